"""The embedding backend of an index: recorded in the manifest, and its queries encoded by that backend whatever
the session's config says."""

import pytest

from scix_core.search import Searcher
from tests.search.conftest import CORPUS

pytestmark = pytest.mark.model


def test_default_build_is_int8_and_a_torch_build_is_searched_with_torch(built):
    from scix_core.ingest import ingest

    default = Searcher(built.index, built.config)
    assert default.manifest["embedding_backend"] == "onnx-int8"  # `auto` on the bundled model: the gated backend
    assert default.manifest["model_slug"].endswith("__onnx-int8")
    cfg = built.config.replace(**{"embedding.backend": "torch"})
    ingest(CORPUS, "fixture-torch", config=cfg, progress=False)
    # a session whose config says auto (int8) still encodes this index's queries with torch
    searcher = Searcher("fixture-torch", built.config)
    assert searcher.manifest["embedding_backend"] == "torch" and "__" not in searcher.manifest["model_slug"]
    result = searcher.search("dark matter halos", "semantic", limit=3)
    assert searcher.encoder.config.backend == "torch"
    int8_top = default.search("dark matter halos", "semantic", limit=3).ids
    assert result.ids[0] == int8_top[0]  # same model, quantised: the best match does not move on this corpus
