"""What the recommender knows about an index's papers, loaded once per build.

Per paper (row = point id = ``papers.idx``): id, category codes, its date
(:func:`paper_day`: the day it was listed where the source has one, its first
publication otherwise) as a day and a month count, citation count. *Codes* are the corpus's own category
codes (arXiv ``cs.LG``, primary first) where it has them, and its tags
otherwise (CiteULike); which one is said in :attr:`Catalog.code_source`.
Citation counts are the in-degree of the paper in the index's citation
graph (direct links), or the loader's count where it is larger (CiteULike's
links are undirected: its count is the degree).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from scix_core.stores.papers import connect, has_listing_days


def months(day: dt.date) -> int:
    """A date as a month count (year·12 + month − 1), the unit of the trending windows."""
    return day.year * 12 + day.month - 1


def paper_day(published: dt.date | None, listed: dt.date | None) -> dt.date | None:
    """A paper's date for recency: the day it was listed, unless it was first published in an earlier month
    (a cross-list or a new version of an older paper: an arXiv id's month dates it) — then that; the
    publication date when it was never listed. (One paper through :func:`_dated`, the catalogue's rule.)"""
    _, day = _dated([published and published.isoformat()], [listed and listed.isoformat()])
    return dt.date.fromordinal(int(day[0])) if day[0] >= 0 else None


def _days(texts: list[str | None]) -> np.ndarray:
    """ISO days (None: undated) as ``datetime64[D]`` (NaT), parsed in one call."""
    return np.array([t or "NaT" for t in texts], dtype="datetime64[D]")


def _ordinals(days: np.ndarray) -> np.ndarray:
    """``datetime64[D]`` days as date ordinals (int32), -1 for NaT."""
    # the ordinal of 1970-01-01 is 719163
    out = np.where(np.isnat(days), -1, days.astype(np.int64) + dt.date(1970, 1, 1).toordinal())
    return out.astype(np.int32)


def _dated(published: list[str | None], listed: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's date for recency (:func:`paper_day`) as (month count, date ordinal), -1 when undated."""
    pub, lis = _days(published), _days(listed)
    pub_m, lis_m = pub.astype("datetime64[M]"), lis.astype("datetime64[M]")
    take_listed = ~np.isnat(lis) & (np.isnat(pub) | (lis_m <= pub_m))
    when = np.where(take_listed, lis, pub)
    undated = np.isnat(when)
    # datetime64 counts from 1970-01: months(day) = year*12 + month - 1
    month = np.where(undated, -1, when.astype("datetime64[M]").astype(np.int64) + 1970 * 12)
    return month.astype(np.int32), _ordinals(when)


@dataclass(frozen=True, eq=False)
class Catalog:
    index: str
    ids: tuple[str, ...]
    row: dict  # paper id -> row
    codes: Sequence[tuple[str, ...]]  # per row; categories (primary first) or tags
    code_source: str  # "categories", "tags" or "none"
    month: np.ndarray  # int32 per row, -1 when undated
    citations: np.ndarray  # int64 per row
    day: np.ndarray | None = None  # int32 per row: the date's ordinal, -1 when undated (None: by month)
    listed: np.ndarray | None = None  # int32 per row: the listing day's ordinal, -1 when never listed

    @classmethod
    def load(cls, index: str, store_path: Path) -> Catalog:
        conn = connect(store_path, readonly=True)
        try:
            listed_column = "listed" if has_listing_days(conn) else "NULL AS listed"
            rows = conn.execute(
                "SELECT idx, paper_id, categories, published, citation_count, "
                f"{listed_column} FROM papers ORDER BY idx"
            ).fetchall()
            indegree = dict(
                conn.execute(
                    "SELECT target, count(DISTINCT source) FROM citations "
                    "WHERE kind = 'direct' GROUP BY target"
                ).fetchall()
            )
            categorised = any(r["categories"] != "[]" for r in rows)
            tagged = not categorised and conn.execute("SELECT 1 FROM tags LIMIT 1").fetchone() is not None
        finally:
            conn.close()
        ids = tuple(r["paper_id"] for r in rows)
        codes: Sequence[tuple[str, ...]]
        if tagged:  # read when first asked: a process that only records a save never needs them
            codes, source = _Tags(store_path, ids), "tags"
        else:  # one JSON document for every row's list: a parse per row was most of a server's follow
            codes = tuple(map(tuple, json.loads("[" + ",".join(r["categories"] for r in rows) + "]")))
            source = "categories" if any(codes) else "none"
        month, day = _dated([r["published"] for r in rows], [r["listed"] for r in rows])
        cites = np.array(
            [max(r["citation_count"], indegree.get(r["paper_id"], 0)) for r in rows], dtype=np.int64
        )
        listed = _ordinals(_days([r["listed"] for r in rows]))
        return cls(
            index, ids, {pid: i for i, pid in enumerate(ids)}, codes, source, month, cites, day, listed
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def has_dates(self) -> bool:
        return bool((self.month >= 0).any())

    @property
    def has_citations(self) -> bool:
        return bool((self.citations > 0).any())

    @property
    def newest_month(self) -> int | None:
        return int(self.month.max()) if self.has_dates else None

    def primary(self, row: int) -> str | None:
        codes = self.codes[row]
        return codes[0] if codes else None

    def suppression_codes(self, row: int) -> tuple[str, ...]:
        """The codes a dismissal counts for: the primary category code, or every tag (tags have no
        primary)."""
        codes = self.codes[row]
        if self.code_source == "categories":
            return codes[:1]
        return codes

    @cached_property
    def trending_order(self) -> np.ndarray:
        """Every row in Tier 0's order — citations descending, then newer first (by day where the catalogue
        has days), then corpus order — sorted once: a subset's ranking is this order filtered (the same total
        order), not a sort per request."""
        rows = np.arange(len(self.ids))
        newer = self.month if self.day is None else self.day
        return rows[np.lexsort((rows, -newer.astype(np.int64), -self.citations))]

    @cached_property
    def _code_rows(self) -> dict[str, np.ndarray]:
        rows: dict[str, list[int]] = {}
        for row, codes in enumerate(self.codes):
            for code in codes:
                rows.setdefault(code, []).append(row)
        return {code: np.array(r, dtype=np.int64) for code, r in rows.items()}

    def rows_with_codes(self, wanted: frozenset[str]) -> np.ndarray:
        """Boolean mask of papers carrying any of ``wanted`` (all codes, cross-lists included)."""
        mask = np.zeros(len(self.codes), dtype=bool)
        for code in wanted:
            mask[self._code_rows.get(code, [])] = True
        return mask

    def all_codes(self) -> set[str]:
        return set(self._code_rows)


class _Tags(Sequence):
    """Each row's tags (in the order the loader gave them, each once), read from the store at the first ask:
    239k tag rows took a CiteULike-a catalogue's load from 0.1 s to 0.5 s, paid by every command that only
    records a save."""

    def __init__(self, store_path: Path, ids: tuple[str, ...]):
        self._path, self._ids = store_path, ids
        self._lock = threading.Lock()
        self._codes: tuple[tuple[str, ...], ...] | None = None

    @property
    def _loaded(self) -> tuple[tuple[str, ...], ...]:
        with self._lock:
            if self._codes is None:
                conn = connect(self._path, readonly=True)
                try:
                    tags: dict[str, list[str]] = {}
                    for pid, tag in conn.execute("SELECT paper_id, tag FROM tags ORDER BY rowid"):
                        tags.setdefault(pid, []).append(tag)
                finally:
                    conn.close()
                self._codes = tuple(tuple(dict.fromkeys(tags.get(pid, ()))) for pid in self._ids)
            return self._codes

    def __getitem__(self, row):
        return self._loaded[row]

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self):
        return iter(self._loaded)


_CATALOGS: dict[str, Catalog] = {}
_LOCK = threading.Lock()


def shared_catalog(index: str, build_dir: Path) -> Catalog:
    key = str(Path(build_dir).resolve())
    with _LOCK:
        if key not in _CATALOGS:
            _CATALOGS[key] = Catalog.load(index, Path(build_dir) / "papers.sqlite")
        return _CATALOGS[key]
