"""The ``bm25`` lexical backend: scores equal an independent BM25 (bm25s) on the same terms, AND/OR/auto
semantics, query term frequency, and an index without the term matrix."""

from __future__ import annotations

import numpy as np
import pytest

from scix_core.search import Searcher
from scix_core.search.lanes import bm25_lanes
from scix_core.search.lanes.bm25 import Bm25Lane
from scix_core.search.query import prepare
from scix_core.stores.terms import TermIndex, analyse, build_terms
from tests.corpus import BY_ID, PAPERS
from tests.helpers import make_request

QUERIES = [
    "neural networks",
    "graph neural networks graph",
    "dark matter halos galaxies",
    "running runners",
    "cafe naive",
    "protein structure prediction sequence",
    "zyzzyva",
    "the networks of the galaxies",
]


@pytest.fixture(scope="module")
def lanes(built):
    searcher = Searcher(built.index, built.config.replace(**{"search.lexical_backend": "bm25"}))
    lane = next(ln for ln in searcher.lexical if ln.name == "lexical")
    assert isinstance(lane, Bm25Lane)
    return {m: Bm25Lane(lane.terms, lane.conn, "lexical", m) for m in ("and", "or", "auto")}


def _reference(query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """bm25s (Lucene variant) over the same analysed terms, the query's terms repeated as often as they
    occur."""
    import bm25s

    corpus = [analyse(p.text) for p in PAPERS]
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index([c or [""] for c in corpus], show_progress=False)
    q = prepare(query)
    terms = [t for t in analyse(" ".join(q.repeated())) if t in retriever.vocab_dict]
    if not terms:
        return {}
    scores = retriever.get_scores(terms)
    return {p.paper_id: float(s) for p, s in zip(PAPERS, scores) if s > 0}


@pytest.mark.parametrize("query", QUERIES)
def test_or_scores_are_lucene_bm25(lanes, query):
    got = {i.paper_id: i.score for i in lanes["or"].search(make_request(query), 100).items}
    expected = _reference(query)
    assert got.keys() == expected.keys()
    for pid, score in expected.items():
        assert got[pid] == pytest.approx(score, rel=1e-5), pid


@pytest.mark.parametrize("k1,b", [(0.9, 0.4), (2.0, 1.0), (1.2, 0.0)])
def test_k1_and_b_apply_at_query_time(lanes, k1, b):
    lane = lanes["or"]
    tuned = Bm25Lane(lane.terms, lane.conn, "lexical", "or", k1, b)
    got = {
        i.paper_id: i.score for i in tuned.search(make_request("graph neural networks galaxies"), 100).items
    }
    expected = _reference("graph neural networks galaxies", k1, b)
    assert got == pytest.approx(expected, rel=1e-5)


def test_and_or_auto(lanes):
    request = make_request("neural galaxies")  # only p09 has both
    assert lanes["and"].search(request, 10).ids == ("p09",)
    every = lanes["or"].search(request, 10)
    assert set(every.ids) == {
        p for p, paper in BY_ID.items() if {"neural", "galaxi"} & set(analyse(paper.text))
    }
    auto = lanes["auto"].search(request, 10)
    assert auto.ids[0] == "p09" and set(auto.ids) == set(every.ids)
    assert [i.score for i in auto.items] == sorted((i.score for i in auto.items), reverse=True)
    assert lanes["auto"].search(request, 1).ids == ("p09",)


def test_stems_and_diacritics_match(lanes):
    assert lanes["and"].search(make_request("runner"), 10).ids == ("p10",)
    assert (
        lanes["and"].search(make_request("café naïve"), 10).ids
        == lanes["and"].search(make_request("cafe naive"), 10).ids
        == ("p11",)
    )


def test_query_term_frequency_counts(lanes):
    once, twice = (lanes["or"].search(make_request(q), 100) for q in ("graph galaxy", "graph graph galaxy"))
    assert once.ids != twice.ids or once.scores() != twice.scores()
    assert twice.scores()["p08"] > once.scores()["p08"]  # p08 has "graph" and not "galaxy"
    assert prepare("graph graph galaxy").counts == (2, 1)
    assert prepare(" ".join(["graph"] * 50)).repeated() == ("graph",) * 8  # capped


def test_ties_go_to_the_earlier_paper(tmp_path, built):
    build_terms(tmp_path / "t", ["alpha beta", "alpha beta", "alpha", "beta beta"])
    terms = TermIndex(tmp_path / "t")
    assert terms.n == 4 and list(terms.lengths) == [2, 2, 1, 2]
    score = np.array([1.0, 1.0, 0.5, 1.0])
    assert Bm25Lane._top(score, np.ones(4, bool), 2) == [(0, 1.0), (1, 1.0)]
    assert Bm25Lane._top(score, np.array([False, True, True, True]), 2) == [(1, 1.0), (3, 1.0)]


def test_index_without_terms_falls_back_to_fts5_and_says_so(built, tmp_path):
    import shutil

    from scix_core.search.lanes.fts5 import Fts5Lane
    from scix_core.workspace import Workspace

    build = Workspace(built.config.home).index_dir(built.index)
    shutil.copy(build / "papers.sqlite", tmp_path / "papers.sqlite")
    out = bm25_lanes(built.config, tmp_path, "old", with_body=False)
    assert [type(ln) for ln in out.lanes] == [Fts5Lane] and not out.unavailable
    assert "scix ingest" in out.notes[0]


def test_searcher_on_an_old_build_notes_the_fallback(built, tmp_path):
    import shutil

    from scix_core.ingest import ingest
    from tests.corpus import CORPUS

    cfg = built.config.replace(home=tmp_path)
    report = ingest(CORPUS, "old", config=cfg, progress=False, embed=False)
    shutil.rmtree(report.path / "terms")
    result = Searcher("old", cfg).search("riemann zeta primes", "keyword", limit=3)
    assert result.ids[:1] == ("p06",) and any("term matrix" in n for n in result.metadata["notes"])
