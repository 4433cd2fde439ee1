"""Stage 9: Maximal Marginal Relevance (Carbonell & Goldstein 1998) down to top_k, λ = 0.6.

pick = argmax λ · rel(d) − (1 − λ) · max_{s ∈ picked} cos(d, s), on the
candidates' real vectors. Relevance is min-max scaled to [0, 1] over the
pool first (all 1 when every score is equal), so λ trades the same units
whatever the scorer's range. λ below ~0.5 degrades relevance visibly; above
~0.8 the feed collapses toward one interest (reference design).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.stages.base import Tier1State


def mmr(relevance: np.ndarray, vectors: np.ndarray, k: int, lam: float) -> list[int]:
    """Indices into the pool in pick order."""
    n = len(relevance)
    if n == 0 or k <= 0:
        return []
    rel = np.asarray(relevance, dtype=np.float64)
    span = rel.max() - rel.min()
    rel = (rel - rel.min()) / span if span > 0 else np.ones(n)
    sims = np.asarray(vectors, dtype=np.float64) @ np.asarray(vectors, dtype=np.float64).T
    picked: list[int] = []
    closest = np.full(n, -np.inf)  # max similarity to anything picked so far
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        gain = lam * rel - (1 - lam) * closest if picked else lam * rel
        gain = np.where(available, gain, -np.inf)
        best = int(np.argmax(gain))
        picked.append(best)
        available[best] = False
        closest = np.maximum(closest, sims[best])
    return picked


class Mmr:
    name, writes = "mmr", "selected"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        pool = state.kept
        lam = state.side.config.mmr_lambda
        vecs = state.side.vectors.get([c.row for c in pool])
        picks = mmr(np.array([c.score for c in pool]), vecs, state.limit, lam)
        selected = tuple(pool[i] for i in picks)
        moves = tuple((pool[i].paper_id, i + 1, pos) for pos, i in enumerate(picks, start=1))
        summary = {"lambda": lam, "pool": len(pool), "picked": len(selected),
                   "moved": sum(1 for _, rel, pos in moves if rel != pos), "moves": [list(m) for m in moves],
                   "clusters_picked": sorted({c.cluster_id for c in selected if c.cluster_id is not None})}
        return replace(state, selected=selected, mmr_moves=moves), summary
