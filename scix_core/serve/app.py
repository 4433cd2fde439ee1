"""The HTTP API of one index: search, recommendations, users, interactions, health and metrics.

``create_app(index, config)`` builds a FastAPI application over one :class:`~scix_core.search.Searcher`
and one :class:`~scix_core.recommend.Recommender` (both thread-safe; FastAPI runs the handlers in its
thread pool). ``scix serve`` runs it under uvicorn. The JSON bodies are the command line's ``--json``
outputs. Errors are typed JSON, never a traceback (:mod:`scix_core.serve.errors`); with
``SCIX_API_TOKEN`` set, every write needs ``Authorization: Bearer <token>``.

``scix serve --workers N`` runs N such processes on one port (``from_environment``): the embedded
vector shard opens in one process at a time, so the others read private copies of it
(:mod:`scix_core.vectors.replica`); user state (SQLite in WAL mode, or PostgreSQL) is shared, and each
worker's co-save model follows the saves any of them records (docs/design.md#api).

Each worker follows its index: every ``FOLLOW_S`` seconds it looks whether ``current`` names another build
(a rebuild or an append, ``scix ingest --append``) and, once that build has been current for
``FOLLOW_SETTLE_S`` (or the worker's own is ``FOLLOW_MAX_LAG_S`` old), opens a searcher and a recommender on
it in the background and swaps them in between requests; a request already running finishes on the build
it started on, whose searcher and recommender are closed ``RETIRE_S`` seconds later (their leases keep the
old build on disk until then). Opening a build costs a worker about half a second (a second worker copies
the vector shard): following every build of a burst of appends put a second's tail on the requests, so a
burst is followed once, at its end.
"""

from __future__ import annotations

import datetime as dt
import gc
import hmac
import logging
import os
import sys
import threading
import time
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import BackgroundTasks, Depends, FastAPI, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from scix_core import __version__
from scix_core.config import TUNED, Config, load_config
from scix_core.errors import ScixError
from scix_core.recommend import Recommender
from scix_core.recommend.feed import seen_at
from scix_core.search import MODES, Searcher
from scix_core.serve.errors import ApiError, install_handlers
from scix_core.serve.front import INDEX_ENV, TUNED_ENV
from scix_core.serve.metrics import Metrics
from scix_core.serve.middleware import LimitsAndMetrics
from scix_core.serve.responses import Json
from scix_core.vectors import close_readers
from scix_core.workspace import Workspace

log = logging.getLogger(__name__)
#: a query longer than this many times ``search.max_query_chars`` is refused with 413 (below it, the
#: search caps the text and notes it)
QUERY_SLACK = 10
TOKEN_ENV = "SCIX_API_TOKEN"
#: ``recommend.community_refresh_s`` when the configuration leaves it unset: other users' saves join a
#: server's co-save model within this many seconds (the asking user's own saves count at once)
SERVE_COMMUNITY_REFRESH_S = 5.0
#: ``recommend.reuse_s`` when the configuration leaves it unset: a user asking again within this many
#: seconds, with no new interaction and the same community model, gets the same list without recomputing it
SERVE_REUSE_S = 30.0
#: seconds between the interpreter's requests that the thread holding its lock let another run (Python's
#: default 0.005): short, so a request back from native code is not kept waiting behind another's Python
SWITCH_INTERVAL_S = 0.0005
FOLLOW_S = 2.0  # how often a worker looks for a new build of its index
FOLLOW_SETTLE_S = 5.0  # a new build is followed once it has been current this long ...
FOLLOW_MAX_LAG_S = 60.0  # ... or once the build served has been superseded this long (appends in a row)
RETIRE_S = 60.0  # how long a superseded build's searcher and recommender stay open for requests still on them


class NewUser(BaseModel):
    user: str = Field(min_length=1, max_length=200)
    categories: list[str] = Field(default=[], max_length=50)  # pydantic copies it per request


class NewInteraction(BaseModel):
    user: str = Field(min_length=1, max_length=200)
    paper: str = Field(min_length=1, max_length=200)
    kind: Literal["save", "dismiss", "view"]
    at: str | None = Field(default=None, max_length=64, description="ISO-8601 time (default: now)")


class Services:
    """What the handlers share: the searcher, the recommender, the metrics and the last rerank outcome."""

    def __init__(self, index: str, config: Config):
        self.index, self.config = index, config
        self.searcher = Searcher(index, config)
        self.recommender = Recommender(index, config)
        self.metrics = Metrics()
        if self.searcher.encoder is not None:
            self.metrics.query_encoder(self.searcher.encoder.query_batches)
        if self.recommender.reused is not None:
            self.metrics.reused_lists(lambda: self.recommender.reused.reused)
        self.started = time.time()
        self._lock = threading.Lock()
        self.last_rerank: dict = {}
        self._variants: dict[str, Searcher] = {}
        self.switches = 0  # builds followed since the start
        self.follow_error = ""  # why the last attempt to follow a new build failed (it is tried again)
        self._stop = threading.Event()
        self._retired: list[threading.Timer] = []
        self._superseded: float | None = None  # when the build served was first seen superseded

    def follow(self, warm: bool = True, settle_s: float = 0.0) -> bool:
        """Serve the index's current build if it is not the one served; True when it switched. The new
        searcher and recommender are opened (and warmed) before the swap, so no request waits for them.
        ``settle_s``: only a build current for that long (or one superseding the served one for
        ``FOLLOW_MAX_LAG_S``)."""
        ws = Workspace(self.config.home)
        if ws.is_current(self.index, self.searcher.build_dir):
            self._superseded = None
            return False
        now = time.time()
        self._superseded = self._superseded or now
        if (
            settle_s > 0
            and now - ws.changed_at(self.index) < settle_s
            and now - self._superseded < FOLLOW_MAX_LAG_S
        ):
            return False
        searcher = Searcher(self.index, self.config)
        try:
            recommender = Recommender(self.index, self.config)
        except BaseException:
            searcher.close()
            raise
        if warm:  # the query encoder is the process's shared one, its shapes warmed at the start
            searcher.warm()
            recommender.warm(serving=True)
        if self.searcher.encoder is None and searcher.encoder is not None:
            self.metrics.query_encoder(searcher.encoder.query_batches)
        with self._lock:
            if self._stop.is_set():  # the server closed while the build was being opened
                _close_all((recommender, searcher))
                return False
            old = (self.recommender, self.searcher, *self._variants.values())
            self.searcher, self.recommender, self._variants = searcher, recommender, {}
            self.switches += 1
            self._superseded = None
            timer = threading.Timer(RETIRE_S, _close_all, args=(old,))
            timer.daemon = True
            timer.start()
            self._retired = [t for t in self._retired if t.is_alive()] + [timer]
        log.info("now serving build %s of index %s", searcher.build_dir.name, self.index)
        return True

    def follow_builds(self, every_s: float = FOLLOW_S) -> threading.Thread:
        """A daemon thread that calls :meth:`follow` every ``every_s`` seconds until :meth:`close`."""

        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.follow(settle_s=FOLLOW_SETTLE_S)
                    self.follow_error = ""
                except Exception as exc:  # the old build keeps serving; the next round tries again
                    self.follow_error = f"{exc.__class__.__name__}: {exc}"
                    log.warning("could not follow a new build of %s: %s", self.index, self.follow_error)

        thread = threading.Thread(target=loop, name=f"scix-follow-{self.index}", daemon=True)
        thread.start()
        return thread

    def searcher_for(self, lexical_mode: str | None) -> Searcher:
        """The searcher, or one of the same index with another lexical mode (built once per mode)."""
        if lexical_mode is None or lexical_mode == self.config.search.lexical_mode:
            return self.searcher
        with self._lock:
            if lexical_mode not in self._variants:
                cfg = self.config.replace(**{"search.lexical_mode": lexical_mode})
                self._variants[lexical_mode] = Searcher(self.index, cfg)
            return self._variants[lexical_mode]

    def note_rerank(self, metadata: dict) -> None:
        with self._lock:
            self.last_rerank = {k: metadata.get(k) for k in ("reranked", "rerank_reason")}

    def close(self) -> None:
        with self._lock:
            self._stop.set()
            retired, self._retired = self._retired, []
        for timer in retired:  # superseded builds still open: closed now
            if timer.is_alive():
                timer.cancel()
                timer.function(*timer.args)
        _close_all((self.recommender, *self._variants.values(), self.searcher))


def _close_all(parts) -> None:
    for part in parts:
        part.close()


def _writer(request: Request) -> None:
    """Writes need the bearer token when ``SCIX_API_TOKEN`` is set."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        return
    given = request.headers.get("authorization", "")
    if not (given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode())):
        raise ApiError(401, "unauthorized", "this write needs 'Authorization: Bearer <SCIX_API_TOKEN>'")


def create_app(index: str, config: Config | None = None) -> FastAPI:
    cfg = config or load_config()
    if cfg.recommend.community_refresh_s is None:
        cfg = cfg.replace(**{"recommend.community_refresh_s": SERVE_COMMUNITY_REFRESH_S})
    if cfg.recommend.reuse_s is None:
        cfg = cfg.replace(**{"recommend.reuse_s": SERVE_REUSE_S})
    services = Services(index, cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # the model loads (and exports, in a fresh workspace) before the first request
        services.searcher.warm(shapes=True)
        # the community's co-save model is fitted, and every library's interests placed, before the first
        # request (a fresh worker's first seconds of recommendations clustered neighbours' libraries)
        services.recommender.warm(serving=True)
        # what the warm-up built lives as long as the worker: out of the collector's reach, a full collection
        # no longer walks it while every request of the worker waits (42 ms each on citeulike-a); what of it
        # is dropped later is still freed by reference counting (only a cycle among it would stay)
        gc.freeze()
        services.follow_builds()
        # a thread back from native code (the query encoder, a vector search, SQLite) waits for the
        # interpreter lock until the thread holding it is asked to let go: every 5 ms by default, so a
        # query's encoding took 14 ms beside a Tier-1 recommendation's Python instead of 3 (docs/history.md)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        yield
        sys.setswitchinterval(switch)
        services.close()
        close_readers()  # the process is ending: a worker's private shard copy goes now (vectors.replica)

    app = FastAPI(
        lifespan=lifespan,
        default_response_class=Json,
        title=f"scix_core: {index}",
        version=__version__,
        description="Search and recommendations of one scix_core index (docs/api.md).",
    )
    app.state.services = services
    install_handlers(app, services.metrics)
    app.add_middleware(LimitsAndMetrics, metrics=services.metrics)

    @app.get("/search", summary="one query -> ranked papers, every lane's rank and every stage's timing")
    def search(
        q: str = Query(..., description="the query text"),
        mode: str = Query("hybrid", description=" | ".join(MODES)),
        limit: int = Query(10, ge=1, le=100),
        year: str | None = Query(None, description="a year or a range, e.g. 2019-2021"),
        # None, not default_factory=list: pydantic inspects a default factory's signature on every request
        category: list[str] | None = Query(None),
        author: list[str] | None = Query(None),
        since: str | None = Query(None, description="only papers listed on or after this day, YYYY-MM-DD"),
        lexical_mode: Literal["auto", "and", "or"] | None = None,
        rerank: str | None = None,
        boosts: bool | None = None,
    ):
        if len(q) > QUERY_SLACK * cfg.search.max_query_chars:
            raise ApiError(
                413, "too_large", f"query over {QUERY_SLACK * cfg.search.max_query_chars} characters"
            )
        if mode not in MODES:
            raise ApiError(422, "bad_parameters", f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        searcher = services.searcher_for(lexical_mode)
        filters = {"year": year, "categories": category or None, "authors": author or None, "since": since}
        result = searcher.search(q, mode, filters, limit, rerank=rerank, boosts=boosts)
        services.metrics.stages(result.timing_ms)
        services.note_rerank(result.metadata)
        return Json(result.to_dict())

    @app.get(
        "/api/recommendations", summary="one user -> papers: tier, reason, next tier, items with provenance"
    )
    def recommendations(
        after: BackgroundTasks,
        user: str = Query(..., min_length=1, max_length=200),
        limit: int = Query(10, ge=1, le=100),
    ):
        # Tier 1's medoids and the served list's log row are written once the answer has gone out: derived
        # rows whose commit does not wait for the disk anyway (recommend.state); on PostgreSQL the log's
        # round trip alone was a tenth of the request
        result, finish = services.recommender.serve(user, limit)
        after.add_task(_finish, finish, dt.datetime.now(dt.UTC))
        return Json(result.to_dict())

    @app.get(
        "/api/feed",
        summary="one user -> the papers of a window (listed since a day, or since the last visit), ranked",
    )
    def feed(
        after: BackgroundTasks,
        user: str = Query(..., min_length=1, max_length=200),
        since: str | None = Query(
            None, description="YYYY-MM-DD, or last-visit (default: the index's newest listing day)"
        ),
        limit: int = Query(10, ge=1, le=100),
    ):
        result = services.recommender.feed(user, since, limit, visit=False)
        # the visit (what since=last-visit opens the next window after) written once the answer has gone out
        after.add_task(_finish, lambda when: services.recommender.visited(user, when), seen_at(result.window))
        return Json(result.to_dict())

    def _finish(finish, at: dt.datetime) -> None:
        try:
            finish(at)
        except ScixError as exc:  # the state went away after answering: the list was served, not kept
            log.warning("after a recommendation: %s", exc)

    @app.post(
        "/api/users", status_code=201, dependencies=[Depends(_writer)], summary="create (or onboard) a user"
    )
    def create_user(body: NewUser):
        status = services.recommender.create_user(body.user, body.categories)
        return {"user": body.user, "status": status}

    @app.post(
        "/api/interactions",
        status_code=201,
        dependencies=[Depends(_writer)],
        summary="record a save, dismiss or view",
    )
    def interactions(body: NewInteraction):
        event = services.recommender.interact(body.user, body.paper, body.kind, body.at)
        saves = len(services.recommender.stored(body.user).saved)  # the write fits nothing
        return {
            "user": body.user,
            "paper": body.paper,
            "kind": body.kind,
            "at": event.at.isoformat(),
            "saves": saves,
        }

    @app.get("/healthz", summary="every backend this server uses")
    def healthz():
        checks = _checks(services)
        ok = all(c["status"] == "ok" for c in checks)
        body = {
            "status": "ok" if ok else "degraded",
            "index": index,
            "version": __version__,
            "worker": os.getpid(),  # which process answered (`scix serve --workers N`)
            "build": services.searcher.build_dir.name,  # the build served (it follows rebuilds and appends)
            "papers": services.searcher.manifest.get("papers"),
            "builds_followed": services.switches,
            "follow_error": services.follow_error or None,  # the last new build it could not open yet
            "checks": checks,
        }
        return Json(body, status_code=200 if ok else 503)

    @app.get("/healthz/reranker", summary="the reranker configured, loaded and scoring with, kept apart")
    def healthz_reranker():
        last = services.last_rerank
        loaded = services.searcher.loaded_rerankers()
        return {
            "configured": cfg.search.rerank,
            "model_loaded": bool(loaded),
            "loaded": loaded,
            "scoring_with": last.get("rerank_reason") if last.get("reranked") else None,
            "last_search": last or None,
        }

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus text format")
    def metrics():
        return PlainTextResponse(services.metrics.render(), media_type=services.metrics.content_type)

    return app


def from_environment() -> FastAPI:
    """The application of one ``scix serve --workers N`` worker: the index from ``SCIX_SERVE_INDEX``, the
    configuration as ``load_config`` finds it (``SCIX_CONFIG``, ``SCIX_HOME``, ...) with the index's tuned
    preset over it when ``scix serve --config tuned`` set ``SCIX_SERVE_TUNED``."""
    index = os.environ.get(INDEX_ENV)
    if not index:
        raise RuntimeError(f"{INDEX_ENV} is not set: start workers with `scix serve --workers N`")
    return create_app(index, load_config(TUNED, index) if os.environ.get(TUNED_ENV) else None)


def _checks(services: Services) -> list[dict]:
    out = []
    searcher = services.searcher
    lexical = [lane.name for lane in searcher.lexical]
    out.append({"name": "lexical", "status": "ok" if lexical else "fail", "lanes": lexical})
    dense = searcher.dense is not None
    reason = searcher.unavailable.get("dense", "no dense lane")
    out.append({"name": "dense", "status": "ok" if dense else "fail", "detail": None if dense else reason})
    health = services.recommender.health()
    out.append(
        {
            "name": "recommender",
            "status": "ok" if health.get("vectors") == "ok" else "fail",
            "detail": None if health.get("vectors") == "ok" else health.get("vectors"),
            "scorer": {
                k: health.get(k) for k in ("configured", "model_loaded", "scoring_with", "last_scored_with")
            },
            "papers": health.get("papers"),
            "community": health.get("community"),
        }
    )
    try:
        services.recommender.state.last_interaction()
        out.append({"name": "user_state", "status": "ok", "location": services.recommender.state.location})
    except Exception as exc:  # any failure of the state store is the thing this check reports
        out.append({"name": "user_state", "status": "fail", "detail": str(exc)})
    return out
