"""The user-state store, on both backends (WAL SQLite and PostgreSQL): it survives restarts, concurrent
writers and bad input."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import psycopg
import pytest

from scix_core.errors import BackendUnavailableError, InteractionError, UnknownUserError
from scix_core.recommend import state_postgres
from scix_core.recommend.state import Profile, StoredCluster, UserState
from scix_core.recommend.state_postgres import WRITE_LOCK, PostgresUserState

T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
OPEN = (
    "from scix_core.recommend.state import UserState\n"
    "from scix_core.recommend.state_postgres import PostgresUserState\n"
    "def open_store(spec):\n"
    "    return PostgresUserState(spec) if spec.startswith('postgresql') else UserState(spec)\n"
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request, tmp_path) -> str:
    """Where a store lives: a SQLite file, or a fresh PostgreSQL database (the test command's server)."""
    if request.param == "sqlite":
        return str(tmp_path / "users.sqlite")
    return dsn_of(request.getfixturevalue("postgresql"))


def dsn_of(postgresql) -> str:
    """The DSN of the test command's PostgreSQL database a ``postgresql`` fixture gives."""
    info = postgresql.info
    return f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}"


def open_store(spec: str) -> UserState:
    return PostgresUserState(spec) if spec.startswith("postgresql") else UserState(spec)


def _writer(spec, user: str, n: int) -> str:
    return OPEN + textwrap.dedent(f"""
        import datetime as dt
        s = open_store({spec!r})
        t = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        for i in range({n}):
            s.record("idx", {user!r}, f"p{{i}}", "save", t + dt.timedelta(seconds=i))
        print("done")
    """)


def test_state_lives_in_the_workspace_in_wal_mode(tmp_path):
    state = UserState.for_home(tmp_path / "home")
    assert state.path == tmp_path / "home" / "state" / "users.sqlite"
    assert sqlite3.connect(state.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_everything_survives_a_process_restart(spec):
    script = OPEN + textwrap.dedent(f"""
        import datetime as dt, numpy as np
        from scix_core.recommend.state import Profile, StoredCluster
        s = open_store({spec!r})
        s.upsert_user("idx", "ada", ["cs.LG"])
        s.record("idx", "ada", "p1", "save", dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc),
                 lambda old, events: [Profile("long", "m", np.array([1, 2], dtype=np.float32), 1, "x")])
        s.record("idx", "ada", "p2", "dismiss", dt.datetime(2024, 3, 2, tzinfo=dt.timezone.utc))
        s.replace_clusters("idx", "ada", [StoredCluster(3, "p1", np.array([0.6, 0.8], dtype=np.float32),
        1)], 4)
        s.log("idx", "ada", 1, "heuristic", [{{"paper_id": "p9"}}])
        import os; os._exit(0)  # no clean shutdown: what was acknowledged must be on disk
    """)
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 0
    state = open_store(spec)
    assert state.user("idx", "ada").categories == ("cs.LG",)
    assert [(e.paper_id, e.kind) for e in state.events("idx", "ada")] == [("p1", "save"), ("p2", "dismiss")]
    assert state.profiles("idx", "ada")["long"].vector.tolist() == [1.0, 2.0]
    clusters, next_id = state.clusters("idx", "ada")
    assert [(c.cluster_id, c.medoid_paper) for c in clusters] == [(3, "p1")] and next_id == 4
    assert state.served("idx", "ada")[0]["items"] == [{"paper_id": "p9"}]


def test_two_concurrent_writer_processes_lose_nothing(spec):
    state = open_store(spec)
    state.upsert_user("idx", "u", [])
    procs = [
        subprocess.Popen([sys.executable, "-c", _writer(spec, "u", 150)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs == ["done\n", "done\n"]
    events = state.events("idx", "u")
    assert len(events) == 300 and len({e.id for e in events}) == 300
    # ids were committed in the order they were handed out: an incremental reader misses none
    saves = state.saves_since("idx", 0)
    assert [r[0] for r in saves] == sorted(e.id for e in events) and state.last_interaction() == max(
        e.id for e in events
    )


def test_the_new_saves_are_read_as_a_range_of_ids_of_one_index(spec):
    state = open_store(spec)
    for index in ("idx", "other"):
        state.upsert_user(index, "u", [])
    for n in range(6):
        state.record("idx" if n % 3 else "other", "u", f"p{n}", "save" if n != 4 else "view", T0)
    ids = [e.id for e in state.events("idx", "u")]
    assert state.saves_since("idx", 0) == [(ids[0], "u", "p1"), (ids[1], "u", "p2"), (ids[3], "u", "p5")]
    assert (
        state.saves_since("idx", ids[1]) == [(ids[3], "u", "p5")] and state.saves_since("idx", ids[3]) == []
    )
    # a server asks every few seconds for the few newest saves: a range of the key, never the user index's
    # scan of all the index's saves and a sort — on SQLite always, on PostgreSQL once a bulk import has
    # taken the planner's statistics
    libraries = [(f"v{u}", [f"q{u}-{i}" for i in range(20)], T0, [], True) for u in range(300)]
    state.import_libraries("idx", libraries)
    state.analyse()
    newest = state.last_interaction()
    assert [r[0] for r in state.saves_since("idx", newest - 2)] == [newest - 1, newest]
    with state._connect() as conn:
        explain = "EXPLAIN " + ("QUERY PLAN " if not isinstance(state, PostgresUserState) else "")
        plan = " ".join(
            str(r[-1]) for r in conn.execute(explain + state.SAVES_SINCE_SQL, ("idx", newest - 2))
        )
    assert "interactions_user" not in plan and "B-TREE" not in plan and "Sort" not in plan, plan
    assert "INTEGER PRIMARY KEY" in plan or "interactions_pkey" in plan, plan


def test_a_failing_profile_update_rolls_the_interaction_back(spec):
    state = open_store(spec)
    state.upsert_user("idx", "u", [])

    def broken(old, events):
        raise RuntimeError("encoder died")

    with pytest.raises(RuntimeError):
        state.record("idx", "u", "p1", "save", T0, broken)
    assert state.events("idx", "u") == [] and state.profiles("idx", "u") == {}


def test_libraries_import_together_or_not_at_all(spec):
    state = open_store(spec)
    state.import_library("idx", "b", ["p1"], T0, [])
    libraries = [("a", ["p1", "p2"], T0, [], True), ("b", ["p3"], T0, [], True)]
    with pytest.raises(InteractionError, match="'b' already exists"):
        state.import_libraries("idx", libraries)
    assert state.counts()["users"] == 1 and state.counts()["interactions"] == 1  # "a" rolled back with "b"
    assert state.import_libraries("idx", libraries[:1]) == 1
    assert [e.paper_id for e in state.events("idx", "a")] == ["p1", "p2"]
    assert [e.at - T0 for e in state.events("idx", "a")] == [dt.timedelta(0), dt.timedelta(seconds=1)]


def test_bad_records_are_typed_errors(spec):
    state = open_store(spec)
    with pytest.raises(UnknownUserError, match="'ghost'"):
        state.record("idx", "ghost", "p1", "save", T0)
    with pytest.raises(UnknownUserError, match="'ghost'"):
        state.user("idx", "ghost")
    state.upsert_user("idx", "u", [])
    with pytest.raises(InteractionError, match="'bookmark'"):
        state.record("idx", "u", "p1", "bookmark", T0)
    for bad in ("", " ", "x" * 201, "a\nb"):
        with pytest.raises(InteractionError):
            state.upsert_user("idx", bad, [])
    assert state.users("idx") == [
        {
            "user": "u",
            "categories": [],
            "created": state.user("idx", "u").created,
            "saves": 0,
            "dismissals": 0,
            "views": 0,
        }
    ]


def test_cluster_sets_are_swapped_whole(spec):
    state = open_store(spec)
    v = np.array([1, 0], dtype=np.float32)
    state.replace_clusters("idx", "u", [StoredCluster(0, "a", v, 2), StoredCluster(1, "b", v, 3)], 2)
    # a duplicate id mid-write: the old set must stay whole
    with pytest.raises((sqlite3.IntegrityError, psycopg.IntegrityError)):
        state.replace_clusters("idx", "u", [StoredCluster(5, "c", v, 1), StoredCluster(5, "d", v, 1)], 6)
    clusters, next_id = state.clusters("idx", "u")
    assert [c.cluster_id for c in clusters] == [0, 1] and next_id == 2


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "users.sqlite"
    UserState(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(BackendUnavailableError, match="schema version 99"):
        UserState(path)


def test_profiles_round_trip_exactly(spec):
    state = open_store(spec)
    state.upsert_user("idx", "u", [])
    vec = np.random.default_rng(1).normal(size=384).astype(np.float32)
    state.record("idx", "u", "p", "save", T0, lambda old, ev: [Profile("short", "m", vec, 1, "t")])
    assert np.array_equal(state.profiles("idx", "u")["short"].vector, vec)


def test_a_file_that_is_not_a_database_is_a_typed_error_and_left_alone(tmp_path):
    path = tmp_path / "users.sqlite"
    path.write_bytes(b"not sqlite" * 1000)
    with pytest.raises(BackendUnavailableError, match="not a usable SQLite database"):
        UserState(path)
    assert path.read_bytes() == b"not sqlite" * 1000


@pytest.mark.postgres
def test_a_newer_schema_is_refused_on_postgres(postgresql):
    dsn = dsn_of(postgresql)
    PostgresUserState(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE scix_state.schema_version SET version = 99")
    with pytest.raises(BackendUnavailableError, match="schema version 99"):
        PostgresUserState(dsn)


@pytest.mark.postgres
def test_postgres_connections_are_kept_between_calls_and_replaced_when_the_server_dropped_them(postgresql):
    dsn = dsn_of(postgresql)
    store = PostgresUserState(dsn)
    store.upsert_user("idx", "ann", [])
    pids = set()
    for _ in range(5):
        with store._connect() as conn:
            pids.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert len(pids) == 1  # one connection, kept
    with psycopg.connect(dsn, autocommit=True) as admin:  # the server drops it (a restart, an admin)
        pid = pids.pop()
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline  # gone: its goodbye is on the kept connection's socket
            time.sleep(0.01)
    store.record("idx", "ann", "p1", "save", T0)  # answered on a new connection, no error
    assert [e.paper_id for e in store.events("idx", "ann")] == ["p1"]
    with store._connect() as conn:  # an error inside a call leaves the kept connection usable
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM nowhere")
    assert store.user("idx", "ann").user_id == "ann"


def test_sqlite_connections_are_kept_per_thread_and_each_write_says_how_durable_it_is(tmp_path):
    store = UserState(tmp_path / "users.sqlite")
    store.upsert_user("idx", "ann", [])
    with store._connect() as a, store._connect() as b:
        assert a is b  # one connection a thread, kept between calls
    store.log("idx", "ann", 0, "tier0", [])  # the served log: synchronous=NORMAL ...
    with store._write() as conn:  # ... and the next durable write on the same connection waits for the disk
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL

    def saves(worker: int) -> None:
        for i in range(25):
            store.record("idx", "ann", f"p{worker}-{i}", "save", T0 + dt.timedelta(seconds=i))

    threads = [threading.Thread(target=saves, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.events("idx", "ann")) == 200  # eight threads, eight connections, nothing lost
    with pytest.raises(sqlite3.OperationalError):  # a database error drops the thread's connection ...
        with store._connect() as conn:
            conn.execute("SELECT * FROM nowhere")
    with store._connect() as fresh:  # ... and the next call opens one
        assert fresh is not conn
    assert store.user("idx", "ann").user_id == "ann"


@pytest.mark.postgres
def test_a_users_derived_rows_do_not_wait_for_the_store_wide_write_lock(postgresql):
    dsn = dsn_of(postgresql)
    store = PostgresUserState(dsn)
    store.upsert_user("idx", "ann", [])
    medoid = StoredCluster(0, "p1", np.ones(4, dtype=np.float32), 3)
    with psycopg.connect(dsn, autocommit=True) as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # another worker mid-write
        served = threading.Thread(
            target=lambda: (
                store.log("idx", "ann", 1, "heuristic", []),
                store.replace_clusters("idx", "ann", [medoid], 1),
            )
        )
        served.start()
        served.join(timeout=20)
        assert not served.is_alive()  # the served log and the medoids were written meanwhile
        saving = threading.Thread(target=store.record, args=("idx", "ann", "p1", "save", T0))
        saving.start()
        saving.join(timeout=1)
        assert saving.is_alive()  # an interaction waits: ids are committed in the order handed out
    saving.join(timeout=20)
    assert [e.paper_id for e in store.events("idx", "ann")] == ["p1"]
    assert store.clusters("idx", "ann")[0][0].medoid_paper == "p1" and len(store.served("idx")) == 1


def test_an_unreachable_postgres_is_a_typed_error_without_the_password():
    with pytest.raises(BackendUnavailableError, match="cannot reach the user state") as err:
        PostgresUserState("postgresql://scix:hunter2@127.0.0.1:1/none", connect_timeout=2)
    assert "hunter2" not in str(err.value)


@pytest.mark.postgres
def test_migrate_copies_everything_keeps_ids_and_refuses_a_full_target(tmp_path, postgresql):
    from scix_core.config import load_config
    from scix_core.recommend.state_postgres import migrate, open_state

    source = UserState(tmp_path / "users.sqlite")
    source.upsert_user("idx", "ada", ["cs.LG"])
    source.upsert_user("idx", "bob", [])
    vec = np.arange(4, dtype=np.float32)
    for i, paper in enumerate(("p1", "p2", "p3")):
        source.record(
            "idx",
            "ada",
            paper,
            "save",
            T0 + dt.timedelta(seconds=i),
            lambda old, ev: [Profile("long", "m", vec, len(ev), "t")],
        )
    source.record("idx", "bob", "p9", "dismiss", T0)
    source.replace_clusters("idx", "ada", [StoredCluster(2, "p1", vec, 3)], 3)
    source.log("idx", "ada", 1, "heuristic", [{"paper_id": "p7"}])
    dsn = dsn_of(postgresql)
    target = open_state(load_config().replace(**{"postgres.state_dsn": dsn}))
    assert isinstance(target, PostgresUserState)
    counts = migrate(source, target)
    assert counts == source.counts() == target.counts()
    assert counts["interactions"] == 4 and counts["users"] == 2
    assert [(u["user"], u["saves"], u["dismissals"]) for u in target.users("idx")] == [
        ("ada", 3, 0),
        ("bob", 0, 1),
    ]
    assert [e.id for e in target.events("idx", "ada")] == [e.id for e in source.events("idx", "ada")]
    assert np.array_equal(target.profiles("idx", "ada")["long"].vector, vec)
    assert target.clusters("idx", "ada")[1] == 3 and target.served("idx")[0]["items"] == [{"paper_id": "p7"}]
    new = target.record("idx", "bob", "p4", "save", T0)  # ids go on after the copied ones
    assert new.id > max(e.id for e in source.events("idx", "ada"))
    from scix_core.errors import ConfigError

    with pytest.raises(ConfigError, match="not empty"):
        migrate(source, target)


@pytest.mark.postgres
def test_users_migrate_command(tmp_path, postgresql, monkeypatch, capsys):
    from scix_core.cli.main import main

    home = tmp_path / "home"
    state = UserState.for_home(home)
    state.upsert_user("idx", "ada", [])
    state.record("idx", "ada", "p1", "save", T0)
    monkeypatch.setenv("SCIX_HOME", str(home))
    monkeypatch.delenv("SCIX_STATE_DSN", raising=False)
    assert main(["users", "migrate", "--to", "postgres"]) == 2  # no target named
    assert "SCIX_STATE_DSN" in capsys.readouterr().err
    dsn = dsn_of(postgresql)
    assert main(["users", "migrate", "--to", "postgres", "--dsn", dsn]) == 0
    assert "users 1, interactions 1" in capsys.readouterr().out
    assert [e.paper_id for e in PostgresUserState(dsn).events("idx", "ada")] == ["p1"]
    assert main(["users", "migrate", "--to", "postgres", "--dsn", dsn]) == 2  # a full target is refused


@pytest.mark.postgres
def test_postgres_durability_is_per_write_and_a_live_kept_connection_costs_no_round_trip(postgresql):
    store = PostgresUserState(dsn_of(postgresql))
    store.upsert_user("idx", "ann", [])
    with store._write(durable=False, user=("idx", "ann")) as conn:  # the served log's kind of write
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
    with store._write() as conn:  # the next write on the same kept connection waits for the WAL again
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
    with store._connect() as conn:
        conn.execute("SELECT 'the last statement'")
        pid = conn.conn.info.backend_pid
    with store._connect() as conn, psycopg.connect(dsn_of(postgresql), autocommit=True) as admin:
        assert conn.conn.info.backend_pid == pid  # kept, and not pinged on the way out of the pool:
        last = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
        assert last == "SELECT 'the last statement'"


@pytest.mark.postgres
def test_a_kept_postgres_connection_idle_a_while_is_pinged_before_use(postgresql, monkeypatch):
    store = PostgresUserState(dsn_of(postgresql))
    monkeypatch.setattr(state_postgres, "PING_IDLE_S", 0.0)  # every kept connection has been idle long enough
    with store._connect() as conn:
        conn.execute("SELECT 'the last statement'")
        pid = conn.conn.info.backend_pid
    with store._connect() as conn, psycopg.connect(dsn_of(postgresql), autocommit=True) as admin:
        assert conn.conn.info.backend_pid == pid
        assert (
            admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
            == "SELECT 1"
        )


def test_a_recommendations_reads_come_together_and_equal_the_single_reads(spec):
    store = open_store(spec)
    store.upsert_user("idx", "ann", ["cs.IR"])
    store.record("idx", "ann", "p2", "save", T0 + dt.timedelta(hours=1))
    store.record("idx", "ann", "p1", "dismiss", T0)
    store.replace_profiles(
        "idx", "ann", [Profile("long", "m", np.ones(3, dtype=np.float32), 1, T0.isoformat())]
    )
    assert store.reading("idx", "ann").medoids == ([], 0)  # none persisted yet
    store.replace_clusters("idx", "ann", [StoredCluster(4, "p2", np.full(3, 0.5, dtype=np.float32), 1)], 5)
    got = store.reading("idx", "ann")
    user, events, profiles = got.user, got.events, got.profiles
    assert user == store.user("idx", "ann") and user.categories == ("cs.IR",)
    assert events == store.events("idx", "ann") and [e.paper_id for e in events] == ["p1", "p2"]
    assert profiles.keys() == {"long"} and profiles["long"].vector.tolist() == [1.0, 1.0, 1.0]
    (medoid,), next_id = got.medoids
    assert (medoid.cluster_id, medoid.medoid_paper, medoid.medoid.tolist(), medoid.size, next_id) == (
        4,
        "p2",
        [0.5, 0.5, 0.5],
        1,
        5,
    )
    with pytest.raises(UnknownUserError, match="no user 'bob'"):
        store.reading("idx", "bob")
    assert store.reading("idx", "ann").user == user  # the store still answers after the error
