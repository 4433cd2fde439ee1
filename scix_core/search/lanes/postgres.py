"""Lexical lanes on PostgreSQL full text (the backend at scale).

Title/abstract: the stored weighted ``tsv`` (title A, abstract B) under GIN.
Body: ``to_tsvector(body)`` under an expression GIN index; the query repeats
the index's partial predicate so the planner can use it, and ranks against
``tsv`` (title/abstract), because ranking long bodies is far too slow — the
body lane's order is approximate by design (RRF absorbs it).

``plainto_tsquery`` gives AND semantics; ``or`` mode turns its ``&`` into
``|``; ``auto`` puts the AND matches first and, when they are fewer than
``k``, the OR matches after them (``and_then_or``). A CTE caps the matched
candidates at ``SCIX_LEXICAL_POOL`` rows before
``ts_rank_cd`` runs, with the normalisation flag from
``SCIX_LEXICAL_RANK_FLAG``. Query term frequency is not scored here:
``ts_rank_cd`` (and ``ts_rank``) rank ``'cat' & 'cat' & 'dog'`` exactly as ``'cat' & 'dog'`` (checked on
PostgreSQL 15), so a long query that repeats a term — CACM's do — weighs it once on this backend and as often
as it occurs (``PreparedQuery.repeated``) on the embedded ones. Every value is a bound parameter; the
text-search config comes from a whitelist.

:class:`PostgresBm25Lane` (``postgres.ranking = "bm25"``, the default) ranks title/abstract instead by Lucene
  BM25
over the build's term matrix mirrored into ``terms`` and ``postings`` — the formula, analyser and parameters
of the embedded ``bm25`` backend (:mod:`~scix_core.search.lanes.bm25`), so the two backends return the same
ranking; one aggregate over the query stems' postings, no pool, no ``tsvector`` at query time.

Each call runs in its own transaction, or in a SAVEPOINT when the caller
holds one open, with a local ``statement_timeout``: a timeout rolls back to
the savepoint and the caller's transaction survives.

A lane given a ``connect`` factory survives a database restart: a connection
found broken (server restarted, backend terminated, network cut) is replaced
and the statement retried once; while the server is down the call raises
:class:`BackendUnavailableError` (the lane is dropped with that reason) and
the next call tries again — a long-lived searcher never stays broken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from scix_core.errors import BackendUnavailableError, UnknownNameError
from scix_core.search.lanes.base import LEXICAL_MODES, LaneRequest, LaneTimeout, and_then_or
from scix_core.search.lanes.bm25 import check_bm25, stem_weights
from scix_core.search.where import postgres_where
from scix_core.stores.postgres import BODY_PREDICATE, BODY_VECTOR
from scix_core.types import Ranking

TS_CONFIGS = ("english", "simple")
FIELDS = ("title_abstract", "body")


class PostgresLane:
    def __init__(
        self,
        conn,
        schema: str,
        name: str = "lexical",
        field: str = "title_abstract",
        mode: str = "and",
        ts_config: str = "english",
        timeout_ms: float = 5000,
        connect: Callable[[], object] | None = None,
    ):
        for kind, value, valid in (
            ("lexical mode", mode, LEXICAL_MODES),
            ("text-search config", ts_config, TS_CONFIGS),
            ("lexical field", field, FIELDS),
        ):
            if value not in valid:
                raise UnknownNameError(kind, value, valid)
        self.conn, self.schema, self.name, self.field, self.mode = conn, schema, name, field, mode
        self.ts_config, self.timeout_ms, self._connect = ts_config, timeout_ms, connect
        self._lock = threading.Lock()  # one statement at a time per connection

    def _sql(self, request: LaneRequest, k: int, mode: str | None = None):
        from psycopg import sql

        tsq = "plainto_tsquery(%s::regconfig, %s)"
        if (mode or self.mode) == "or":
            tsq = f"replace({tsq}::text, ' & ', ' | ')::tsquery"
        text = " ".join(request.query.tokens)
        match = (
            f"tsv @@ {tsq}"
            if self.field == "title_abstract"
            else f"{BODY_PREDICATE} AND {BODY_VECTOR} @@ {tsq}"
        )
        where, params = postgres_where(request.filters)
        query = sql.SQL(
            f"WITH pool AS (SELECT p.idx FROM {{t}} p WHERE {match} AND {where} LIMIT %s) "
            f"SELECT p.paper_id, ts_rank_cd(p.tsv, {tsq}, %s) AS score FROM pool JOIN {{t}} p ON p.idx = "
            "pool.idx "
            "ORDER BY score DESC, p.idx LIMIT %s"
        ).format(t=sql.Identifier(self.schema, "papers"))
        args = [
            self.ts_config,
            text,
            *params,
            request.knobs.pool,
            self.ts_config,
            text,
            request.knobs.rank_flag,
            k,
        ]
        return query, args

    def search(self, request: LaneRequest, k: int) -> Ranking:
        if not request.query.tokens or k <= 0:
            return Ranking(self.name)
        first = "and" if self.mode == "auto" else self.mode
        rows = self._run(*self._sql(request, k, first))
        if self.mode == "auto" and len(rows) < k and len(request.query.tokens) > 1:
            rows = and_then_or(rows, self._run(*self._sql(request, k + len(rows), "or")), k)
        return Ranking.from_pairs(self.name, rows)

    def explain(self, request: LaneRequest, k: int = 60) -> str:
        """The planner's plan for this lane's query (text format)."""
        from psycopg import sql

        query, args = self._sql(request, k)
        return "\n".join(r[0] for r in self._run(sql.SQL("EXPLAIN ") + query, args))

    def _run(self, query, args) -> list[tuple]:
        import psycopg

        with self._lock:
            if self._connect is not None and (self.conn.closed or self.conn.broken):
                self._reconnect()
            try:
                return self._execute(query, args)
            except psycopg.OperationalError as exc:
                if self._connect is None or not self.conn.broken:
                    raise BackendUnavailableError(
                        f"{self.name} lane: PostgreSQL failed: {exc}".strip()
                    ) from exc
                self._reconnect()  # the server restarted or the backend was terminated: once more, afresh
                return self._execute(query, args)

    def _reconnect(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 — a broken connection may fail to close; it is dropped either way
            pass
        self.conn = self._connect()  # BackendUnavailableError while the server is down

    def _execute(self, query, args) -> list[tuple]:
        import psycopg

        try:
            with self.conn.transaction():  # a SAVEPOINT if the caller has a transaction open
                before = self.conn.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    [f"{int(self.timeout_ms)}ms"],
                ).fetchone()[0]
                rows = self.conn.execute(query, args).fetchall()
                # SET LOCAL would outlive a released savepoint: hand the caller back its own timeout
                self.conn.execute("SELECT set_config('statement_timeout', %s, true)", [before])
            return rows
        except psycopg.errors.QueryCanceled:
            raise LaneTimeout(f"{self.name} lane exceeded statement_timeout {self.timeout_ms:g} ms") from None


class PostgresBm25Lane(PostgresLane):
    """Title/abstract by Lucene BM25 on the mirrored term matrix (``papers`` is the number of papers it
    holds)."""

    def __init__(
        self,
        conn,
        schema: str,
        papers: int,
        name: str = "lexical",
        mode: str = "and",
        k1: float = 1.2,
        b: float = 0.75,
        timeout_ms: float = 5000,
        connect: Callable[[], object] | None = None,
        avg_len: float = 0.0,
    ):
        super().__init__(conn, schema, name, "title_abstract", mode, "english", timeout_ms, connect)
        check_bm25(k1, b)
        # avg_len: the papers' average length in terms (BM25's length norm is a posting's len / avg_len)
        self.papers, self.k1, self.b, self.avg_len = papers, k1, b, avg_len

    def search(self, request: LaneRequest, k: int) -> Ranking:
        if self.mode != "auto" or not request.query.tokens or k <= 0:
            return super().search(request, k)
        # auto in one statement: the papers matching every stem sort first (then and_then_or caps the others'
        # scores), instead of an AND round trip followed by an OR one
        rows = self._run(*self._sql(request, k, "auto"))
        return Ranking.from_pairs(
            self.name,
            and_then_or(
                [(p, s) for p, s, every in rows if every], [(p, s) for p, s, every in rows if not every], k
            ),
        )

    def _sql(self, request: LaneRequest, k: int, mode: str | None = None):
        """Each stem's weight (query frequency × IDF) once, in a materialised CTE; one hash aggregate over the
        stems' postings; without filters the top ``k`` are cut before ``papers`` is joined (4× the throughput
        of joining every matched paper on SciFact). ``auto`` adds whether a paper matched every stem, sorted
        first."""
        from psycopg import sql

        weights = stem_weights(request.query)
        mode = mode or self.mode
        where, params = postgres_where(request.filters)
        unfiltered = where == "TRUE"
        every = {"and": "", "or": "", "auto": ", count(*) = %s AS every"}[mode]
        first = "every DESC, " if mode == "auto" else ""
        statement = sql.SQL(
            "WITH q AS MATERIALIZED (SELECT t.id, w.qtf * ln(1 + (%s::float8 - t.df + 0.5) / (t.df + 0.5)) "
            "AS w "
            "FROM unnest(%s::text[], %s::float8[]) AS w(term, qtf) JOIN {terms} t ON t.term = w.term), "
            "s AS (SELECT po.idx, sum(q.w * po.tf / (po.tf + %s + %s * po.len)) AS score{every} "
            "FROM q JOIN {postings} po ON po.term = q.id GROUP BY po.idx{having}{cut}) "
            "SELECT p.paper_id, s.score{every_out} FROM s JOIN {papers} p ON p.idx = s.idx WHERE {where} "
            "ORDER BY {first}s.score DESC, s.idx LIMIT %s"
        ).format(
            every=sql.SQL(every),
            every_out=sql.SQL(", s.every" if every else ""),
            having=sql.SQL(" HAVING count(*) = %s" if mode == "and" else ""),
            cut=sql.SQL(f" ORDER BY {first}score DESC, po.idx LIMIT %s" if unfiltered else ""),
            where=sql.SQL(where),
            first=sql.SQL(first.replace("every", "s.every")),
            **{t: sql.Identifier(self.schema, t) for t in ("terms", "postings", "papers")},
        )
        n = [len(weights)] if mode in ("and", "auto") else []
        args = [
            self.papers,
            list(weights),
            [float(w) for w in weights.values()],
            self.k1 * (1 - self.b),
            self.k1 * self.b / self.avg_len if self.avg_len > 0 else 0.0,
            *n,
            *([k] if unfiltered else []),
            *params,
            k,
        ]
        return statement, args
