"""Per-query IR metrics through ir-measures on trec_eval (pytrec_eval); graded qrels, negative grades as
non-relevant.

trec_eval is the implementation the field's figures come from, and its C code runs at once in a new process
(ranx compiles its metrics with numba first, which costs a cold process over a minute). The project's own
names are ``name@k``: ``ndcg`` (linear gain, as trec_eval), ``mrr`` (the reciprocal rank within the first
k), ``recall``, ``hit`` (at least one relevant paper in the first k). Any other ir-measures measure is taken
by its name in any case (:func:`parse_metric`): ``map``/``AP``, ``p@10``, ``r-prec``/``Rprec``, ``bpref``,
``judged@10``, ``rr``, ``infAP``, ``AP@100``, ``nDCG@10(judged)`` ... Every judged paper is passed to
trec_eval with its grade (negative grades as 0): bpref and judged@k need the judged non-relevant ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
import numpy as np

from scix_core.errors import ConfigError
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
# other spellings of the project's own names, and of ir-measures' (lower case -> the measure's name)
_ALIASES = {"success": "hit", "r": "recall", "rr": "mrr", "map": "AP", "r-prec": "Rprec", "rprec": "Rprec"}
_IR_NAMES = {name.lower(): name for name in ir_measures.measures.registry}


def parse_metric(text: str) -> str:
    """A metric's canonical name: the project's ``ndcg@10``, ``mrr@10``, ``recall@100``, ``hit@10`` (also as
    ``nDCG@10``, ``RR@10``, ``R@100``, ``Success@10``), else ir-measures' own (``AP``, ``P@10``, ``Rprec``,
    ``Bpref``, ``Judged@10``, ``RR`` without a cutoff ...). An unknown one is a ConfigError."""
    raw = text.strip()
    head, at, rest = raw.partition("@")
    name = _ALIASES.get(head.lower(), head.lower())
    if name in _MEASURES and at and rest.isdigit():
        return f"{name}@{int(rest)}"
    name = _IR_NAMES.get(name.lower(), _ALIASES.get(head.lower(), head))
    candidate = f"{name}{at}{rest}"
    try:
        return str(ir_measures.parse_measure(candidate))
    except (ValueError, TypeError, KeyError, NameError, SyntaxError) as exc:
        raise ConfigError(
            f"unknown metric {text!r}: ndcg@k, mrr@k, recall@k, hit@k or an ir-measures measure "
            f"(map, p@10, r-prec, bpref, judged@10, rr, ...): {exc}"
        ) from None


def parse_metrics(text: str) -> tuple[str, ...]:
    """A comma list of metrics, canonical and without repeats, in the order given (the first is primary)."""
    metrics = tuple(dict.fromkeys(parse_metric(m) for m in text.split(",") if m.strip()))
    if not metrics:
        raise ConfigError("--metrics names no metric")
    return metrics


def trec_qrels(gold: Gold) -> dict[str, dict[str, int]]:
    """The judged queries' qrels as trec_eval takes them: every judged paper, a negative grade as 0."""
    return {q: {d: max(int(g), 0) for d, g in gold.qrels[q].items()} for q in gold.judged}


def per_query(gold: Gold, rankings: Mapping[str, Ranking], metrics=METRICS) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, over ``gold.judged`` (a query with no ranking scores 0)."""
    ids = gold.judged
    qrels = trec_qrels(gold)
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
        if name == "mrr" and k.isdigit():
            groups.setdefault(int(k), {})[_MEASURES[name]] = metric
        elif name in _MEASURES and k.isdigit():
            groups.setdefault(None, {})[_MEASURES[name] @ int(k)] = metric
        else:
            groups.setdefault(None, {})[ir_measures.parse_measure(parse_metric(metric))] = metric
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
