"""Dense-lane specifics: points without a paper id, the exact switch, over-fetch."""

from __future__ import annotations

import logging

import pytest

from scix_core.search.lanes.dense import OVERFETCH_CAP, DenseLane
from scix_core.stores.papers import connect
from scix_core.vectors.edge import EdgeVectorStore
from scix_core.workspace import Workspace
from tests.helpers import make_request

pytestmark = [pytest.mark.model]


@pytest.fixture
def orphan_store(tmp_path, built, encoder):
    """Three points; one has no paper_id payload (e.g. written by another tool)."""
    store = EdgeVectorStore(tmp_path / "v", dim=encoder.dim)
    vecs = encoder.encode(["dark matter halos", "galaxy rotation curves", "dark matter in galaxies"])
    store.upsert(
        [0, 1, 2],
        vecs,
        [{"paper_id": "p03", "year": 2020}, {"paper_id": "p04", "year": 2018}, {"year": 2021}],
    )
    store.finish()
    yield store
    store.close()


def test_points_without_paper_id_are_skipped_with_one_warning(orphan_store, built, encoder, caplog):
    papers = connect(Workspace(built.config.home).index_dir(built.index) / "papers.sqlite", readonly=True)
    lane = DenseLane(orphan_store, papers)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            ranking = lane.search(make_request("dark matter", encoder), 3)
    assert set(ranking.ids) == {"p03", "p04"}
    assert caplog.text.count("without a paper_id payload") == 1
    assert lane.skipped_points == 3


def test_exact_switch_is_read_per_call(built, encoder, monkeypatch):
    from scix_core.search import Searcher

    searcher = Searcher(built.index, built.config)
    monkeypatch.setenv("SCIX_QDRANT_EXACT", "1")
    exact = searcher.search("galaxy morphology", "semantic", limit=5)
    monkeypatch.setenv("SCIX_QDRANT_EXACT", "0")
    approx = searcher.search("galaxy morphology", "semantic", limit=5)
    assert (
        exact.metadata["knobs"]["qdrant_exact"] is True and approx.metadata["knobs"]["qdrant_exact"] is False
    )
    assert exact.ids == approx.ids  # 12 points: under the full-scan threshold, HNSW is exact too


def test_overfetch_is_ten_times_capped_at_500(built, encoder):
    """The real store, instrumented to record how many points the lane asks for."""
    from scix_core.search import Searcher

    lane = Searcher(built.index, built.config).dense
    store, calls = lane.store, []

    class Recording:
        def search(self, vector, k, flt=None, exact=False):
            calls.append(k)
            return store.search(vector, k, flt, exact)

    lane = DenseLane(Recording(), lane.papers)
    for k, expected in ((1, 10), (10, 100), (60, 500), (700, 700)):
        ranking = lane.search(make_request("galaxies", encoder, {"authors": ["rubin"]}), k)
        assert calls[-1] == expected and len(ranking) == min(k, 4)  # four papers by Rubin
    lane.search(make_request("galaxies", encoder, {"year": 2020}), 60)
    assert calls[-1] == 60 and OVERFETCH_CAP == 500
