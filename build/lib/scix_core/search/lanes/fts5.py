"""Lexical lanes on SQLite FTS5 (the embedded default).

The query becomes an FTS5 expression of quoted terms only (``"graph" AND
"neural"``), so no user text ever reaches ``MATCH`` as syntax. ``bm25()``
ranks with configurable column weights; scores are reported negated, so
higher is better as in every other lane.

Modes: ``and`` (every term), ``or`` (any term, bm25 ranks the papers
matching more and rarer terms first), ``auto`` (the papers matching every
term first, then — when they are fewer than ``k``, as for most sentence-like
queries — the papers matching some, in bm25 order: ``and_then_or``).

Candidate pool (``SCIX_LEXICAL_POOL``): the inner query takes the first
``pool`` matching rows in rowid (= ingest) order, after the filters, and
only those are ranked — the same trade-off as the PostgreSQL CTE.
"""

from __future__ import annotations

import sqlite3
import threading

from scix_core.errors import UnknownNameError
from scix_core.search.lanes.base import LEXICAL_MODES, LaneRequest, LaneTimeout, and_then_or
from scix_core.search.where import sqlite_where
from scix_core.stores.analysis import BODY_MAX_CHARS
from scix_core.stores.papers import time_limit
from scix_core.types import Ranking


def fts5_expression(tokens: tuple[str, ...], mode: str = "and") -> str:
    """Quoted terms joined by AND (``and``) or OR (``or``); tokens are letters and digits only, so quoting is
    total. A term given twice is two phrases to bm25(), so it counts twice (the query's term frequency)."""
    return (" OR " if mode == "or" else " AND ").join(f'"{t}"' for t in tokens)


class Fts5Lane:
    """``table`` is ``papers_fts`` (title, abstract) or ``body_fts`` (full text)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str = "lexical",
        table: str = "papers_fts",
        weights: tuple[float, ...] = (1.0, 1.0),
        mode: str = "and",
        timeout_ms: float = 5000,
    ):
        if table not in ("papers_fts", "body_fts"):
            raise ValueError(f"unknown FTS5 table {table!r}")
        if mode not in LEXICAL_MODES:
            raise UnknownNameError("lexical mode", mode, LEXICAL_MODES)
        self.conn, self.name, self.table, self.weights, self.mode = conn, name, table, weights, mode
        self.timeout_ms = timeout_ms
        # one statement at a time on the lane's connection: the time limit is a per-connection progress
        # handler, and setting it while another thread's statement calls it deadlocks on the GIL
        self._lock = threading.Lock()

    def search(self, request: LaneRequest, k: int) -> Ranking:
        tokens = request.query.repeated()
        if not tokens or k <= 0:
            return Ranking(self.name)
        where, params = sqlite_where(request.filters)
        if self.table == "body_fts":
            where += f" AND length(p.body) <= {BODY_MAX_CHARS}"
        restrict = "" if where == "1" else f" AND rowid IN (SELECT p.idx FROM papers p WHERE {where})"
        weights = ", ".join("?" * len(self.weights))
        # pool (first matches in rowid order) -> top k by bm25 -> join only those k to papers
        sql = (
            f"SELECT p.paper_id, -f.s FROM (SELECT idx, s FROM (SELECT rowid AS idx, bm25({self.table}, "
            f"{weights}) AS s "
            f"FROM {self.table} WHERE {self.table} MATCH ?{restrict} LIMIT ?) ORDER BY s, idx LIMIT ?) f "
            "JOIN papers p ON p.idx = f.idx ORDER BY f.s, f.idx"
        )
        pool = -1 if request.knobs.pool is None else request.knobs.pool
        first = "and" if self.mode == "auto" else self.mode
        rows = self._run(sql, [*self.weights, fts5_expression(tokens, first), *params, pool, k])
        if self.mode == "auto" and len(rows) < k and len(request.query.tokens) > 1:
            more = self._run(
                sql, [*self.weights, fts5_expression(tokens, "or"), *params, pool, k + len(rows)]
            )
            rows = and_then_or(rows, more, k)
        return Ranking.from_pairs(self.name, rows)

    def _run(self, sql: str, args: list) -> list[tuple]:
        try:
            with self._lock, time_limit(self.conn, self.timeout_ms):
                return self.conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise LaneTimeout(f"{self.name} lane exceeded {self.timeout_ms:g} ms") from None
            raise
