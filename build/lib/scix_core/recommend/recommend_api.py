"""Tier 3: Qdrant recommend — saved papers as positives, dismissed ones as negatives, BEST_SCORE.

Examples are passed as vectors read locally (qdrant-edge's recommend takes
vectors; qdrant-client's accepts them too), so both backends answer the same
call and return the same ids (congruence test). At most the newest
``EXAMPLES`` saves and dismissals are sent: BEST_SCORE scores every
candidate against every example.
"""

from __future__ import annotations

import time

from scix_core.recommend.blend import depth, tier_items
from scix_core.recommend.context import IndexSide, UserContext, hits_minus
from scix_core.recommend.result import StageRecord
from scix_core.recommend.tiers import TierRun
from scix_core.search import knobs

EXAMPLES = 64


class RecommendTier:
    number = 3

    def run(self, side: IndexSide, ctx: UserContext, limit: int) -> TierRun:
        t = time.perf_counter()
        pos = [p for p in ctx.saved if p in side.catalog.row][-EXAMPLES:]
        neg = [p for p in ctx.dismissed if p in side.catalog.row][-EXAMPLES:]
        positives = side.vectors.get(side.rows(pos))
        hits = hits_minus(
            side.store.recommend(
                positives,
                side.vectors.get(side.rows(neg)),
                depth(side, ctx, limit),
                ctx.exclusion(side),
                exact=knobs.qdrant_exact(),
            ),
            ctx.seen,
        )
        items, facts = tier_items(
            side,
            ctx,
            hits,
            lambda rows: (side.vectors.get(rows) @ positives.T).max(axis=1),
            limit,
            3,
            "recommend",
            "best_score",
        )
        summary = {
            "positives": len(pos),
            "negatives": len(neg),
            "strategy": "best_score",
            "candidates": len(items),
            **facts,
        }
        return TierRun(items, (StageRecord("recommend", (time.perf_counter() - t) * 1000, summary),))
