"""The dense lane: query embedding -> cosine kNN in the vector store.

Years, categories and ids go to the store as payload filters. Conditions the
payload cannot express (authors, has_body) are post-filtered against the
paper store after an over-fetch of 10x the depth, capped at 500 (the
reference design's rule), so a selective post-filter can return fewer than
``k`` papers. ``SCIX_QDRANT_EXACT=1`` switches to exact kNN for evaluation.
Points without a ``paper_id`` payload are skipped, with one warning per lane.
"""

from __future__ import annotations

import logging
import sqlite3

from scix_core.search.lanes.base import LaneRequest
from scix_core.search.where import sqlite_where
from scix_core.types import Ranking
from scix_core.vectors import VectorStore

log = logging.getLogger(__name__)

OVERFETCH = 10
OVERFETCH_CAP = 500


class DenseLane:
    def __init__(self, store: VectorStore, papers: sqlite3.Connection, name: str = "dense"):
        self.store, self.papers, self.name = store, papers, name
        self.skipped_points = 0

    def search(self, request: LaneRequest, k: int) -> Ranking:
        if request.vector is None:
            raise ValueError("the dense lane needs request.vector (the query embedding)")
        flt = request.filters
        fetch = max(k, min(k * OVERFETCH, OVERFETCH_CAP)) if flt.needs_post_filter else k
        hits = self.store.search(request.vector, fetch, flt.vector_filter(), exact=request.knobs.exact)
        pairs = [(h.paper_id, h.score) for h in hits if h.paper_id]
        if len(pairs) < len(hits):
            if not self.skipped_points:
                log.warning("dense lane: %d point(s) without a paper_id payload skipped", len(hits) - len(pairs))
            self.skipped_points += len(hits) - len(pairs)
        if flt.needs_post_filter and pairs:
            keep = self._passing([p for p, _ in pairs], request)
            pairs = [(p, s) for p, s in pairs if p in keep]
        return Ranking.from_pairs(self.name, pairs[:k])

    def _passing(self, paper_ids: list[str], request: LaneRequest) -> set[str]:
        import json

        where, params = sqlite_where(request.filters)
        sql = f"SELECT p.paper_id FROM papers p WHERE p.paper_id IN (SELECT value FROM json_each(?)) AND {where}"
        return {r[0] for r in self.papers.execute(sql, [json.dumps(paper_ids), *params])}
