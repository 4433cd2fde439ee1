"""qdrant-edge (embedded default) and qdrant-client local mode agree on exact search."""

import numpy as np
import pytest

from scix_core.data import load_dataset
from scix_core.errors import BackendUnavailableError
from scix_core.vectors import VectorFilter, payload
from scix_core.vectors.client import ClientVectorStore
from scix_core.vectors.edge import EdgeVectorStore

pytestmark = [pytest.mark.model, pytest.mark.realdata]

QUERIES = [
    "galaxy formation in the early universe",
    "large language model agents",
    "elliptic curves over number fields",
    "image segmentation with transformers",
]
FILTERS = [
    None,
    VectorFilter(year_min=2024),
    VectorFilter(categories=("astro-ph.GA", "math.NT")),
    VectorFilter(year_min=2020, year_max=2025, categories=("cs.CV",)),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory, data_dir, encoder):
    files = ["astro_ph_daily", "math_nt_daily", "cs_ai_daily"]
    papers = [p for f in files for p in load_dataset(data_dir / "arxiv-daily" / f"{f}.jsonl.gz").papers[:100]]
    # titles: the stores are compared, not the texts (a minute less than abstracts on a slow machine)
    vecs = encoder.encode([p.title for p in papers])
    ids, pls = list(range(len(papers))), [payload(p) for p in papers]
    edge = EdgeVectorStore(tmp_path_factory.mktemp("edge") / "v", dim=vecs.shape[1])
    edge.upsert(ids, vecs, pls)
    edge.finish()
    client = ClientVectorStore("congruence", dim=vecs.shape[1], location=":memory:")
    client.upsert(ids, vecs, pls)
    yield edge, client
    edge.close()
    client.close()


@pytest.mark.parametrize("flt", FILTERS, ids=["none", "year", "cats", "year+cat"])
@pytest.mark.parametrize("query", QUERIES)
def test_same_ids_for_same_query_and_filter(stores, encoder, query, flt):
    edge, client = stores
    vec = encoder.encode_query(query)
    a = edge.search(vec, 10, flt, exact=True)
    b = client.search(vec, 10, flt, exact=True)
    assert [h.paper_id for h in a] == [h.paper_id for h in b]
    assert a, "filters chosen so that every case has hits"
    assert np.allclose([h.score for h in a], [h.score for h in b], atol=1e-4)


def test_hits_without_ids_are_the_same_points_without_the_payload_read(stores, encoder):
    vec = encoder.encode_query(QUERIES[0])
    for store in stores:
        full, bare = (
            store.search(vec, 10, FILTERS[1], exact=True),
            store.search(vec, 10, FILTERS[1], exact=True, ids=False),
        )
        assert [(h.point_id, h.score) for h in bare] == [(h.point_id, h.score) for h in full] and full
        assert all(h.paper_id is None for h in bare) and all(h.paper_id for h in full)
        [batch] = store.search_batch(vec[None, :], [10], FILTERS[1], exact=True, ids=False)
        assert batch == bare


def test_counts_and_single_owner(stores):
    edge, client = stores
    assert edge.count() == client.count() == 300
    with pytest.raises(BackendUnavailableError, match="WAL"):
        EdgeVectorStore(edge.path)  # an open shard is locked: a typed error, not a crash


def test_reopen_after_close(tmp_path):
    store = EdgeVectorStore(tmp_path / "v", dim=3)
    store.upsert([7], np.array([[1.0, 0, 0]]), [{"paper_id": "p7", "year": 2020, "categories": []}])
    store.finish()
    store.close()
    again = EdgeVectorStore(tmp_path / "v")
    assert again.count() == 1 and again.search(np.array([1.0, 0, 0]), 1)[0].paper_id == "p7"
    again.close()
