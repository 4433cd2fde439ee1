"""One query string -> a :class:`SearchResult` whose every step can be seen.

Stages, in order: (optionally) lift fielded terms into filters and apply the
broad-query guard; prepare the query; encode it for the dense lane while the
(optional) rewrite runs and the lexical lanes — title/abstract, body, alias
and sparse lanes — search; the dense lane once the vector is ready;
Reciprocal Rank Fusion of the lanes that answered; the post-fusion stages
(rerank, boosts), each ``Ranking -> Ranking``; cutoff; hydrate titles. Each
lane runs isolated — an error or a timeout drops that lane, lists it under
``metadata["dropped_lanes"]`` with the reason, and the query is still
answered by the others. ``semantic`` with no usable dense lane raises
:class:`VectorIndexUnavailableError`; ``hybrid`` without one runs
lexical-only, logs a warning and says so in the metadata.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from scix_core.config import Config, load_config
from scix_core.embeddings import query_embedding, shared_encoder
from scix_core.errors import (
    BackendUnavailableError,
    QueryError,
    ScixError,
    UnknownNameError,
    VectorIndexUnavailableError,
)
from scix_core.search import knobs
from scix_core.search.community import CitationCommunities
from scix_core.search.fielded import merge_filters, parse_fielded
from scix_core.search.filters import SearchFilters
from scix_core.search.fusion import fusion_step
from scix_core.search.guard import check_broad
from scix_core.search.lanes import Lane, LaneRequest, lexical_lanes
from scix_core.search.lanes.dense import DenseLane
from scix_core.search.lanes.sparse import SparseLane
from scix_core.search.options import MAX_ALIAS_LANES, SearchOptions, reranks
from scix_core.search.query import prepare
from scix_core.search.result import Hit, LaneScore, SearchResult
from scix_core.search.rewrite import alias_table, get_rewriter, skip_reason
from scix_core.search.stages.base import StageBypassed, StageContext
from scix_core.search.stages.boosts import BoostStage
from scix_core.search.stages.rerank import CrossEncoderReranker, reranker_path
from scix_core.stores.papers import PaperStore, connect
from scix_core.types import Ranking
from scix_core.vectors import open_reader, release_reader
from scix_core.vectors.sparse import open_sparse_reader
from scix_core.workspace import Workspace, read_json

log = logging.getLogger(__name__)

MODES = ("hybrid", "keyword", "semantic")
MAX_LIMIT = 1000
WARM_QUERY_TOKENS = 64  # Searcher.warm(shapes=True): query lengths run once before a server's first request
LANE_ORDER = ("lexical", "body", "alias_1", "alias_2", "alias_3", "sparse", "dense")  # fusion input order


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
        self.lease = Workspace(cfg.home).lease_build(
            index
        )  # this build stays on disk while the searcher lives
        self.build_dir = self.lease.path
        self.manifest = read_json(self.build_dir / "manifest.json")
        self.store = PaperStore(self.build_dir / "papers.sqlite")
        self.has_body = self.store.counts()["with_body"] > 0
        lanes = lexical_lanes(cfg, self.build_dir, index, cfg.search.body and self.has_body)
        self.lexical: list[Lane] = lanes.lanes
        self.unavailable: dict[str, str] = dict(lanes.unavailable)
        self.lane_notes: tuple[str, ...] = tuple(lanes.notes)
        self.dense_notes: tuple[str, ...] = ()
        self.dense, self.encoder = self._dense()
        self.sparse, self.sparse_unavailable = self._sparse()
        self.boost_stage = BoostStage(self.store)
        self.communities = CitationCommunities(self.store)
        self._alias_lanes: dict[int, Lane | None] = {}
        self._pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix=f"scix-{index}")
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()

    def _dense(self):
        if not self.manifest.get("vectors"):
            self.unavailable["dense"] = "index built without vectors (ingested with --no-embed)"
            return None, None

        try:
            vectors = replace(
                self.config.vectors,
                backend=self.manifest.get("vector_backend", self.config.vectors.backend),
                url=self.manifest.get("vector_url") or self.config.vectors.url,
            )
            store = open_reader(vectors, self.build_dir, self.index)
            self._reader = vectors
        except ScixError as exc:
            self.unavailable["dense"] = _reason(exc)
            return None, None
        # queries must be encoded by the model the corpus was encoded with, whatever the config says now (or
        # by a query encoder trained against its vectors: embedding.query_model)
        emb = query_embedding(self.config.embedding, self.manifest, self.config.home)
        encoder = shared_encoder(emb, self.config.home)
        built = self.manifest.get("model_slug")
        own = not self.config.embedding.query_model
        if built and own and built != encoder.slug and emb.backend != "torch":
            # e.g. an int8 index from an earlier (unfused) export: close, not the same space — say so on every
            # query
            self.dense_notes = (
                (
                    f"dense: the index's vectors are {built}, queries are encoded by {encoder.slug}; "
                    f"`scix ingest --index {self.index} --force` re-encodes the corpus to match"
                ),
            )
        return DenseLane(
            store, connect(self.build_dir / "papers.sqlite", readonly=True), passages=self._passages(vectors)
        ), encoder

    def _passages(self, vectors):
        """The passage vectors' store when the index has them and ``search.passages`` is on; a store that
        cannot be opened leaves the lane on the papers' own vectors, with a note on every query."""

        if not (self.manifest.get("passages") and self.config.search.passages):
            return None
        try:
            store = open_reader(vectors, self.build_dir, self.index, part="passages")
        except ScixError as exc:
            self.dense_notes += (
                f"dense: passage vectors unavailable, papers' own vectors only: {_reason(exc)}",
            )
            return None
        self._passage_reader = vectors
        return store

    def _sparse(self):
        if not self.manifest.get("sparse"):
            return None, "index built without sparse vectors: re-run `scix ingest ... --sparse`"

        try:
            store = open_sparse_reader(self.build_dir / "sparse", self.manifest.get("sparse_avg_len"))
        except ScixError as exc:
            return None, _reason(exc)
        return SparseLane(store, connect(self.build_dir / "papers.sqlite", readonly=True)), ""

    def loaded_rerankers(self) -> list[str]:
        """Model paths of the cross-encoders this process has loaded (any searcher's: they are shared)."""
        with _SHARED_LOCK:
            return sorted({r.model_path for r in _RERANKERS.values() if r.loaded})

    @property
    def lane_names(self) -> list[str]:
        return (
            [lane.name for lane in self.lexical] + (["dense"] if self.dense else []) + list(self.unavailable)
        )

    def warm(self, shapes: bool = False) -> None:
        """Load the query encoder now rather than inside the first query's timing. ``shapes`` (a server):
        run a query of every length up to ``WARM_QUERY_TOKENS`` tokens once too — an exported model's first
        query of a new length took twice as long as the next (5.5 against 2.4 ms on the ONNX/OpenVINO
        backends), and a fresh worker's first seconds of searches were all new lengths."""
        if self.encoder is not None:
            try:
                self.encoder.encode_query("warm up")
                for n in range(1, WARM_QUERY_TOKENS + 1) if shapes else ():
                    self.encoder.encode([" ".join(["paper"] * n)])
            except ScixError as exc:
                self.unavailable["dense"] = _reason(exc)
                self.dense = None

    def close(self, keep_vectors: bool | None = None) -> None:
        """Idempotent. The shared vector reader is closed too once no one in this process uses it and the
        build is superseded — or whatever the build, with ``keep_vectors=False`` (a long job done searching
        frees an embedded shard, which one process at a time can open, for other processes)."""

        self._pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()
        readers = [
            (reader, part)
            for reader, part in (
                (getattr(self, "_reader", None), "vectors"),
                (getattr(self, "_passage_reader", None), "passages"),
            )
            if reader is not None
        ]
        self._reader = self._passage_reader = None
        if readers:
            keep = (
                Workspace(self.config.home).is_current(self.index, self.build_dir)
                if keep_vectors is None
                else keep_vectors
            )
            for reader, part in readers:
                release_reader(reader, self.build_dir, self.index, keep=keep, part=part)
        self.lease.release()

    def search(
        self,
        query: str,
        mode: str = "hybrid",
        filters: SearchFilters | Mapping | None = None,
        limit: int | None = None,
        *,
        rerank: str | None = None,
        boosts: bool | None = None,
        rewrite: str | None = None,
        lanes: str | list[str] | None = None,
    ) -> SearchResult:
        """One query -> ranked papers. ``rerank``/``boosts``/``rewrite``/``lanes`` override the config per
        call."""
        t0 = time.perf_counter()
        if mode not in MODES:
            raise UnknownNameError("search mode", mode, MODES)
        s = self.config.search
        limit = self._limit(limit)
        opts = SearchOptions.resolve(s, rerank, boosts, rewrite, lanes)
        # a bad fusion setting fails before any lane runs
        fusion = fusion_step(s.fusion, s.rrf_k, s.convex_alpha, s.convex_normalise)
        flt, text, meta = SearchFilters.parse(filters), query, {}
        if "fielded" in opts.lanes and isinstance(query, str):
            fielded = parse_fielded(query)
            flt, text, meta["fielded"] = (
                merge_filters(flt, fielded.filters),
                fielded.text,
                list(fielded.fields),
            )
        prepared, prep_ms = _timed(prepare, text, s.max_query_chars, s.max_query_tokens)
        prepared = replace(prepared, original=query)
        if s.broad_query_guard:
            check_broad(prepared, flt)
        reranker = self._reranker(opts.rerank)
        rerank_why = (
            reranker.check(limit) if reranker else "off"
        )  # refuses a window <= limit before any lane runs
        request = LaneRequest(prepared, flt, knobs.read())
        timing, dropped = {"prepare": prep_ms}, {}
        rankings = self._retrieve(mode, request, max(s.depth, limit), opts, timing, dropped, meta)

        lane_order = [n for n in LANE_ORDER if n in rankings]
        fused, timing["fusion"] = _timed(fusion.fuse, {n: rankings[n] for n in lane_order})
        context = StageContext(prepared, limit, self.store, fusion.max_score(lane_order))
        stages = {"rerank": rerank_why or "ran", "boosts": "ran" if opts.boosts else "off"}
        final = fused
        for stage in [
            st
            for st in (reranker if rerank_why is None else None, self.boost_stage if opts.boosts else None)
            if st is not None
        ]:
            try:
                out, timing[stage.name] = _timed(stage.run, final, context)
            except StageBypassed as why:
                stages[stage.name] = str(why)
                continue
            rankings[stage.name] = final = out
        hits, timing["hydrate"] = _timed(
            self._hits, final.top(limit), fused, {n: rankings[n] for n in lane_order}
        )
        timing["total"] = (time.perf_counter() - t0) * 1000
        concurrent = [n for n in ("rewrite", "encode", *lane_order) if n in timing and n != "dense"]
        metadata = {
            "index": self.index,
            "mode": mode,
            "lexical_backend": s.lexical_backend if mode != "semantic" else None,
            "lanes_run": lane_order,
            "dropped_lanes": dropped,
            "lanes_skipped": self._skipped(mode, opts, meta),
            "fusion": s.fusion,
            "rrf_k": s.rrf_k,
            "convex_alpha": s.convex_alpha if s.fusion == "convex" else None,
            "convex_normalise": s.convex_normalise if s.fusion == "convex" else None,
            "depth": max(s.depth, limit),
            "limit": limit,
            "filters": flt.to_dict(),
            "knobs": request.knobs.to_dict(),
            "lexical_mode": s.lexical_mode,
            "query_text": prepared.text,
            "lexical_terms": list(meta.get("lexical_terms", prepared.tokens)),
            "notes": [
                *prepared.notes,
                *(self.lane_notes if mode != "semantic" else ()),
                *(self.dense_notes if mode != "keyword" else ()),
            ],
            "degraded": bool(dropped),
            "reranked": "rerank" in rankings,
            "rerank_reason": opts.rerank if "rerank" in rankings else stages["rerank"],
            "stages": stages,
            "rewrite": meta.get("rewrite", {"mode": "off", "status": "off", "text": None}),
            "optional_lanes": sorted(opts.lanes),
            "fielded": meta.get("fielded", []),
            "aliases": meta.get("aliases", []),
            "overlapped_stages": concurrent if len(concurrent) > 1 else [],
            "dense_passages": bool(self.dense and self.dense.passages is not None and "dense" in rankings),
        }
        return SearchResult(query, hits, len(fused), timing, metadata, {**rankings, "fused": fused})

    def _limit(self, limit: Any) -> int:
        limit = self.config.search.limit if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise QueryError(f"limit must be an integer 1..{MAX_LIMIT}, got {limit!r}")
        return limit

    def community(self, seeds: list[str], limit: int | None = None) -> SearchResult:
        """The seeds' citation community (replaces retrieval and fusion; see
        :mod:`scix_core.search.community`)."""
        t0 = time.perf_counter()
        limit = self._limit(limit)
        (ranking, info), expand_ms = _timed(
            self.communities.expand, list(seeds), limit, self.config.search.community_max
        )
        hits, hydrate_ms = _timed(self._hits, ranking, ranking, {"community": ranking})
        timing = {"community": expand_ms, "hydrate": hydrate_ms, "total": (time.perf_counter() - t0) * 1000}
        metadata = {
            "index": self.index,
            "mode": "community",
            "lanes_run": ["community"],
            "dropped_lanes": {},
            "limit": limit,
            "degraded": False,
            "community": info,
            "algorithm": "louvain + personalised pagerank",
        }
        return SearchResult(
            " ".join(seeds), hits, info["community_size"], timing, metadata, {"community": ranking}
        )

    def _retrieve(
        self,
        mode: str,
        request: LaneRequest,
        depth: int,
        opts: SearchOptions,
        timing: dict,
        dropped: dict,
        meta: dict,
    ) -> dict[str, Ranking]:
        """Encode (and rewrite) concurrently, run every lane isolated, return the rankings that came back."""
        s = self.config.search
        want_lexical, want_dense = mode != "semantic", mode != "keyword"
        futures: dict[str, Future] = {}
        if want_dense and self.dense:
            futures["encode"] = self._pool.submit(_timed, self.encoder.encode_query, request.query.text)
        lexical_request = request
        if want_lexical:
            lexical_request = self._rewrite(request, opts.rewrite, timing, meta)
            meta["lexical_terms"] = lexical_request.query.tokens
            for lane, lane_request in self._lexical_plan(lexical_request, opts, meta):
                futures[lane.name] = self._pool.submit(_timed, lane.search, lane_request, depth)
        rankings: dict[str, Ranking] = {}
        budget = s.lane_timeout_ms / 1000 * 2  # lanes enforce their own timeouts; this catches a hung client
        if "encode" in futures:
            try:
                vector, timing["encode"] = futures.pop("encode").result(timeout=budget)
                rankings["dense"], timing["dense"] = _timed(
                    self.dense.search, replace(request, vector=vector), depth
                )
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
        dropped.update(
            {
                n: why
                for n, why in self.unavailable.items()
                if mode == "hybrid" or (n == "dense") == (mode == "semantic")
            }
        )
        self._check_answerable(mode, rankings, dropped)
        return rankings

    def _rewrite(self, request: LaneRequest, spec: str, timing: dict, meta: dict) -> LaneRequest:
        """The rewritten query for the lexical lanes (runs while the encoder works on the original)."""
        s = self.config.search
        rewriter = get_rewriter(spec, s.alias_file or None, s.rewrite_model, s.rewrite_timeout_s)
        if rewriter is None:
            return request
        info = meta["rewrite"] = {"mode": spec, "status": "", "text": None}
        why = skip_reason(request.query.text)
        if why:
            info["status"] = why
            return request
        try:
            text, timing["rewrite"] = _timed(rewriter.rewrite, request.query.text)
        except Exception as exc:  # noqa: BLE001 — a rewriter failure keeps the query as typed
            info["status"] = f"failed: {_reason(exc)}"
            return request
        info["text"] = text
        info["status"] = "rewritten" if text != request.query.text else "unchanged"
        prepared = prepare(text, s.max_query_chars, s.max_query_tokens)
        return replace(request, query=replace(prepared, original=request.query.original))

    def _lexical_plan(self, request: LaneRequest, opts: SearchOptions, meta: dict):
        yield from ((lane, request) for lane in self.lexical)
        if "alias" in opts.lanes:
            table = alias_table(self.config.search.alias_file or None)
            found = table.find(request.query.text)[:MAX_ALIAS_LANES]
            meta["aliases"] = [
                {"alias": a.alias, "canonical": a.canonical, "lane": f"alias_{i}"}
                for i, a in enumerate(found, start=1)
            ]
            for i, alias in enumerate(found, start=1):
                lane = self._alias_lane(i)
                if lane is not None:
                    text = table.variant(request.query.text, alias, found)
                    prepared = prepare(
                        text, self.config.search.max_query_chars, self.config.search.max_query_tokens
                    )
                    yield lane, replace(request, query=replace(prepared, original=request.query.original))
        if "sparse" in opts.lanes and self.sparse is not None:
            yield self.sparse, request

    def _check_answerable(self, mode: str, rankings: dict, dropped: dict) -> None:
        if mode == "semantic" and "dense" not in rankings:
            raise VectorIndexUnavailableError(
                f"semantic search needs the dense lane of index {self.index!r}: "
                f"{dropped.get('dense', 'not available')}"
            )
        if not rankings:
            raise BackendUnavailableError(f"no lane could answer: {dropped}")
        if mode == "hybrid" and "dense" in dropped:
            self._warn_once("dense", f"hybrid search on {self.index!r} ran lexical-only: {dropped['dense']}")

    def _warn_once(self, key: str, message: str) -> None:
        with self._warn_lock:
            if key not in self._warned:
                self._warned.add(key)
                log.warning(message)

    def _skipped(self, mode: str, opts: SearchOptions, meta: dict) -> dict[str, str]:
        out = {}
        if not self.has_body:
            out["body"] = "no paper in this index has a full text"
        elif not self.config.search.body:
            out["body"] = "disabled (search.body = false)"
        if "alias" in opts.lanes and mode != "semantic" and not meta.get("aliases"):
            out["alias"] = "no alias of the alias table in the query"
        if "sparse" in opts.lanes and self.sparse is None:
            out["sparse"] = self.sparse_unavailable
        return out

    def _hits(self, top: Ranking, fused: Ranking, lanes: dict[str, Ranking]) -> tuple[Hit, ...]:
        titles = self.store.titles(top.ids)  # only titles: no need to decode whole papers on the hot path
        fused_scores = fused.scores()
        ranks = {n: r.ranks() for n, r in lanes.items()}
        scores = {n: r.scores() for n, r in lanes.items()}
        return tuple(
            Hit(
                item.paper_id,
                titles[item.paper_id][0] if item.paper_id in titles else "",
                item.score,
                fused_scores.get(item.paper_id, 0.0),
                {
                    n: LaneScore(ranks[n][item.paper_id], scores[n][item.paper_id])
                    for n in lanes
                    if item.paper_id in ranks[n]
                },
                {k: v for k, v in item.detail if k != "base"},
            )
            for item in top.items
        )

    def _reranker(self, spec: str):
        if not reranks(spec):
            return None

        path = reranker_path(spec, self.config.home)
        s = self.config.search
        key = (
            str(path),
            s.rerank_window,
            self.config.embedding.device,
            s.rerank_backend,
            s.rerank_max_length,
        )
        with _SHARED_LOCK:
            if key not in _RERANKERS:
                _RERANKERS[key] = CrossEncoderReranker(
                    path,
                    s.rerank_window,
                    max_length=s.rerank_max_length,
                    device=self.config.embedding.device,
                    backend=s.rerank_backend,
                )
            return _RERANKERS[key]

    def _alias_lane(self, i: int) -> Lane | None:
        """The i-th alias lane (its own connection), built on first use; None if it cannot be."""
        with _SHARED_LOCK:
            if i not in self._alias_lanes:
                built = lexical_lanes(self.config, self.build_dir, self.index, with_body=False)
                lane = built.lanes[0] if built.lanes else None
                if lane is not None:
                    lane.name = f"alias_{i}"
                self._alias_lanes[i] = lane
            return self._alias_lanes[i]


_RERANKERS: dict[tuple, object] = {}
_SHARED_LOCK = threading.Lock()
_SEARCHERS: dict[tuple, Searcher] = {}
_SEARCHERS_LOCK = threading.Lock()


def search(
    query: str,
    index: str = "scifact",
    mode: str = "hybrid",
    filters: SearchFilters | Mapping | None = None,
    limit: int | None = None,
    *,
    backend: str | None = None,
    config: Config | None = None,
    **options,
) -> SearchResult:
    """Module-level entry point: a cached :class:`Searcher` per index, backend and config."""
    cfg = config or load_config()
    key = (index, backend or cfg.search.lexical_backend, cfg)
    with _SEARCHERS_LOCK:
        if key not in _SEARCHERS:
            _SEARCHERS[key] = Searcher(index, cfg, backend=backend)
        searcher = _SEARCHERS[key]
    return searcher.search(query, mode, filters, limit, **options)
