"""Stage 4: quota allocation over clusters by importance — quota, never RRF, across clusters.

RRF would let the dominant cluster win on rank alone and bring back the
interest collapse the product exists to prevent (reference design). Every
cluster gets ``min_slots`` (3) of ``total_slots`` (100); the rest is shared
in proportion to importance by the largest-remainder method, so quotas
always sum to ``total_slots`` exactly. Importance = the sum over a cluster's
saves of 2^(−age/h), age counted in saves since (newest save = 0) and h =
``recommend.recency_half_life_saves``: size and recency in one number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from scix_core.recommend.stages.base import Tier1State


def importance(members_positions: Sequence[Sequence[int]], n_saves: int, half_life: float) -> np.ndarray:
    """Normalised importance per cluster from the save positions (0 = oldest) of its members."""
    raw = np.array([sum(0.5 ** ((n_saves - 1 - p) / half_life) for p in pos) for pos in members_positions])
    return raw / raw.sum() if raw.sum() > 0 else np.full(len(raw), 1.0 / max(1, len(raw)))


def allocate(weights: Sequence[float], total: int, min_slots: int) -> list[int]:
    """``min_slots`` each, the remainder by largest remainder on ``weights``; sums to ``total``.

    When ``min_slots`` × clusters exceeds ``total`` every cluster gets an equal share (remainder to the
    most important).
    """
    n = len(weights)
    if n == 0:
        return []
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum() if w.sum() > 0 else np.full(n, 1.0 / n)
    base = min(min_slots, total // n)
    spare = total - base * n
    exact = w * spare
    quotas = np.floor(exact).astype(int)
    order = sorted(range(n), key=lambda i: (-(exact[i] - quotas[i]), -w[i], i))
    for i in order[: spare - int(quotas.sum())]:
        quotas[i] += 1
    return [int(base + q) for q in quotas]


class QuotaAllocation:
    name, writes = "quota", "clusters"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        cfg = state.side.config
        position = {p: i for i, p in enumerate(p for p in state.ctx.saved if p in state.side.catalog.row)}
        imp = importance(
            [[position[m] for m in c.members] for c in state.clusters],
            len(position),
            cfg.recency_half_life_saves,
        )
        quotas = allocate(imp, cfg.total_slots, cfg.min_slots)
        clusters = tuple(
            replace(c, importance=float(w), quota=q) for c, w, q in zip(state.clusters, imp, quotas)
        )
        summary = {
            "total_slots": cfg.total_slots,
            "min_slots": cfg.min_slots,
            "quotas": {c.cluster_id: c.quota for c in clusters},
        }
        return replace(state, clusters=clusters), summary
