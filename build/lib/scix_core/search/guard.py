"""The unscoped-broad-query guard (docs/design.md#guards): an optional policy, off in the workbench.

A query with no filters and ≥ 3 tokens or ≥ 30 characters is refused before
any lane runs, with a structured error saying how to scope it.
"""

from __future__ import annotations

from scix_core.errors import QueryError
from scix_core.search.filters import SearchFilters
from scix_core.search.query import PreparedQuery

MIN_TOKENS = 3
MIN_CHARS = 30


class BroadQueryError(QueryError):
    code = "unscoped_broad_query"


def check_broad(query: PreparedQuery, filters: SearchFilters) -> None:
    if filters:
        return
    words = query.text.split()
    if len(words) >= MIN_TOKENS or len(query.text) >= MIN_CHARS:
        raise BroadQueryError(
            f"unscoped broad query ({len(words)} words, {len(query.text)} characters, no filters): "
            "add a year range, categories or authors, or turn off search.broad_query_guard"
        )
