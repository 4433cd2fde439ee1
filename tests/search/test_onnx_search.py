"""An index built with an ONNX backend: recorded in the manifest, and its queries encoded by that backend."""

import pytest

from scix_core.search import Searcher
from tests.search.conftest import CORPUS

pytestmark = pytest.mark.model


def test_index_built_with_onnx_int8_is_searched_with_it(built):
    from scix_core.ingest import ingest

    cfg = built.config.replace(**{"embedding.backend": "onnx-int8"})
    ingest(CORPUS, "fixture-int8", config=cfg, progress=False)
    # a session whose config says torch still encodes this index's queries with int8
    searcher = Searcher("fixture-int8", built.config)
    manifest = searcher.manifest
    assert manifest["embedding_backend"] == "onnx-int8" and manifest["model_slug"].endswith("__onnx-int8")
    result = searcher.search("dark matter halos", "semantic", limit=3)
    assert searcher.encoder.config.backend == "onnx-int8"
    torch_top = Searcher(built.index, built.config).search("dark matter halos", "semantic", limit=3).ids
    assert result.ids[0] == torch_top[0]  # same model, quantised: the best match does not move on this corpus
