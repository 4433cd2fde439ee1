"""Lane attribution: which lane put each top-10 paper where the user sees it (docs/design.md#attribution).

For one run over a gold set, every top-10 hit of every query is attributed
to the lanes that had it in their own top ``LANE_TOP`` (10). From that:
per lane, the share of top-10 hits it had, the share of *relevant* top-10
hits it had, and the shares only it had (unique contributions); the overlap
between lanes (how many hits each exact combination of lanes had: the
UpSet chart's bars); the same per query bucket.

    att = attribute("scifact", gold, run="hybrid", sample=50)
    att.aggregate(); att.overlap(relevant_only=True); att.by_bucket(); att.frame()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from scix_core.config import Config, load_config
from scix_core.errors import UnknownNameError
from scix_core.evaluate import sample_queries, uncapped_pool
from scix_core.evaluate.gold import Gold, from_index
from scix_core.evaluate.metrics import per_query
from scix_core.evaluate.provenance import LANE_TOP, TOP, length_bucket
from scix_core.evaluate.runs import DEPTH, LANE_RUNS, RRF_RUNS, collect
from scix_core.search import Searcher
from scix_core.types import Ranking

#: runs produced by the one base pass, whose lane rankings are the ones fused
ATTRIBUTABLE_RUNS = ("hybrid", *RRF_RUNS, *LANE_RUNS)
NO_LANE = "(deeper)"  # a hit no lane had in its own top 10: fusion lifted it from further down


@dataclass(frozen=True)
class TopHit:
    paper_id: str
    relevant: bool
    lanes: frozenset[str]  # lanes that had it in their own top LANE_TOP
    ranks: Mapping[str, int]  # every lane that retrieved it (100 deep) -> rank


@dataclass(frozen=True)
class QueryAttribution:
    query_id: str
    text: str
    buckets: tuple[str, ...]
    ndcg: float
    n_relevant: int
    hits: tuple[TopHit, ...]  # the run's top 10, best first


def _shares(hits: list[TopHit], lanes: tuple[str, ...]) -> dict[str, dict[str, float]]:
    relevant = [h for h in hits if h.relevant]
    out = {}
    for lane in lanes:
        had = [h for h in hits if lane in h.lanes]
        rel = [h for h in relevant if lane in h.lanes]
        out[lane] = {
            "share_top10": len(had) / len(hits) if hits else 0.0,
            "share_relevant_top10": len(rel) / len(relevant) if relevant else 0.0,
            "unique_top10": sum(h.lanes == {lane} for h in hits) / len(hits) if hits else 0.0,
            "unique_relevant_top10": sum(h.lanes == {lane} for h in relevant) / len(relevant)
            if relevant
            else 0.0,
        }
    return out


@dataclass(frozen=True)
class Attribution:
    index: str
    gold: str
    run: str
    lanes: tuple[str, ...]
    queries: tuple[QueryAttribution, ...]

    def _hits(self, queries=None) -> list[TopHit]:
        return [h for q in (self.queries if queries is None else queries) for h in q.hits]

    def aggregate(self, bucket: str | None = None) -> dict[str, dict[str, float]]:
        """lane -> shares, pooled over every top-10 hit of every query (of ``bucket``)."""
        queries = [q for q in self.queries if bucket is None or bucket in q.buckets]
        return _shares(self._hits(queries), self.lanes)

    def for_query(self, query_id: str) -> QueryAttribution:
        for q in self.queries:
            if q.query_id == query_id:
                return q
        raise UnknownNameError("query", query_id, [q.query_id for q in self.queries][:20])

    def overlap(self, relevant_only: bool = False, bucket: str | None = None) -> dict[frozenset[str], int]:
        """Exact lane combination -> number of top-10 hits it had (a hit in no lane's top 10 counts
        under ``frozenset({NO_LANE})``); most frequent first."""
        queries = [q for q in self.queries if bucket is None or bucket in q.buckets]
        counts = Counter(
            h.lanes or frozenset({NO_LANE}) for h in self._hits(queries) if h.relevant or not relevant_only
        )
        return dict(counts.most_common())

    def buckets(self) -> dict[str, int]:
        """bucket name -> number of queries in it."""
        return dict(sorted(Counter(b for q in self.queries for b in q.buckets).items()))

    def by_bucket(self) -> dict[str, dict]:
        return {
            b: {
                "n": n,
                "ndcg@10": sum(q.ndcg for q in self.queries if b in q.buckets) / n,
                "lanes": self.aggregate(b),
            }
            for b, n in self.buckets().items()
        }

    def frame(self):
        """One row per query: nDCG@10, relevant in top 10, and per lane its share of top 10 / relevant top
        10."""
        import pandas as pd

        rows = []
        for q in self.queries:
            shares = _shares(list(q.hits), self.lanes)
            rows.append(
                {
                    "query_id": q.query_id,
                    "query": q.text,
                    "ndcg@10": q.ndcg,
                    "relevant_in_top10": sum(h.relevant for h in q.hits),
                    "judged_relevant": q.n_relevant,
                    **{f"{lane} top10": s["share_top10"] for lane, s in shares.items()},
                    **{f"{lane} rel": s["share_relevant_top10"] for lane, s in shares.items()},
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "gold": self.gold,
            "run": self.run,
            "lanes": list(self.lanes),
            "queries": len(self.queries),
            "aggregate": self.aggregate(),
            "overlap": {"+".join(sorted(k)): v for k, v in self.overlap().items()},
            "overlap_relevant": {"+".join(sorted(k)): v for k, v in self.overlap(relevant_only=True).items()},
            "by_bucket": self.by_bucket(),
        }


def attribute_runs(
    gold: Gold,
    run: Mapping[str, Ranking],
    lanes: Mapping[str, Mapping[str, Ranking]],
    ndcg: Mapping[str, float],
    index: str = "",
    run_name: str = "hybrid",
) -> Attribution:
    """The pure part: a run's rankings and the lane rankings of the same queries -> :class:`Attribution`."""
    names = tuple(sorted({lane for per in lanes.values() for lane in per}))
    queries = []
    for qid in gold.judged:
        if qid not in run:
            continue
        relevant = gold.relevant(qid)
        lane_ranks = {lane: r.ranks() for lane, r in lanes.get(qid, {}).items()}
        hits = []
        for paper in run[qid].ids[:TOP]:
            ranks = {lane: rk[paper] for lane, rk in lane_ranks.items() if paper in rk}
            hits.append(
                TopHit(
                    paper, paper in relevant, frozenset(ln for ln, r in ranks.items() if r <= LANE_TOP), ranks
                )
            )
        fields = tuple(f"{k}={v}" for k, v in sorted(gold.fields.get(qid, {}).items()))
        queries.append(
            QueryAttribution(
                qid,
                gold.queries[qid],
                (length_bucket(gold.queries[qid]), *fields),
                float(ndcg.get(qid, 0.0)),
                len(relevant),
                tuple(hits),
            )
        )
    return Attribution(index, gold.name, run_name, names, tuple(queries))


def attribute(
    index: str,
    gold: Gold | None = None,
    run: str = "hybrid",
    config: Config | None = None,
    sample: int | None = None,
    seed: int = 13,
    progress: bool = False,
) -> Attribution:
    """Run ``run`` (one of :data:`ATTRIBUTABLE_RUNS`) over ``gold`` (default: the index's qrels) and attribute
    it."""

    if run not in ATTRIBUTABLE_RUNS:
        raise UnknownNameError("attributable run", run, ATTRIBUTABLE_RUNS)
    cfg = (config or load_config()).replace(**{"search.depth": DEPTH})
    with uncapped_pool():
        searcher = Searcher(index, cfg)
        gold = sample_queries(gold or from_index(searcher.store), sample, seed)
        runset = collect(searcher, dict(gold.queries), (run,), progress=progress)
    ndcg = per_query(gold, runset.rankings[run], ("ndcg@10",))["ndcg@10"]
    return attribute_runs(gold, runset.rankings[run], runset.lanes, ndcg, index, run)
