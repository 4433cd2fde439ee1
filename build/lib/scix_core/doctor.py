"""Health checks for every backend: SQLite/FTS5, PostgreSQL, Qdrant, the model."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scix_core.config import Config
from scix_core.embeddings import Encoder
from scix_core.recommend.scorers import SCORERS
from scix_core.recommend.state import SCHEMA_VERSION
from scix_core.recommend.state_postgres import open_state
from scix_core.vectors import open_store


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "fail" or "skip"
    detail: str


def check_sqlite(cfg: Config) -> Check:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
        return Check("sqlite-fts5", "ok", f"SQLite {sqlite3.sqlite_version} with FTS5")
    except sqlite3.OperationalError as exc:
        return Check("sqlite-fts5", "fail", f"SQLite {sqlite3.sqlite_version} lacks FTS5: {exc}")
    finally:
        conn.close()


def check_postgres(cfg: Config) -> Check:
    if not cfg.postgres.dsn:
        return Check("postgresql", "skip", "not configured (set SCIX_PG_DSN to use the PostgreSQL backend)")
    try:
        import psycopg

        with psycopg.connect(cfg.postgres.dsn, connect_timeout=3) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        return Check("postgresql", "ok", f"PostgreSQL {version} reachable")
    except Exception as exc:  # psycopg raises OperationalError and friends
        return Check(
            "postgresql", "fail", f"cannot connect with SCIX_PG_DSN: {str(exc).strip().splitlines()[0]}"
        )


def check_vectors(cfg: Config) -> Check:
    import numpy as np

    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(cfg.vectors, Path(tmp), "doctor-probe", dim=4)
            store.upsert([0, 1], np.eye(2, 4, dtype=np.float32), [{"paper_id": "a"}, {"paper_id": "b"}])
            store.finish()
            hits = store.search(np.array([1, 0, 0, 0], dtype=np.float32), 1)
            store.close()
        where = cfg.vectors.url or "embedded"
        ok = hits and hits[0].paper_id == "a"
        return Check(
            "vectors",
            "ok" if ok else "fail",
            f"{cfg.vectors.backend} ({where}) upsert+search {'works' if ok else 'wrong result'}",
        )
    except Exception as exc:
        return Check("vectors", "fail", f"{cfg.vectors.backend}: {exc}")


def check_model(cfg: Config) -> Check:
    try:
        enc = Encoder(cfg.embedding, cfg.home)
        vec = enc.encode_query("doctor probe")
        return Check(
            "model",
            "ok",
            f"{cfg.embedding.model} ({enc.config.backend}) loads; dim {vec.shape[0]}, max_length "
            f"{enc.max_length}",
        )
    except Exception as exc:
        return Check("model", "fail", str(exc))


def check_user_state(cfg: Config) -> Check:
    """The workspace's user-state database opens (WAL, schema version) and the configured scorer resolves."""

    try:
        state = open_state(cfg)
    except Exception as exc:
        return Check("user-state", "fail", str(exc))
    if cfg.recommend.scorer not in SCORERS:
        return Check(
            "user-state",
            "fail",
            f"recommend.scorer {cfg.recommend.scorer!r} is not one of {', '.join(SCORERS)}",
        )
    return Check(
        "user-state",
        "ok",
        f"{state.location} ({'PostgreSQL' if state.path is None else 'WAL'}, schema {SCHEMA_VERSION}); "
        f"scorer {cfg.recommend.scorer}",
    )


CHECKS: dict[str, Callable[[Config], Check]] = {
    "sqlite-fts5": check_sqlite,
    "postgresql": check_postgres,
    "vectors": check_vectors,
    "model": check_model,
    "user-state": check_user_state,
}


def run_checks(cfg: Config) -> list[Check]:
    return [check(cfg) for check in CHECKS.values()]
