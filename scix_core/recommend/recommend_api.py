"""Tier 3: Qdrant recommend — saved papers as positives, dismissed ones as negatives, BEST_SCORE.

Examples are passed as vectors read locally (qdrant-edge's recommend takes
vectors; qdrant-client's accepts them too), so both backends answer the same
call and return the same ids (congruence test). At most the newest
``EXAMPLES`` saves and dismissals are sent: BEST_SCORE scores every
candidate against every example.
"""

from __future__ import annotations

import time

from scix_core.recommend.blend import active, blend
from scix_core.recommend.context import IndexSide, UserContext, hits_minus
from scix_core.recommend.result import RecItem, StageRecord
from scix_core.recommend.tiers import TierRun
from scix_core.search import knobs

EXAMPLES = 64


class RecommendTier:
    number = 3

    def run(self, side: IndexSide, ctx: UserContext, limit: int) -> TierRun:
        t = time.perf_counter()
        pos = [p for p in ctx.saved if p in side.catalog.row][-EXAMPLES:]
        neg = [p for p in ctx.dismissed if p in side.catalog.row][-EXAMPLES:]
        community = active(side, ctx)
        positives = side.vectors.get(side.rows(pos))
        hits = side.store.recommend(positives, side.vectors.get(side.rows(neg)),
                                    limit * side.config.oversample if community else limit,
                                    ctx.exclusion(side), exact=knobs.qdrant_exact())
        hits = hits_minus(hits, ctx.seen)
        if community:
            pool = blend(side, ctx, hits, lambda rows: (side.vectors.get(rows) @ positives.T).max(axis=1), limit,
                         "recommend")
            items = tuple(RecItem(b.paper_id, "", rank, b.score, 3, b.source, scores=(
                ("best_score", b.similarity), ("cosave", b.cosave)), codes=side.catalog.codes[b.row])
                for rank, b in enumerate(pool, start=1))
        else:
            items = tuple(RecItem(h.paper_id, "", rank, h.score, 3, "recommend", scores=(("best_score", h.score),),
                                  codes=side.catalog.codes[h.point_id])
                          for rank, h in enumerate(hits, start=1))
        summary = {"positives": len(pos), "negatives": len(neg), "strategy": "best_score", "candidates": len(items),
                   "community": community, "co_saved": sum(1 for i in items if i.source == "co-saved")}
        return TierRun(items, (StageRecord("recommend", (time.perf_counter() - t) * 1000, summary),))
