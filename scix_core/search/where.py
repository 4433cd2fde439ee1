"""Filter semantics as SQL, one function per dialect, so every lane means the same thing.

Both functions read a :class:`SearchFilters` and return ``(sql, params)`` for
a ``WHERE`` over the papers table aliased ``p``. Every value is a bound
parameter. See :mod:`scix_core.search.filters` for what each filter means.
"""

from __future__ import annotations

import json

from scix_core.search.filters import SearchFilters


def _body(flt: SearchFilters) -> list[str]:
    if flt.has_body is None:
        return []
    return ["p.body IS NOT NULL" if flt.has_body else "p.body IS NULL"]


def _adder(sql: list[str], params: list):
    def add(clause: str, value) -> None:
        sql.append(clause)
        params.append(value)

    return add


def sqlite_where(flt: SearchFilters) -> tuple[str, list]:
    """For the SQLite store (``scix_author_match`` is registered by
    :func:`scix_core.stores.papers.connect`)."""
    sql, params = [], []
    add = _adder(sql, params)
    if flt.year_min is not None:
        add("p.year >= ?", flt.year_min)
    if flt.year_max is not None:
        add("p.year <= ?", flt.year_max)
    if flt.categories:
        add(
            "p.idx IN (SELECT idx FROM paper_categories WHERE category IN (SELECT value FROM json_each(?)))",
            json.dumps(list(flt.categories)),
        )
    if flt.authors:
        add("scix_author_match(p.authors, ?)", json.dumps(list(flt.author_needles)))
    if flt.paper_ids:
        add("p.paper_id IN (SELECT value FROM json_each(?))", json.dumps(list(flt.paper_ids)))
    if flt.exclude_categories:
        add(
            "p.idx NOT IN (SELECT idx FROM paper_categories WHERE category IN (SELECT value FROM "
            "json_each(?)))",
            json.dumps(list(flt.exclude_categories)),
        )
    if flt.exclude_authors:
        add("NOT scix_author_match(p.authors, ?)", json.dumps(list(flt.excluded_author_needles)))
    if flt.since is not None:
        add("p.listed >= ?", flt.since.isoformat())
    sql += _body(flt)
    return " AND ".join(sql) or "1", params


def postgres_where(flt: SearchFilters) -> tuple[str, list]:
    """For the PostgreSQL mirror (``authors_folded`` holds case-folded names)."""
    sql, params = [], []
    add = _adder(sql, params)
    if flt.year_min is not None:
        add("p.year >= %s", flt.year_min)
    if flt.year_max is not None:
        add("p.year <= %s", flt.year_max)
    if flt.categories:
        add("p.categories && %s::text[]", list(flt.categories))
    if flt.authors:
        add(
            "EXISTS (SELECT 1 FROM unnest(p.authors_folded) a, unnest(%s::text[]) n WHERE strpos(a, n) > 0)",
            list(flt.author_needles),
        )
    if flt.paper_ids:
        add("p.paper_id = ANY(%s::text[])", list(flt.paper_ids))
    if flt.exclude_categories:
        add("NOT (p.categories && %s::text[])", list(flt.exclude_categories))
    if flt.since is not None:
        add("p.listed >= %s", flt.since)
    if flt.exclude_authors:
        add(
            "NOT EXISTS (SELECT 1 FROM unnest(p.authors_folded) a, unnest(%s::text[]) n WHERE strpos(a, n) > "
            "0)",
            list(flt.excluded_author_needles),
        )
    sql += _body(flt)
    return " AND ".join(sql) or "TRUE", params


def sqlite_passing(conn, paper_ids: list[str], flt: SearchFilters) -> set[str]:
    """Which of ``paper_ids`` pass ``flt`` (the post-filter of the vector lanes)."""
    where, params = sqlite_where(flt)
    sql = f"SELECT p.paper_id FROM papers p WHERE p.paper_id IN (SELECT value FROM json_each(?)) AND {where}"
    return {r[0] for r in conn.execute(sql, [json.dumps(paper_ids), *params])}
