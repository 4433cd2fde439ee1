"""CombSUM and CombMNZ (Fox & Shaw, TREC-2 1994) over min-max normalised scores.

Normalisation is guarded: a ranking whose scores are all equal (max == min)
gives every paper 1.0 instead of dividing by zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from scix_core.fusion.order import ordered, summed
from scix_core.types import Ranking


def minmax(ranking: Ranking) -> dict[str, float]:
    scores = ranking.scores()
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi == lo:
        return dict.fromkeys(scores, 1.0)
    return {p: (s - lo) / (hi - lo) for p, s in scores.items()}


def combsum(rankings: Sequence[Ranking], name: str = "combsum") -> Ranking:
    total, _ = summed(rankings, minmax)
    return ordered(name, total, rankings)


def combmnz(rankings: Sequence[Ranking], name: str = "combmnz") -> Ranking:
    """CombSUM times the number of rankings that retrieved the paper."""
    total, hits = summed(rankings, minmax)
    return ordered(name, {p: total[p] * hits[p] for p in total}, rankings)
