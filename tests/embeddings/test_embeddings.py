"""The real MiniLM model and the on-disk vector cache."""

import numpy as np
import pytest

from scix_core.config import EmbeddingConfig
from scix_core.embeddings import EmbeddingCache, Encoder
from scix_core.errors import ModelUnavailableError
from scix_core.ingest import ingest
from tests.conftest import FIXTURES

pytestmark = pytest.mark.model


def test_bundled_model_encodes_normalised_384d(encoder):
    vecs = encoder.encode(["dark matter halo density profiles", "galaxy rotation curves", "protein folding"])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-4)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]  # astronomy closer to astronomy than to biology
    assert encoder.max_length == 256  # capped by the model's own maximum (config asks 512)


def test_query_cache_returns_the_same_readonly_vector(encoder):
    a = encoder.encode_query("stellar streams")
    assert encoder.encode_query("stellar streams") is a
    assert not a.flags.writeable
    assert encoder.encode_query.cache_info().maxsize == 128


def test_missing_model_is_a_typed_error(tmp_path):
    enc = Encoder(EmbeddingConfig(model=str(tmp_path / "no-such-model")))
    with pytest.raises(ModelUnavailableError, match="never downloaded"):
        enc.encode(["x"])


def test_cache_encodes_each_chunk_once(tmp_path, encoder, monkeypatch):
    import scix_core.embeddings.cache as cache_mod

    monkeypatch.setattr(cache_mod, "CHUNK", 2)
    texts = ["a b", "c d", "e f", "g h", "i j"]
    cache = EmbeddingCache(tmp_path, "m", 512)
    first = cache.vectors(texts[:3], encoder.encode)  # a --limit 3 run
    assert (cache.misses, cache.hits) == (3, 0)
    cache2 = EmbeddingCache(tmp_path, "m", 512)
    full = cache2.vectors(texts, encoder.encode)
    # the first full chunk came from the prefix run; "e f" too, from its chunk of one
    assert (cache2.misses, cache2.hits) == (2, 3)
    assert full.dtype == np.float16 and np.array_equal(full[:3], first)
    again = EmbeddingCache(tmp_path, "m", 512)  # any order, any chunking: every text is held now
    assert np.array_equal(again.vectors(texts[::-1], encoder.encode), full[::-1]) and again.misses == 0
    manifest = cache2.manifest(texts)
    assert manifest["count"] == 5 and manifest["dim"] == 384 and manifest["model"] == "m"


def test_second_ingest_reencodes_nothing(config, encoder):
    first = ingest(FIXTURES / "beir", "b", config=config, progress=False, encoder=encoder)
    assert (first.encoded, first.reused) == (3, 0)
    second = ingest(FIXTURES / "beir", "b", config=config, progress=False, encoder=encoder, force=True)
    assert (second.encoded, second.reused) == (0, 3)
    assert second.manifest["dim"] == 384 and second.manifest["vectors"] == 3
