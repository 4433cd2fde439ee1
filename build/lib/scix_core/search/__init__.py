"""Search: one query -> ranked papers, with every lane and stage visible (docs/design.md#search)."""

from scix_core.search.filters import SearchFilters
from scix_core.search.pipeline import MODES, Searcher, search
from scix_core.search.result import Hit, LaneScore, SearchResult

__all__ = ["MODES", "Hit", "LaneScore", "SearchFilters", "SearchResult", "Searcher", "search"]
