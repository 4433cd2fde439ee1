"""Hybrid search on real SciFact (the suite's slice: every judged paper among 1,000) returns the relevant
papers for train queries.

Thresholds sit a few points under the figures measured on the slice (hybrid nDCG@10 0.804 / 0.833 / 0.833 and
recall@10 0.901 / 0.927 / 0.927 with AND / OR / auto lexical matching), so a real regression fails while
machine noise cannot. The whole corpus's figures are `scix eval`'s, in docs/results.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval

from scix_core.search import Searcher
from scix_core.search.lanes import LaneTimeout
from scix_core.search.lanes.fts5 import Fts5Lane
from scix_core.stores.papers import connect
from scix_core.workspace import Workspace
from tests.helpers import make_request

pytestmark = [pytest.mark.model, pytest.mark.realdata]


def _evaluate(searcher: Searcher, mode: str) -> dict[str, float]:
    qrels = searcher.store.qrels("train")
    queries = [q for q in searcher.store.queries() if q.query_id in qrels]
    assert len(queries) == 809
    run, seen = {}, {}
    for q in queries:
        result = searcher.search(q.text, mode, limit=10)
        run[q.query_id] = {h.paper_id: h.score for h in result.hits} or {"": 0.0}
        for key in ("notes", "dropped_lanes", "lanes_run"):  # what a failure message should show
            seen.setdefault(key, set()).add(str(result.metadata[key]))
    gold = {q: {d: int(g) for d, g in docs.items() if g > 0} for q, docs in qrels.items()}
    per = pytrec_eval.RelevanceEvaluator(gold, {"ndcg_cut.10", "recall.10"}).evaluate(run)  # trec_eval itself
    return {
        "ndcg@10": float(np.mean([per.get(q, {}).get("ndcg_cut_10", 0.0) for q in gold])),
        "recall@10": float(np.mean([per.get(q, {}).get("recall_10", 0.0) for q in gold])),
        "_seen": {k: sorted(v)[:5] for k, v in seen.items()},
        "_config": searcher.config.search,
        "_embedding": searcher.config.embedding,
        "_first": (queries[0].text, list(run[queries[0].query_id])[:3]),
    }


@pytest.mark.parametrize("lexical_mode, floor", [("and", 0.77), ("or", 0.80), ("auto", 0.80)])
def test_hybrid_finds_relevant_papers(scifact, lexical_mode, floor):
    cfg, index = scifact
    searcher = Searcher(index, cfg.replace(**{"search.lexical_mode": lexical_mode}))
    scores = _evaluate(searcher, "hybrid")
    assert scores["ndcg@10"] >= floor and scores["recall@10"] >= 0.87, scores


def test_sqlite_lane_timeout(scifact):
    cfg, index = scifact
    path = Workspace(cfg.home).index_dir(index) / "papers.sqlite"
    lane = Fts5Lane(connect(path, readonly=True), mode="or", timeout_ms=0)
    with pytest.raises(LaneTimeout, match="exceeded 0 ms"):
        lane.search(make_request("cells protein expression patients disease", pool=None), 60)
    lane.timeout_ms = 5000
    assert len(lane.search(make_request("cells protein expression patients disease", pool=None), 60)) == 60
