"""The embedding backend of an index: recorded in the manifest, and its queries encoded by that backend
whatever the session's config says."""

import pytest

from scix_core.config import EmbeddingConfig
from scix_core.embeddings import resolve_backend
from scix_core.embeddings.onnx import FORMAT, OPENVINO_FORMAT, onnx_variant
from scix_core.search import Searcher
from scix_core.workspace import read_json, write_json_atomic
from tests.corpus import CORPUS

pytestmark = pytest.mark.model


def test_default_build_is_int8_and_a_torch_build_is_searched_with_torch(built):
    from scix_core.ingest import ingest

    default = Searcher(built.index, built.config)
    gated = resolve_backend(
        EmbeddingConfig()
    ).backend  # `auto` on the bundled model: the gated int8 for this CPU
    assert gated in ("openvino-int8", "onnx-int8") and default.manifest["embedding_backend"] == gated
    assert default.manifest["model_slug"].endswith(onnx_variant(gated))
    assert onnx_variant("openvino-int8") == f"openvino-int8.f{FORMAT}.o{OPENVINO_FORMAT}"
    cfg = built.config.replace(**{"embedding.backend": "torch"})
    ingest(CORPUS, "fixture-torch", config=cfg, progress=False)
    # a session whose config says auto (int8) still encodes this index's queries with torch
    searcher = Searcher("fixture-torch", built.config)
    assert searcher.manifest["embedding_backend"] == "torch" and "__" not in searcher.manifest["model_slug"]
    result = searcher.search("dark matter halos", "semantic", limit=3)
    assert searcher.encoder.config.backend == "torch"
    int8_top = default.search("dark matter halos", "semantic", limit=3).ids
    assert result.ids[0] == int8_top[0]  # same model, quantised: the best match does not move on this corpus


def test_an_index_encoded_by_another_export_says_so_on_dense_queries(built):
    """An int8 index from the unfused format-1 export, searched with today's graph: close vectors, not the
    same space — the dense lane still answers and every query that uses it carries the note (keyword ones do
    not)."""
    from scix_core.ingest import ingest

    ingest(
        CORPUS, "fixture-old-export", config=built.config, progress=False
    )  # the embedding cache: no encoding
    build = Searcher("fixture-old-export", built.config).build_dir
    manifest = read_json(build / "manifest.json")
    old = manifest["model_slug"].rsplit(".f", 1)[0]  # what a format-1 build recorded
    write_json_atomic(build / "manifest.json", {**manifest, "model_slug": old})
    searcher = Searcher("fixture-old-export", built.config)
    notes = searcher.search("dark matter halos", "hybrid", limit=3).metadata["notes"]
    assert any(f"vectors are {old}," in n and "--force` re-encodes the corpus" in n for n in notes), notes
    assert searcher.search("dark matter halos", "semantic", limit=3).ids
    assert not any(
        "re-encodes" in n for n in searcher.search("dark matter halos", "keyword", limit=3).metadata["notes"]
    )
