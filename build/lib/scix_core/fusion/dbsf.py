"""Distribution-Based Score Fusion (as in Qdrant's ``Fusion.DBSF``).

Each ranking's scores are normalised against mean +/- 3 standard
deviations, clipped to [0, 1], and summed. A ranking with zero spread
gives every paper 0.5 (guarded, no division by zero).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scix_core.fusion.order import ordered, summed
from scix_core.types import Ranking


def _normalise(ranking: Ranking) -> dict[str, float]:
    scores = ranking.scores()
    if not scores:
        return {}
    mean = statistics.fmean(scores.values())
    sd = statistics.pstdev(scores.values())
    if sd == 0:
        return dict.fromkeys(scores, 0.5)
    lo, hi = mean - 3 * sd, mean + 3 * sd
    return {p: min(1.0, max(0.0, (s - lo) / (hi - lo))) for p, s in scores.items()}


def dbsf(rankings: Sequence[Ranking], name: str = "dbsf") -> Ranking:
    total, _ = summed(rankings, _normalise)
    return ordered(name, total, rankings)
