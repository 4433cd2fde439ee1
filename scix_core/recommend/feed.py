"""The feed (docs/recommendations.md#the-feed): the papers of a window, ranked for one user.

A window is the papers listed on or after a day (``--since DATE``; the
listing days of the living corpus), the papers that arrived in the index
since the user's last feed (``--since last-visit``: every feed read records
a visit), or, by default, the index's newest listing day — "today's papers".
An index whose source has no listing days dates each paper by when it
arrived: the build that ingested it (``built_at`` in its manifest) or the
``--append`` that added it (``appends``). The window's papers are ranked by
the user's tier's pipeline restricted to them (:func:`~scix_core.recommend.pool.within`):
every item keeps its stage provenance, Tier 0 users get the window's papers
in their onboarding categories. A window with no papers is an empty feed with
the reason, not an error.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scix_core.errors import FilterError
from scix_core.recommend.result import Recommendations
from scix_core.search.filters import parse_day

LAST_VISIT = "last-visit"
UNIX_DAY_0 = dt.date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Window:
    """The papers a feed ranks: catalogue ``rows``, chosen ``by`` listing day or by arrival."""

    rows: np.ndarray
    by: str  # "listing day" or "arrival"
    start: str  # ISO day (listing day) or time (arrival) the window opens at, inclusive
    newest: str | None  # the newest listing day / arrival of the index
    described: str  # for a reader: what the window holds and why
    # the newest arrival of the build this window was read from: what a visit records, so the next
    # ``last-visit`` window opens after the papers this read could see — never at a clock time an append
    # under way could straddle
    seen_up_to: float = 0.0

    def to_dict(self) -> dict:
        return {
            "by": self.by,
            "start": self.start,
            "newest": self.newest,
            "papers": len(self.rows),
            "described": self.described,
        }


def arrivals(manifest: Mapping, n: int) -> np.ndarray:
    """Seconds since the epoch at which each of the ``n`` rows arrived: the build's ``built_at`` for the rows
    it ingested (0: a build from before it was recorded), each kept append's time for the rows it added."""
    out = np.full(n, _seconds(manifest.get("built_at")) or 0.0)
    for entry in manifest.get("appends", []):
        first, added = int(entry.get("first_new", n)), int(entry.get("added", 0))
        out[first : min(n, first + added)] = _seconds(entry.get("at")) or 0.0
    return out


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    at = dt.datetime.fromisoformat(text)
    return (at if at.tzinfo else at.replace(tzinfo=dt.UTC)).timestamp()


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="milliseconds")


def seen_at(window: Window) -> dt.datetime:
    """What a visit records: the newest arrival the window's build held, as a time."""
    return dt.datetime.fromtimestamp(window.seen_up_to, dt.UTC)


def window(catalog, manifest: Mapping, since: str | dt.date | None, last_visit: dt.datetime | None) -> Window:
    """The rows ``since`` selects (None: the newest listing day; :data:`LAST_VISIT`: arrived after
    ``last_visit``, the newest day on a first visit). A day that is not ``YYYY-MM-DD`` is a
    :class:`~scix_core.errors.FilterError`."""
    listed = catalog.listed if catalog.listed is not None else np.full(len(catalog), -1, dtype=np.int32)
    arrived = arrivals(manifest, len(catalog))
    seen = float(arrived.max()) if len(arrived) else 0.0
    by_listing = bool((listed >= 0).any())
    visit = isinstance(since, str) and since.strip() == LAST_VISIT
    if visit and last_visit is not None:
        after = last_visit.timestamp()
        rows = np.flatnonzero(arrived > after)
        newest = _iso(float(arrived.max())) if len(arrived) else None
        described = (
            f"{len(rows)} papers arrived since your last visit (which saw the papers of {_iso(after)})"
        )
        return Window(rows, "arrival", _iso(after), newest, described, seen)
    if by_listing:
        days = listed
        newest_day = int(days.max())
    else:
        # each arrival's UTC day as a date ordinal, in one pass (a request reads every row)
        days = np.where(arrived > 0, (arrived // 86400).astype(np.int64) + UNIX_DAY_0, -1)
        newest_day = int(days.max()) if len(days) else -1
    by = "listing day" if by_listing else "arrival"
    newest = dt.date.fromordinal(newest_day).isoformat() if newest_day > 0 else None
    if since is None or visit:
        first = newest_day
        why = "the index's newest listing day" if by_listing else "the index's newest arrival day"
        if visit:
            why = f"first visit: {why}"
    else:
        day = parse_day(since)
        first, why = day.toordinal(), f"since {day.isoformat()}"
    if first <= 0:
        return Window(
            np.zeros(0, dtype=np.int64),
            by,
            "",
            newest,
            "no paper of this index has a listing day or an arrival time (an index built before arrival "
            "times were recorded: `scix ingest --force` records them)",
            seen,
        )
    rows = np.flatnonzero(days >= first)
    start = dt.date.fromordinal(first).isoformat()
    verb = "listed" if by_listing else "arrived"
    return Window(rows, by, start, newest, f"{len(rows)} papers {verb} on or after {start} ({why})", seen)


def check_since(since: object) -> str | dt.date | None:
    """A ``since`` as given on the command line or in a query string, checked before anything is read."""
    if since is None or isinstance(since, dt.date):
        return since
    text = str(since).strip()
    if not text:
        return None
    if text == LAST_VISIT:
        return text
    try:
        return parse_day(text)
    except FilterError:
        raise FilterError(f"since must be a day as YYYY-MM-DD or {LAST_VISIT!r}, got {since!r}") from None


@dataclass(frozen=True)
class Feed:
    """A user's feed: the window and the ranked list (an empty list says why in ``empty``)."""

    window: Window
    recommendations: Recommendations
    empty: str = ""

    @property
    def items(self):
        return self.recommendations.items

    def to_dict(self) -> dict:
        return {
            "window": self.window.to_dict(),
            "empty": self.empty or None,
            **self.recommendations.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


@dataclass(frozen=True)
class Why:
    """Why a paper is in a feed: its interest cluster (and that cluster's medoid paper), the saved paper
    nearest it and how near, the parts of its score, and whether it is the page's spread pick (MMR's last
    pick for a library of few interests, :func:`~scix_core.recommend.stages.mmr.tail_of`)."""

    paper_id: str
    source: str
    cluster: int | None
    medoid: str | None
    nearest_saved: str | None
    similarity: float | None
    parts: tuple[tuple[str, float], ...]
    spread: bool = False


def reasons(feed: Feed, side, saved: Sequence[str]) -> dict[str, Why]:
    """Each item's :class:`Why`: the nearest of the user's ``saved`` papers by the index's vectors (none
    without vectors or saves), the medoid of Tier 1's cluster, and whether MMR made it the spread pick."""
    result = feed.recommendations
    medoids, spread = {}, None
    if any(s.name == "quota" for s in result.stages):
        medoids = {c.cluster_id: c.medoid for c in result.stage("quota").output}
    if any(s.name == "mmr" for s in result.stages):
        spread = result.stage("mmr").summary.get("spread_pick")
    saved = [p for p in saved if p in side.catalog.row]
    nearest: dict[str, tuple[str, float]] = {}
    if side.vectors is not None and saved and result.items:
        sims = (
            side.vectors.get(side.rows(i.paper_id for i in result.items))
            @ side.vectors.get(side.rows(saved)).T
        )
        for item, row in zip(result.items, sims):
            best = int(row.argmax())
            nearest[item.paper_id] = (saved[best], float(row[best]))
    return {
        i.paper_id: Why(
            i.paper_id,
            i.source,
            i.cluster_id,
            medoids.get(i.cluster_id),
            nearest.get(i.paper_id, (None, None))[0],
            nearest.get(i.paper_id, (None, None))[1],
            tuple(i.scores),
            i.paper_id == spread and not i.exploration,
        )
        for i in result.items
    }


def empty_reason(result: Recommendations, window: Window, categories) -> str:
    """Why a feed has no item: nothing in the window, everything already seen, or nothing in the user's
    categories (Tier 0)."""
    if not len(window.rows):
        return f"nothing in the window: {window.described}"
    if result.items:
        return ""
    if result.tier == 0 and categories:
        return (
            f"none of the window's {len(window.rows)} papers is in your categories ({', '.join(categories)})"
        )
    return f"you have already saved or dismissed every one of the window's {len(window.rows)} papers"
