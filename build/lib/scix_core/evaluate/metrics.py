"""Per-query IR metrics through ir-measures on trec_eval (pytrec_eval); graded qrels, negative grades as
non-relevant.

trec_eval is the implementation the field's figures come from, and its C code runs at once in a new process.
(ranx, used here before, compiles its metrics with numba: 80 s in a cold process on the AVX2 machine kind and
10 s in each process after, with its cache warm, before the first figure of a ``scix eval``.) A metric is
``name@k``: ``ndcg`` (linear gain, as trec_eval), ``mrr`` (the reciprocal rank within the first k),
``recall``, ``hit`` (at least one relevant paper in the first k).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
import numpy as np

from scix_core.evaluate.gold import Gold
from scix_core.types import Ranking

METRICS = ("ndcg@10", "mrr@10", "recall@50", "recall@100")
PRIMARY = "ndcg@10"

_MEASURES = {
    "ndcg": ir_measures.nDCG,
    "mrr": ir_measures.RR,
    "recall": ir_measures.R,
    "hit": ir_measures.Success,
}


def per_query(gold: Gold, rankings: Mapping[str, Ranking], metrics=METRICS) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, over ``gold.judged`` (a query with no ranking scores 0)."""
    ids = gold.judged
    qrels = {q: {d: int(g) for d, g in gold.qrels[q].items() if g > 0} for q in ids}
    run = {}
    for q in ids:
        ranking = rankings.get(q)
        scores = {}
        if ranking is not None:
            n = len(ranking.items)
            for rank, item in enumerate(
                ranking.items
            ):  # rank-derived scores: ties and odd scales cannot reorder
                scores.setdefault(item.paper_id, float(n - rank))
        run[q] = scores
    return trec_values(qrels, run, metrics)


def trec_values(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], metrics: Sequence[str]
) -> dict[str, dict[str, float]]:
    """metric -> query id -> value for every query of ``qrels`` (sorted ids; 0 for a query the run misses or
    with no relevant paper), computed by trec_eval through ir-measures."""
    # trec_eval's recip_rank has no cutoff (ir-measures' pytrec_eval provider computes RR@k as plain RR): an
    # mrr@k is RR over the run cut to its first k
    groups: dict[int | None, dict] = {}
    for metric in metrics:
        name, _, k = metric.partition("@")
        if name not in _MEASURES or not k.isdigit():
            raise ValueError(f"unknown metric {metric!r}: one of {', '.join(_MEASURES)} @ a cutoff")
        if name == "mrr":
            groups.setdefault(int(k), {})[_MEASURES[name]] = metric
        else:
            groups.setdefault(None, {})[_MEASURES[name] @ int(k)] = metric
    # trec_eval skips a query with no retrieved paper: an empty ranking is one non-relevant placeholder
    run = {q: run.get(q) or {"__no_result__": 0.0} for q in qrels}
    out = {metric: dict.fromkeys(sorted(qrels), 0.0) for metric in metrics}
    for cut, measures in groups.items():
        ranked = (
            run
            if cut is None
            else {q: dict(sorted(r.items(), key=lambda x: -x[1])[:cut]) for q, r in run.items()}
        )
        for value in ir_measures.pytrec_eval.iter_calc(list(measures), qrels, ranked):
            out[measures[value.measure]][value.query_id] = float(value.value)
    return out


def means(values: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {m: float(np.mean(list(v.values()))) if v else 0.0 for m, v in values.items()}
