"""Convex combination of normalised scores (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid
Retrieval", TOIS 2023): score(d) = Σ_i w_i · norm_i(d), the weights summing to one.

``minmax`` maps each ranking's scores to [0, 1]; ``zscore`` to standard scores. A paper a ranking did not
return gets that ranking's lowest normalised value (0 for min-max): absent is no better than the last paper
returned. Guarded: a ranking whose scores are all equal gives every paper 1.0 (min-max) or 0.0 (z-score).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scix_core.errors import UnknownNameError
from scix_core.fusion.combsum import minmax
from scix_core.fusion.order import ordered
from scix_core.types import Ranking


def zscore(ranking: Ranking) -> dict[str, float]:
    scores = ranking.scores()
    if not scores:
        return {}
    mean, sd = statistics.fmean(scores.values()), statistics.pstdev(scores.values())
    if sd == 0:
        return dict.fromkeys(scores, 0.0)
    return {p: (s - mean) / sd for p, s in scores.items()}


NORMALISERS = {"minmax": minmax, "zscore": zscore}


def convex(
    rankings: Sequence[Ranking], weights: Sequence[float], normalise: str = "minmax", name: str = "convex"
) -> Ranking:
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if normalise not in NORMALISERS:
        raise UnknownNameError("score normalisation", normalise, list(NORMALISERS))
    normed = [NORMALISERS[normalise](r) for r in rankings]
    floors = [min(n.values(), default=0.0) for n in normed]
    papers = {p for n in normed for p in n}
    total = {p: sum(w * n.get(p, floor) for w, n, floor in zip(weights, normed, floors)) for p in papers}
    return ordered(name, total, rankings)
