"""Reciprocal Rank Fusion (Cormack, Clarke & Buettcher, SIGIR 2009).

score(d) = sum over rankings containing d of w / (k + rank(d)), ranks from 1.
k = 60 is the paper's value and the SciX reference design's RRF_K.
"""

from __future__ import annotations

from collections.abc import Sequence

from scix_core.fusion.order import ordered
from scix_core.types import Ranking

RRF_K = 60


def weighted_rrf(
    rankings: Sequence[Ranking], weights: Sequence[float], k: int = RRF_K, name: str = "rrf"
) -> Ranking:
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        for paper_id, rank in ranking.ranks().items():
            scores[paper_id] = scores.get(paper_id, 0.0) + weight / (k + rank)
    return ordered(name, scores, rankings)


def rrf(rankings: Sequence[Ranking], k: int = RRF_K, name: str = "rrf") -> Ranking:
    """Plain RRF: every ranking weighs 1."""
    return weighted_rrf(rankings, [1.0] * len(rankings), k, name)
