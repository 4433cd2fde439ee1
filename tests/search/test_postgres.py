"""PostgreSQL specifics: the planner uses the indexes, per-lane timeouts inside
savepoints, the per-call knobs, and an idempotent, atomic sync."""

from __future__ import annotations

import psycopg
import pytest

from scix_core.errors import BackendUnavailableError, ConfigError
from scix_core.search import Searcher
from scix_core.search.lanes import LaneTimeout
from scix_core.search.lanes.postgres import PostgresBm25Lane, PostgresLane
from scix_core.stores.postgres import SYNC_FORMAT, connect, schema_name, sync_index, synced_build_key
from scix_core.stores.terms import TermIndex
from scix_core.workspace import Workspace
from tests.helpers import make_request

pytestmark = [pytest.mark.postgres, pytest.mark.model]


def _lane(pg_built, field="title_abstract", **kw) -> PostgresLane:
    return PostgresLane(
        connect(pg_built.config.postgres.dsn),
        schema_name(pg_built.index),
        "body" if field == "body" else "lexical",
        field,
        **kw,
    )


def _plan(lane: PostgresLane, query: str) -> str:
    lane.conn.execute("SET enable_seqscan = off")  # a 12-row table: make the index the only fair choice
    return lane.explain(make_request(query))


def test_planner_uses_the_gin_indexes(pg_built):
    assert "papers_tsv_gin" in _plan(_lane(pg_built), "graph neural")
    assert "papers_body_gin" in _plan(_lane(pg_built, "body"), "transformer")
    bm25 = Searcher(pg_built.index, pg_built.config).lexical[0]
    assert isinstance(bm25, PostgresBm25Lane) and "postings_term" in _plan(bm25, "graph neural")


def test_body_index_needs_the_repeated_predicate(pg_built):
    """Negative control: without the partial predicate the body index cannot be used."""
    conn = connect(pg_built.config.postgres.dsn)
    conn.execute("SET enable_seqscan = off")
    table = f"{schema_name(pg_built.index)}.papers"
    bare = conn.execute(
        f"EXPLAIN SELECT idx FROM {table} "
        "WHERE to_tsvector('english'::regconfig, body) @@ plainto_tsquery('english', 'x')"
    ).fetchall()
    assert "papers_body_gin" not in "\n".join(r[0] for r in bare)


def test_timeout_rolls_back_to_savepoint_and_outer_transaction_survives(pg_built):
    dsn = pg_built.config.postgres.dsn
    locker = psycopg.connect(dsn)  # another session holds the table, as a long migration would
    locker.execute(f"LOCK TABLE {schema_name(pg_built.index)}.papers IN ACCESS EXCLUSIVE MODE")
    lane = _lane(pg_built, timeout_ms=200)
    try:
        with lane.conn.transaction():  # the caller's own transaction
            lane.conn.execute("CREATE TEMP TABLE caller_work (x int)")
            lane.conn.execute("INSERT INTO caller_work VALUES (1)")
            with pytest.raises(LaneTimeout, match="statement_timeout 200 ms"):
                lane.search(make_request("graph"), 10)
            assert lane.conn.execute("SELECT x FROM caller_work").fetchone() == (1,)
            assert lane.conn.execute("SELECT current_setting('statement_timeout')").fetchone() == ("0",)
    finally:
        locker.rollback()
    assert "p08" in lane.search(make_request("graph"), 10).ids


def test_a_timed_out_lane_is_dropped_and_the_query_answered(pg_built):
    searcher = Searcher(pg_built.index, pg_built.config.replace(**{"search.lane_timeout_ms": 200}))
    searcher.warm()  # the model loads outside the 200 ms the dense lane gets
    locker = psycopg.connect(pg_built.config.postgres.dsn)
    locker.execute(f"LOCK TABLE {schema_name(pg_built.index)}.papers IN ACCESS EXCLUSIVE MODE")
    try:
        result = searcher.search("graph neural networks", limit=5)
    finally:
        locker.rollback()
    assert set(result.metadata["dropped_lanes"]) == {"lexical", "body"}
    assert result.metadata["dropped_lanes"]["lexical"].startswith("lane_timeout")
    assert result.metadata["lanes_run"] == ["dense"] and result.metadata["degraded"]
    assert len(result.hits) == 5


def test_rank_flag_is_reread_per_call(pg_ts_built, monkeypatch):
    """Flag 32 divides by (rank + 1): the same query's scores become s/(s+1)."""
    searcher = Searcher(pg_ts_built.index, pg_ts_built.config)
    monkeypatch.setenv("SCIX_LEXICAL_RANK_FLAG", "0")
    raw = searcher.search("neural networks", "keyword", limit=20).rankings["lexical"]
    monkeypatch.setenv("SCIX_LEXICAL_RANK_FLAG", "32")
    flagged = searcher.search("neural networks", "keyword", limit=20).rankings["lexical"]
    assert raw.ids == flagged.ids and len(raw) >= 3
    for a, b in zip(raw.items, flagged.items):
        assert b.score == pytest.approx(a.score / (a.score + 1), rel=1e-5)
    for bad in ("64", "-1", "thirty-two"):
        monkeypatch.setenv("SCIX_LEXICAL_RANK_FLAG", bad)
        with pytest.raises(ConfigError, match="SCIX_LEXICAL_RANK_FLAG"):
            searcher.search("neural networks", "keyword")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_pool_cap_is_reread_per_call(pg_ts_built, monkeypatch, backend):
    searcher = Searcher(pg_ts_built.index, pg_ts_built.config, backend=backend)
    monkeypatch.setenv("SCIX_LEXICAL_POOL", "inf")
    full = searcher.search("neural networks", "keyword", limit=20)
    monkeypatch.setenv("SCIX_LEXICAL_POOL", "2")
    capped = searcher.search("neural networks", "keyword", limit=20)
    for lane in ("lexical", "body"):
        assert len(capped.rankings[lane]) == min(2, len(full.rankings[lane]))
        assert set(capped.rankings[lane].ids) <= set(full.rankings[lane].ids)
    assert len(full.rankings["lexical"]) >= 4
    assert capped.metadata["knobs"]["lexical_pool"] == 2 and full.metadata["knobs"]["lexical_pool"] == "inf"
    monkeypatch.setenv("SCIX_LEXICAL_POOL", "0")
    with pytest.raises(ConfigError, match="SCIX_LEXICAL_POOL"):
        searcher.search("neural networks", "keyword")


def test_sync_is_idempotent(pg_built):
    folder = Workspace(pg_built.config.home).index_dir(pg_built.index)
    dsn = pg_built.config.postgres.dsn
    assert sync_index(pg_built.index, folder, dsn).status == "unchanged"
    again = sync_index(pg_built.index, folder, dsn, force=True)
    assert again.status == "synced" and again.papers == 12
    conn = connect(dsn)
    assert conn.execute(f"SELECT count(*) FROM {schema_name(pg_built.index)}.papers").fetchone() == (12,)
    terms = TermIndex(folder / "terms")  # the term matrix is mirrored whole: every posting, every stem's df
    schema = schema_name(pg_built.index)
    assert conn.execute(f"SELECT count(*), sum(tf) FROM {schema}.postings").fetchone() == (
        len(terms.docs),
        int(terms.tf.sum()),
    )
    assert dict(conn.execute(f"SELECT term, df FROM {schema}.terms").fetchall()) == {
        t: int(terms.indptr[i + 1] - terms.indptr[i]) for t, i in terms.vocab.items()
    }


def test_a_schema_synced_by_an_older_format_is_stale_and_a_bm25_lane_without_postings_falls_back(pg_built):
    dsn, schema = pg_built.config.postgres.dsn, schema_name(pg_built.index)
    conn = connect(dsn)
    conn.execute(f"DELETE FROM {schema}.meta WHERE key = 'sync_format'")
    assert synced_build_key(conn, schema) is None  # format 1 had no postings: `scix ingest` re-syncs it
    conn.execute(f"INSERT INTO {schema}.meta VALUES ('sync_format', %s)", [SYNC_FORMAT])
    conn.execute(
        f"DELETE FROM {schema}.meta WHERE key = 'terms'"
    )  # as if synced from a build without a matrix
    searcher = Searcher(pg_built.index, pg_built.config)
    assert type(searcher.lexical[0]) is PostgresLane
    result = searcher.search("graph", "keyword", limit=3)
    assert "ranked by ts_rank_cd" in " ".join(result.metadata.get("notes", [])) and result.ids


def test_failed_sync_leaves_postgres_unchanged(pg_built):
    folder = Workspace(pg_built.config.home).index_dir(pg_built.index)
    dsn, schema = pg_built.config.postgres.dsn, schema_name(pg_built.index)
    reader = psycopg.connect(dsn)  # a reader mid-transaction on the old schema blocks the swap
    reader.execute(f"SELECT count(*) FROM {schema}.papers")
    try:
        with pytest.raises(BackendUnavailableError, match="rolled back"):
            sync_index(pg_built.index, folder, dsn, force=True, lock_timeout_ms=200)
    finally:
        reader.rollback()
    conn = connect(dsn)
    assert synced_build_key(conn, schema) is not None
    assert conn.execute(f"SELECT count(*) FROM {schema}.papers").fetchone() == (12,)
    assert conn.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema + "__new"]
    ).fetchone() == (0,)


def test_unreachable_server_drops_the_lexical_lanes(built):
    cfg = built.config.replace(
        **{"postgres.dsn": "postgresql://postgres@127.0.0.1:1/none", "postgres.connect_timeout_s": 2}
    )
    searcher = Searcher(built.index, cfg, backend="postgres")
    result = searcher.search("graph neural networks", limit=3)
    assert "backend_unavailable" in result.metadata["dropped_lanes"]["lexical"]
    assert result.metadata["lanes_run"] == ["dense"] and len(result.hits) == 3
    with pytest.raises(BackendUnavailableError, match="no lane could answer"):
        searcher.search("graph neural networks", "keyword")


def test_unsynced_index_is_reported_not_searched(built, postgresql):
    cfg = built.config.replace(**{"postgres.dsn": postgresql.info.dsn})
    result = Searcher(built.index, cfg, backend="postgres").search("graph", limit=3)
    assert "not synced" in result.metadata["dropped_lanes"]["lexical"]


def test_a_live_searcher_reconnects_after_its_connections_are_killed(pg_built):
    """A database restart, as the client sees it: every backend of the searcher's lanes terminated."""
    searcher = Searcher(pg_built.index, pg_built.config)
    before = searcher.search("graph neural networks", "keyword", limit=3)
    assert before.metadata["lanes_run"] == ["lexical", "body"] and before.hits
    pids = [lane.conn.info.backend_pid for lane in searcher.lexical]
    admin = connect(pg_built.config.postgres.dsn)
    assert all(admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0] for pid in pids)
    after = searcher.search("graph neural networks", "keyword", limit=3)
    assert after.ids == before.ids and not after.metadata["dropped_lanes"]
    assert all(lane.conn.info.backend_pid not in pids for lane in searcher.lexical)


def test_a_server_down_drops_the_lane_with_its_reason_and_a_later_query_recovers(pg_built):
    searcher = Searcher(pg_built.index, pg_built.config)
    assert searcher.search("graph neural networks", limit=3).metadata["lanes_run"] == [
        "lexical",
        "body",
        "dense",
    ]
    lane = searcher.lexical[0]
    real = lane._connect
    admin = connect(pg_built.config.postgres.dsn)
    admin.execute("SELECT pg_terminate_backend(%s)", [lane.conn.info.backend_pid])

    def refused():
        return connect("postgresql://postgres@127.0.0.1:1/none", 2)  # the server still down

    lane._connect = refused
    down = searcher.search("graph neural networks", limit=3)
    assert "backend_unavailable" in down.metadata["dropped_lanes"]["lexical"] and down.hits  # dense answered
    lane._connect = real  # the server is back
    assert searcher.search("graph neural networks", limit=3).metadata["lanes_run"] == [
        "lexical",
        "body",
        "dense",
    ]
