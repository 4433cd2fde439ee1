"""The PostgreSQL mirror of an index: the lexical backend at scale.

One schema per index (``scix_<name>_<hash>``) holding ``papers`` with a
generated, weighted ``tsvector`` (title A, abstract B) under a GIN index,
an expression GIN index over ``to_tsvector(body)`` whose partial predicate
(``body IS NOT NULL AND length(body) <= 1048575``) the body lane repeats,
``meta`` (build key, text-search config, sync format), and — when the build has a term matrix
(:mod:`scix_core.stores.terms`) — that matrix as ``terms`` (stem, id, document frequency) and ``postings``
(term id, paper, term frequency, paper length in terms; the lane divides by ``meta.avg_len``), copied
term-major so one term's postings are contiguous on disk: the ``bm25`` ranking of the title/abstract lane
(:class:`~scix_core.search.lanes.postgres.PostgresBm25Lane`) reads them.

:func:`sync_index` copies a built SQLite store into PostgreSQL in one
transaction: the new schema is loaded beside the old one and swapped in at
commit, so readers never see a half-loaded index and a failure changes
nothing. Re-syncing an unchanged build is a no-op. :func:`sync_append` brings
the mirror of a build up to an append of it in place (one transaction too).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from scix_core.errors import BackendUnavailableError, ConfigError
from scix_core.stores.analysis import BODY_MAX_CHARS
from scix_core.stores.papers import PaperStore
from scix_core.stores.terms import TermIndex

SYNC_FORMAT = (
    "3"  # 2: the term matrix mirrored too; 3: listing days. A schema of an older format is re-synced
)
INDEX_TS_CONFIG = "english"  # the config the stored tsvector and the body index are built with
#: the body index's partial predicate and expression; the body lane repeats both verbatim
BODY_PREDICATE = f"body IS NOT NULL AND length(body) <= {BODY_MAX_CHARS}"
BODY_VECTOR = f"to_tsvector('{INDEX_TS_CONFIG}'::regconfig, body)"


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise BackendUnavailableError("psycopg is not installed: `pip install 'psycopg[binary]'`") from None
    return psycopg


def connect(dsn: str | None, timeout_s: int = 5):
    """An autocommit connection; lanes open their own transactions (and savepoints inside a caller's)."""
    if not dsn:
        raise ConfigError("no PostgreSQL DSN: set postgres.dsn in scix.toml or SCIX_PG_DSN")
    psycopg = _psycopg()
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=timeout_s)
    except psycopg.Error as exc:
        raise BackendUnavailableError(f"cannot reach PostgreSQL ({_redact(dsn)}): {exc}".strip()) from exc


def _redact(dsn: str) -> str:
    return re.sub(r"//([^:@/]+):[^@/]*@", r"//\1:***@", dsn)


def schema_name(index: str) -> str:
    """A valid, collision-free schema name for an index name."""
    slug = re.sub(r"[^a-z0-9_]", "_", index.lower())[:40]
    return f"scix_{slug}_{hashlib.sha1(index.encode()).hexdigest()[:6]}"


def _ddl(schema):
    from psycopg import sql

    s = sql.Identifier(schema)
    return [
        sql.SQL(q).format(s=s)
        for q in (
            "CREATE SCHEMA {s}",
            "CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
            f"""CREATE TABLE {{s}}.papers (
            idx integer PRIMARY KEY, paper_id text NOT NULL UNIQUE, title text NOT NULL,
            abstract text NOT NULL,
            body text, authors text[] NOT NULL, authors_folded text[] NOT NULL, categories text[] NOT NULL,
            published date, year integer, citation_count integer NOT NULL DEFAULT 0, listed date,
            tsv tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('{INDEX_TS_CONFIG}'::regconfig, title), 'A') ||
                setweight(to_tsvector('{INDEX_TS_CONFIG}'::regconfig, abstract), 'B')) STORED)""",
            "CREATE TABLE {s}.terms (id integer PRIMARY KEY, term text NOT NULL UNIQUE, df integer NOT NULL)",
            "CREATE TABLE {s}.postings (term integer NOT NULL, idx integer NOT NULL, tf integer NOT NULL, "
            "len integer NOT NULL)",
        )
    ]


def _indexes(schema):
    from psycopg import sql

    s = sql.Identifier(schema)
    return [
        sql.SQL(q).format(s=s)
        for q in (
            "CREATE INDEX papers_tsv_gin ON {s}.papers USING gin (tsv)",
            f"CREATE INDEX papers_body_gin ON {{s}}.papers USING gin ({BODY_VECTOR}) WHERE {BODY_PREDICATE}",
            "CREATE INDEX papers_year ON {s}.papers (year)",
            "CREATE INDEX papers_categories_gin ON {s}.papers USING gin (categories)",
            "CREATE INDEX postings_term ON {s}.postings (term)",
            "ANALYZE {s}.papers",
            "ANALYZE {s}.terms",
            "ANALYZE {s}.postings",
        )
    ]


@dataclass(frozen=True)
class SyncReport:
    index: str
    schema: str
    status: str  # "synced" or "unchanged"
    papers: int
    seconds: float


def synced_meta(conn, schema: str) -> dict[str, str]:
    """The ``meta`` table of a synced schema ({} when there is none)."""
    exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    if not exists:
        return {}
    from psycopg import sql

    return dict(
        conn.execute(sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema))).fetchall()
    )


def synced_build_key(conn, schema: str) -> str | None:
    """The build key a schema was synced from; None if absent or synced by another format (so: stale)."""
    return _current_key(synced_meta(conn, schema))


def _current_key(meta: dict[str, str]) -> str | None:
    return meta.get("build_key") if meta.get("sync_format") == SYNC_FORMAT else None


def _copy_terms(conn, schema: str, terms_dir: Path) -> dict[str, str]:
    """COPY the term matrix into ``terms`` and ``postings`` (term-major); returns meta entries."""
    import numpy as np
    from psycopg import sql

    matrix = TermIndex(terms_dir)
    indptr = np.asarray(matrix.indptr)
    df = np.diff(indptr)
    with conn.cursor() as cur:
        with cur.copy(
            sql.SQL("COPY {}.terms (id, term, df) FROM STDIN").format(sql.Identifier(schema))
        ) as out:
            for term, t in matrix.vocab.items():
                out.write_row((t, term, int(df[t])))
        terms = np.repeat(np.arange(len(df)), df)
        _copy_postings(cur, schema, terms, np.asarray(matrix.docs), np.asarray(matrix.tf), matrix.lengths)
    return _term_meta(matrix)


def _term_meta(matrix: TermIndex) -> dict[str, str]:
    return {
        "terms": str(len(matrix.vocab)),
        "postings": str(len(matrix.docs)),
        "avg_len": repr(matrix.avg_len),
    }


def _copy_postings(cur, schema: str, terms, docs, tf, lengths) -> None:
    """COPY postings (term, paper, tf, the paper's length in terms): BM25's length norm divides the length by
    the average at query time (``meta.avg_len``), so an append changes no other paper's rows."""
    from psycopg import sql

    with cur.copy(
        sql.SQL("COPY {}.postings (term, idx, tf, len) FROM STDIN").format(sql.Identifier(schema))
    ) as out:
        for t, d, f in zip(terms.tolist(), docs.tolist(), tf.tolist()):
            out.write_row((t, d, f, int(lengths[d])))


def _text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; nothing searchable is lost by dropping it."""
    return value.replace("\x00", "") if value else value


PAPER_COLUMNS = (
    "idx",
    "paper_id",
    "title",
    "abstract",
    "body",
    "authors",
    "authors_folded",
    "categories",
    "published",
    "year",
    "citation_count",
    "listed",
)


def _copy_papers(conn, schema: str, store: PaperStore, select: str, params: list) -> int:
    """COPY the store's papers that ``select`` picks into ``schema.papers``; returns how many."""
    from psycopg import sql

    copy = sql.SQL("COPY {}.papers ({}) FROM STDIN").format(
        sql.Identifier(schema), sql.SQL(", ").join(map(sql.Identifier, PAPER_COLUMNS))
    )
    n = 0
    with conn.cursor() as cur, cur.copy(copy) as out:
        for row in store.conn.execute(select, params):
            authors = json.loads(row["authors"])
            out.write_row(
                (
                    row["idx"],
                    row["paper_id"],
                    _text(row["title"]),
                    _text(row["abstract"]),
                    _text(row["body"]),
                    authors,
                    [a.casefold() for a in authors],
                    json.loads(row["categories"]),
                    row["published"],
                    row["year"],
                    row["citation_count"],
                    row["listed"] if "listed" in row.keys() else None,  # an older build has none
                )
            )
            n += 1
    return n


def sync_append(index: str, build_dir: Path, dsn: str | None, lock_timeout_ms: int = 30_000) -> SyncReport:
    """Bring the mirror of an appended build's previous build up to it in place, in one transaction: the
    appended and replaced papers' rows and postings written (a replaced paper's old ones deleted first), new
    terms added, every changed document frequency and the meta (build key, counts, average length) set.
    Readers see the old mirror until the commit. A mirror of anything else — no mirror, another build, an
    older sync format — is synced whole (:func:`sync_index`)."""
    import numpy as np
    import psycopg
    from psycopg import sql

    t = time.perf_counter()
    build_dir = Path(build_dir)
    last = (json.loads((build_dir / "manifest.json").read_text()).get("appends") or [{}])[-1]
    rows, previous = last.get("rows"), last.get("previous_key")
    store = PaperStore(build_dir / "papers.sqlite")
    schema, key = schema_name(index), store.meta().get("build_key", "")
    try:
        with connect(dsn) as conn:
            mirrored = synced_meta(conn, schema)
            held = _current_key(mirrored)
            if key and held == key:
                return SyncReport(index, schema, "unchanged", len(store), time.perf_counter() - t)
            if not rows or not previous or held != previous or not (build_dir / "terms").is_dir():
                store.close()
                return sync_index(index, build_dir, dsn, lock_timeout_ms=lock_timeout_ms)
            held_terms = int(mirrored.get("terms", 0))
            matrix = TermIndex(build_dir / "terms")
            df = np.diff(np.asarray(matrix.indptr))
            docs = np.asarray(matrix.docs)
            pick = np.isin(docs, np.asarray(rows, dtype=np.int64))
            q = {name: sql.Identifier(schema, name) for name in ("papers", "postings", "terms", "meta")}
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(lock_timeout_ms)}ms"])
                replaced = [r for r in rows if r < int(last.get("first_new", 0))]
                cur.execute(sql.SQL("DELETE FROM {} WHERE idx = ANY(%s)").format(q["papers"]), [rows])
                if replaced:  # (postings have no index by paper: only a replacement pays the scan)
                    cur.execute(
                        sql.SQL("DELETE FROM {} WHERE idx = ANY(%s)").format(q["postings"]), [replaced]
                    )
                select = "SELECT * FROM papers WHERE idx IN (SELECT value FROM json_each(?)) ORDER BY idx"
                _copy_papers(conn, schema, store, select, [json.dumps(rows)])
                terms = np.repeat(np.arange(len(df)), df)[pick]
                _copy_postings(cur, schema, terms, docs[pick], np.asarray(matrix.tf)[pick], matrix.lengths)
                with cur.copy(sql.SQL("COPY {} (id, term, df) FROM STDIN").format(q["terms"])) as out:
                    for term, i in matrix.vocab.items():
                        if i >= held_terms:
                            out.write_row((i, term, int(df[i])))
                cur.execute(
                    sql.SQL(
                        "UPDATE {t} SET df = v.df FROM unnest(%s::int[], %s::int[]) AS v(id, df) "
                        "WHERE {t}.id = v.id AND {t}.df <> v.df"
                    ).format(t=q["terms"]),
                    [list(range(held_terms)), df[:held_terms].tolist()],
                )
                meta = {"build_key": key, "papers": str(len(store)), **_term_meta(matrix)}
                cur.executemany(
                    sql.SQL("UPDATE {} SET value = %s WHERE key = %s").format(q["meta"]),
                    [(v, k) for k, v in meta.items()],
                )
    except psycopg.Error as exc:
        raise BackendUnavailableError(
            f"sync of the append to index {index!r} to PostgreSQL failed and was rolled back "
            f"(PostgreSQL is unchanged): {exc}"
        ) from exc
    finally:
        store.close()
    return SyncReport(index, schema, "appended", len(rows), time.perf_counter() - t)


def sync_index(
    index: str, build_dir: Path, dsn: str | None, force: bool = False, lock_timeout_ms: int = 30_000
) -> SyncReport:
    """Mirror the build at ``build_dir`` (its ``papers.sqlite``) into PostgreSQL, atomically.

    Readers holding the old schema for longer than ``lock_timeout_ms`` make the
    swap fail; the transaction rolls back and PostgreSQL is left as it was.
    """
    import psycopg
    from psycopg import sql

    t = time.perf_counter()
    store = PaperStore(Path(build_dir) / "papers.sqlite")
    schema, staging = schema_name(index), schema_name(index) + "__new"
    key = store.meta().get("build_key", "")
    try:
        with connect(dsn) as conn:
            if not force and key and synced_build_key(conn, schema) == key:
                return SyncReport(index, schema, "unchanged", len(store), time.perf_counter() - t)
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(lock_timeout_ms)}ms"])
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(staging)))
                for stmt in _ddl(staging):
                    conn.execute(stmt)
                n = _copy_papers(conn, staging, store, "SELECT * FROM papers ORDER BY idx", [])
                meta = {
                    "index": index,
                    "build_key": key,
                    "ts_config": INDEX_TS_CONFIG,
                    "papers": str(n),
                    "sync_format": SYNC_FORMAT,
                }
                if (Path(build_dir) / "terms").is_dir():
                    meta.update(_copy_terms(conn, staging, Path(build_dir) / "terms"))
                conn.cursor().executemany(
                    sql.SQL("INSERT INTO {}.meta VALUES (%s, %s)").format(sql.Identifier(staging)),
                    sorted(meta.items()),
                )
                for stmt in _indexes(staging):
                    conn.execute(stmt)
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                        sql.Identifier(staging), sql.Identifier(schema)
                    )
                )
    except psycopg.Error as exc:
        raise BackendUnavailableError(
            f"sync of index {index!r} to PostgreSQL failed and was rolled back "
            f"(PostgreSQL is unchanged): {exc}"
        ) from exc
    finally:
        store.close()
    return SyncReport(index, schema, "synced", n, time.perf_counter() - t)
