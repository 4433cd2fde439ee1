"""The user-state store: one WAL-mode SQLite database per workspace.

``SCIX_HOME/state/users.sqlite`` (never a temp dir — the reference design
lost every profile on each rebuild because it kept them in ``/tmp``) holds,
per index: users with their onboarding categories, every interaction
(save / dismiss / view, timestamped), the EWMA profile vectors, the
persisted cluster medoids with their stable ids, and a log of every
recommendation served (the LightGBM scorer's training data).

Every write is one ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``:
a call returns only after its rows are committed, concurrent writers (threads
or processes) queue on SQLite's lock instead of losing rows, and an error
leaves nothing half-written — except what is derived from the interactions or only records what was
shown: the served log (``rec_log``), the EWMA profiles and the persisted cluster medoids commit with
``synchronous=NORMAL``. A killed process loses none of them (the WAL has them); a crash of the machine may
lose the last few — never what a user did: a lost profile is recomputed from the interactions at the
next request (it names the saves it was made of), lost medoids leave the cluster ids matched against the
set before — and a recommendation does not wait for the disk. The schema carries a version number;
opening a database written by a newer version is refused rather than guessed at.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scix_core.errors import BackendUnavailableError, InteractionError, UnknownUserError

SCHEMA_VERSION = 1
KINDS = ("save", "dismiss", "view")
TABLES = ("users", "interactions", "profiles", "clusters", "cluster_counters", "rec_log", "visits")
MAX_USER_ID = 200

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    index_name TEXT NOT NULL, user_id TEXT NOT NULL, categories TEXT NOT NULL, created TEXT NOT NULL,
    PRIMARY KEY (index_name, user_id));
CREATE TABLE IF NOT EXISTS interactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, index_name TEXT NOT NULL, user_id TEXT NOT NULL,
    paper_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('save', 'dismiss', 'view')), at TEXT NOT NULL,
    synthetic INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (index_name, user_id) REFERENCES users (index_name, user_id));
CREATE INDEX IF NOT EXISTS interactions_user ON interactions (index_name, user_id, at, id);
CREATE TABLE IF NOT EXISTS profiles (
    index_name TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('long', 'short')),
    model TEXT NOT NULL, vector BLOB NOT NULL, saves INTEGER NOT NULL, last_at TEXT NOT NULL,
    updated TEXT NOT NULL,
    PRIMARY KEY (index_name, user_id, kind));
CREATE TABLE IF NOT EXISTS clusters (
    index_name TEXT NOT NULL, user_id TEXT NOT NULL, cluster_id INTEGER NOT NULL, medoid_paper TEXT NOT NULL,
    medoid BLOB NOT NULL, size INTEGER NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (index_name, user_id, cluster_id));
CREATE TABLE IF NOT EXISTS cluster_counters (
    index_name TEXT NOT NULL, user_id TEXT NOT NULL, next_id INTEGER NOT NULL, PRIMARY KEY (index_name,
    user_id));
CREATE TABLE IF NOT EXISTS rec_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT, index_name TEXT NOT NULL, user_id TEXT NOT NULL,
    tier INTEGER NOT NULL,
    scorer TEXT NOT NULL, items TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS visits (
    index_name TEXT NOT NULL, user_id TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (index_name, user_id));
"""


def utc_text(at: dt.datetime) -> str:
    """A fixed-width UTC ISO timestamp: lexicographic order is time order."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | dt.datetime | None) -> dt.datetime:
    """An aware UTC datetime from ISO 8601 text (naive = UTC); now when ``value`` is None."""
    if value is None:
        return dt.datetime.now(dt.UTC)
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InteractionError(
                f"timestamp {value!r} is not ISO 8601 (e.g. 2024-05-01T12:00:00Z)"
            ) from None
    if not isinstance(value, dt.datetime):
        raise InteractionError(f"timestamp {value!r} is not a datetime")
    if not 1900 <= value.year <= 9998:
        raise InteractionError(f"timestamp {value.isoformat()!r} is outside the years 1900-9998")
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def check_user_id(user_id: object) -> str:
    """User ids are opaque labels: 1-200 printable characters, never control characters or NUL."""
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > MAX_USER_ID:
        raise InteractionError(f"user id {user_id!r} must be 1-{MAX_USER_ID} printable characters")
    if any(unicodedata.category(c).startswith("C") for c in user_id):
        raise InteractionError(f"user id {user_id!r} contains control characters")
    return user_id


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise InteractionError(f"interaction kind {kind!r} is not one of {', '.join(KINDS)}")
    return str(kind)


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32).copy()


@dataclass(frozen=True)
class User:
    user_id: str
    categories: tuple[str, ...]
    created: str


@dataclass(frozen=True)
class Event:
    """One stored interaction."""

    id: int
    paper_id: str
    kind: str
    at: dt.datetime
    synthetic: bool = False


@dataclass(frozen=True)
class Profile:
    kind: str  # "long" or "short"
    model: str  # what computed it: the index's model and the averaging (recommend.profile.profile_tag)
    vector: np.ndarray
    saves: int
    last_at: str


@dataclass(frozen=True)
class StoredCluster:
    cluster_id: int
    medoid_paper: str
    medoid: np.ndarray
    size: int


@dataclass(frozen=True)
class Reading:
    """What a recommendation reads of one user (:meth:`UserState.reading`)."""

    user: User
    events: list[Event]
    profiles: dict[str, Profile]
    medoids: tuple[list[StoredCluster], int]  # the persisted medoids and the next unused cluster id


#: (stored profiles, every event incl. the new one) -> profiles to write, run inside the write transaction
ProfileUpdate = Callable[[dict[str, Profile], list[Event]], Sequence[Profile]]


USER_SQL = "SELECT user_id, categories, created FROM users WHERE index_name=? AND user_id=?"
EVENTS_SQL = (
    "SELECT id, paper_id, kind, at, synthetic FROM interactions WHERE index_name=? AND user_id=? "
    "ORDER BY at, id"
)
PROFILES_SQL = "SELECT kind, model, vector, saves, last_at FROM profiles WHERE index_name=? AND user_id=?"
MEDOIDS_SQL = (
    "SELECT cluster_id, medoid_paper, medoid, size FROM clusters WHERE index_name=? AND user_id=? "
    "ORDER BY cluster_id"
)
COUNTER_SQL = "SELECT next_id FROM cluster_counters WHERE index_name=? AND user_id=?"


def _medoids_of(rows, counter) -> tuple[list[StoredCluster], int]:
    return [StoredCluster(r[0], r[1], from_blob(r[2]), r[3]) for r in rows], (counter[0] if counter else 0)


def _user_of(row, index: str, user_id: str) -> User:
    if row is None:
        raise UnknownUserError(
            f"no user {user_id!r} for index {index!r}; "
            f"create one with `scix users create --index {index} --user {user_id} --categories ...`"
        )
    return User(row[0], tuple(json.loads(row[1])), row[2])


def _events_of(rows) -> list[Event]:
    return [Event(r[0], r[1], r[2], dt.datetime.fromisoformat(r[3]), bool(r[4])) for r in rows]


def _profiles_of(rows) -> dict[str, Profile]:
    return {r[0]: Profile(r[0], r[1], from_blob(r[2]), r[3], r[4]) for r in rows}


class UserState:
    """The store. Cheap to construct; each thread of a process keeps one connection (opened on its first
    call, opened again in a forked child or after a database error): a server's recommendation makes about
    six calls, and opening and closing a WAL connection for each cost it ~1 ms apiece (docs/history.md)."""

    #: every user of an index with interaction counts per kind, in creation order
    USERS_SQL = """SELECT u.user_id, u.categories, u.created,
                        sum(CASE WHEN i.kind='save' THEN 1 ELSE 0 END),
                        sum(CASE WHEN i.kind='dismiss' THEN 1 ELSE 0 END),
                        sum(CASE WHEN i.kind='view' THEN 1 ELSE 0 END)
                 FROM users u LEFT JOIN interactions i ON i.index_name=u.index_name AND i.user_id=u.user_id
                 WHERE u.index_name=? GROUP BY u.user_id ORDER BY u.rowid"""
    #: an index's saves after an interaction id, read as a range of the row id: without the statistics of
    #: an ANALYZE, SQLite took the user index's ``index_name`` prefix and sorted all the index's saves to
    #: return a server's few new ones (30 ms at 205k saves, against 0.04)
    SAVES_SINCE_SQL = (
        "SELECT id, user_id, paper_id FROM interactions NOT INDEXED WHERE index_name=? AND kind='save' "
        "AND id>? ORDER BY id"
    )

    def __init__(self, path: Path):
        self._threads = threading.local()  # each thread's connection (:meth:`_connect`)
        self.path = Path(path)
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._create(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise BackendUnavailableError(
                f"user state {self.path} is not a usable SQLite database: {exc}; "
                "move it aside (nothing is overwritten) and retry"
            ) from exc

    def _create(self, schema: str) -> None:
        """The tables (if missing) and the schema version, in one write; a newer version is refused."""
        with self._write() as conn:
            for statement in schema.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                raise BackendUnavailableError(
                    f"user state {self.location} has schema version {row[0]}; this scix_core reads up to "
                    f"{SCHEMA_VERSION}"
                )

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        with self._connect() as conn:
            return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}

    @classmethod
    def for_home(cls, home: Path) -> UserState:
        return cls(Path(home) / "state" / "users.sqlite")

    def snapshot(self, path: Path) -> UserState:
        """A consistent copy of the whole store into a new file ``path`` (SQLite's online backup), opened as a
        store of its own; an existing ``path`` is refused, never overwritten."""
        path = Path(path)
        if path.exists():
            raise BackendUnavailableError(f"cannot snapshot user state into {path}: the file exists")
        with self._connect() as conn:
            target = sqlite3.connect(path)
            try:
                conn.backup(target)
            finally:
                target.close()
        return UserState(path)

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        except sqlite3.Error as exc:
            raise BackendUnavailableError(f"cannot open user state {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection; a database error drops it (the next call opens a new one)."""
        local = self._threads
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = local.conn = self._open()
            local.pid = os.getpid()
        try:
            yield conn
        except sqlite3.DatabaseError:
            local.conn = None
            conn.close()
            raise

    @contextmanager
    def _write(
        self, durable: bool = True, user: tuple[str, str] | None = None
    ) -> Iterator[sqlite3.Connection]:
        """One immediate transaction: committed on exit, rolled back on any exception. Not ``durable``:
        the commit does not wait for the disk (the served log, profiles, medoids). ``user`` (index, user):
        the write touches only that user's derived rows (PostgreSQL then locks only that user; SQLite has
        one writer at a time anyway)."""
        with self._connect() as conn:
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # users
    # ---------------------------------------------------------------------------------------------------
    def upsert_user(
        self, index: str, user_id: str, categories: Sequence[str], at: dt.datetime | None = None
    ) -> str:
        """Create the user, or replace its onboarding categories; returns ``created`` or ``updated``."""
        check_user_id(user_id)
        with self._write() as conn:
            exists = conn.execute(
                "SELECT 1 FROM users WHERE index_name=? AND user_id=?", (index, user_id)
            ).fetchone()
            if exists:
                conn.execute(
                    "UPDATE users SET categories=? WHERE index_name=? AND user_id=?",
                    (json.dumps(list(categories)), index, user_id),
                )
                return "updated"
            conn.execute(
                "INSERT INTO users VALUES (?,?,?,?)",
                (index, user_id, json.dumps(list(categories)), utc_text(parse_time(at))),
            )
            return "created"

    def user(self, index: str, user_id: str) -> User:
        with self._connect() as conn:
            return _user_of(conn.execute(USER_SQL, (index, user_id)).fetchone(), index, user_id)

    def reading(self, index: str, user_id: str) -> Reading:
        """The user, their interactions (as :meth:`events`), their profiles and their medoids (as
        :meth:`clusters`), read on one connection — on PostgreSQL in one round trip (a pipeline): what every
        recommendation reads (Tier 1 the medoids)."""
        with self._connect() as conn:
            with self._together(conn):
                cursors = [
                    conn.execute(sql, (index, user_id))
                    for sql in (USER_SQL, EVENTS_SQL, PROFILES_SQL, MEDOIDS_SQL, COUNTER_SQL)
                ]
            user = _user_of(cursors[0].fetchone(), index, user_id)
            events, profiles = _events_of(cursors[1].fetchall()), _profiles_of(cursors[2].fetchall())
            return Reading(user, events, profiles, _medoids_of(cursors[3].fetchall(), cursors[4].fetchone()))

    @contextmanager
    def _together(self, conn) -> Iterator[None]:
        """Statements sent inside are sent together where the backend can (SQLite: one process, nothing to
        batch)."""
        yield

    def users(self, index: str) -> list[dict]:
        """Every user of an index with interaction counts per kind, in creation order."""
        with self._connect() as conn:
            rows = conn.execute(self.USERS_SQL, (index,)).fetchall()
        return [
            {
                "user": r[0],
                "categories": json.loads(r[1]),
                "created": r[2],
                "saves": r[3] or 0,
                "dismissals": r[4] or 0,
                "views": r[5] or 0,
            }
            for r in rows
        ]

    def existing(self, index: str, user_ids: Iterable[str]) -> set[str]:
        with self._connect() as conn:
            have = {r[0] for r in conn.execute("SELECT user_id FROM users WHERE index_name=?", (index,))}
        return have.intersection(user_ids)

    # interactions
    # --------------------------------------------------------------------------------------------
    def events(self, index: str, user_id: str, conn: sqlite3.Connection | None = None) -> list[Event]:
        """A user's interactions in time order (ties: insertion order)."""
        if conn is None:
            with self._connect() as own:
                return _events_of(own.execute(EVENTS_SQL, (index, user_id)).fetchall())
        return _events_of(conn.execute(EVENTS_SQL, (index, user_id)).fetchall())

    def record(
        self,
        index: str,
        user_id: str,
        paper_id: str,
        kind: str,
        at: dt.datetime,
        update: ProfileUpdate | None = None,
    ) -> Event:
        """Append one interaction (and, for a save, the profiles ``update`` computes) in one transaction."""
        check_kind(kind)
        with self._write() as conn:
            if not conn.execute(
                "SELECT 1 FROM users WHERE index_name=? AND user_id=?", (index, user_id)
            ).fetchone():
                raise UnknownUserError(
                    f"no user {user_id!r} for index {index!r}; create it with `scix users create`"
                )
            new_id = conn.execute(
                "INSERT INTO interactions (index_name, user_id, paper_id, kind, at) VALUES (?,?,?,?,?) "
                "RETURNING id",
                (index, user_id, paper_id, kind, utc_text(at)),
            ).fetchall()[0][0]  # every row read: the statement is finished before the commit
            if update is not None:
                self._write_profiles(
                    conn,
                    index,
                    user_id,
                    update(self._profiles(conn, index, user_id), self.events(index, user_id, conn)),
                )
            return Event(int(new_id), paper_id, kind, at)

    def import_library(
        self,
        index: str,
        user_id: str,
        paper_ids: Sequence[str],
        at: dt.datetime | Sequence[dt.datetime],
        profiles: Sequence[Profile],
        synthetic: bool = True,
    ) -> None:
        """A new user with its saves in one transaction. ``at``: one time per save, or a start from which the
        saves are one second apart (synthetic times in file order)."""
        self.import_libraries(index, [(user_id, paper_ids, at, profiles, synthetic)])

    def import_libraries(
        self,
        index: str,
        libraries: Iterable[
            tuple[str, Sequence[str], dt.datetime | Sequence[dt.datetime], Sequence[Profile], bool]
        ],
    ) -> int:
        """Many new users — (user, papers, at, profiles, synthetic) each, as :meth:`import_library` takes
        them — in one transaction: all of them or none. One commit instead of one per user is what makes
        replaying a whole community fast (5,551 CiteULike-a libraries: 13 s one by one). Returns the count."""
        n = 0
        with self._write() as conn:
            for user_id, paper_ids, at, profiles, synthetic in libraries:
                times = (
                    [at + dt.timedelta(seconds=i) for i in range(len(paper_ids))]
                    if isinstance(at, dt.datetime)
                    else list(at)
                )
                check_user_id(user_id)
                if conn.execute(
                    "SELECT 1 FROM users WHERE index_name=? AND user_id=?", (index, user_id)
                ).fetchone():
                    raise InteractionError(f"user {user_id!r} already exists: a library imports only once")
                conn.execute(
                    "INSERT INTO users VALUES (?,?,?,?)",
                    (index, user_id, "[]", utc_text(min(times, default=parse_time(None)))),
                )
                conn.executemany(
                    "INSERT INTO interactions (index_name, user_id, paper_id, kind, at, synthetic) VALUES "
                    "(?,?,?,'save',?,?)",
                    (
                        (index, user_id, pid, utc_text(when), int(synthetic))
                        for pid, when in zip(paper_ids, times)
                    ),
                )
                self._write_profiles(conn, index, user_id, profiles)
                n += 1
        return n

    def saves_since(self, index: str, after_id: int = 0) -> list[tuple[int, str, str]]:
        """(interaction id, user, paper) of every save of ``index`` with an id above ``after_id``, in id
        order."""
        with self._connect() as conn:
            return conn.execute(self.SAVES_SINCE_SQL, (index, after_id)).fetchall()

    def analyse(self) -> None:
        """The planner's statistics of the interactions, taken afresh after a bulk import: without them
        PostgreSQL read a server's few new saves through the user index's scan of all the index's (19 ms
        at 205k saves, against 0.1 through the key)."""
        with self._connect() as conn:
            conn.execute("ANALYZE interactions")

    def last_interaction(self) -> int:
        """The newest interaction id of the whole store (ids only grow; rows are never deleted)."""
        with self._connect() as conn:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='interactions'").fetchone()
        return int(row[0]) if row else 0

    # profiles
    # ------------------------------------------------------------------------------------------------
    @staticmethod
    def _profiles(conn: sqlite3.Connection, index: str, user_id: str) -> dict[str, Profile]:
        return _profiles_of(conn.execute(PROFILES_SQL, (index, user_id)).fetchall())

    def profiles(self, index: str, user_id: str) -> dict[str, Profile]:
        with self._connect() as conn:
            return self._profiles(conn, index, user_id)

    @staticmethod
    def _write_profiles(
        conn: sqlite3.Connection, index: str, user_id: str, profiles: Sequence[Profile]
    ) -> None:
        now = utc_text(parse_time(None))
        conn.executemany(
            "INSERT INTO profiles VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (index_name, user_id, kind) DO UPDATE "
            "SET model=excluded.model, vector=excluded.vector, saves=excluded.saves, "
            "last_at=excluded.last_at, updated=excluded.updated",
            ((index, user_id, p.kind, p.model, to_blob(p.vector), p.saves, p.last_at, now) for p in profiles),
        )

    def replace_profiles(self, index: str, user_id: str, profiles: Sequence[Profile]) -> None:
        with self._write(durable=False, user=(index, user_id)) as conn:  # recomputable: the module's doc
            conn.execute("DELETE FROM profiles WHERE index_name=? AND user_id=?", (index, user_id))
            self._write_profiles(conn, index, user_id, profiles)

    # clusters
    # ------------------------------------------------------------------------------------------------
    def clusters(self, index: str, user_id: str) -> tuple[list[StoredCluster], int]:
        """The persisted medoids and the next unused cluster id."""
        with self._connect() as conn:
            with self._together(conn):
                medoids = conn.execute(MEDOIDS_SQL, (index, user_id))
                counter = conn.execute(COUNTER_SQL, (index, user_id))
            return _medoids_of(medoids.fetchall(), counter.fetchone())

    def replace_clusters(
        self, index: str, user_id: str, clusters: Sequence[StoredCluster], next_id: int
    ) -> None:
        """Swap the whole medoid set in one transaction: readers see the old set or the new one, never a
        mix. Not waiting for the disk (the module's doc)."""
        now = utc_text(parse_time(None))
        with self._write(durable=False, user=(index, user_id)) as conn:
            conn.execute("DELETE FROM clusters WHERE index_name=? AND user_id=?", (index, user_id))
            conn.executemany(
                "INSERT INTO clusters VALUES (?,?,?,?,?,?,?)",
                (
                    (index, user_id, c.cluster_id, c.medoid_paper, to_blob(c.medoid), c.size, now)
                    for c in clusters
                ),
            )
            conn.execute(
                "INSERT INTO cluster_counters VALUES (?,?,?) ON CONFLICT (index_name, user_id) "
                "DO UPDATE SET next_id=excluded.next_id",
                (index, user_id, next_id),
            )

    # the recommendation log
    # ----------------------------------------------------------------------------------
    def log(
        self,
        index: str,
        user_id: str,
        tier: int,
        scorer: str,
        items: list[dict],
        at: str | dt.datetime | None = None,
    ) -> None:
        """One row of the served log, served ``at`` (default now) — committed without waiting for the
        disk (see the module's doc)."""
        with self._write(durable=False, user=(index, user_id)) as conn:
            conn.execute(
                "INSERT INTO rec_log (index_name, user_id, tier, scorer, items, at) VALUES (?,?,?,?,?,?)",
                (index, user_id, tier, scorer, json.dumps(items), utc_text(parse_time(at))),
            )

    def last_visit(self, index: str, user_id: str) -> dt.datetime | None:
        """When the user last read their feed (``scix feed --since last-visit``), or None."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT at FROM visits WHERE index_name=? AND user_id=?", (index, user_id)
            ).fetchone()
        return parse_time(row[0]) if row else None

    def record_visit(self, index: str, user_id: str, at: dt.datetime) -> None:
        """The time a feed was read — a derived row, committed without waiting for the disk."""
        with self._write(durable=False, user=(index, user_id)) as conn:
            conn.execute(
                "INSERT INTO visits (index_name, user_id, at) VALUES (?,?,?) "
                "ON CONFLICT (index_name, user_id) DO UPDATE SET at=excluded.at",
                (index, user_id, utc_text(at)),
            )

    def served(self, index: str, user_id: str | None = None) -> list[dict]:
        sql = "SELECT user_id, tier, scorer, items, at FROM rec_log WHERE index_name=?"
        args: tuple = (index,)
        if user_id is not None:
            sql, args = sql + " AND user_id=?", (index, user_id)
        with self._connect() as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        return [
            {"user": r[0], "tier": r[1], "scorer": r[2], "items": json.loads(r[3]), "at": r[4]} for r in rows
        ]
