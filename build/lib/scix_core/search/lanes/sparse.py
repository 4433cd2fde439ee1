"""The optional sparse lane: BM25-weighted sparse vectors in qdrant-edge (docs/design.md#search-lanes).

Same filters, over-fetch and orphan-point rules as the dense lane; the query
text is embedded by qdrant-edge's BM25 model (its own tokenizer, stemmer and
stopwords), and the collection's IDF modifier turns the dot product into a
BM25 score. OR semantics, unlike the lexical lanes' default AND.
"""

from __future__ import annotations

from scix_core.search.lanes.base import LaneRequest
from scix_core.search.lanes.dense import PayloadFilteredLane
from scix_core.vectors import VectorHit


class SparseLane(PayloadFilteredLane):
    name = "sparse"

    def _query(self, request: LaneRequest, fetch: int) -> list[VectorHit]:
        if not request.query.tokens:
            return []
        return self.store.search(request.query.text, fetch, request.filters.vector_filter())
