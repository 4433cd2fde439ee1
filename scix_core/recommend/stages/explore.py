"""Stage 10: exploration — ``n_explore`` papers from outside the user's clusters, marked as such.

The pool is the trending ranking of the whole index (Tier 0's rule, no
category restriction, top ``recommend.explore_pool``) minus saved,
dismissed, already picked and suppressed papers, and minus anything inside a
cluster: a paper is inside when its cosine to some cluster centroid reaches
that cluster's radius (its least similar member). From the first 50 left the
picks are drawn with a generator seeded by the user and the number of their
interactions — reproducible for the same state, new after every interaction.
So ``limit + n_explore`` items come back.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from scix_core.recommend.stages.base import Candidate, Tier1State
from scix_core.recommend.trending import trending

DRAW_FROM = 50


class Explore:
    name, writes = "explore", "explore"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx, cfg = state.side, state.ctx, state.side.config
        if cfg.n_explore <= 0:
            return state, {"picked": 0, "reason": "n_explore = 0"}
        cat = side.catalog
        taken = ctx.seen | {c.paper_id for c in state.selected}
        ranked = trending(cat, (), side.rows(taken), cfg.explore_pool, cfg.trending_months, side.pool).rows[
            : cfg.explore_pool
        ]
        if state.suppressed:  # (most users have no suppressed code: the pool as it is)
            ranked = np.array(
                [r for r in ranked.tolist() if not state.suppressed.keys() & set(cat.suppression_codes(r))],
                dtype=np.int64,
            )
        centroids = np.stack([c.centroid for c in state.clusters])
        radius = np.array([c.radius for c in state.clusters])
        sims = side.vectors.get(ranked) @ centroids.T if len(ranked) else np.zeros((0, len(centroids)))
        outside = ~(sims >= radius).any(axis=1)
        eligible = ranked[outside][:DRAW_FROM]
        near = sims[outside][:DRAW_FROM]
        rng = np.random.default_rng(zlib.crc32(f"{ctx.user_id}\x00{len(ctx.events)}".encode()))
        picks = (
            rng.choice(len(eligible), size=min(cfg.n_explore, len(eligible)), replace=False)
            if len(eligible)
            else []
        )
        explore = tuple(
            Candidate(
                cat.ids[eligible[i]],
                int(eligible[i]),
                "exploration",
                state.clusters[int(near[i].argmax())].cluster_id,
                float(near[i].max()),
                scores=(
                    ("citations", float(cat.citations[eligible[i]])),
                    ("nearest_cluster_sim", float(near[i].max())),
                ),
            )
            for i in sorted(int(p) for p in picks)
        )
        summary = {"pool": int(len(ranked)), "outside_clusters": int(outside.sum()), "picked": len(explore)}
        return replace(state, explore=explore), summary
