"""Score-based fusion runs beside RRF: ``convex_minmax`` and ``convex_zscore``.

The base pass's lane rankings (no second search) combined by :func:`scix_core.fusion.convex`, with α the dense
lane's weight and 1 − α each lexical lane's. α is chosen by K-fold cross-validation over the judged queries:
each query is ranked with the α (of ``ALPHAS``) that scored the best mean nDCG@10 on the *other* folds, so no
query's own judgments choose its weight — the figure is an honest estimate of "α tuned on this gold set".
The α of every fold are reported in the evaluation's setup (``score_fusion_alpha``). With more lanes than a
lexical and a dense one (e.g. a trained encoder beside the untrained one), :func:`weight_grid` gives the
candidates: a weight per lane on a simplex grid, chosen the same way.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence

from scix_core.evaluate.gold import Gold
from scix_core.evaluate.metrics import PRIMARY, per_query
from scix_core.fusion import convex
from scix_core.types import Ranking

SCORE_RUNS = {"convex_minmax": "minmax", "convex_zscore": "zscore"}
ALPHAS = tuple(i / 10 for i in range(11))
FOLDS = 5


def fused(
    lanes: Mapping[str, Ranking],
    weights: float | Mapping[str, float],
    normalise: str,
    depth: int,
    name: str = "convex",
) -> Ranking:
    """``weights``: α (the dense lane's weight, 1 − α each other lane's) or a weight per lane name (a lane not
    named is left out)."""
    if isinstance(weights, Mapping):
        names = [n for n in lanes if weights.get(n, 0) > 0] or list(lanes)[:1]
        return convex([lanes[n] for n in names], [weights.get(n, 1.0) for n in names], normalise, name).top(
            depth
        )
    names = list(lanes)
    return convex(
        [lanes[n] for n in names], [weights if n == "dense" else 1 - weights for n in names], normalise, name
    ).top(depth)


def weight_grid(names: Sequence[str], step: float = 0.1) -> tuple[dict[str, float], ...]:
    """Every weighting of ``names`` whose weights are multiples of ``step`` summing to 1 (a simplex grid: 66
    points for three lanes at 0.1)."""
    n = round(1 / step)

    def parts(k: int, total: int):
        if k == 1:
            yield (total,)
            return
        for first in range(total + 1):
            for rest in parts(k - 1, total - first):
                yield (first, *rest)

    return tuple(
        {name: round(c * step, 10) for name, c in zip(names, combo)} for combo in parts(len(names), n)
    )


def _evenness(weights: float | Mapping[str, float]) -> float:
    """Ties go to the most even weighting (α nearest 0.5)."""
    if isinstance(weights, Mapping):
        return -max(weights.values())
    return -abs(weights - 0.5)


def cross_validated(
    lanes: Mapping[str, Mapping[str, Ranking]],
    gold: Gold,
    normalise: str,
    depth: int,
    folds: int = FOLDS,
    seed: int = 13,
    grid: Sequence[float | Mapping[str, float]] = ALPHAS,
) -> tuple[dict[str, Ranking], list]:
    """Per query the convex ranking with its fold's weighting; and the weighting chosen for each fold (in fold
    order). ``grid``: the candidates — α values (the default) or lane weightings (see :func:`weight_grid`)."""
    ids = [q for q in gold.judged if q in lanes]
    middle = max(grid, key=_evenness)
    if len(ids) < 2:  # nothing to hold out: the most even weighting, said so by a single choice
        return {q: fused(lanes[q], middle, normalise, depth) for q in ids}, [middle]
    folds = min(folds, len(ids))
    values = [
        per_query(gold, {q: fused(lanes[q], w, normalise, depth) for q in ids}, (PRIMARY,))[PRIMARY]
        for w in grid
    ]
    shuffled = random.Random(seed).sample(ids, len(ids))
    fold_of = {q: i % folds for i, q in enumerate(shuffled)}
    rankings: dict[str, Ranking] = {}
    chosen = []
    for f in range(folds):
        train = [q for q in ids if fold_of[q] != f]
        # best mean on the other folds; a tie goes to the most even weighting, then the earlier in the grid
        best = max(
            range(len(grid)),
            key=lambda i: (statistics.fmean(values[i][q] for q in train), _evenness(grid[i]), -i),
        )
        chosen.append(grid[best])
        rankings.update({q: fused(lanes[q], grid[best], normalise, depth) for q in ids if fold_of[q] == f})
    return rankings, chosen
