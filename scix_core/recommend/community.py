"""Co-saves: what the other users of an index saved alongside a user's papers.

The collaborative signal of the tiers. From every save of the index in the
user state, a binary matrix X (users × catalogue rows); the co-save score of
a paper c for a user who saved S is, by ``recommend.collab`` — one part, or
several joined by "+" (``scix_core.recommend.collab.ensemble``: each part's
scores divided by the user's best, then summed):

* ``"rp3beta"`` — the popularity-penalised random walk item → user → item
  (Paudel et al. 2017; ``scix_core.recommend.collab.walk``) with
  ``recommend.collab_alpha`` and ``collab_beta``:
  Σ_{s∈S} Σ_u (1/n_s)^α (1/n_u)^α / n_c^β over the users u who saved s and c;
  two sparse products per user (about 1 ms at CiteULike-a's 206k saves);
* ``"ease"`` — EASE^R (Steck 2019) with ``recommend.collab_ease_lambda``: a
  dense item × item regression over the items somebody saved (17 s and
  1.2 GB at CiteULike-a's 17k; refused with its reason where it would not
  fit — the ensemble then scores with the parts that fit,
  :attr:`Community.failure` says why);
* ``"cosine"`` — item-based kNN with cosine similarity (Sarwar et al. 2001),
  Σ_{s∈S} co(s, c) / √(n_s · n_c): the score before the strong-baselines
  issue, kept reachable by configuration.

* ``"ials"`` — implicit's ALS (Hu, Koren & Volinsky 2008; 128 factors, α
  60, regularisation 1; ``scix_core.recommend.collab.ials``), the user's
  factors solved from their saves as they are now (about 1 ms a user, the
  fit 4 s at CiteULike-a's 205k saves).

The default ``"rp3beta+ease"`` beat each part alone and every tuned peer
inside the cascade on CiteULike-a (docs/history.md). Tiers 3 and 2 score with
``recommend.tier_collab`` (default ``"rp3beta+ease+ials"``: iALS raised their
recall at three saves on both tuning samples, and covered more at one save,
but helped Tier 1 on one sample and cost it on the other); the community
fits the parts of both once (:func:`joined`) and :meth:`Community.cosaves`
sums each set (:attr:`CoSaves.scores`, :attr:`CoSaves.for_tiers`; the tiers' sum weighted per library
size as :meth:`Community.tier_weights` chose on a validation split of the saves,
``recommend.tier_weights``). Scores are divided by
the user's best, so every user's lie in [0, 1]; the user's own saved papers
never score (they are excluded downstream anyway). ``savers`` (n_c) is the
paper's popularity in the index's community.

The matrix follows the store: it is rebuilt when the store's newest
interaction id moves (ids only grow; rows are never deleted), by reading only
the new saves, and refitted: a part whose fit took under ``INLINE_FIT_S`` in
line, a slower one (EASE or iALS on a real catalogue) on its own clock — once
its fit is ``refit_age_s`` old and the saves have grown by ``refit_growth``
since, in a background thread (a server, a notebook) or a detached process
(the command line, ``scix_core.recommend.refit``) — until then its last fit
keeps scoring, and a user's new save still counts through their own rows
(x_u · B, iALS's user factors solved from their saves now). A ``lag``
community (every one but the offline evaluation's) starts from its own last
cached fit of its slow parts instead of fitting them, so a process that only
records a save or asks for a list never waits for a fit. One process refits
an index at a time (a lock in the fit cache, :func:`refit_lock`): a server's
other workers take its fit at a later refresh instead of making their own; a
killed refit leaves the fits before it in use (a fit is written whole or not
at all). An index with no other users has no signal: ``cosaves`` returns None
and every tier is content-only.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scix_core.errors import ConfigError, UnknownNameError
from scix_core.locks import exclusive, held, mtime, try_exclusive
from scix_core.recommend.catalog import Catalog
from scix_core.recommend.collab import ItemScorer
from scix_core.recommend.collab.cache import keep_newest
from scix_core.recommend.collab.ease import Ease
from scix_core.recommend.collab.ensemble import Ensemble, summed
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.collab.walk import CosineWalk, RP3Beta
from scix_core.recommend.collab.weights import PROCEDURE, TierWeights, choose, questions
from scix_core.recommend.collab.weights import K as WEIGHTS_AT
from scix_core.recommend.fits import fit_in_child, read_record, refit_lock, write_record
from scix_core.recommend.state import UserState
from scix_core.workspace import read_json, write_json_atomic

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix


@dataclass(frozen=True, eq=False)
class Libraries:
    """Who saved what, as the co-save model last read it (users × catalogue rows, binary)."""

    by_user: csr_matrix
    memo: dict = field(default_factory=dict)  # what was derived from this snapshot (interests.neighbourhood)

    @cached_property
    def by_item(self) -> csr_matrix:
        return self.by_user.T.tocsr()

    def savers_of(self, saved_rows: np.ndarray, cap: int) -> list[tuple[np.ndarray, int]]:
        """The libraries (catalogue rows) of up to ``cap`` users who saved any of ``saved_rows`` — most of
        them shared first, ties by user row — each with how many it shares. A library holding nothing but
        those papers (the asking user's own) shows no other interest and is left out."""
        saved = np.unique(np.asarray(saved_rows, dtype=np.int64))
        if not len(saved) or cap <= 0:
            return []
        items, users = self.by_item, self.by_user  # rows read from indptr / indices: no matrix per row
        savers, shared = np.unique(
            np.concatenate([items.indices[items.indptr[r] : items.indptr[r + 1]] for r in saved]),
            return_counts=True,
        )
        # a library of no more papers than it shares holds nothing but those (the asking user's own): no
        # other interest shows in it (counted, not looked up: a membership test a library took 2 ms of 3)
        other = np.diff(users.indptr)[savers] > shared
        savers, shared = savers[other], shared[other]
        chosen = np.lexsort((savers, -shared))[:cap]
        return [
            (users.indices[users.indptr[u] : users.indptr[u + 1]], int(n))
            for u, n in zip(savers[chosen], shared[chosen])
        ]


@dataclass(frozen=True, eq=False)
class CoSaves:
    """One user's co-save scores over the catalogue rows, and every paper's saver count."""

    scores: np.ndarray  # float32 in [0, 1], 0 where nobody co-saved
    savers: np.ndarray  # int per row
    model: str = ""  # what scored them, e.g. "rp3beta+ease"
    libraries: Libraries | None = None  # the community's libraries these scores came from
    # the same by ``recommend.tier_collab`` (Tiers 3 and 2), computed when first asked; None: ``scores``
    tier_scores: Callable[[], np.ndarray] | None = None
    tier_weights: dict[str, float] | None = None  # each tier part's weight in that sum (None: equal)
    kept: dict = field(default_factory=dict, repr=False)

    @property
    def for_tiers(self) -> np.ndarray:
        """The scores Tiers 3 and 2 blend (``recommend.tier_collab``): a Tier-1 call never computes the parts
        only they use (iALS: 4 ms a user at 91k papers)."""
        if self.tier_scores is None:
            return self.scores
        if "tiers" not in self.kept:
            self.kept["tiers"] = self.tier_scores()
        return self.kept["tiers"]

    def top(self, n: int, exclude: np.ndarray, tiers: bool = False) -> np.ndarray:
        """Up to ``n`` rows with a positive score (:attr:`for_tiers`' with ``tiers``), best first, never one
        of ``exclude``; ties by row, so a shorter list is always the start of a longer one."""
        scores = (self.for_tiers if tiers else self.scores).copy()
        scores[exclude] = 0.0
        positive = int(np.count_nonzero(scores > 0))
        n = min(n, positive)
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        kth = scores[np.argpartition(-scores, n - 1)[n - 1]]  # the n-th best score; its ties: lowest rows
        above = np.flatnonzero(scores > kth)
        rows = np.concatenate([above, np.flatnonzero(scores == kth)[: n - len(above)]])
        return rows[np.lexsort((rows, -scores[rows]))]


COLLAB = ("rp3beta", "cosine", "ease", "ials")  # the parts; "+" joins them into an ensemble
DEFAULT_COLLAB = "rp3beta+ease"
INLINE_FIT_S = 0.25  # a part whose last fit took longer is refitted in the background, not in a request
# ... once the saves have grown by this share since its fit (recommend.community_refit_growth)
REFIT_GROWTH = 0.01
KEEP_WEIGHTS = 8  # tier-weight choices kept in the fit cache
# a server adopts a kept choice made on at least this share of its saves: an offline evaluation's choice (80%
# of the saves, or ten a user) is of another community
KEPT_WEIGHTS_SHARE = 0.9


def collab_model(
    kind: str = DEFAULT_COLLAB,
    alpha: float = 0.8,
    beta: float = 0.4,
    ease_lambda: float = 50.0,
    cache_dir: Path | None = None,
) -> ItemScorer:
    """The co-save scorer: RP3beta, item-kNN cosine (the same walk with α 0.5 on items, none on users, β
    0.5), EASE^R, or several of them joined by "+" (an :class:`Ensemble`, equal weights). ``cache_dir``: where
    EASE keeps its fits (the workspace's ``cache/collab``; a fit depends only on λ and the saves, so
    indexes share it)."""
    names = kind.split("+")
    if not kind or any(n not in COLLAB for n in names) or len(set(names)) < len(names):
        raise UnknownNameError("recommend.collab", kind, (*COLLAB, DEFAULT_COLLAB))
    made = {
        "cosine": lambda: CosineWalk(),
        "rp3beta": lambda: RP3Beta(alpha=alpha, beta=beta),
        "ease": lambda: Ease(lam=ease_lambda, cache_dir=cache_dir),
        "ials": lambda: Ials(factors=128, alpha=60.0, regularization=1.0, cache_dir=cache_dir),
    }
    parts = [made[n]() for n in names]
    if len(parts) == 1 and kind in ("rp3beta", "cosine"):
        return parts[0]
    return Ensemble(tuple((part, 1.0) for part in parts))


def joined(*kinds: str) -> str:
    """Several co-save scores' parts, each once, in order ("" adds none): what a community serving all of
    them fits (``recommend.collab`` for Tier 1, ``tier_collab`` for Tiers 3 and 2)."""
    names: list[str] = []
    for kind in kinds:
        names += [n for n in kind.split("+") if n and n not in names]
    return "+".join(names)


def part_names(kind: str) -> frozenset[str]:
    """The model names of a co-save score's parts."""
    return frozenset(n for n in kind.split("+") if n)


def _params(model) -> dict:
    return {f.name: getattr(model, f.name) for f in fields(model) if f.compare and not f.name.startswith("_")}


def _stale_share(parts: tuple, share: float | None, own: dict | None = None) -> tuple:
    """Ensemble parts with EASE's and iALS's ``stale_share`` set (which cached fit each may adopt) and, with
    ``own`` (part name → cached fit file names), ``stale_from``: only those."""

    def limited(m):
        if not isinstance(m, (Ease, Ials)):
            return m
        allowed = None if own is None else frozenset(own.get(m.name, ()))
        return replace(m, stale_share=share, stale_from=allowed)

    return tuple((limited(m), w) for m, w in parts)


class Community:
    """The index's save matrix, kept in step with the user state; thread-safe.

    ``base``: saves that count before any in the state — the user libraries the index was built from
    (``(user, paper)`` pairs, read once on first use), so an index built from a dataset that carries
    libraries has them as its community without ``scix users import``; an imported library is the same
    pairs and counts once.

    ``refresh_s`` > 0 (a server): the saves are re-read at most that often. ``lag`` (implied by
    ``refresh_s`` > 0): the first fit starts from this community's last cached fit of each slow part and
    its last tier-weight choice (:mod:`scix_core.recommend.fits`) — refitted on the clock like any stale
    part — and a background refit adopts a fit another process just made of nearly the same saves.
    Without it (the offline evaluation) every fit is of the saves as they are. A slow part is due for a
    refit once its fit is ``refit_age_s`` old and the saves have grown by ``refit_growth`` since;
    ``detached`` starts that refit in another process (the command line's, which ends before a thread would
    finish), else a background thread makes it.
    """

    def __init__(
        self,
        state: UserState,
        index: str,
        catalog: Catalog,
        model: ItemScorer | None = None,
        base: Callable[[], Iterable[tuple[str, str]]] | None = None,
        refresh_s: float = 0.0,
        parts: frozenset[str] | None = None,
        tier_parts: frozenset[str] | None = None,
        weigh_tiers: bool = False,
        weights_cache: Path | None = None,
        weights_at: int = WEIGHTS_AT,
        lag: bool = False,
        refit_age_s: float = 0.0,
        refit_growth: float = REFIT_GROWTH,
        detached: Callable[[], object] | None = None,
    ):
        self.state, self.index, self.catalog = state, index, catalog
        # which of an ensemble's parts score for Tier 1 and for Tiers 3 and 2 (None: all of them)
        self.parts, self.tier_parts = parts, tier_parts
        self.refresh_s = refresh_s  # co-save scores may use a matrix this many seconds old
        self.lag = lag or refresh_s > 0
        self.refit_age_s, self.refit_growth, self.detached = refit_age_s, refit_growth, detached
        # the fit cache folders of the parts that keep their fits on disk (the record lives in the first)
        self._folders = sorted(
            {Path(m.cache_dir) for m, _ in getattr(model, "parts", ()) if getattr(m, "cache_dir", None)}
        )
        if self.lag and isinstance(model, Ensemble):  # start from this community's last fit of each slow part
            model = replace(model, parts=_stale_share(model.parts, 0.0, self._own_fits()))
        self._checked = -np.inf  # when the state was last asked for new saves (time.monotonic)
        self.model = model or collab_model()
        self._base = base
        self._lock = threading.Lock()
        self._seen_id = -1
        self._read_id = 0
        self._users: dict[str, int] = {}  # by arrival
        self._ranks = np.zeros(0, dtype=np.int64)  # each user's row in the matrix: the order of their ids
        self._pairs: set[tuple[int, int]] = set()
        # the pairs in arrival order, for a cheap matrix rebuild (grown by the new pairs only)
        self._user_col = np.zeros(0, dtype=np.int64)
        self._item_col = np.zeros(0, dtype=np.int64)
        self._matrix = None
        self._libraries: Libraries | None = None
        self.version = 0  # + 1 at every new fitted model (:meth:`current`)
        self._fitted = None
        self._savers = np.zeros(len(catalog), dtype=np.int64)
        self._background: threading.Thread | None = None
        self._refit_parts: tuple[str, ...] = ()
        self.failure = ""  # why the last fit left the community without a signal (or a part stale)
        # the tier parts' weights chosen on a validation split of the saves (collab/weights.py), once
        self.weigh_tiers, self.weights_cache = weigh_tiers, weights_cache
        self.weights_at = weights_at  # the list length the choice's validation recall is at
        self._weights: TierWeights | None = None
        self._weights_file: str | None = None  # where the weights in use are kept (the fit record names it)
        self._weights_lock = threading.Lock()

    @property
    def _fitted(self):
        """The fitted co-save model now (None before the first fit, or when no part fits)."""
        return self._fitted_model

    @_fitted.setter
    def _fitted(self, model) -> None:  # every new model (a refresh, a background refit adopted) a new version
        self._fitted_model = model
        self.version += 1

    def current(self) -> int:
        """The version of the co-save model a request made now would score with (new saves read first when
        ``refresh_s`` has passed): what a list kept for reuse was made under (recommend/reuse.py)."""
        with self._lock:
            self._refresh(lazy=True)
            return self.version

    @property
    def model_label(self) -> str:
        """What scores co-saves now, e.g. ``rp3beta+ease`` (a part that could not be fitted is missing)."""
        model = self._fitted or self.model
        return getattr(model, "label", model.name)

    @property
    def refitting(self) -> tuple[str, ...]:
        """The parts a background refit is fitting now (() when none is running)."""
        thread = self._background
        return self._refit_parts if thread is not None and thread.is_alive() else ()

    def _own_fits(self) -> dict:
        """Part name → the cached fits this community (index and user state) used lately, newest first: the
        only ones a lagging community starts from or adopts — another community's (an evaluation split's, a
        test's state over the same index) has other saves."""
        folders = self._folders
        record = read_record(folders[0], self.index, self.state.location) if folders else None
        return (record or {}).get("files", {})

    def _adopting(self, parts: tuple) -> tuple:
        """Ensemble ``parts`` as a lagging community refits them: a slow part takes a fit of this community
        another process made of nearly these saves (within ``refit_growth``, as recorded now) instead of
        repeating it."""
        return _stale_share(parts, 1 / (1 + self.refit_growth), self._own_fits())

    @property
    def refit_elsewhere(self) -> bool:
        """Whether a refit of this index's community is running in any process (one worker of a server
        refits for all, a detached ``scix users refit`` for the command line; the others take its fit at a
        later refresh, and their own :attr:`refitting` stays empty meanwhile)."""
        return any(held(refit_lock(folder, self.index)) for folder in self._folders)

    @property
    def saves(self) -> int:
        """Distinct (user, paper) saves in the matrix as of the last refresh."""
        return len(self._pairs)

    def _refresh(self, lazy: bool = False, fit: bool = True) -> None:
        """Read the saves recorded since the last refresh and refit (not with ``fit`` False: the caller fits).
        ``lazy``: not again within ``refresh_s`` of the last check once there is a matrix (``cosaves``;
        ``warm`` is never lazy)."""
        now = time.monotonic()
        if lazy and self._matrix is not None and now - self._checked < self.refresh_s:
            return
        self._checked = now
        last = self.state.last_interaction()
        if last == self._seen_id:
            return
        from scipy.sparse import csr_matrix

        new = self.state.saves_since(self.index, self._read_id)
        row = self.catalog.row
        base = [(0, user, paper) for user, paper in self._base()] if self._base is not None else []
        self._base = None
        added: list[tuple[int, int]] = []
        for _, user, paper in [*base, *new]:
            pair = (self._users.setdefault(user, len(self._users)), row.get(paper, -1))
            if pair[1] >= 0 and pair not in self._pairs:
                self._pairs.add(pair)
                added.append(pair)
        if added:
            users_added, items_added = np.asarray(added, dtype=np.int64).reshape(-1, 2).T
            self._user_col = np.concatenate([self._user_col, users_added])
            self._item_col = np.concatenate([self._item_col, items_added])
        if new:
            self._read_id = new[-1][0]
        if new or base or self._matrix is None:
            # users in the order of their ids, not of their arrival: the same saves read in another order (an
            # evaluation's replay with or without its per-tier sample, another process's) make the same
            # matrix, and so the same fits, neighbour ties and sums to the last digit
            users, items = self._rows_by_id()[self._user_col], self._item_col
            self._matrix = csr_matrix(
                (np.ones(len(users), dtype=np.float32), (users, items)),
                shape=(max(len(self._users), 1), len(self.catalog)),
            )
            self._savers = np.bincount(items, minlength=len(self.catalog))
            if fit:
                self._fit()
                self._note_fit(last)
        self._seen_id = last

    def _rows_by_id(self) -> np.ndarray:
        """Each user's matrix row (by arrival index): their rank in the order of the user ids."""
        if len(self._ranks) != len(self._users):
            ids = list(self._users)
            order = sorted(range(len(ids)), key=ids.__getitem__)
            self._ranks = np.empty(len(ids), dtype=np.int64)
            self._ranks[order] = np.arange(len(ids))
        return self._ranks

    def _fit(self) -> None:
        """Refit on the new matrix: in line, except an ensemble part whose last fit was slow — it keeps
        scoring as it is (the user's current saves still count) and is refitted in the background once it
        is due (:meth:`_due`)."""
        try:
            first = not isinstance(self._fitted, Ensemble)
            if first:
                self._fitted = replace(self.model).fit(self._matrix)
                self.failure = "; ".join(getattr(self._fitted, "dropped", ()))
                if not isinstance(self._fitted, Ensemble):
                    return
                # a part may have started from a stale cached fit: a quick one is redone now, a slow one in
                # the background (below); a server's later fits adopt another worker's fit of (nearly) the
                # same saves instead of repeating it
                parts = self._fitted.parts
                self._fitted = replace(
                    self._fitted, parts=self._adopting(parts) if self.lag else _stale_share(parts, None)
                )
            slow = tuple(p.model.name for p in self._fitted.fitted if p.seconds > INLINE_FIT_S)
            # a first fit refits only the quick parts it loaded stale
            fresh = (
                {p.model.name for p in self._fitted.fitted if p.saves >= self._matrix.nnz} if first else set()
            )
            keep = {*slow, *fresh}
            if not first or len(keep) < len(self._fitted.fitted):
                self._fitted = self._fitted.refit(self._matrix, keep=tuple(keep))
            self.failure = "; ".join(self._fitted.dropped)
        except ConfigError as exc:  # no part fits this catalogue: the tiers run content-only, saying why
            self._fitted, self.failure = None, str(exc)
            return
        due = self._due(slow)
        if due and self.detached is not None:
            self.detached()  # another process refits; a later one starts from its fit
        elif due and not (self._background and self._background.is_alive()):
            self._refit_parts = due
            self._background = threading.Thread(
                target=self._refit_in_background, args=(self._fitted, self._matrix, due), daemon=True
            )
            self._background.start()

    def _due(self, slow) -> tuple[str, ...]:
        """The slow parts (names in ``slow``) whose fit is at least ``refit_age_s`` old and has seen fewer
        than the saves of now by ``refit_growth``."""
        now = time.time()
        return tuple(
            p.model.name
            for p in self._fitted.fitted
            if p.model.name in slow
            and self._matrix.nnz >= (1 + self.refit_growth) * p.saves
            and now - p.at >= self.refit_age_s
        )

    def _refit_in_background(self, fitted: Ensemble, matrix, names: tuple[str, ...]) -> None:
        keep = tuple(p.model.name for p in fitted.fitted if p.model.name not in names)
        if self.lag:  # adopt a fit another process of this community made meanwhile, as it is recorded now
            fitted = replace(fitted, parts=self._adopting(fitted.parts))
        cached = [m for m, _ in fitted.parts if m.name in names and getattr(m, "cache_dir", None) is not None]
        try:
            if cached:  # a part with a disk cache is fitted in a child process first, one at a time
                with try_exclusive(refit_lock(Path(cached[0].cache_dir), self.index)) as mine:
                    if not mine:  # another worker is refitting: its fit is taken at a later refresh
                        return
                    for model in cached:
                        fit_in_child(model, matrix)
            fresh = fitted.refit(matrix, keep=keep)  # ... and loaded from the cache here
        except Exception as exc:  # noqa: BLE001 — the stale part keeps scoring; the reason is kept
            self.failure = f"background refit of {'+'.join(names)} failed: {exc}"
            return
        with self._lock:
            if isinstance(self._fitted, Ensemble):
                self._fitted = self._fitted.adopt(fresh, names)
                self._note_fit(self._seen_id)

    def refit_now(self) -> None:
        """Fit every part on the saves of now — no stale fit taken, the slow parts' fits written to the fit
        cache, where every lagging community of the index starts from them — and choose (or take) the tier
        weights: what ``scix users refit`` and a detached refit run, holding :func:`refit_lock`."""
        with self._lock:
            self._refresh(fit=False)
            matrix, model = self._matrix, self.model
        if matrix is None:
            return
        if isinstance(model, Ensemble):
            model = replace(model, parts=_stale_share(model.parts, None))
        try:
            fitted = replace(model).fit(matrix)
        except ConfigError as exc:
            fitted, failure = None, str(exc)
        else:
            failure = "; ".join(getattr(fitted, "dropped", ()))
        if isinstance(fitted, Ensemble) and self.lag:  # later refits of this community adopt fits of others
            fitted = replace(fitted, parts=self._adopting(fitted.parts))
        with self._lock:
            self._fitted, self.failure = fitted, failure
            self._note_fit(self._seen_id)
        if fitted is not None and self.weigh_tiers:
            self.tier_weights(exact=True)

    def status(self) -> dict:
        """How old the co-save model is: the saves in the matrix, and for each part the saves it was fitted
        on, the saves since (negative: a stale fit of a larger community), its age and fit time; when a
        slow part is refitted (``refit_age_s``, ``refit_growth``), which are due and whether a refit is
        running (``--explain``, ``scix info``, ``/healthz``)."""
        with self._lock:
            fitted, matrix = self._fitted, self._matrix
        saves = int(matrix.nnz) if matrix is not None else 0
        now = time.time()
        parts = fitted.fitted if isinstance(fitted, Ensemble) else ()
        slow = [p.model.name for p in parts if p.seconds > INLINE_FIT_S]
        return {
            "model": self.model_label,
            "saves": saves,
            "parts": [
                {
                    "part": p.model.name,
                    "fitted_on": p.saves,
                    "saves_since": saves - p.saves,
                    "age_s": round(now - p.at, 1) if p.at else None,
                    "fit_s": round(p.seconds, 3),
                    "refit": "on the clock" if p.model.name in slow else "in line",
                }
                for p in parts
            ],
            "refit_age_s": self.refit_age_s,
            "refit_growth": self.refit_growth,
            "due": list(self._due(slow)) if parts and matrix is not None else [],
            "refitting": bool(self.refitting) or self.refit_elsewhere,
            "failure": self.failure or None,
        }

    def _note_fit(self, last_id: int) -> None:
        """The fit in use into the record of this index and user state (:func:`read_record`; lagging
        communities only: the offline evaluation's are of a split): its parts, the saves each saw and when,
        the last interaction id read, and each part's cached fits — this one first — that the next process
        may start from."""
        folders = self._folders
        if not self.lag or not folders or not isinstance(self._fitted, Ensemble):
            return
        named = [(p.model.name, getattr(p.model, "cache_file", None)) for p in self._fitted.fitted]
        write_record(
            folders[0],
            self.index,
            self.state.location,
            {
                "index": self.index,
                "state": self.state.location,
                "model": self.model_label,
                "saves": int(self._matrix.nnz),
                "last_id": int(last_id),
                "written_at": time.time(),
                "parts": {
                    p.model.name: {"saves": p.saves, "at": p.at, "seconds": p.seconds}
                    for p in self._fitted.fitted
                },
            },
            [*named, ("weights", self._weights_file)],
        )

    def start_from(self, other: Community, changes=()) -> None:
        """Begin with ``other``'s fitted model where this community is ``other``'s with some users' saves
        changed (``(old rows, new rows)`` pairs: the offline evaluation's per-tier truncations). At the
        first refresh the fast parts are refitted on this community's saves; a slow part is updated for
        the changes when it can be (EASE: :meth:`Ease.with_rows_changed`, exact) and refitted otherwise."""
        with other._lock:
            fitted = other._fitted
        if isinstance(fitted, Ensemble):
            grown = sum(len(new) - len(old) for old, new in changes)
            parts = []
            for p in fitted.fitted:  # a part left out here is fitted at the first refresh
                updated = getattr(p.model, "with_rows_changed", lambda _: None)(changes)
                if updated is not None:
                    parts.append(replace(p, model=updated, saves=p.saves + grown))
            fitted = replace(fitted, fitted=tuple(parts))
        with self._lock:
            self._fitted = fitted
        if self.weigh_tiers and other.weigh_tiers:  # the weights of the community this one varies
            self._weights = other.tier_weights()

    def warm(self) -> None:
        with self._lock:
            self._refresh()
        if self.weigh_tiers:
            self.tier_weights()

    @property
    def weights_chosen(self) -> dict | None:
        """What the tier weights' choice saw and took (None before it was made, or with equal weights)."""
        weights = self._weights
        return None if weights is None or not self.weigh_tiers else weights.facts

    def tier_weights(self, exact: bool = False) -> TierWeights:
        """The weights of the tiers' co-save parts (``recommend.tier_weights``), chosen at the first ask on
        the saves of then (:func:`scix_core.recommend.collab.weights.choose`) and kept: in the fit cache
        under a hash of those saves, so the same community — a second evaluation of a split — reads them
        back. A lagging community (a server, the command line, a notebook) takes, as it takes a stale fit,
        the choice its own record names (:meth:`_note_fit`), else the newest kept choice of the index's
        parts and catalogue made on at least ``KEPT_WEIGHTS_SHARE`` of its saves (an offline evaluation's
        choice, on a split's training saves, is not one), and chooses only when there is none. ``exact``
        (a refit): chosen again on the saves of now unless these very saves were chosen on."""
        with self._weights_lock:
            if exact:
                self._weights = None
            if self._weights is not None:
                return self._weights
            with self._lock:
                self._refresh(lazy=True)
                matrix, model, fitted = self._matrix, self.model, self._fitted
            if not self.weigh_tiers or not isinstance(model, Ensemble) or matrix is None:
                self._weights = TierWeights(facts={"reason": "equal weights (recommend.tier_weights)"})
                return self._weights
            self._weights = self._kept_weights(model, matrix, fitted, exact)
            with self._lock:  # the record names the choice: the next process of this community takes it
                self._note_fit(self._seen_id)
            return self._weights

    def take_weights(self, other: Community) -> None:
        """Use ``other``'s tier weights (chosen there when not yet) instead of choosing on these saves: the
        scorer trainer's community is its recommender's saves less an inner hold-out, and its examples'
        features are then those served (a second choice cost a cold evaluation 35 s of a slow core)."""
        chosen = other.tier_weights()
        with self._weights_lock:
            self._weights = chosen

    def _kept_weights(self, model: Ensemble, matrix, fitted, exact: bool = False) -> TierWeights:
        start = fitted if isinstance(fitted, Ensemble) else None  # its EASE part the validation fits update
        order = [m.name for m, _ in model.parts]
        mine = tuple(n for n in order if self.parts is None or n in self.parts)
        tiers = tuple(n for n in order if self.tier_parts is None or n in self.tier_parts)
        asked = questions(mine, tiers)
        names = set(mine) | set(tiers)
        # what the choice depends on besides the saves (not the index's name: indexes share it; not the
        # catalogue's size: papers nobody saved never score in a co-save part, and an append adds such papers)
        sign = {
            "questions": repr(asked),
            "procedure": repr(PROCEDURE),
            "at": self.weights_at,
            "parts": [[m.name, repr(sorted(_params(m).items()))] for m, _ in model.parts if m.name in names],
        }
        if self.weights_cache is None:
            return choose(model, matrix, asked, start=start, k=self.weights_at)
        saves = matrix.sorted_indices()  # the same saves hash alike, whatever order they arrived in
        digest = hashlib.sha1(repr(sign).encode())
        digest.update(saves.indptr.tobytes())
        digest.update(saves.indices.tobytes())
        folder = Path(self.weights_cache)
        path = folder / f"tier-weights-{digest.hexdigest()[:16]}.json"
        # one lock per choice (these saves, these parts): processes asking the same one wait for it and read
        # it back; another index's choice in the same folder, or another split's, goes ahead (one lock for the
        # folder held a notebook's first recommendation 30 s behind an evaluation's choice)
        with exclusive(path):
            kept = [path] if path.exists() else []
            stale = self.lag and not kept and not exact
            own = [folder / name for name in self._own_fits().get("weights", ())] if stale else []
            if stale:  # the choice this community last used, else the newest of this index for these parts
                kept = [*own, *sorted(folder.glob("tier-weights-*.json"), key=mtime, reverse=True)]
            for candidate in kept:
                try:
                    note = read_json(candidate)
                except (OSError, ValueError):
                    continue
                ours = note.get("index") == self.index and (
                    candidate in own or note.get("saves", 0) >= KEPT_WEIGHTS_SHARE * matrix.nnz
                )
                if note.get("sign") == sign and (not stale or ours):
                    by_size = tuple((s, tuple((n, float(w)) for n, w in ws)) for s, ws in note["by_size"])
                    self._weights_file = candidate.name
                    return TierWeights(by_size, {**note["facts"], "kept": candidate.name})
            self._weights_file = path.name
            weights = choose(model, matrix, asked, start=start, k=self.weights_at)
            by_size = [[s, [list(nw) for nw in ws]] for s, ws in weights.by_size]
            note = {
                "sign": sign,
                "index": self.index,
                "saves": int(matrix.nnz),
                "by_size": by_size,
                "facts": weights.facts,
            }
            write_json_atomic(path, note)
            keep_newest(folder, "tier-weights-*.json", KEEP_WEIGHTS)
            return weights

    def makes(self, model) -> bool:
        """Whether ``model`` (unfitted) is one of the parts this community fits — the same kind and
        parameters: a fit of it on the community's saves is the community's own."""
        parts = [m for m, _ in self.model.parts] if isinstance(self.model, Ensemble) else [self.model]
        return any(type(p) is type(model) and _params(p) == _params(model) for p in parts)

    def fitted_like(self, model, matrix) -> object | None:
        """The community's fitted part with ``model``'s parameters when it was fitted on the same saves as
        ``matrix`` (the offline evaluation's EASE peer reuses the community's), else None."""
        with self._lock:
            self._refresh()
            fitted, mine = self._fitted, self._matrix
        parts = [p.model for p in fitted.fitted] if isinstance(fitted, Ensemble) else [fitted]
        if (
            mine is None
            or mine.nnz != matrix.nnz
            or not np.array_equal(self._savers, np.asarray((matrix > 0).sum(axis=0)).ravel())
        ):
            return None
        fits = fitted.fitted if isinstance(fitted, Ensemble) else [None]
        for part, fit in zip(parts, fits):
            same_saves = fit is None or fit.saves == matrix.nnz  # not a part kept from fewer or more saves
            if type(part) is type(model) and _params(part) == _params(model) and same_saves:
                return part
        return None

    def wait(self, timeout: float | None = None) -> None:
        """Until a background refit, if one is running, has finished (tests, a clean shutdown)."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)

    def libraries(self) -> Libraries | None:
        """Who saved what as of the last refresh (None before any save)."""
        with self._lock:
            self._refresh(lazy=True)
            return self._snapshot()

    def _snapshot(self) -> Libraries | None:
        if self._libraries is None or self._libraries.by_user is not self._matrix:
            self._libraries = Libraries(self._matrix) if self._matrix is not None else None
        return self._libraries

    def prime(self, queries: list) -> None:
        """The co-save model scores ``queries`` (users' saved rows) ahead, in one batch where a part can
        (:meth:`Ensemble.prime <scix_core.recommend.collab.ensemble.Ensemble.prime>`)."""
        with self._lock:
            self._refresh(lazy=True)
            model = self._fitted
        getattr(model, "prime", lambda _: None)(queries)

    def cosaves(self, saved_rows: np.ndarray) -> CoSaves | None:
        """The user's co-save scores, or None when no other user saved any of their papers (by Tier 1's
        parts, ``recommend.collab``; the tiers' own, :attr:`CoSaves.for_tiers`, follow when asked)."""
        with self._lock:
            self._refresh(lazy=True)
            matrix, model, savers = self._matrix, self._fitted, self._savers
            self._snapshot()
        if not len(saved_rows) or model is None or matrix is None or not matrix.nnz:
            return None
        tiers, weights = None, None
        if isinstance(model, Ensemble):
            chosen = self.tier_weights()
            mine = chosen.for_tier1()  # Tier 1's parts as chosen for the index (None: its own, equal)
            names = self.parts if mine is None else [n for n, w in mine.items() if w > 0]
            each = model.normalised(saved_rows, names)
            scores = summed(each, None, mine)
            label = "+".join(n if mine is None or mine[n] == 1 else f"{n}:{mine[n]:g}" for n in each)
            if self.tier_parts != self.parts:
                weights = chosen.for_saves(len(saved_rows))

                def tiers() -> np.ndarray:
                    more = model.normalised(saved_rows, [n for n in self.tier_parts if n not in each])
                    out = _scaled(summed({**each, **more}, self.tier_parts, weights), saved_rows)
                    return np.zeros(len(self.catalog), dtype=np.float32) if out is None else out

        else:
            scores, label = model.scores(saved_rows), model.name
        scores = _scaled(scores, saved_rows)
        if scores is None:
            return None
        return CoSaves(scores, savers, label, self._libraries, tiers, weights)


def _scaled(scores: np.ndarray | None, saved_rows: np.ndarray) -> np.ndarray | None:
    """Co-save scores (changed in place) with the saved rows 0, divided by the best; None when none is
    positive."""
    if scores is None:
        return None
    scores[saved_rows] = 0.0
    best = float(scores.max()) if len(scores) else 0.0
    return scores / best if best > 0 else None
