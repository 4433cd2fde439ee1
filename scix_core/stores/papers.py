"""The paper store: one SQLite file (WAL) with the papers and FTS5 indexes.

Tables: ``papers`` (one row per paper, ``idx`` = its position in the
corpus and its vector id), ``papers_fts`` (title, abstract) and
``body_fts`` (full text), both external-content FTS5 tables with the
porter tokenizer; plus the gold data that came with the corpus
(``queries``, ``qrels``), ``interactions``, ``citations`` and ``meta``.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scix_core.data.dataset import Dataset
from scix_core.errors import BackendUnavailableError
from scix_core.types import Paper, Query

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE papers (
    idx INTEGER PRIMARY KEY,
    paper_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    abstract TEXT NOT NULL,
    body TEXT,
    authors TEXT NOT NULL,
    categories TEXT NOT NULL,
    published TEXT,
    year INTEGER,
    citation_count INTEGER NOT NULL DEFAULT 0,
    refs TEXT NOT NULL,
    listed TEXT
);
CREATE INDEX papers_year ON papers(year);
CREATE INDEX papers_listed ON papers(listed);
CREATE VIRTUAL TABLE papers_fts USING fts5(
    title, abstract, content='papers', content_rowid='idx', tokenize='porter unicode61');
CREATE VIRTUAL TABLE body_fts USING fts5(
    body, content='papers', content_rowid='idx', tokenize='porter unicode61');
CREATE TABLE paper_categories (idx INTEGER NOT NULL, category TEXT NOT NULL, PRIMARY KEY (category, idx));
CREATE TABLE queries (query_id TEXT PRIMARY KEY, text TEXT NOT NULL, fields TEXT NOT NULL);
CREATE TABLE qrels (split TEXT NOT NULL, query_id TEXT NOT NULL, paper_id TEXT NOT NULL,
grade INTEGER NOT NULL,
                    PRIMARY KEY (split, query_id, paper_id));
CREATE TABLE interactions (user_id TEXT NOT NULL, paper_id TEXT NOT NULL, action TEXT NOT NULL,
                           position INTEGER NOT NULL, at TEXT);
CREATE TABLE citations (source TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE tags (paper_id TEXT NOT NULL, tag TEXT NOT NULL);
"""


def _row(idx: int, p: Paper) -> tuple:
    return (
        idx,
        p.paper_id,
        p.title,
        p.abstract,
        p.body,
        json.dumps(list(p.authors)),
        json.dumps(list(p.categories)),
        p.published.isoformat() if p.published else None,
        p.year,
        p.citation_count,
        json.dumps(list(p.references)),
        p.listed.isoformat() if p.listed else None,
    )


def _paper(row: sqlite3.Row) -> Paper:
    return Paper(
        paper_id=row["paper_id"],
        title=row["title"],
        abstract=row["abstract"],
        body=row["body"],
        authors=tuple(json.loads(row["authors"])),
        categories=tuple(json.loads(row["categories"])),
        published=dt.date.fromisoformat(row["published"]) if row["published"] else None,
        citation_count=row["citation_count"],
        references=tuple(json.loads(row["refs"])),
        listed=dt.date.fromisoformat(row["listed"]) if "listed" in row.keys() and row["listed"] else None,
    )


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    try:
        uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.OperationalError as exc:
        raise BackendUnavailableError(f"cannot open paper store {path}: {exc}") from exc
    conn.row_factory = sqlite3.Row
    conn.create_function("scix_author_match", 2, _author_match, deterministic=True)
    return conn


def _author_match(authors_json: str, needles_json: str) -> int:
    """1 when a case-folded author name contains a case-folded needle (see ``SearchFilters.authors``)."""
    needles = json.loads(needles_json)
    return int(any(n in a.casefold() for a in json.loads(authors_json) for n in needles))


@contextmanager
def time_limit(conn: sqlite3.Connection, ms: float) -> Iterator[None]:
    """Interrupt statements on ``conn`` that run past ``ms`` (``sqlite3.OperationalError: interrupted``)."""
    deadline = time.perf_counter() + ms / 1000
    conn.set_progress_handler(lambda: int(time.perf_counter() > deadline), 2000)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def build_store(path: Path, dataset: Dataset, meta: dict[str, str]) -> None:
    """Write a complete store for ``dataset`` at ``path`` (a new file).

    Rows are inserted in corpus order so that ``idx`` is stable: the same
    input always gives the same store.
    """
    conn = connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA)
        with conn:
            conn.executemany(
                "INSERT INTO papers VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (_row(i, p) for i, p in enumerate(dataset.papers)),
            )
            conn.executemany(
                "INSERT INTO paper_categories VALUES (?,?)",
                ((i, c) for i, p in enumerate(dataset.papers) for c in dict.fromkeys(p.categories)),
            )
            conn.execute("INSERT INTO papers_fts(papers_fts) VALUES ('rebuild')")
            conn.execute(
                "INSERT INTO body_fts(rowid, body) SELECT idx, body FROM papers WHERE body IS NOT NULL"
            )
            conn.executemany(
                "INSERT INTO queries VALUES (?,?,?)",
                ((q.query_id, q.text, json.dumps(dict(q.fields), sort_keys=True)) for q in dataset.queries),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO qrels VALUES (?,?,?,?)",
                (
                    (s, q, d, g)
                    for s, qr in dataset.qrels.items()
                    for q, docs in qr.items()
                    for d, g in docs.items()
                ),
            )
            conn.executemany(
                "INSERT INTO interactions VALUES (?,?,?,?,?)",
                (
                    (i.user_id, i.paper_id, i.action, i.position, i.at.isoformat() if i.at else None)
                    for i in dataset.interactions
                ),
            )
            conn.executemany(
                "INSERT INTO citations VALUES (?,?,?)",
                ((c.source, c.target, c.kind) for c in dataset.citations),
            )
            conn.executemany(
                "INSERT INTO tags VALUES (?,?)", ((p, t) for p, ts in dataset.tags.items() for t in ts)
            )
            conn.executemany("INSERT INTO meta VALUES (?,?)", sorted(meta.items()))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def has_listing_days(conn: sqlite3.Connection) -> bool:
    """Whether the store has the ``listed`` column (builds made before listing days have not)."""
    return "listed" in {r["name"] for r in conn.execute("PRAGMA table_info(papers)")}


def copy_store(source: Path, path: Path) -> None:
    """A page-for-page copy of a finished store (SQLite's online backup: whole even while others read it)."""
    src = connect(source, readonly=True)
    dst = connect(path)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=WAL")
    finally:
        dst.close()
        src.close()


def append_papers(path: Path, papers: dict[int, Paper], meta: dict[str, str], max_segments: int = 16) -> None:
    """Write ``papers`` (row -> paper) into the store at ``path`` in one transaction: a row the store has is
    replaced (its FTS5 entries deleted with the old text, as an external-content table needs), a new one
    added; FTS5 merges its segments as it goes (automerge), and an index left with more than
    ``max_segments`` is optimised into one. ``meta`` entries are set."""
    conn = connect(path)
    try:
        if not has_listing_days(conn):
            conn.execute("ALTER TABLE papers ADD COLUMN listed TEXT")
        with conn:
            marks = json.dumps(list(papers))
            old = conn.execute(
                "SELECT idx, title, abstract, body FROM papers WHERE idx IN (SELECT value FROM json_each(?))",
                [marks],
            ).fetchall()
            conn.executemany(
                "INSERT INTO papers_fts(papers_fts, rowid, title, abstract) VALUES ('delete', ?, ?, ?)",
                ((r["idx"], r["title"], r["abstract"]) for r in old),
            )
            conn.executemany(
                "INSERT INTO body_fts(body_fts, rowid, body) VALUES ('delete', ?, ?)",
                ((r["idx"], r["body"]) for r in old if r["body"] is not None),
            )
            conn.execute(
                "DELETE FROM paper_categories WHERE idx IN (SELECT value FROM json_each(?))", [marks]
            )
            conn.executemany(
                "INSERT OR REPLACE INTO papers VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (_row(i, p) for i, p in papers.items()),
            )
            conn.executemany(
                "INSERT INTO paper_categories VALUES (?,?)",
                ((i, c) for i, p in papers.items() for c in dict.fromkeys(p.categories)),
            )
            conn.executemany(
                "INSERT INTO papers_fts(rowid, title, abstract) VALUES (?, ?, ?)",
                ((i, p.title, p.abstract) for i, p in papers.items()),
            )
            conn.executemany(
                "INSERT INTO body_fts(rowid, body) VALUES (?, ?)",
                ((i, p.body) for i, p in papers.items() if p.body is not None),
            )
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", sorted(meta.items()))
        for t in ("papers_fts", "body_fts"):
            if conn.execute(f"SELECT count(DISTINCT segid) FROM {t}_idx").fetchone()[0] > max_segments:
                with conn:
                    conn.execute(f"INSERT INTO {t}({t}) VALUES ('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


class PaperStore:
    """Read access to a built paper store."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = connect(self.path, readonly=True)

    def close(self) -> None:
        self.conn.close()

    def __len__(self) -> int:
        return self.conn.execute("SELECT count(*) FROM papers").fetchone()[0]

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def get(self, paper_ids: Iterable[str]) -> dict[str, Paper]:
        ids = list(paper_ids)
        out: dict[str, Paper] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(f"SELECT * FROM papers WHERE paper_id IN ({marks})", chunk):
                out[row["paper_id"]] = _paper(row)
        return out

    def rows(self, paper_ids: Iterable[str]) -> dict[str, tuple[int, Paper]]:
        """paper id -> (row, paper) of the ids the store holds."""
        sql = "SELECT * FROM papers WHERE paper_id IN (SELECT value FROM json_each(?))"
        return {
            r["paper_id"]: (r["idx"], _paper(r))
            for r in self.conn.execute(sql, [json.dumps(list(paper_ids))])
        }

    def listed_range(self) -> dict | None:
        """The first and last listing day and how many papers have one (None: no paper was listed)."""
        if not has_listing_days(self.conn):
            return None
        first, last, n = self.conn.execute(
            "SELECT min(listed), max(listed), count(listed) FROM papers WHERE listed IS NOT NULL"
        ).fetchone()
        return {"first": first, "last": last, "papers": n} if n else None

    def titles(self, paper_ids: Iterable[str]) -> dict[str, tuple[str, int]]:
        """paper id -> (title, citation count): the cheap lookup the boosts need."""
        sql = (
            "SELECT paper_id, title, citation_count FROM papers "
            "WHERE paper_id IN (SELECT value FROM json_each(?))"
        )
        return {r[0]: (r[1], r[2]) for r in self.conn.execute(sql, [json.dumps(list(paper_ids))])}

    def papers(self) -> Iterator[Paper]:
        for row in self.conn.execute("SELECT * FROM papers ORDER BY idx"):
            yield _paper(row)

    def queries(self) -> list[Query]:
        return [
            Query(r["query_id"], r["text"], json.loads(r["fields"]))
            for r in self.conn.execute("SELECT * FROM queries ORDER BY rowid")
        ]

    def qrels(self, split: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.conn.execute("SELECT query_id, paper_id, grade FROM qrels WHERE split = ?", (split,)):
            out.setdefault(r[0], {})[r[1]] = r[2]
        return out

    def counts(self) -> dict[str, int]:
        q = lambda sql: self.conn.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "papers": q("SELECT count(*) FROM papers"),
            "with_abstract": q("SELECT count(*) FROM papers WHERE abstract != ''"),
            "with_body": q("SELECT count(*) FROM papers WHERE body IS NOT NULL"),
            "queries": q("SELECT count(*) FROM queries"),
            "qrels": q("SELECT count(*) FROM qrels"),
            "interactions": q("SELECT count(*) FROM interactions"),
            "users": q("SELECT count(DISTINCT user_id) FROM interactions"),
            "citations": q("SELECT count(*) FROM citations"),
        }

    def dump(self) -> list[tuple]:
        """Every row of every table, for comparing two builds."""
        tables = [
            r[0]
            for r in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE '%fts%' ORDER BY name"
            )
        ]
        return [
            (t, *tuple(r)) for t in tables for r in self.conn.execute(f"SELECT * FROM {t} ORDER BY rowid")
        ]
