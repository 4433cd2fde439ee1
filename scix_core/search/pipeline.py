"""One query string -> a :class:`SearchResult` whose every step can be seen.

Stages, in order: prepare the query; encode it (dense) concurrently with the
lexical lanes; the dense lane once the vector is ready; Reciprocal Rank
Fusion of the lanes that answered; cutoff; hydrate titles. Each lane runs
isolated — an error or a timeout drops that lane, lists it under
``metadata["dropped_lanes"]`` with the reason, and the query is still
answered by the others. ``semantic`` with no usable dense lane raises
:class:`VectorIndexUnavailableError`; ``hybrid`` without one runs
lexical-only, logs a warning and says so in the metadata.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, Callable, Mapping

from scix_core.config import Config, load_config
from scix_core.errors import (BackendUnavailableError, QueryError, ScixError, UnknownNameError,
                              VectorIndexUnavailableError)
from scix_core.fusion import rrf
from scix_core.search import knobs
from scix_core.search.filters import SearchFilters
from scix_core.search.lanes import Lane, LaneRequest, lexical_lanes
from scix_core.search.lanes.dense import DenseLane
from scix_core.search.query import prepare
from scix_core.search.result import Hit, LaneScore, SearchResult
from scix_core.stores.papers import PaperStore, connect
from scix_core.types import Ranking
from scix_core.workspace import Workspace, read_json

log = logging.getLogger(__name__)

MODES = ("hybrid", "keyword", "semantic")
MAX_LIMIT = 1000


def _timed(fn: Callable, *args) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t) * 1000


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ScixError):
        return exc.describe()
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


class Searcher:
    """Search over one built index. Build once, query many times (thread-safe)."""

    def __init__(self, index: str, config: Config | None = None, *, backend: str | None = None):
        cfg = config or load_config()
        if backend:
            cfg = cfg.replace(**{"search.lexical_backend": backend})
        self.config, self.index = cfg, index
        self.build_dir = Workspace(cfg.home).index_dir(index)
        self.manifest = read_json(self.build_dir / "manifest.json")
        self.store = PaperStore(self.build_dir / "papers.sqlite")
        self.has_body = self.store.counts()["with_body"] > 0
        lanes = lexical_lanes(cfg, self.build_dir, index, cfg.search.body and self.has_body)
        self.lexical: list[Lane] = lanes.lanes
        self.unavailable: dict[str, str] = dict(lanes.unavailable)
        self.dense, self.encoder = self._dense()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"scix-{index}")
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()

    def _dense(self):
        if not self.manifest.get("vectors"):
            self.unavailable["dense"] = "index built without vectors (ingested with --no-embed)"
            return None, None
        from scix_core.embeddings import shared_encoder
        from scix_core.vectors import open_reader

        try:
            vectors = replace(self.config.vectors, backend=self.manifest.get("vector_backend", self.config.vectors.backend),
                              url=self.manifest.get("vector_url") or self.config.vectors.url)
            store = open_reader(vectors, self.build_dir, self.index)
        except ScixError as exc:
            self.unavailable["dense"] = _reason(exc)
            return None, None
        # queries must be encoded by the model the corpus was encoded with, whatever the config says now
        encoder = shared_encoder(replace(self.config.embedding, model=self.manifest["model"]))
        return DenseLane(store, connect(self.build_dir / "papers.sqlite", readonly=True)), encoder

    @property
    def lane_names(self) -> list[str]:
        return [lane.name for lane in self.lexical] + (["dense"] if self.dense else []) + list(self.unavailable)

    def warm(self) -> None:
        """Load the query encoder now rather than inside the first query's timing."""
        if self.encoder is not None:
            try:
                self.encoder.encode_query("warm up")
            except ScixError as exc:
                self.unavailable["dense"] = _reason(exc)
                self.dense = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def search(self, query: str, mode: str = "hybrid", filters: SearchFilters | Mapping | None = None,
               limit: int | None = None) -> SearchResult:
        t0 = time.perf_counter()
        if mode not in MODES:
            raise UnknownNameError("search mode", mode, MODES)
        s = self.config.search
        limit = s.limit if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise QueryError(f"limit must be an integer 1..{MAX_LIMIT}, got {limit!r}")
        flt = SearchFilters.parse(filters)
        prepared, prep_ms = _timed(prepare, query, s.max_query_chars, s.max_query_tokens)
        request = LaneRequest(prepared, flt, knobs.read())
        depth = max(s.depth, limit)
        timing = {"prepare": prep_ms}
        dropped: dict[str, str] = {}

        want_lexical, want_dense = mode != "semantic", mode != "keyword"
        futures: dict[str, Future] = {}
        if want_dense and self.dense:
            futures["encode"] = self._pool.submit(_timed, self.encoder.encode_query, prepared.text)
        if want_lexical:
            for lane in self.lexical:
                futures[lane.name] = self._pool.submit(_timed, lane.search, request, depth)
        rankings: dict[str, Ranking] = {}
        budget = s.lane_timeout_ms / 1000 * 2  # lanes enforce their own timeouts; this catches a hung client
        if "encode" in futures:
            try:
                vector, timing["encode"] = futures.pop("encode").result(timeout=budget)
                rankings["dense"], timing["dense"] = _timed(self.dense.search, replace(request, vector=vector), depth)
            except FutureTimeout:
                dropped["dense"] = f"lane_timeout: query encoding took longer than {budget:g} s"
            except Exception as exc:  # noqa: BLE001 — isolation: any lane failure drops only that lane
                dropped["dense"] = _reason(exc)
        for name, future in futures.items():
            try:
                rankings[name], timing[name] = future.result(timeout=budget)
            except FutureTimeout:
                dropped[name] = f"lane_timeout: no answer within {budget:g} s"
            except Exception as exc:  # noqa: BLE001
                dropped[name] = _reason(exc)
        # lanes this mode would have run but that could not be built (no vectors, server down)
        dropped.update({n: why for n, why in self.unavailable.items()
                        if mode == "hybrid" or (n == "dense") == (mode == "semantic")})
        self._check_answerable(mode, rankings, dropped)

        lane_order = [n for n in ("lexical", "body", "dense") if n in rankings]
        fused, timing["fusion"] = _timed(rrf, [rankings[n] for n in lane_order], s.rrf_k, "fused")
        top = fused.top(limit)
        (hits, hydrate_ms) = _timed(self._hits, top, {n: rankings[n] for n in lane_order})
        timing["hydrate"] = hydrate_ms
        timing["total"] = (time.perf_counter() - t0) * 1000
        metadata = {
            "index": self.index, "mode": mode, "lexical_backend": s.lexical_backend if want_lexical else None,
            "lanes_run": lane_order, "dropped_lanes": dropped, "lanes_skipped": self._skipped(),
            "rrf_k": s.rrf_k, "depth": depth, "limit": limit, "filters": flt.to_dict(), "knobs": request.knobs.to_dict(),
            "lexical_mode": s.lexical_mode, "query_text": prepared.text, "lexical_terms": list(prepared.tokens),
            "notes": list(prepared.notes), "degraded": bool(dropped), "reranked": False, "rerank_reason": "off",
            "overlapped_stages": [n for n in ("encode", *(lane.name for lane in self.lexical)) if n in timing]
            if want_dense and want_lexical else [],
        }
        return SearchResult(query, hits, len(fused), timing, metadata, {**rankings, "fused": fused})

    def _check_answerable(self, mode: str, rankings: dict, dropped: dict) -> None:
        if mode == "semantic" and "dense" not in rankings:
            raise VectorIndexUnavailableError(
                f"semantic search needs the dense lane of index {self.index!r}: {dropped.get('dense', 'not available')}")
        if not rankings:
            raise BackendUnavailableError(f"no lane could answer: {dropped}")
        if mode == "hybrid" and "dense" in dropped:
            self._warn_once("dense", f"hybrid search on {self.index!r} ran lexical-only: {dropped['dense']}")

    def _warn_once(self, key: str, message: str) -> None:
        with self._warn_lock:
            if key not in self._warned:
                self._warned.add(key)
                log.warning(message)

    def _skipped(self) -> dict[str, str]:
        if not self.has_body:
            return {"body": "no paper in this index has a full text"}
        return {} if self.config.search.body else {"body": "disabled (search.body = false)"}

    def _hits(self, top: Ranking, lanes: dict[str, Ranking]) -> tuple[Hit, ...]:
        papers = self.store.get(top.ids)
        ranks = {n: r.ranks() for n, r in lanes.items()}
        scores = {n: r.scores() for n, r in lanes.items()}
        return tuple(
            Hit(item.paper_id, papers[item.paper_id].title if item.paper_id in papers else "", item.score, item.score,
                {n: LaneScore(ranks[n][item.paper_id], scores[n][item.paper_id]) for n in lanes if item.paper_id in ranks[n]})
            for item in top.items)


_SEARCHERS: dict[tuple, Searcher] = {}
_SEARCHERS_LOCK = threading.Lock()


def search(query: str, index: str = "scifact", mode: str = "hybrid", filters: SearchFilters | Mapping | None = None,
           limit: int | None = None, *, backend: str | None = None, config: Config | None = None) -> SearchResult:
    """Module-level entry point: a cached :class:`Searcher` per index, backend and config."""
    cfg = config or load_config()
    key = (index, backend or cfg.search.lexical_backend, cfg)
    with _SEARCHERS_LOCK:
        if key not in _SEARCHERS:
            _SEARCHERS[key] = Searcher(index, cfg, backend=backend)
        searcher = _SEARCHERS[key]
    return searcher.search(query, mode, filters, limit)
