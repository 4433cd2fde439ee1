"""Fielded-query parser (docs/design.md#search-lanes, item 4, off by default): lifts fields into filters.

    dark matter year:2019-2021 cat:astro-ph.GA author:"Kurtz" -cat:astro-ph.CO

``year:`` takes ``2019-2021``, ``2019-``, ``-2021``, ``2020``, ``>2015``,
``>=2015``, ``<2015``, ``<=2015``; ``cat:`` a category code (repeat for any
of); ``author:`` a name substring, quoted if it has spaces. A leading ``-``
negates ``cat:`` and ``author:`` (exclude). Other ``word:`` forms are plain
text. A malformed field is a :class:`QuerySyntaxError` naming its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from scix_core.errors import FilterError, QueryError
from scix_core.search.filters import SearchFilters, parse_year_range

_FIELD = re.compile(r'(?<!\S)(?P<neg>-)?(?P<field>year|cat|author):(?P<value>"[^"]*"?|\S*)', re.IGNORECASE)
_COMPARE = re.compile(r"^(>=|<=|>|<)(\d{4})$")


class QuerySyntaxError(QueryError):
    """A fielded query term is malformed; ``position`` is its 0-based offset in the query."""

    code = "query_syntax_error"

    def __init__(self, position: int, message: str):
        self.position = position
        super().__init__(f"at position {position}: {message}")


@dataclass(frozen=True)
class FieldedQuery:
    text: str  # the query with the fields removed
    filters: dict[str, Any]  # SearchFilters fields lifted from the query
    fields: tuple[str, ...]  # the field terms as typed, for the metadata


def _year(value: str, pos: int) -> tuple[int | None, int | None]:
    m = _COMPARE.match(value)
    if m:
        op, year = m.group(1), int(m.group(2))
        return {">": (year + 1, None), ">=": (year, None), "<": (None, year - 1), "<=": (None, year)}[op]
    try:
        return parse_year_range(value)
    except FilterError as exc:
        raise QuerySyntaxError(pos, f"year:{value}: {exc}") from None


def parse_fielded(query: str) -> FieldedQuery:
    lifted: dict[str, Any] = {}
    terms = []
    for m in _FIELD.finditer(query):
        field, value, neg, pos = m.group("field").lower(), m.group("value"), bool(m.group("neg")), m.start()
        if value.startswith('"'):
            if len(value) < 2 or not value.endswith('"'):
                raise QuerySyntaxError(pos, f"unterminated quote in {m.group(0)!r}")
            value = value[1:-1]
        if not value.strip():
            raise QuerySyntaxError(pos, f"{field}: needs a value")
        if field == "year":
            if neg:
                raise QuerySyntaxError(pos, "year: cannot be negated; use a range such as year:<2015")
            if "year_min" in lifted or "year_max" in lifted:
                raise QuerySyntaxError(pos, "year: given twice")
            lifted["year_min"], lifted["year_max"] = _year(value, pos)
        else:
            key = {
                ("cat", False): "categories",
                ("cat", True): "exclude_categories",
                ("author", False): "authors",
                ("author", True): "exclude_authors",
            }[field, neg]
            lifted.setdefault(key, []).append(value.strip())
        terms.append(m.group(0))
    text = " ".join(_FIELD.sub(" ", query).split())
    return FieldedQuery(
        text, {k: tuple(v) if isinstance(v, list) else v for k, v in lifted.items()}, tuple(terms)
    )


def merge_filters(base: SearchFilters, lifted: dict[str, Any]) -> SearchFilters:
    """The call's filters plus the query's; a field set in both is an error rather than a silent choice."""
    if not lifted:
        return base
    given = {k for k, v in base.to_dict().items()}
    clash = sorted(given & set(lifted))
    if clash:
        raise FilterError(f"{', '.join(clash)} given both in the query and as a filter")
    return SearchFilters.parse({**base.to_dict(), **{k: v for k, v in lifted.items() if v is not None}})
