"""Lane provenance and query buckets (docs/design.md#attribution).

Provenance: for each relevant paper a run puts in its top 10, which lanes
had it and at what rank (lanes go 100 deep); per run, the share of those
hits each lane had in its own top ``LANE_TOP`` (10), and the share only
that lane had there — "which lane put this paper where the user sees it".
"""

from __future__ import annotations

from collections.abc import Mapping

from scix_core.evaluate.gold import Gold
from scix_core.evaluate.metrics import means
from scix_core.types import Ranking

TOP = 10
LANE_TOP = 10


def provenance(gold: Gold, run: Mapping[str, Ranking], lanes: Mapping[str, Mapping[str, Ranking]]) -> dict:
    hits, per_query = 0, {}
    had: dict[str, int] = {}
    only: dict[str, int] = {}
    for qid in gold.judged:
        relevant = gold.relevant(qid)
        found = {}
        for paper in (p for p in run[qid].ids[:TOP] if p in relevant) if qid in run else ():
            where = {lane: r.ranks()[paper] for lane, r in lanes.get(qid, {}).items() if paper in r.ranks()}
            found[paper] = where
            hits += 1
            near = [lane for lane, rank in where.items() if rank <= LANE_TOP]
            for lane in near:
                had[lane] = had.get(lane, 0) + 1
            if len(near) == 1:
                only[near[0]] = only.get(near[0], 0) + 1
        if found:
            per_query[qid] = found
    return {
        "relevant_in_top10": hits,
        "share": {lane: n / hits for lane, n in sorted(had.items())} if hits else {},
        "only": {lane: n / hits for lane, n in sorted(only.items())} if hits else {},
        "per_query": per_query,
    }


def length_bucket(text: str) -> str:
    n = len(text.split())
    return "len<=3" if n <= 3 else "len4-8" if n <= 8 else "len>=9"


def buckets(gold: Gold, values: Mapping[str, Mapping[str, float]]) -> dict[str, dict]:
    """bucket -> {"n": queries, metric: mean}; by query length, and by every field the queries carry."""
    groups: dict[str, list[str]] = {}
    for qid in gold.judged:
        groups.setdefault(length_bucket(gold.queries[qid]), []).append(qid)
        for key, value in gold.fields.get(qid, {}).items():
            groups.setdefault(f"{key}={value}", []).append(qid)
    return {
        name: {"n": len(ids), **means({m: {q: v[q] for q in ids} for m, v in values.items()})}
        for name, ids in sorted(groups.items())
    }
