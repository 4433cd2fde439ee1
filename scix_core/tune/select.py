"""Choosing a pipeline by cross-validation, and an honest estimate of that choice.

* The **CV table**: every candidate's mean of each metric over the judged queries, each query ranked with
  the candidate's pieces built without it (its fold's model for a fine-tuned encoder), with a 95% t
  interval of the primary metric's mean.
* The **winner** (the preset): the best CV mean of the primary metric; a tie goes to the defaults, then to
  the candidate with fewer changes from them.
* The **nested estimate** of tuning itself: for each outer fold F, the best candidate on the other folds'
  queries — ranked, for a fine-tuned encoder, by models that never saw fold F (the folds-but-two models) —
  scores fold F's queries with its folds-but-one model. The best of hundreds of CV means is optimistic;
  this is not, and it is what the gate compares with the defaults.
* **What each choice is worth**: the best candidate that differs from the defaults in that choice only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

from scix_core.evaluate.gold import Gold
from scix_core.evaluate.metrics import per_query
from scix_core.tune.fusing import PreparedLanes
from scix_core.tune.pieces import Folds
from scix_core.tune.space import Candidate
from scix_core.types import Ranking

TUNED = "tuned (nested)"
DEFAULTS = "defaults"
CHOICES = ("encoder", "passages", "lexical", "fusion", "reranker")


@dataclass(frozen=True)
class CvRow:
    candidate: Candidate
    means: Mapping[str, float]  # metric -> CV mean
    ci: tuple[float, float]  # the primary metric's 95% t interval

    def to_dict(self) -> dict:
        c = self.candidate
        return {
            "name": c.name,
            "epochs": c.epochs,
            "query_epochs": c.query_epochs,
            "passages": c.passages,
            "lexical": c.lexical,
            "fusion": c.fusion.kind,
            "fusion_value": c.fusion.value,
            "rerank": c.rerank,
            "rerank_window": c.rerank_window,
            "means": dict(self.means),
            "ci95": list(self.ci),
        }


def interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The t interval of the mean of ``values`` (one per query)."""
    n = len(values)
    mean = statistics.fmean(values) if values else 0.0
    if n < 2:
        return mean, mean
    half = stats.t.ppf(0.5 + level / 2, n - 1) * statistics.stdev(values) / n**0.5
    return mean - half, mean + half


def fused(
    candidate: Candidate,
    lexical: Mapping[str, Mapping[str, Ranking]],
    dense: Mapping[str, Mapping[str, Ranking]],
    queries: Sequence[str],
    depth: int,
    prepared: dict | None = None,
) -> dict[str, Ranking]:
    """query id -> the candidate's fused ranking: the pipeline's own fusion over its lanes
    (:class:`~scix_core.tune.fusing.PreparedLanes`, kept in ``prepared`` for the next candidate that fuses
    the same lanes)."""
    prepared = {} if prepared is None else prepared
    out = {}
    for q in queries:
        lanes = {**lexical[q], "dense": dense[q][candidate.dense]}
        key = tuple(id(r) for r in lanes.values())  # the same ranking objects: the same lanes
        if key not in prepared:
            prepared[key] = PreparedLanes(lanes)
        out[q] = prepared[key].fuse(candidate.fusion, depth)
    return out


def _preference(candidate: Candidate, defaults: Candidate, order: int) -> tuple:
    """Ties on the mean go to the defaults, then to fewer changes from them, then to the earlier candidate."""
    return (candidate == defaults, -len(candidate.changes(defaults)), -order)


def best(
    candidates: Sequence[Candidate], score: Callable[[Candidate], float], defaults: Candidate
) -> Candidate:
    return max(
        enumerate(candidates), key=lambda ic: (round(score(ic[1]), 12), *_preference(ic[1], defaults, ic[0]))
    )[1]


def cv_table(plain: Mapping[Candidate, Mapping[str, Mapping[str, float]]], primary: str) -> list[CvRow]:
    """The rows, best primary mean first."""
    rows = [
        CvRow(
            c,
            {m: statistics.fmean(v.values()) for m, v in values.items()},
            interval(list(values[primary].values())),
        )
        for c, values in plain.items()
    ]
    return sorted(rows, key=lambda r: -r.means[primary])


def _mean_on(values: Mapping[str, float], queries: set[str]) -> float:
    return statistics.fmean(v for q, v in values.items() if q in queries)


def nested(
    candidates: Sequence[Candidate],
    plain: Mapping[Candidate, Mapping[str, Mapping[str, float]]],
    inner: Mapping[Candidate, Mapping[int, Mapping[str, float]]],
    folds: Folds,
    primary: str,
    defaults: Candidate,
    then: Callable[[Candidate], Sequence[Candidate]] | None = None,
) -> tuple[dict[str, dict[str, float]], list[Candidate]]:
    """metric -> query id -> value of tuning itself (each outer fold's choice on the other folds, scored on
    the fold), and the candidate chosen for each fold. ``then(pick)``: a later stage's variants of the
    fold's pick (the pick reranked), among which the fold chooses again on the same queries."""
    metrics = list(next(iter(plain.values())))
    values: dict[str, dict[str, float]] = {m: {} for m in metrics}
    chosen = []
    for f in range(folds.k):
        train = set(folds.training(f))

        def mean(c: Candidate, f: int = f, train: set[str] = train) -> float:
            return _mean_on(inner[c][f], train)

        pick = best(candidates, mean, defaults)
        if then is not None:
            pick = best([pick, *then(pick)], mean, defaults)
        chosen.append(pick)
        for q in folds.queries(f):
            for m in metrics:
                values[m][q] = plain[pick][m][q]
    return values, chosen


def worth(
    candidates: Sequence[Candidate],
    plain: Mapping[Candidate, Mapping[str, Mapping[str, float]]],
    primary: str,
    defaults: Candidate,
) -> dict[str, Candidate]:
    """choice -> the best candidate (by CV mean) that differs from the defaults in that choice alone."""
    out = {}
    for choice in CHOICES:
        alone = [c for c in candidates if c.changes(defaults) == (choice,)]
        if alone:
            out[choice] = best(alone, lambda c: statistics.fmean(plain[c][primary].values()), defaults)
    return out


def values_of(gold: Gold, rankings: Mapping[str, Ranking], metrics: Sequence[str]) -> dict:
    """metric -> query id -> value over the queries of ``rankings`` only."""
    sub = Gold(
        gold.name, {q: gold.queries[q] for q in rankings}, {q: gold.qrels[q] for q in rankings}, gold.fields
    )
    return per_query(sub, rankings, tuple(metrics))
