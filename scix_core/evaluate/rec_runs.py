"""The runs ``scix eval-recs`` compares: forced tiers, Tier-1 variants, an MMR λ sweep and peer baselines.

Every run maps one evaluated user (their replayed training saves) to at most
``k`` paper ids, never a training save. Tier-1 variants share one candidate
pass per user (stages 1-6c: vectors → the candidate pool); each scorer variant
scores and suppresses it once, and the runs differ only after that:

* ``tier1`` — MMR at the configured λ (the default pipeline's top ``k``; the
  two exploration picks come *beyond* ``k`` and are not scored at @k);
* ``tier1-nommr`` — the top ``k`` by score;
* ``tier1-rrf`` — the per-cluster kNN lists fused by RRF (k = 60) instead of
  quota + scoring: the reference design's warning (the dominant interest
  wins on rank alone), measured;
* ``tier1-quota`` — the final ``k`` slots shared across clusters by their
  quotas too (largest remainder, at least one each while slots last), each
  cluster's best-scored candidates, instead of MMR over the pooled scores;
* ``tier1-cosine`` / ``tier1-profile`` — the default pipeline with the
  heuristic's content part on the cosine to the query that found each
  candidate / on the EWMA profiles (the reference design);
* ``tier1-content`` — content only: none of the community's candidates (co-saved, neighbour-interest),
  co-save weight 0
  (what Tier 1 is on an index without other users);
* ``mmr_0.0`` … ``mmr_1.0`` — MMR at each λ;
* ``tier1-lgbm`` — the default pipeline scored by a LightGBM model trained
  in the same run on the evaluated users' *training* saves only (an inner
  hold-out labels them; ``scix_core.train.scorer``), so no
  evaluation label leaks into it.

Peers, computed by well-kept libraries on the same split: ``most-popular``
(training save counts), ``content-knn`` (mean of the saved vectors → cosine
kNN), and from the ``implicit`` package: ``item-knn`` (item-item cosine,
1,000 neighbours), ``als`` (64 factors, confidence α = 40 and
regularisation 0.1 — Hu, Koren & Volinsky's setting; implicit's default
α = 1 is no better than BPR here) and ``bpr`` (64 factors), seeded.
Forced tiers: ``tier0`` (trending in the three most frequent codes of the
user's training saves — the stand-in for onboarding categories),
``tier3``, ``tier2``.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import islice

import numpy as np

from scix_core.errors import UnknownNameError
from scix_core.evaluate import tuning
from scix_core.extras import require
from scix_core.fusion import rrf
from scix_core.recommend import collab
from scix_core.recommend.collab import ease_dual
from scix_core.recommend.collab.text import load_texts
from scix_core.recommend.pipeline import candidate_stages, ranking_stages, run_stages
from scix_core.recommend.scorers import features
from scix_core.recommend.stages.base import Tier1State
from scix_core.recommend.stages.mmr import pick_inputs, tier1_sweep
from scix_core.recommend.stages.quota import allocate
from scix_core.types import Ranking

LAMBDAS = tuple(round(x, 1) for x in np.linspace(0.0, 1.0, 11))
TIER1 = ("tier1", "tier1-nommr", "tier1-rrf", "tier1-quota", *(f"mmr_{lam:.1f}" for lam in LAMBDAS))
LGBM = "tier1-lgbm"
#: the candidates the community brings (``tier1-content`` leaves them out): its co-saves, and over a pool the
#: papers nearest its interests
COMMUNITY = ("co-saved", "neighbour-interest")
VARIANTS = {"tier1-cosine": "cosine", "tier1-profile": "profile", "tier1-content": "content", LGBM: "lgbm"}
TIERS = ("tier0", "tier3", "tier2")
COLLAB = tuple(
    collab.MODELS
)  # rp3beta, item-knn, ease, ials, text-knn, hybrid-knn: tuned on a validation split
PEERS = ("most-popular", "content-knn", *COLLAB, "als", "bpr")
ALL_RUNS = (*TIERS, *TIER1, *VARIANTS, *PEERS)
DEFAULT_RUNS = (
    "tier0",
    "tier3",
    "tier2",
    "tier1",
    "tier1-nommr",
    "tier1-rrf",
    "tier1-quota",
    *VARIANTS,
    *PEERS,
)


#: the runs that cannot rank a paper nobody saved (the cold-item protocol lists them as not applicable)
NEEDS_SAVES = {
    **{
        m: "an item-based collaborative model: an item nobody saved has no scores" for m in collab.NEEDS_SAVES
    },
    "most-popular": "ranks by saves: every new item has none",
    "als": "a collaborative factor model: an item nobody saved has no factors",
    "bpr": "a collaborative factor model: an item nobody saved has no factors",
}


def check_runs(names: Sequence[str]) -> tuple[str, ...]:
    for name in names:
        if name not in ALL_RUNS:
            raise UnknownNameError("recommendation run", name, ALL_RUNS)
    return tuple(dict.fromkeys(names))


class Tier1Family:
    """Stages 1-6b once per user; scoring + suppression once per scorer variant; every run finishes from
    those.

    ``scorers``: variant -> scorer (``default`` is the configured one). The
    ``content`` variant drops the co-saved candidates before scoring. ``runs``: the runs to be finished —
    the first MMR-sweep run of a user picks at every λ of the sweep in one pass (its seconds are the
    sweep's) and the others read their picks from it.
    """

    def __init__(self, rec, k: int, scorers: Mapping[str, object], runs: Sequence[str] = ()):
        self.rec, self.k, self.scorers = rec, k, dict(scorers)
        self.sweep = tuple(dict.fromkeys(self._lambda(r) for r in runs if r.startswith("mmr_")))
        self._read: tuple = (None, None)  # (a user's stage 1-6c state, its candidates' features)
        self._picks: tuple = (None, None, {})  # (a scored state, its MMR inputs, λ -> its picks)

    def _lambda(self, run: str) -> float:
        return float(run.split("_")[1]) if run.startswith("mmr_") else self.rec.config.recommend.mmr_lambda

    def candidates(self, ctx):
        return run_stages(Tier1State(self.rec.side, ctx, self.k), candidate_stages())[0]

    def ranked(self, base, variant: str):
        if variant == "content":
            base = replace(base, candidates=tuple(c for c in base.candidates if c.source not in COMMUNITY))
            return run_stages(base, ranking_stages(self.scorers[variant], {}))[0]
        if self._read[0] is not base:  # every other variant scores the same pool: its features read once
            self._read = (base, features(base, base.candidates))
        return run_stages(base, ranking_stages(self.scorers[variant], {}, self._read[1]))[0]

    def finish(self, state, run: str) -> list[str]:
        pool = state.kept
        if run == "tier1-nommr":
            return [c.paper_id for c in pool[: self.k]]
        if run == "tier1-rrf":
            lists = [
                Ranking.from_pairs(
                    str(c.cluster_id),
                    sorted(
                        ((x.paper_id, x.cosine) for x in state.candidates if x.cluster_id == c.cluster_id),
                        key=lambda p: -p[1],
                    ),
                )
                for c in state.clusters
            ]
            return list(rrf(lists, k=60).ids[: self.k])
        if run == "tier1-quota":
            clusters = [c for c in state.clusters if any(x.cluster_id == c.cluster_id for x in pool)]
            slots = allocate([c.quota for c in clusters], self.k, 1)
            picked = [
                x
                for c, n in zip(clusters, slots)
                for x in [y for y in pool if y.cluster_id == c.cluster_id][:n]
            ]
            return [x.paper_id for x in sorted(picked, key=lambda x: -x.score)]
        lam = self._lambda(run)
        if self._picks[0] is not state:  # the λ sweep reads the pool's vectors, quotas and cover once
            self._picks = (state, pick_inputs(state, pool, self.k), {})
        _, inputs, picks = self._picks
        if lam not in picks:
            lams = [lam, *(x for x in self.sweep if x not in picks)] if run.startswith("mmr_") else [lam]
            lams = list(dict.fromkeys(lams))
            picks.update(zip(lams, tier1_sweep(state, pool, self.k, lams, inputs)))
        return [pool[i].paper_id for i in picks[lam]]


def variant(run: str, default: str | None = None) -> str:
    """The scorer variant a Tier-1 run is scored by; ``default``: the variant the configured scorer is
    (``tier1-cosine`` is ``tier1`` when the heuristic is ``cosine``: scored and finished once)."""
    name = VARIANTS.get(run, "default")
    return "default" if name == default else name


def finish_key(run: str) -> str:
    """Runs with the same variant and the same key have the same list: a scorer variant finishes as
    ``tier1``."""
    return "tier1" if run in VARIANTS else run


def onboarding(rec, ctx, n: int = 3) -> tuple[str, ...]:
    cat = rec.side.catalog
    counts = Counter(code for p in ctx.saved for code in cat.codes[cat.row[p]])
    return tuple(code for code, _ in counts.most_common(n))


def forced_tier(rec, run: str) -> Callable:
    number = {"tier0": 0, "tier3": 3, "tier2": 2}[run]

    def recommend(ctx, k: int) -> list[str]:
        if number == 0:
            ctx = replace(ctx, user=replace(ctx.user, categories=onboarding(rec, ctx)))
        return [i.paper_id for i in rec.tiers[number].run(rec.side, ctx, k).items]

    return recommend


#: the subfolder of the fit cache where the peers keep the fits the community does not make
PEER_FITS = "peers"


class Peers:
    """Baselines fitted once on the training interactions of every user (held-out saves removed).

    The collaborative and text peers (``COLLAB``) are tuned first on a validation split carved from the
    evaluated users' training saves (``scix_core.evaluate.tuning``; up to ``validation_users`` of them), then
    refitted on the whole training matrix; :attr:`tuned` holds each choice and its validation table.
    """

    def __init__(
        self,
        rec,
        train: Mapping[str, Sequence[str]],
        factors: int = 64,
        seed: int = 7,
        evaluated: Sequence[str] = (),
        k: int = 10,
        cache_dir=None,
        validation_users: int = 1000,
        fit_cache=None,
        cold: float | None = None,
    ):
        """``cold``: the cold-item protocol's share of training items the tuning sets aside as new
        (:func:`~scix_core.evaluate.tuning.carve_items`); None: the saves' split."""
        self.rec, self.train, self.factors, self.seed, self.k = rec, train, factors, seed, k
        self.cold = cold
        self.users = {u: i for i, u in enumerate(train)}
        self._models: dict[str, object] = {}
        self.tuned: dict[str, tuning.Tuned] = {}
        counts = Counter(p for papers in train.values() for p in papers)
        self.popular = [p for p, _ in counts.most_common()]
        pool = list(evaluated) or list(train)
        if len(pool) > validation_users:
            pool = [
                pool[i]
                for i in sorted(
                    np.random.default_rng(seed).choice(len(pool), validation_users, replace=False)
                )
            ]
        self.validation_users, self.cache_dir, self.fit_cache = tuple(pool), cache_dir, fit_cache
        self._texts: list[str] | None = None
        self._base: Peers | None = None
        self._changes: Sequence = ()

    def refitted(self, rec, train: Mapping[str, Sequence[str]], changes: Sequence = ()) -> Peers:
        """The same peers, tuned as they are, to be fitted on other training saves (the per-tier tables).
        ``changes``: each changed user's ``(old rows, new rows)`` — a model that can take them (EASE's exact
        low-rank update, :meth:`~scix_core.recommend.collab.ease.Ease.with_rows_changed`) starts from this
        peer's fit instead of refitting (at 17k items about 10 s for 1,000 users against 15 s)."""
        other = Peers(
            rec, train, self.factors, self.seed, self.validation_users, self.k, self.cache_dir, cold=self.cold
        )
        # (no fit cache: the truncated fits are made once each, and EASE's is an update of this one)
        other.tuned = dict(self.tuned)
        other._base, other._changes = self, tuple(changes)
        return other

    def matrix(self):
        if "_matrix" not in self.__dict__:
            cat = self.rec.side.catalog
            self._matrix = tuning.matrix(self.train, cat.row, len(cat))
        return self._matrix

    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = load_texts(self.rec.build_dir)
        return self._texts

    def vectors(self) -> np.ndarray:
        if "_vectors" not in self.__dict__:
            self._vectors = self.rec.side.vectors.get(np.arange(len(self.rec.side.catalog)))
        return self._vectors

    def _build(self, name: str, params: dict):
        extra = {"seed": self.seed} if name in ("ials", "svm", "cf-from-text") else {}
        return collab.make(
            name,
            texts=self.texts() if name in collab.TEXT_MODELS else None,
            vectors=self.vectors() if name in collab.VECTOR_MODELS else None,
            **params,
            **extra,
        )

    def tune(self, name: str) -> tuning.Tuned:
        if name not in self.tuned:
            cat = self.rec.side.catalog
            grid = collab.GRIDS[name]
            candidates = None
            if self.cold:
                fit, val, new = tuning.carve_items(self.train, self.validation_users, self.cold, self.seed)
                candidates = np.zeros(len(cat), dtype=bool)
                candidates[[cat.row[p] for p in new if p in cat.row]] = True
            else:
                fit, val = tuning.carve(self.train, self.validation_users, 0.2, self.seed)
            cache = None
            if self.cache_dir is not None:
                key = tuning.cache_key(
                    {
                        "build": self.rec.build_dir.name,
                        "peer": name,
                        "grid": grid,
                        "beyond": collab.BEYOND.get(name),
                        "k": self.k,
                        "seed": self.seed,
                        **({"cold": self.cold} if self.cold else {}),
                        "fit": sorted(fit.items()),
                        "val": sorted((u, sorted(v)) for u, v in val.items()),
                    }
                )
                cache = self.cache_dir / f"{name}-{key}.json"
            self.tuned[name] = tuning.tune(
                name,
                grid,
                lambda p: self._build(name, p),
                fit,
                val,
                cat.row,
                len(cat),
                self.k,
                cache,
                beyond=collab.BEYOND.get(name),
                candidates=candidates,
                fitted=None if self.cold else self._updated_for(name, fit),
            )
        return self.tuned[name]

    def _updated_for(self, name: str, fit: Mapping[str, Sequence[str]]) -> Callable | None:
        """For EASE, each setting's validation fit made without a dense inversion of its own: with fewer users
        than saved items, every λ from one eigendecomposition of the carved saves' users' Gram matrix
        (:class:`~scix_core.recommend.collab.ease_dual.EaseSpectrum`; only the λ chosen is then fitted as P,
        by :meth:`model`); otherwise its fit on the whole training matrix updated exactly for the
        validation users' set-aside saves (:meth:`~scix_core.recommend.collab.ease.Ease.with_rows_changed`),
        the fit the chosen setting then keeps. None for any other model."""
        if not hasattr(collab.MODELS[name], "with_rows_changed"):
            return None
        row = self.rec.side.catalog.row
        spectrum: list = []  # made at the first setting's ask (a cached choice asks none)

        def dual(params):
            if not spectrum:
                spectrum.append(
                    ease_dual.EaseSpectrum.of(tuning.matrix(fit, row, len(self.rec.side.catalog)))
                )
            return spectrum[0].at(params["lam"])

        if ease_dual.worth_it(self.matrix()):
            return dual

        def rows(papers) -> np.ndarray:
            return np.array(sorted({row[p] for p in papers if p in row}), dtype=np.int64)

        changes = [(rows(self.train[u]), rows(fit[u])) for u in fit if set(fit[u]) != set(self.train[u])]
        return lambda params: self._fitted(name, params).with_rows_changed(changes)

    def model(self, name: str):
        if name not in self._models:
            if name in COLLAB:
                params = self.tune(name).params
                self._models[name] = self._updated(name) or self._fitted(name, params)
                return self._models[name]
            import threadpoolctl

            als = require("implicit.als", None, f"the {name} peer")
            bpr = require("implicit.bpr", None, f"the {name} peer")

            with (
                threadpoolctl.threadpool_limits(1, "blas"),
                warnings.catch_warnings(),
            ):  # implicit's own advice
                warnings.simplefilter("ignore", RuntimeWarning)
                if name == "als":
                    model = als.AlternatingLeastSquares(
                        factors=self.factors, alpha=40.0, regularization=0.1, random_state=self.seed
                    )
                else:
                    model = bpr.BayesianPersonalizedRanking(factors=self.factors, random_state=self.seed)
                model.fit(self.matrix(), show_progress=False)
            self._models[name] = model
        return self._models[name]

    def _fitted(self, name: str, params: dict):
        """``name`` with ``params`` fitted on the whole training matrix: the community's own part when it is
        the same model on the same saves (EASE: 17 s), else fitted — into the fit cache where the model keeps
        one (EASE: 50 s on an AVX2 machine; iALS), a function of the training saves and the parameters only,
        reused by the tuning's validation fits, a second run of the same split and the evaluation's second
        process."""
        model = self._build(name, params)
        if self.fit_cache is not None and hasattr(model, "cache_dir"):
            # a part the community fits shares the community's folder (the two processes make it once);
            # any other setting keeps its fits in a folder of the peers' own, which keeps its newest few, so
            # that a tuning's fits never displace a community's (EASE keeps three a folder)
            own = self.rec.community.makes(model)
            model = replace(model, cache_dir=self.fit_cache if own else self.fit_cache / PEER_FITS)
        return self.rec.community.fitted_like(model, self.matrix()) or model.fit(self.matrix())

    def _updated(self, name: str):
        """The base peers' fit of ``name`` updated for :attr:`_changes`, when it was fitted and can be; else
        None."""
        base = self._base._models.get(name) if self._base is not None else None
        update = getattr(base, "with_rows_changed", None)
        return update(self._changes) if update is not None and self._changes else None

    def recommend(self, name: str, ctx, k: int) -> list[str]:
        seen = ctx.seen
        if name == "most-popular":  # stops at the k-th unseen paper instead of filtering the whole catalogue
            return list(islice((p for p in self.popular if p not in seen), k))
        side = self.rec.side
        cat = side.catalog
        if name == "content-knn":
            mean = side.vectors.get(side.rows(ctx.saved)).mean(axis=0)
            hits = side.store.search(mean / (np.linalg.norm(mean) or 1.0), k, ctx.exclusion(side))
            return [h.paper_id for h in hits if h.paper_id not in seen][:k]
        model = self.model(name)
        if name in COLLAB:  # item-based: the user's saves as they are now (the per-tier tables truncate them)
            exclude = side.rows(p for p in seen if p in cat.row)
            if side.pool is not None:  # a candidate pool (the cold-item protocol's new items): only those
                exclude = np.concatenate([exclude, np.flatnonzero(~side.pool)])
            return top_rows(
                model.scores(side.rows(p for p in ctx.saved if p in cat.row)),
                exclude,
                cat.ids,
                k,
                positive=not getattr(model, "signed", False),
            )
        user = self.users[ctx.user_id]
        ids, _ = model.recommend(user, self.matrix()[user : user + 1], N=k, filter_already_liked_items=True)
        return [cat.ids[i] for i in ids if cat.ids[i] not in seen][:k]


def top_rows(
    scores: np.ndarray, exclude: np.ndarray, ids: Sequence[str], k: int, positive: bool = True
) -> list[str]:
    """The ``k`` best-scored ids with a positive score (any finite score: not ``positive``, a signed
    scorer's), never an excluded row; ties by row."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    scores[np.asarray(exclude, dtype=np.int64)] = -np.inf
    n = min(k, int(np.count_nonzero(scores > 0 if positive else np.isfinite(scores))))
    if n <= 0:
        return []
    rows = np.argpartition(-scores, n - 1)[:n]
    return [ids[int(r)] for r in rows[np.lexsort((rows, -scores[rows]))]]
