"""Score-based fusion runs beside RRF: ``convex_minmax`` and ``convex_zscore``.

The base pass's lane rankings (no second search) combined by :func:`scix_core.fusion.convex`, with α the dense
lane's weight and 1 − α each lexical lane's. α is chosen by K-fold cross-validation over the judged queries:
each query is ranked with the α (of ``ALPHAS``) that scored the best mean nDCG@10 on the *other* folds, so no
query's own judgments choose its weight — the figure is an honest estimate of "α tuned on this gold set".
The α of every fold are reported in the evaluation's setup (``score_fusion_alpha``).
"""

from __future__ import annotations

import random
import statistics
from typing import Mapping

from scix_core.evaluate.gold import Gold
from scix_core.evaluate.metrics import PRIMARY, per_query
from scix_core.fusion import convex
from scix_core.types import Ranking

SCORE_RUNS = {"convex_minmax": "minmax", "convex_zscore": "zscore"}
ALPHAS = tuple(i / 10 for i in range(11))
FOLDS = 5


def fused(lanes: Mapping[str, Ranking], alpha: float, normalise: str, depth: int, name: str = "convex") -> Ranking:
    names = list(lanes)
    weights = [alpha if n == "dense" else 1 - alpha for n in names]
    return convex([lanes[n] for n in names], weights, normalise, name).top(depth)


def cross_validated(lanes: Mapping[str, Mapping[str, Ranking]], gold: Gold, normalise: str, depth: int,
                    folds: int = FOLDS, seed: int = 13) -> tuple[dict[str, Ranking], list[float]]:
    """Per query the convex ranking with its fold's α; and the α chosen for each fold (in fold order)."""
    ids = [q for q in gold.judged if q in lanes]
    if len(ids) < 2:  # nothing to hold out: the midpoint, said so by a single α
        return {q: fused(lanes[q], 0.5, normalise, depth) for q in ids}, [0.5]
    folds = min(folds, len(ids))
    values = {a: per_query(gold, {q: fused(lanes[q], a, normalise, depth) for q in ids}, (PRIMARY,))[PRIMARY]
              for a in ALPHAS}
    shuffled = random.Random(seed).sample(ids, len(ids))
    fold_of = {q: i % folds for i, q in enumerate(shuffled)}
    rankings: dict[str, Ranking] = {}
    chosen = []
    for f in range(folds):
        train = [q for q in ids if fold_of[q] != f]
        # best mean on the other folds; a tie goes to the α nearer the middle, then the smaller
        alpha = max(ALPHAS, key=lambda a: (statistics.fmean(values[a][q] for q in train), -abs(a - 0.5), -a))
        chosen.append(alpha)
        rankings.update({q: fused(lanes[q], alpha, normalise, depth) for q in ids if fold_of[q] == f})
    return rankings, chosen
