"""``Recommender(index).recommend(user)``: the tiered recommender over one built index.

Build once, call many times (thread-safe): the catalog, the memory-mapped
local vectors, the shared vector-store reader and the scorer are loaded in
the constructor; user state lives in the workspace's WAL SQLite database.
Writes (:meth:`interact`, :meth:`create_user`) validate everything first —
unknown user, a paper not in this index (named, with the index that has it),
a bad kind or timestamp — and then commit in one transaction.
"""

from __future__ import annotations

import datetime as dt
import difflib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from scix_core.config import Config, load_config
from scix_core.errors import ConfigError, InteractionError, ScixError, UnknownNameError, UnknownPaperError
from scix_core.recommend.catalog import shared_catalog
from scix_core.recommend.community import collab_model, joined
from scix_core.recommend.context import IndexSide, UserContext
from scix_core.recommend.feed import LAST_VISIT, Feed, check_since, empty_reason, seen_at, window
from scix_core.recommend.interests import shared_interests
from scix_core.recommend.pipeline import ClusterTier, warm_stages
from scix_core.recommend.pool import pooled_cosaves, within
from scix_core.recommend.profile import EWMA_STARTS, ProfileTier, compute_profiles, profiles_current
from scix_core.recommend.recommend_api import RecommendTier
from scix_core.recommend.refit import community_for, fit_cache, spawn
from scix_core.recommend.result import Recommendations
from scix_core.recommend.reuse import REUSED, ServedLists
from scix_core.recommend.scorers import load_scorer
from scix_core.recommend.stages.mmr import QUOTA_SHAPES
from scix_core.recommend.state import (
    Event,
    UserState,
    check_kind,
    check_user_id,
    parse_time,
)
from scix_core.recommend.state_postgres import open_state
from scix_core.recommend.tiers import entitled, next_tier_message, select
from scix_core.recommend.trending import TrendingTier
from scix_core.stores.papers import PaperStore
from scix_core.vectors import open_reader, release_reader
from scix_core.vectors.local import shared_local
from scix_core.workspace import Workspace, read_json

TIER_WEIGHTS = ("validated", "equal")  # recommend.tier_weights

MAX_LIMIT = 1000


#: weights, bonuses and counts a negative value would turn around
NON_NEGATIVE = (
    "collab_alpha",
    "collab_beta",
    "mmr_quota_bonus",
    "tier3_quota_bonus",
    "tier2_quota_bonus",
    "tier3_neighbour_cover",
    "tier2_neighbour_cover",
    "tier1_neighbour_cover",
    "neighbours",
    "pool_spread_clusters",
    "pool_later_cosave",
    "weight_cosave",
    "community_weight",
    "tier2_community_weight",
    "pool_community_weight",
    "tier2_pool_community_weight",
)


def _check_config(cfg) -> None:
    r = cfg.recommend
    if not (r.tier1_min_saves >= r.tier2_min_saves >= r.tier3_min_saves >= 1):
        raise ConfigError(
            "recommend thresholds must satisfy tier1_min_saves >= tier2_min_saves >= tier3_min_saves >= 1"
        )
    if not r.trending_months or any(m <= 0 for m in r.trending_months):
        raise ConfigError(
            f"recommend.trending_months must be positive month counts, not {r.trending_months!r}"
        )
    for name in ("mmr_lambda", "tier_mmr_lambda", "tier2_mmr_lambda"):
        if not 0.0 <= getattr(r, name) <= 1.0:
            raise ConfigError(f"recommend.{name} must be within [0, 1], not {getattr(r, name)}")
    for name in ("mmr_tail_lambda", "pool_spread_lambda"):
        if not 0.0 <= getattr(r, name) <= 1.0:
            raise ConfigError(f"recommend.{name} must be within [0, 1], not {getattr(r, name)}")
    if min(r.mmr_tail_every, r.tier_tail_every, r.tier2_tail_every) < 1:
        raise ConfigError("recommend.mmr_tail_every, tier_tail_every and tier2_tail_every must be >= 1")
    if r.cosave_per_slot < 0 or r.cosave_candidates < 0:
        raise ConfigError("recommend.cosave_candidates and cosave_per_slot must be >= 0")
    if r.total_slots <= 0 or r.min_slots < 0 or r.oversample <= 0:
        raise ConfigError("recommend.total_slots and oversample must be positive, min_slots non-negative")
    if min(r.longterm_half_life, r.shortterm_half_life, r.recency_half_life_saves) <= 0:
        raise ConfigError("recommend half-lives must be positive")
    negative = [name for name in NON_NEGATIVE if getattr(r, name) < 0]
    if negative:
        values = ", ".join(str(getattr(r, n)) for n in negative)
        raise ConfigError(f"recommend.{', '.join(negative)} must be >= 0, not {values}")
    if r.collab_ease_lambda <= 0:
        raise ConfigError(f"recommend.collab_ease_lambda must be positive, not {r.collab_ease_lambda}")
    collab_model(r.collab)  # an unknown name lists the valid ones
    if r.tier_collab:
        collab_model(r.tier_collab)
    joined(r.collab, r.tier_collab)
    if r.tier_weights not in TIER_WEIGHTS:
        raise UnknownNameError("recommend.tier_weights", r.tier_weights, TIER_WEIGHTS)
    if r.tier_weights_at < 1:
        raise ConfigError(f"recommend.tier_weights_at must be a list length, not {r.tier_weights_at}")
    if r.mmr_quota_shape not in QUOTA_SHAPES:
        raise UnknownNameError("recommend.mmr_quota_shape", r.mmr_quota_shape, QUOTA_SHAPES)
    if r.ewma_start not in EWMA_STARTS:
        raise UnknownNameError("recommend.ewma_start", r.ewma_start, EWMA_STARTS)


class Recommender:
    def __init__(
        self,
        index: str,
        config: Config | None = None,
        *,
        persist_clusters: bool = True,
        state: UserState | None = None,
        build_community: bool = True,
        lag: bool | None = None,
        detach_refits: bool = False,
        pool=None,
    ):
        """``state``: another user-state store than the workspace's (benchmarks, offline evaluation).
        ``build_community``: the user libraries the index was built from count as other users' saves (the
        offline evaluation turns it off: it replays only the training saves). ``lag`` (default: as
        ``build_community``): the co-save model's slow parts start from their community's last fit and are
        refitted on their clock (``recommend.community_refit_age_s``) — off, every change of the saves is
        fitted exactly, as the offline evaluation needs. ``detach_refits``: those refits run in a detached
        process (the command line's, which ends before a background thread would finish)."""
        cfg = config or load_config()
        _check_config(cfg)
        self.config, self.index = cfg, index
        self.workspace = Workspace(cfg.home)
        self.lease = self.workspace.lease_build(index)
        self.build_dir = self.lease.path
        self.manifest = read_json(self.build_dir / "manifest.json")
        self.state = state or open_state(cfg)
        self.scorer, self._health = load_scorer(cfg.recommend, cfg.home, index)
        self.side = self._side()
        if pool is not None:
            self.side = within(self.side, pool)
        r = cfg.recommend
        # EASE's and iALS's fits on disk (the evaluation's too)
        self.fit_cache = fit_cache(cfg)
        lag = build_community if lag is None else lag
        self.community = community_for(
            cfg,
            index,
            self.state,
            self.side.catalog,
            self.build_dir,
            build_community=build_community,
            lag=lag,
            detached=(lambda: spawn(cfg, index)) if detach_refits else None,
        )
        self.tiers = {
            0: TrendingTier(),
            3: RecommendTier(),
            2: ProfileTier(),
            1: ClusterTier(self.state, self.scorer, self._health, persist_clusters),
        }
        self._papers = PaperStore(self.build_dir / "papers.sqlite")
        self._last_scorer: str | None = None
        # a user's last list, answered again while nothing it depends on changed (``recommend.reuse_s``)
        self.reused = ServedLists(r.reuse_s) if r.reuse_s else None

    def _side(self) -> IndexSide:
        catalog = shared_catalog(self.index, self.build_dir)
        side = IndexSide(
            self.index,
            self.manifest.get("model", ""),
            catalog,
            self.config.recommend,
            interests=shared_interests(str(self.build_dir.resolve())),
        )
        if not self.manifest.get("vectors"):
            return replace(
                side, unavailable="index built without vectors (--no-embed): only Tier 0 (trending) runs"
            )

        try:
            vectors = shared_local(
                self.build_dir, self.manifest, self.workspace.embedding_cache(self.manifest["model_slug"])
            )
            vcfg = replace(
                self.config.vectors,
                backend=self.manifest.get("vector_backend", self.config.vectors.backend),
                url=self.manifest.get("vector_url") or self.config.vectors.url,
            )
            store = open_reader(vcfg, self.build_dir, self.index)
            self._reader = vcfg
        except ScixError as exc:
            return replace(side, unavailable=exc.describe())
        return replace(side, vectors=vectors, store=store)

    def close(self) -> None:
        """Idempotent; releases the shared vector reader as :meth:`Searcher.close` does."""

        self._papers.close()
        reader, self._reader = getattr(self, "_reader", None), None
        if reader is not None:
            release_reader(
                reader, self.build_dir, self.index, keep=self.workspace.is_current(self.index, self.build_dir)
            )
        self.lease.release()

    def papers(self, paper_ids) -> dict:
        """paper id -> :class:`~scix_core.types.Paper` (title, authors, abstract, categories, listing day)."""
        return self._papers.get(paper_ids)

    def titles(self, paper_ids) -> dict[str, str]:
        return {p: t for p, (t, _) in self._papers.titles(paper_ids).items()}

    # users and interactions
    # ----------------------------------------------------------------------------------
    def check_paper(self, paper_id: str) -> int:
        """The paper's row, or UnknownPaperError naming it (and the other index that has it, if any)."""
        if not isinstance(paper_id, str) or paper_id not in self.side.catalog.row:
            elsewhere = [
                name
                for name in self.workspace.indexes()
                if name != self.index and isinstance(paper_id, str) and self._holds(name, paper_id)
            ]
            hint = f" (it is a paper of index {', '.join(elsewhere)})" if elsewhere else ""
            raise UnknownPaperError(f"paper {paper_id!r} is not in index {self.index!r}{hint}")
        return self.side.catalog.row[paper_id]

    def _holds(self, index: str, paper_id: str) -> bool:
        store = PaperStore(self.workspace.index_dir(index) / "papers.sqlite")
        try:
            return bool(store.titles([paper_id]))
        finally:
            store.close()

    def check_categories(self, categories: Sequence[str]) -> tuple[str, ...]:
        known = self.side.catalog.all_codes()
        cats = tuple(dict.fromkeys(c.strip() for c in categories if c and c.strip()))
        bad = [c for c in cats if c not in known]
        if bad:
            hints = {c: difflib.get_close_matches(c, sorted(known), n=3) for c in bad}
            what = "category codes" if self.side.catalog.code_source == "categories" else "tags"
            raise InteractionError(
                f"unknown {what} for index {self.index!r}: "
                + "; ".join(f"{c!r}" + (f" (close: {', '.join(h)})" if h else "") for c, h in hints.items())
            )
        return cats

    def create_user(self, user: str, categories: Sequence[str] = ()) -> str:
        """Create (or update the onboarding categories of) a user; returns ``created`` or ``updated``."""
        return self.state.upsert_user(self.index, check_user_id(user), self.check_categories(categories))

    def interact(self, user: str, paper_id: str, kind: str, at: str | dt.datetime | None = None) -> Event:
        """Record one interaction; a save recomputes the EWMA profiles in the same transaction. Never fits a
        co-save model: the user's next list scores their saves of now against the community's last fit."""
        check_user_id(user)
        check_kind(kind)
        when = parse_time(at)
        self.check_paper(paper_id)
        self.state.user(self.index, user)
        update = (lambda _stored, events: compute_profiles(self.side, events)) if kind == "save" else None
        return self.state.record(self.index, user, paper_id, kind, when, update)

    def context(self, user: str) -> UserContext:
        """The user's interactions and profiles (stale profiles — another model, missed saves — are
        recomputed) and their co-save scores."""
        return self._with_cosaves(self.stored(user))

    def stored(self, user: str) -> UserContext:
        """The user's interactions and profiles as stored (stale profiles recomputed), without co-save
        scores: what a write acknowledges and ``scix users show`` prints never touches the co-save model."""
        ctx = UserContext.read(self.state.reading(self.index, check_user_id(user)))
        if ctx.saved and self.side.vectors is not None and not profiles_current(self.side, ctx):
            profiles = compute_profiles(self.side, ctx.events)
            self.state.replace_profiles(self.index, user, profiles)
            ctx = replace(ctx, profiles={p.kind: p for p in profiles})
        return ctx

    def _with_cosaves(self, ctx: UserContext, side: IndexSide | None = None) -> UserContext:
        """``ctx`` with the user's co-save scores; on a ``side`` restricted to a pool (the recommender's own,
        or a feed's window) only the pool's, its papers nobody saved bridged (recommend/pool.py)."""
        side = side or self.side
        if ctx.saved:
            known = [p for p in ctx.saved if p in side.catalog.row]
            cosaves = self.community.cosaves(side.rows(known))
            if side.pool is not None:
                cosaves = pooled_cosaves(cosaves, side.pool, side.bridge)
            ctx = replace(ctx, cosaves=cosaves)
        return ctx

    # recommending
    # --------------------------------------------------------------------------------------------
    def recommend(self, user: str, limit: int | None = None, *, log: bool | None = None) -> Recommendations:
        """The user's list; Tier 1's changed medoids written and the list logged (``recommend.log``; ``log``
        overrides it) before it is returned."""
        result, write = self._answer(user, limit)
        if write is not None:
            write()
        self._log(result, log)
        return result

    def serve(
        self, user: str, limit: int | None = None
    ) -> tuple[Recommendations, Callable[[dt.datetime], None]]:
        """The user's list, and what a server does once the answer has gone out — called with the time the
        list was answered: Tier 1's changed medoids written, the list logged as served then
        (``recommend.log`` permitting). Both are derived rows whose commit never waited for the disk; on
        PostgreSQL each is a round trip, which under a server's load ends in a wait for the interpreter
        lock (docs/history.md#serving). The scorer's training labels a served paper by what the user did
        after that time, whenever the row was written."""
        result, write = self._answer(user, limit)

        def finish(at: dt.datetime) -> None:
            if write is not None:
                write()
            self._log(result, None, at)

        return result, finish

    def feed(
        self, user: str, since: str | dt.date | None = None, limit: int | None = None, *, visit: bool = True
    ) -> Feed:
        """The user's feed (:mod:`scix_core.recommend.feed`): the window ``since`` selects, ranked by their
        tier's pipeline on its papers only. ``visit``: record this read as the user's last visit (the next
        ``since="last-visit"`` window holds what arrived after the papers this read could see). Neither
        logged nor Tier 1's medoids written: a feed ranks a few papers, the list the scorer learns from is
        the full one."""
        since = check_since(since)
        check_user_id(user)
        known = self.state.user(self.index, user)  # an unknown user: UnknownUserError before anything is read
        last = self.state.last_visit(self.index, user) if since == LAST_VISIT else None
        win = window(self.side.catalog, self.manifest, since, last)
        result, _ = self._answer(user, limit, within(self.side, win.rows))
        if visit:
            self.visited(user, seen_at(win))
        return Feed(win, result, empty_reason(result, win, known.categories))

    def visited(self, user: str, at: dt.datetime) -> None:
        """Record the user's feed read: ``at`` is the newest arrival the read could see
        (:func:`~scix_core.recommend.feed.seen_at`), where ``since="last-visit"`` opens next time."""
        self.state.record_visit(self.index, user, at)

    def _answer(
        self, user: str, limit: int | None, side: IndexSide | None = None
    ) -> tuple[Recommendations, Callable[[], None] | None]:
        """The list, and the tier's derived-state write still to do (:attr:`TierRun.write`); ``side``: the
        index restricted to a pool (a feed), never answered from or kept in the served lists."""
        t0 = time.perf_counter()
        cfg = self.config.recommend
        limit = cfg.limit if limit is None else limit
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise ConfigError(f"limit must be an integer in 1..{MAX_LIMIT}, not {limit!r}")
        t = time.perf_counter()
        ctx = self.stored(user)
        key = None
        if (
            self.reused is not None and side is None
        ):  # the same limit, categories, interactions and community: the last list
            newest = max((e.id for e in ctx.events), default=-1)
            key = (ctx.user.categories, len(ctx.events), newest, self.community.current())
            kept = self.reused.get(ctx.user_id, limit, key)
            if kept is not None:
                context_ms, total_ms = (time.perf_counter() - t) * 1000, (time.perf_counter() - t0) * 1000
                result = replace(
                    kept, notes=(*kept.notes, REUSED), timing_ms={"context": context_ms, "total": total_ms}
                )
                return result, None
        side = side or self.side
        ctx = self._with_cosaves(ctx, side)
        context_ms = (time.perf_counter() - t) * 1000
        tier, why, run, _, tier_ms = select(self.tiers, cfg, side, ctx, limit, side.unavailable)
        titles = self._papers.titles(i.paper_id for i in run.items)
        items = tuple(replace(i, title=titles.get(i.paper_id, ("", 0))[0]) for i in run.items)
        scorer = dict(run.scorer) if run.scorer else {**self._health, "scoring_with": None}
        notes = tuple(run.notes) + ((side.unavailable,) if side.unavailable else ())
        self._last_scorer = scorer.get("scoring_with")
        result = Recommendations(
            self.index,
            user,
            tier,
            why,
            next_tier_message(cfg, entitled(cfg, len(ctx.saved)), len(ctx.saved)),
            items,
            run.stages,
            scorer,
            notes,
            {"context": context_ms, f"tier{tier}": tier_ms, "total": (time.perf_counter() - t0) * 1000},
        )
        if key is not None:
            self.reused.put(ctx.user_id, limit, key, result)
        return result, run.write

    def _log(self, result: Recommendations, log: bool | None, at: dt.datetime | None = None) -> None:
        """The served list into the recommendation log (``recommend.log``; ``log`` overrides it)."""
        if self.config.recommend.log if log is None else log:
            items, tier = result.items, result.tier
            self.state.log(
                self.index,
                result.user,
                tier,
                str(result.scorer.get("scoring_with") or f"tier{tier}"),
                [
                    {
                        "paper_id": i.paper_id,
                        "rank": i.rank,
                        "score": i.score,
                        "source": i.source,
                        "cluster_id": i.cluster_id,
                        "exploration": i.exploration,
                        "features": dict(i.scores),
                    }
                    for i in items
                ],
                at,
            )

    def health(self) -> dict:
        """Which scorer is configured, whether its model loaded, what would score, and the vector side."""
        return {
            **self._health,
            "last_scored_with": self._last_scorer,
            "index": self.index,
            "vectors": self.side.unavailable or "ok",
            "codes": self.side.catalog.code_source,
            "papers": len(self.side.catalog),
            "community": {
                "configured": self.config.recommend.collab,
                "scoring_with": self.community.model_label,
                "saves": self.community.saves,
                "failure": self.community.failure or None,
                "refitting": list(self.community.refitting),  # in the background, the stale fit scoring
                "refit_elsewhere": self.community.refit_elsewhere,  # by another worker, for all of them
                "fit": self.community.status(),  # each part's age and the saves since its fit
            },
        }

    def warm(self, serving: bool = False) -> dict:
        """Reads the community's saves and fits its co-save model now, not in the first request; with
        ``serving`` (a server) also every library's interest centroids (:meth:`InterestCache.warm`, kept
        under ``SCIX_HOME/cache/interests``) when a tier's MMR covers the neighbours' interests, and Tier 1's
        clustering and cluster matching run once on a tiny input (:func:`warm_stages`: their libraries took
        ~0.8 s to import inside a worker's first Tier-1 request, every request of the worker waiting).
        Returns what the interest warm-up read and computed ({} without it)."""
        self.community.warm()
        if serving:
            warm_stages()
        r = self.config.recommend
        covers = max(r.tier1_neighbour_cover, r.tier2_neighbour_cover, r.tier3_neighbour_cover) > 0
        libraries = self.community.libraries() if serving and covers else None
        if libraries is None or self.side.vectors is None:
            return {}
        folder = self.config.home / "cache" / "interests"
        return self.side.interests.warm(libraries, self.side.vectors, r, folder)
