"""The dense lane: query embedding -> cosine kNN in the vector store (and the base of the sparse lane).

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

from scix_core.embeddings.passages import FANOUT
from scix_core.search.lanes.base import LaneRequest
from scix_core.search.where import sqlite_passing
from scix_core.types import Ranking
from scix_core.vectors import VectorHit, VectorStore

log = logging.getLogger(__name__)

OVERFETCH = 10
OVERFETCH_CAP = 500


class PayloadFilteredLane:
    """A lane over a vector store: payload filters, post-filter with over-fetch, orphan points skipped.
    Subclasses say how to query the store (``_query``)."""

    name = "vectors"

    def __init__(self, store, papers: sqlite3.Connection, name: str | None = None):
        self.store, self.papers = store, papers
        self.name = name or self.name
        self.skipped_points = 0

    def _query(self, request: LaneRequest, fetch: int) -> list[VectorHit]:
        raise NotImplementedError

    def search(self, request: LaneRequest, k: int) -> Ranking:
        flt = request.filters
        fetch = max(k, min(k * OVERFETCH, OVERFETCH_CAP)) if flt.needs_post_filter else k
        hits = self._query(request, fetch)
        pairs = [(h.paper_id, h.score) for h in hits if h.paper_id]
        if len(pairs) < len(hits):
            if not self.skipped_points:
                log.warning(
                    "dense lane: %d point(s) without a paper_id payload skipped", len(hits) - len(pairs)
                )
            self.skipped_points += len(hits) - len(pairs)
        if flt.needs_post_filter and pairs:
            keep = sqlite_passing(self.papers, [p for p, _ in pairs], flt)
            pairs = [(p, s) for p, s in pairs if p in keep]
        return Ranking.from_pairs(self.name, pairs[:k])


class DenseLane(PayloadFilteredLane):
    """With ``passages`` (the index's passage vectors, :mod:`scix_core.embeddings.passages`), a paper's score
    is the best of its own vector's and its passages' cosines (MaxP): the top ``fetch`` papers and the top
    ``fetch`` × ``FANOUT`` passages, merged by paper."""

    name = "dense"

    def __init__(
        self,
        store: VectorStore,
        papers: sqlite3.Connection,
        name: str = "dense",
        passages: VectorStore | None = None,
    ):
        super().__init__(store, papers, name)
        self.passages = passages

    def _query(self, request: LaneRequest, fetch: int) -> list[VectorHit]:
        if request.vector is None:
            raise ValueError("the dense lane needs request.vector (the query embedding)")
        flt = request.filters.vector_filter()
        hits = self.store.search(request.vector, fetch, flt, exact=request.knobs.exact)
        if self.passages is None:
            return hits
        # the search's filters are payload conditions (years, categories, ids), which passages carry too
        more = self.passages.search(request.vector, fetch * FANOUT, flt, exact=request.knobs.exact)
        best: dict[str, VectorHit] = {}
        for hit in (*hits, *more):
            if hit.paper_id and (hit.paper_id not in best or hit.score > best[hit.paper_id].score):
                best[hit.paper_id] = hit
        merged = sorted(best.values(), key=lambda h: (-h.score, h.paper_id))[:fetch]
        return merged + [h for h in hits if not h.paper_id]  # orphan points stay, to be counted and skipped
