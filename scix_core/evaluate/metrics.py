"""Per-query IR metrics through ranx; graded qrels, negative grades as non-relevant."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from scix_core.evaluate.gold import Gold
from scix_core.types import Ranking

METRICS = ("ndcg@10", "mrr@10", "recall@50", "recall@100")
PRIMARY = "ndcg@10"


def per_query(gold: Gold, rankings: Mapping[str, Ranking], metrics=METRICS) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, over ``gold.judged`` (a query with no ranking scores 0)."""
    from ranx import Qrels, Run, evaluate

    ids = gold.judged
    qrels = Qrels({q: {d: g for d, g in gold.qrels[q].items() if g > 0} for q in ids})
    run = {}
    for q in ids:
        ranking = rankings.get(q)
        scores = {}
        if ranking is not None:
            n = len(ranking.items)
            for rank, item in enumerate(ranking.items):  # rank-derived scores: ties and odd scales cannot reorder
                scores.setdefault(item.paper_id, float(n - rank))
        run[q] = scores or {"__no_result__": 0.0}
    values = evaluate(qrels, Run(run), list(metrics), return_mean=False, make_comparable=True)
    if len(metrics) == 1:
        values = {metrics[0]: values}
    order = list(qrels.keys())  # ranx sorts query ids: align by its order, not ours
    return {m: {q: float(v) for q, v in zip(order, np.asarray(values[m]))} for m in metrics}


def means(values: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {m: float(np.mean(list(v.values()))) if v else 0.0 for m, v in values.items()}
