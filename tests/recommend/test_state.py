"""The user-state store: WAL SQLite that survives restarts, concurrent writers and bad input."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from scix_core.errors import BackendUnavailableError, InteractionError, UnknownUserError
from scix_core.recommend.state import Profile, StoredCluster, UserState

T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)


def _writer(path, user: str, n: int) -> str:
    return textwrap.dedent(f"""
        import datetime as dt
        from scix_core.recommend.state import UserState
        s = UserState({str(path)!r})
        t = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        for i in range({n}):
            s.record("idx", {user!r}, f"p{{i}}", "save", t + dt.timedelta(seconds=i))
        print("done")
    """)


def test_state_lives_in_the_workspace_in_wal_mode(tmp_path):
    state = UserState.for_home(tmp_path / "home")
    assert state.path == tmp_path / "home" / "state" / "users.sqlite"
    assert sqlite3.connect(state.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_everything_survives_a_process_restart(tmp_path):
    path = tmp_path / "users.sqlite"
    script = textwrap.dedent(f"""
        import datetime as dt, numpy as np
        from scix_core.recommend.state import UserState, Profile, StoredCluster
        s = UserState({str(path)!r})
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
    state = UserState(path)
    assert state.user("idx", "ada").categories == ("cs.LG",)
    assert [(e.paper_id, e.kind) for e in state.events("idx", "ada")] == [("p1", "save"), ("p2", "dismiss")]
    assert state.profiles("idx", "ada")["long"].vector.tolist() == [1.0, 2.0]
    clusters, next_id = state.clusters("idx", "ada")
    assert [(c.cluster_id, c.medoid_paper) for c in clusters] == [(3, "p1")] and next_id == 4
    assert state.served("idx", "ada")[0]["items"] == [{"paper_id": "p9"}]


def test_two_concurrent_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "users.sqlite"
    state = UserState(path)
    state.upsert_user("idx", "u", [])
    procs = [
        subprocess.Popen([sys.executable, "-c", _writer(path, "u", 150)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs == ["done\n", "done\n"]
    events = state.events("idx", "u")
    assert len(events) == 300 and len({e.id for e in events}) == 300


def test_a_failing_profile_update_rolls_the_interaction_back(tmp_path):
    state = UserState(tmp_path / "users.sqlite")
    state.upsert_user("idx", "u", [])

    def broken(old, events):
        raise RuntimeError("encoder died")

    with pytest.raises(RuntimeError):
        state.record("idx", "u", "p1", "save", T0, broken)
    assert state.events("idx", "u") == [] and state.profiles("idx", "u") == {}


def test_bad_records_are_typed_errors(tmp_path):
    state = UserState(tmp_path / "users.sqlite")
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


def test_cluster_sets_are_swapped_whole(tmp_path):
    state = UserState(tmp_path / "users.sqlite")
    v = np.array([1, 0], dtype=np.float32)
    state.replace_clusters("idx", "u", [StoredCluster(0, "a", v, 2), StoredCluster(1, "b", v, 3)], 2)
    with pytest.raises(sqlite3.IntegrityError):  # a duplicate id mid-write: the old set must stay whole
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


def test_profiles_round_trip_exactly(tmp_path):
    state = UserState(tmp_path / "users.sqlite")
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
