"""Deterministic ordering of fused scores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from scix_core.types import Ranking


def ordered(name: str, scores: Mapping[str, float], rankings: Sequence[Ranking]) -> Ranking:
    """Sort by score, descending; ties go to the best rank any input gave the
    paper, then to the earliest input that has it, then to the paper id."""
    best: dict[str, tuple[int, int]] = {}
    for lane, ranking in enumerate(rankings):
        for paper_id, rank in ranking.ranks().items():
            best[paper_id] = min(best.get(paper_id, (rank, lane)), (rank, lane))
    keys = sorted(scores, key=lambda p: (-scores[p], *best.get(p, (0, 0)), p))
    return Ranking.from_pairs(name, ((p, scores[p]) for p in keys))


def summed(
    rankings: Sequence[Ranking], normalise: Callable[[Ranking], dict[str, float]]
) -> tuple[dict[str, float], dict[str, int]]:
    """Per paper: the sum of its normalised scores, and how many rankings had it."""
    total: dict[str, float] = {}
    hits: dict[str, int] = {}
    for ranking in rankings:
        for p, s in normalise(ranking).items():
            total[p] = total.get(p, 0.0) + s
            hits[p] = hits.get(p, 0) + 1
    return total, hits
