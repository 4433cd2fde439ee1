"""``scix users import``: real user libraries from the interactions a loader found.

The CiteULike format's ``users.dat`` holds each user's saved items as an
unordered list, so timestamps are synthesised: in file order, one second
apart, from a fixed origin (``SYNTHETIC_ORIGIN``), and every such row is
flagged ``synthetic``. Import is idempotent: a user already present is
skipped, never duplicated. Each user (interactions + profiles) is one
transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scix_core.recommend.profile import compute_profiles
from scix_core.recommend.state import Event
from scix_core.stores.papers import connect

SYNTHETIC_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class ImportReport:
    users: int
    saves: int
    skipped_users: int
    unknown_papers: int
    synthetic_times: bool
    seconds: float


def library_saves(build_dir) -> dict[str, list[str]]:
    """user -> saved paper ids in file order, from the paper store's ``interactions`` table."""
    conn = connect(build_dir / "papers.sqlite", readonly=True)
    try:
        rows = conn.execute("SELECT user_id, paper_id FROM interactions WHERE action = 'save' "
                            "ORDER BY rowid").fetchall()
    finally:
        conn.close()
    out: dict[str, list[str]] = {}
    for user, paper in rows:
        out.setdefault(user, []).append(paper)
    return out


def import_libraries(rec, users: list[str] | None = None, progress: bool = False) -> ImportReport:
    import time

    from tqdm.auto import tqdm

    t = time.perf_counter()
    libraries = library_saves(rec.build_dir)
    if users is not None:
        libraries = {u: libraries[u] for u in users if u in libraries}
    have = rec.state.existing(rec.index, libraries)
    row = rec.side.catalog.row
    imported = saves = unknown = 0
    for user, papers in tqdm(libraries.items(), desc="users", unit="user", disable=not progress, leave=False):
        if user in have:
            continue
        known = list(dict.fromkeys(p for p in papers if p in row))
        unknown += len(papers) - len(known)
        events = [Event(0, p, "save", SYNTHETIC_ORIGIN + dt.timedelta(seconds=i)) for i, p in enumerate(known)]
        rec.state.import_library(rec.index, user, known, SYNTHETIC_ORIGIN, compute_profiles(rec.side, events))
        imported += 1
        saves += len(known)
    return ImportReport(imported, saves, len(have), unknown, True, time.perf_counter() - t)
