"""Lanes and the registry that assembles the lexical ones for a backend.

A backend factory returns the lanes it could build and, for those it
could not (server unreachable, index not synced), the reason — a lane that
cannot reach its backend is dropped and reported, never faked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scix_core.config import Config
from scix_core.errors import BackendUnavailableError, UnknownNameError
from scix_core.search.lanes.base import Lane, LaneRequest, LaneTimeout
from scix_core.search.lanes.bm25 import Bm25Lane
from scix_core.search.lanes.fts5 import Fts5Lane
from scix_core.search.lanes.postgres import PostgresBm25Lane, PostgresLane
from scix_core.stores import postgres as pg_store
from scix_core.stores.papers import PaperStore, connect
from scix_core.stores.terms import TermIndex


@dataclass
class LaneSet:
    lanes: list[Lane] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # lane name -> why
    notes: list[str] = field(default_factory=list)  # a documented degradation (e.g. a fallback engine)


def _lane_names(with_body: bool) -> list[str]:
    return ["lexical", "body"] if with_body else ["lexical"]


def sqlite_lanes(cfg: Config, build_dir: Path, index: str, with_body: bool) -> LaneSet:
    s = cfg.search
    path = build_dir / "papers.sqlite"
    out = LaneSet(
        [
            Fts5Lane(
                connect(path, readonly=True),
                "lexical",
                "papers_fts",
                (s.title_weight, s.abstract_weight),
                s.lexical_mode,
                s.lane_timeout_ms,
            )
        ]
    )
    if with_body:
        out.lanes.append(_fts5_body(cfg, path))
    return out


def _fts5_body(cfg: Config, path: Path) -> Lane:
    return Fts5Lane(
        connect(path, readonly=True),
        "body",
        "body_fts",
        (1.0,),
        cfg.search.lexical_mode,
        cfg.search.lane_timeout_ms,
    )


def bm25_lanes(cfg: Config, build_dir: Path, index: str, with_body: bool) -> LaneSet:
    """Title/abstract from the term matrix (Lucene BM25, :mod:`~scix_core.search.lanes.bm25`); the body lane
    stays FTS5."""

    s = cfg.search
    if not (build_dir / "terms").is_dir():  # built before the term matrix: FTS5 answers, and says so
        out = sqlite_lanes(cfg, build_dir, index, with_body)
        out.notes.append(
            f"index {index!r} was built before the term matrix: the lexical lane ran on FTS5; "
            "re-run `scix ingest` to build it"
        )
        return out
    out = LaneSet()
    try:
        terms = TermIndex(build_dir / "terms")
        out.lanes.append(
            Bm25Lane(
                terms,
                connect(build_dir / "papers.sqlite", readonly=True),
                "lexical",
                s.lexical_mode,
                s.bm25_k1,
                s.bm25_b,
            )
        )
    except BackendUnavailableError as exc:
        out.unavailable["lexical"] = exc.describe()
    if with_body:
        out.lanes.append(_fts5_body(cfg, build_dir / "papers.sqlite"))
    return out


def postgres_lanes(cfg: Config, build_dir: Path, index: str, with_body: bool) -> LaneSet:
    s, names = cfg.search, _lane_names(with_body)
    try:
        conns = [pg_store.connect(cfg.postgres.dsn, cfg.postgres.connect_timeout_s) for _ in names]
    except BackendUnavailableError as exc:
        return LaneSet(unavailable={n: exc.describe() for n in names})
    store = PaperStore(build_dir / "papers.sqlite")
    key = store.meta().get("build_key")
    store.close()
    schema = pg_store.schema_name(index)
    if pg_store.synced_build_key(conns[0], schema) != key:
        for c in conns:
            c.close()
        why = (
            f"index_not_synced: index {index!r} is not synced to PostgreSQL (or is stale); "
            "run `scix ingest ... --backend postgres`"
        )
        return LaneSet(unavailable={n: why for n in names})
    fields = {"lexical": "title_abstract", "body": "body"}

    def reconnect():
        return pg_store.connect(cfg.postgres.dsn, cfg.postgres.connect_timeout_s)

    ranking = cfg.postgres.ranking
    if ranking not in POSTGRES_RANKINGS:
        raise UnknownNameError("PostgreSQL ranking", ranking, POSTGRES_RANKINGS)
    meta, out = pg_store.synced_meta(conns[0], schema), LaneSet()
    if ranking == "bm25" and "terms" not in meta:  # synced from a build without the term matrix
        out.notes.append(
            f"index {index!r} has no term matrix in PostgreSQL: the lexical lane ranked by ts_rank_cd; "
            "re-run `scix ingest ... --backend postgres` to mirror it"
        )
        ranking = "ts_rank_cd"
    for c, n in zip(conns, names):
        if n == "lexical" and ranking == "bm25":
            out.lanes.append(
                PostgresBm25Lane(
                    c,
                    schema,
                    int(meta["papers"]),
                    n,
                    s.lexical_mode,
                    s.bm25_k1,
                    s.bm25_b,
                    s.lane_timeout_ms,
                    reconnect,
                    float(meta.get("avg_len", 0.0)),
                )
            )
        else:
            out.lanes.append(
                PostgresLane(
                    c, schema, n, fields[n], s.lexical_mode, s.ts_config, s.lane_timeout_ms, reconnect
                )
            )
    return out


POSTGRES_RANKINGS = ("bm25", "ts_rank_cd")


LEXICAL_BACKENDS: dict[str, Callable[[Config, Path, str, bool], LaneSet]] = {
    "sqlite": sqlite_lanes,
    "postgres": postgres_lanes,
    "bm25": bm25_lanes,
}


def lexical_lanes(cfg: Config, build_dir: Path, index: str, with_body: bool) -> LaneSet:
    backend = cfg.search.lexical_backend
    if backend not in LEXICAL_BACKENDS:
        raise UnknownNameError("lexical backend", backend, list(LEXICAL_BACKENDS))
    return LEXICAL_BACKENDS[backend](cfg, build_dir, index, with_body)


__all__ = ["LEXICAL_BACKENDS", "Lane", "LaneRequest", "LaneSet", "LaneTimeout", "lexical_lanes"]
