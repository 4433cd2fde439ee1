"""``scix users import``: real user libraries from the interactions a loader found.

Where the loader found real save times they are kept. The CiteULike
format's ``users.dat`` holds each user's saved items as an unordered list,
so there timestamps are synthesised: in file order, one second apart, from a
fixed origin (``SYNTHETIC_ORIGIN``), and every such row is flagged
``synthetic``. Import is idempotent: a user already present is
skipped, never duplicated. Users are written ``IMPORT_BATCH`` to a
transaction (interactions + profiles of each, all or none of the batch): an
interrupted import keeps the batches committed, and a rerun imports the rest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from scix_core.recommend.profile import compute_profiles
from scix_core.recommend.state import Event
from scix_core.stores.papers import connect

SYNTHETIC_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
IMPORT_BATCH = 500  # users a transaction of `scix users import`


@dataclass(frozen=True)
class ImportReport:
    users: int
    saves: int
    skipped_users: int
    unknown_papers: int
    synthetic_times: bool
    seconds: float


def _rows(build_dir) -> list[tuple[str, str, str | None]]:
    conn = connect(build_dir / "papers.sqlite", readonly=True)
    try:
        return conn.execute(
            "SELECT user_id, paper_id, at FROM interactions WHERE action = 'save' ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def library_times(build_dir) -> dict[str, list[dt.datetime]] | None:
    """user -> save times in the order of :func:`library_saves`, when *every* save has a real timestamp; else
    None."""
    rows = _rows(build_dir)
    if not rows or any(at is None for _, _, at in rows):
        return None
    out: dict[str, list[dt.datetime]] = {}
    for user, _, at in sorted(rows, key=lambda r: (r[0], r[2])):  # per user the same order as library_saves
        when = dt.datetime.fromisoformat(at)
        out.setdefault(user, []).append(when if when.tzinfo else when.replace(tzinfo=dt.UTC))
    return out


def library_pairs(build_dir) -> list[tuple[str, str]]:
    """Every (user, paper) save of the libraries the index was built from; none when it has none."""
    return [(user, paper) for user, paper, _ in _rows(build_dir)]


def library_saves(build_dir) -> dict[str, list[str]]:
    """user -> saved paper ids: in time order where the source has timestamps, else in file order."""
    rows = _rows(build_dir)
    if rows and all(at is not None for _, _, at in rows):
        order: dict[str, int] = {}
        for user, _, _ in rows:
            order.setdefault(user, len(order))
        rows = sorted(
            rows, key=lambda r: (order[r[0]], r[2])
        )  # users in file order, each one's saves oldest first
    out: dict[str, list[str]] = {}
    for user, paper, _ in rows:
        out.setdefault(user, []).append(paper)
    return out


def replay(rec, user: str, papers: Sequence[str], at: Sequence[dt.datetime] | None = None) -> None:
    """Store a new user with ``papers`` saved (at ``at``, or at synthetic times in order) and their profiles,
    in one transaction of ``rec``'s user state."""
    replay_many(rec, [(user, papers, at)])


def replay_many(
    rec, libraries: Iterable[tuple[str, Sequence[str], Sequence[dt.datetime] | None]], batch: int = 1000
) -> int:
    """:func:`replay` for many users, ``batch`` users a transaction (one commit each, not one a user);
    returns how many were stored."""

    def stored(user, papers, at):
        times = (
            list(at)
            if at is not None
            else [SYNTHETIC_ORIGIN + dt.timedelta(seconds=i) for i in range(len(papers))]
        )
        events = [Event(0, p, "save", when) for p, when in zip(papers, times)]
        return user, papers, times, compute_profiles(rec.side, events), at is None

    n = 0
    pending = iter(libraries)
    while chunk := list(islice(pending, batch)):
        n += rec.state.import_libraries(rec.index, (stored(*item) for item in chunk))
    return n


def import_libraries(rec, users: list[str] | None = None, progress: bool = False) -> ImportReport:
    import time

    from tqdm.auto import tqdm

    t = time.perf_counter()
    libraries = library_saves(rec.build_dir)
    times = library_times(rec.build_dir)
    if users is not None:
        libraries = {u: libraries[u] for u in users if u in libraries}
    have = rec.state.existing(rec.index, libraries)
    row = rec.side.catalog.row
    imported = saves = unknown = 0

    def known_saves():  # each new user's saves of papers the index holds, first save of each
        nonlocal imported, saves, unknown
        for user, papers in tqdm(
            libraries.items(), desc="users", unit="user", disable=not progress, leave=False
        ):
            if user in have:
                continue
            first = {}
            for i, p in enumerate(papers):
                if p in row:
                    first.setdefault(p, i)
            known = list(first)
            unknown += len(papers) - len(known)
            imported += 1
            saves += len(known)
            yield user, known, [times[user][first[p]] for p in known] if times else None

    # a batch of users a transaction: an interrupted import keeps the batches committed, and the next run
    # skips those users
    if replay_many(rec, known_saves(), batch=IMPORT_BATCH):
        rec.state.analyse()
    return ImportReport(imported, saves, len(have), unknown, not times, time.perf_counter() - t)
