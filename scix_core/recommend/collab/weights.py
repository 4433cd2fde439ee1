"""The weights of the co-save parts, chosen per index on a validation split of its own saves.

Each tier sums its co-save parts (RP3beta, EASE^R, iALS), each divided by
the user's best score: Tiers 3 and 2 those of ``recommend.tier_collab``,
Tier 1 those of ``recommend.collab``. Which part predicts best depends on the
community: on CiteULike-a RP3beta's walk, EASE and iALS are close; on a
sparser bag-of-words set made from it (``python -m scix_core.data.thin``)
iALS alone beat the equal sum at three saves by a seventh, and Tier 1's
RP3beta + EASE by a tenth with whole libraries (docs/history.md). So the
weights are chosen per index, the way the peers' hyperparameters are, for
three questions — one save (Tier 3), three saves (Tier 2), a whole library
(Tier 1, which may then take a part only the tiers had):

1. up to ``USERS`` users with at least ``MIN_SAVES`` saves (seeded, by a key
   made of each user's saves — not the order users joined the community; as
   many as the peers' validation split in ``scix eval-recs``) each set aside
   a fifth of their saves (at least one);
2. for one and three saves the parts are fitted on the community without
   those users (a user who asks with few saves brings nothing else the fit
   could know: the per-tier tables' protocol, where their rows are cut to
   those saves), and each of them asks with ``QUERIES`` seeded sets of one
   or three of their kept saves — the parts score from the asking saves
   alone (RP3beta's and EASE's item rows, iALS's fold-in); for a whole
   library they are fitted with those users' kept saves, and each asks with
   all of them (no disk cache: a validation fit never displaces the
   community's own; EASE's is the community's fit of the same saves updated
   for the changed rows by the Woodbury identity, exact but for float32
   rounding, whose residue at the removed ties is set to 0 — it ranked a
   validation user's own set-aside saves first and flattered EASE; a refit at
   17k items cost a slow core 165 s). Recall@k of the set-aside saves (k: ``recommend.tier_weights_at``, 10;
   not an evaluation's cutoff — at fifty it cost Tier 1 on CiteULike-a), averaged over a
   user's queries (their kept saves never offered), is computed for every
   point of a small grid of weights — several queries a user steady a
   one-save user's 0-or-1 recall (with one query each, the thinned set's
   one- and three-save choices changed with the split seed);
3. the best point replaces the configured weights (equal for the tiers;
   Tier 1's own parts at 1, the others at 0) only when it beats them
   significantly — a one-sided paired t-test over the validation users at
   ``ALPHA``: the best of a grid flatters itself, and a raw gain of a few
   percent did not carry into the cascade, where content similarity and MMR
   share the ranking.

A community too small for ``MIN_USERS`` validation users keeps the configured
weights, and says so. The choice depends only on the saves it is given: the
offline evaluation gives it the training saves, so held-out saves never
reach it.
"""

from __future__ import annotations

import itertools
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from scix_core.errors import ConfigError, MissingExtraError
from scix_core.recommend.collab.ensemble import Ensemble, Part

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

USERS = 1000  # validation users, at most
QUERIES = 5  # seeded asking sets of one or three saves a validation user
MIN_USERS = 50  # fewer: the configured weights
MIN_SAVES = 5  # a validation user's saves, at least (eval-recs' min_saves)
HOLDOUT = 0.2
LEVELS = (0.0, 0.5, 1.0)  # each part's weight on the grid (the best part's is 1)
ALPHA = 0.05  # a one-sided paired t-test's level
K = 10  # the list length the choice's recall is at, unless told (choose's k)
# what a kept choice was made by: a change here makes every kept choice stale (Community.tier_weights)
PROCEDURE = (USERS, QUERIES, MIN_USERS, MIN_SAVES, HOLDOUT, LEVELS, ALPHA, "apart", "keyed", "residue")


@dataclass(frozen=True)
class Question:
    """Which weights to choose: for validation users keeping ``size`` saves (None: all but the set-aside
    ones), over the parts ``names``, against the ``configured`` weights."""

    label: str  # "1", "3", "all"
    size: int | None
    names: tuple[str, ...]
    configured: tuple[float, ...]


def questions(parts: tuple[str, ...], tier_parts: tuple[str, ...]) -> tuple[Question, ...]:
    """Tier 3's (one save) and Tier 2's (three) over ``tier_parts`` against equal weights; Tier 1's (a whole
    library) over every part against its own ``parts`` at 1."""
    every = tuple(dict.fromkeys((*parts, *tier_parts)))
    equal = tuple(1.0 for _ in tier_parts)
    return (
        Question("1", 1, tier_parts, equal),
        Question("3", 3, tier_parts, equal),
        Question("all", None, every, tuple(1.0 if n in parts else 0.0 for n in every)),
    )


@dataclass(frozen=True)
class TierWeights:
    """Per question, each part's weight in that co-save sum, and what the choice saw."""

    by_size: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    facts: dict = field(default_factory=dict, compare=False)

    def for_saves(self, n: int) -> dict[str, float] | None:
        """Tiers 3 and 2's weights for a user with ``n`` saves: those of the largest size ≤ n (the smallest's
        below it); None (equal weights) when nothing was chosen."""
        chosen = None
        for label, weights in self.by_size:
            if label.isdigit() and (chosen is None or int(label) <= n):
                chosen = dict(weights)
        return chosen

    def for_tier1(self) -> dict[str, float] | None:
        """Tier 1's weights over every part (None: its own parts, equal)."""
        return next((dict(w) for label, w in self.by_size if label == "all"), None)


def grid(names: tuple[str, ...], first: tuple[float, ...] | None = None) -> list[tuple[float, ...]]:
    """Every weight vector over ``LEVELS`` with a best part at 1, ``first`` (equal weights when None)
    first."""
    points = [w for w in itertools.product(LEVELS, repeat=len(names)) if max(w) == 1.0]
    first = first or tuple(1.0 for _ in names)
    return [first, *sorted(p for p in points if p != first)]


def _keys(by_user: csr_matrix, users: np.ndarray, seed: int) -> np.ndarray:
    """A seeded key for each of ``users`` (matrix rows) made of the catalogue rows it saved, not of its
    position: which users validate, how each is split and what each asks with do not depend on the order
    the users joined the community (an evaluation's replay order, a server's arrivals)."""
    start = zlib.crc32(b"tier-weights") ^ (seed & 0xFFFFFFFF)
    saved = (np.sort(by_user.indices[by_user.indptr[u] : by_user.indptr[u + 1]]) for u in users)
    return np.array([zlib.crc32(r.astype(np.int64).tobytes(), start) for r in saved], dtype=np.int64)


def _validation(by_user: csr_matrix, users: np.ndarray, keys: np.ndarray, seed: int):
    """(user row, kept catalogue rows, set-aside rows, key) for each of ``users``, seeded by its key."""
    out = []
    for u, key in zip(users, keys):
        rows = np.sort(by_user.indices[by_user.indptr[u] : by_user.indptr[u + 1]])
        order = np.random.default_rng([seed, int(key)]).permutation(rows)
        held = max(1, int(round(HOLDOUT * len(rows))))
        out.append((int(u), np.sort(order[held:]), order[:held], int(key)))
    return out


def _queries(kept: np.ndarray, size: int | None, seed: int, key: int) -> list[np.ndarray]:
    """The sets of ``size`` kept saves a validation user asks with (all of them when None), seeded by the
    user's key."""
    if size is None or size >= len(kept):
        return [kept]
    rng = np.random.default_rng([seed, size, key])
    if size == 1:
        return [kept[[i]] for i in rng.choice(len(kept), min(QUERIES, len(kept)), replace=False)]
    return [np.sort(rng.choice(kept, size, replace=False)) for _ in range(QUERIES)]


def _unfitted(model: Ensemble, names: tuple[str, ...]) -> Ensemble:
    """The ensemble's parts named in ``names``, fitted without a disk cache or a stale start."""
    parts = []
    for part, weight in model.parts:
        if part.name not in names:
            continue
        changes = {k: None for k in ("cache_dir", "stale_share") if hasattr(part, k)}
        parts.append((replace(part, **changes), weight))
    return Ensemble(tuple(parts))


def _derived(start: Ensemble | None, names: tuple[str, ...], by_user: csr_matrix, changes) -> dict:
    """The parts of ``start`` (the community's fit of exactly ``by_user``) named in ``names`` that can be
    updated for the validation users' ``changes`` instead of refitted (EASE, by the Woodbury identity,
    exactly: on CiteULike-a, one slow core, each validation fit took 18–26 s with iALS and RP3beta refitted,
    where EASE's refit alone took 165 s), by name."""
    out = {}
    for part in getattr(start, "fitted", ()):
        # a part fitted on fewer saves (kept while a slow refit is due) or loaded stale saw other saves
        if (
            part.model.name not in names
            or part.saves != by_user.nnz
            or getattr(part.model, "fitted_saves", None)
        ):
            continue
        updated = getattr(part.model, "with_rows_changed", lambda _: None)(changes)
        if updated is not None:
            out[part.model.name] = updated
    return out


def _fit(model: Ensemble, by_user: csr_matrix, plan, apart: bool, names: tuple[str, ...], start=None):
    """(the parts fitted on the community with each validation user's row emptied — ``apart`` — or holding
    their kept saves only, seconds), or (why a part could not be fitted, 0). A part of ``start`` that can
    take the changed rows (:func:`_derived`) is updated rather than refitted."""
    t = time.perf_counter()
    matrix = by_user.tolil(copy=True)
    changes = []
    for u, kept, _, _ in plan:
        rows = [] if apart else kept.tolist()
        changes.append((by_user.indices[by_user.indptr[u] : by_user.indptr[u + 1]], np.asarray(rows)))
        matrix.rows[u], matrix.data[u] = rows, [1.0] * len(rows)
    wanted = tuple(dict.fromkeys(names))
    derived = _derived(start, wanted, by_user, changes)
    rest = tuple(n for n in wanted if n not in derived)
    try:
        fitted = _unfitted(model, rest).fit(matrix.tocsr()) if rest else Ensemble()
    except (ConfigError, MissingExtraError) as exc:
        return str(exc), 0.0
    if fitted.dropped:
        return "; ".join(fitted.dropped), 0.0
    seconds = round(time.perf_counter() - t, 1)
    parts = {p.model.name: p for p in fitted.fitted}
    for m, weight in model.parts:
        if m.name in derived:
            parts[m.name] = Part(derived[m.name], weight, seconds, int(matrix.nnz))
    order = [m.name for m, _ in model.parts if m.name in parts]
    return replace(fitted, fitted=tuple(parts[n] for n in order)), seconds


def _hits(scores: np.ndarray, parts: np.ndarray, kept: int, held: np.ndarray, k: int = K) -> np.ndarray:
    """For each grid point (a row of ``scores``: the points' sums of ``parts``, the ``kept`` saves at -1), how
    many of the ``held`` rows are among its best ``k`` — what a partition of each whole row gives, for less:
    the best of each part are the candidates; where exactly ``k`` rows of the whole row reach the ``k``-th
    best candidate's sum, they are its best ``k`` (no tie at that place, no better row outside); any other
    row is partitioned whole, as before. (The whole partitions took 6.4 s of the choice's 40 on CiteULike-a;
    this 1.1 s, with the same counts.)"""
    if scores.shape[1] <= k:  # the whole catalogue is the list
        return np.full(len(scores), len(held))
    depth = 2 * k + kept  # a part's best kept saves are candidates too, at -1
    if scores.shape[1] <= depth * len(parts):
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        return np.isin(top, held).sum(axis=1)
    candidates = np.unique(np.argpartition(-parts, depth, axis=1)[:, :depth])
    threshold = -np.partition(-scores[:, candidates], k - 1, axis=1)[:, k - 1]
    above = scores >= threshold[:, None]
    hits = above[:, held].sum(axis=1)
    whole = np.flatnonzero(above.sum(axis=1) != k)
    if len(whole):
        top = np.argpartition(-scores[whole], k, axis=1)[:, :k]
        hits[whole] = np.isin(top, held).sum(axis=1)
    return hits


def choose(
    model: Ensemble,
    by_user: csr_matrix,
    asked: tuple[Question, ...],
    seed: int = 0,
    start: Ensemble | None = None,
    k: int = K,
) -> TierWeights:
    """The part weights for this community's saves (``by_user``: users × catalogue rows), per question, by
    recall@``k``. ``start``: the community's own fit of these saves, whose EASE part the validation fits
    update rather than refit (:func:`_fit`)."""
    present = {p.name for p, _ in model.parts}
    asked = tuple(q for q in asked if len(q.names) >= 2 and set(q.names) <= present)
    if not asked:
        return TierWeights(facts={"reason": "one part: nothing to weigh"})
    eligible = np.flatnonzero(np.diff(by_user.indptr) >= MIN_SAVES)
    keys = _keys(by_user, eligible, seed)
    order = np.lexsort((eligible, keys))  # by key; identical libraries (one key) by row: interchangeable
    take = min(USERS, len(eligible))
    if take < MIN_USERS:
        return TierWeights(facts={"reason": f"{len(eligible)} users with {MIN_SAVES}+ saves: too few"})
    plan = _validation(by_user, eligible[order[:take]], keys[order[:take]], seed)
    fits: dict[bool, tuple] = {}
    by_size, facts = [], {}
    for q in asked:
        apart = q.size is not None  # one or three saves: the validation users' rows out of the fit
        if apart not in fits:
            fits[apart] = _fit(
                model,
                by_user,
                plan,
                apart,
                tuple(n for a in asked if (a.size is not None) == apart for n in a.names),
                start,
            )
        fitted, fit_s = fits[apart]
        if isinstance(fitted, str):  # a part that could not be fitted: the configured weights stay
            facts[q.label] = {"reason": fitted}
            continue
        t = time.perf_counter()
        points = np.array(grid(q.names, q.configured), dtype=np.float32)
        recall = np.zeros((len(plan), len(points)))
        asks = []  # (validation user, query, how many queries that user asks)
        for i, (_, kept, _, key) in enumerate(plan):
            asking = _queries(kept, q.size, seed, key)
            asks += [(i, query, len(asking)) for query in asking]
        for lo in range(0, len(asks), 256):  # the parts score a batch of queries at once
            batch = asks[lo : lo + 256]
            for (i, _, asked_by), each in zip(batch, fitted.normalised_many([a[1] for a in batch], q.names)):
                _, kept, held, _ = plan[i]
                parts = np.stack([each[n] for n in q.names])
                scores = points @ parts  # grid points × catalogue rows
                scores[:, kept] = -1.0  # never a kept save
                recall[i] += _hits(scores, parts, len(kept), held, k) / len(held) / asked_by
        mean = recall.mean(axis=0)
        best = int(np.argmax(mean))
        diff = recall[:, best] - recall[:, 0]
        se = float(diff.std(ddof=1) / np.sqrt(len(diff)))
        if not best:
            p = 1.0
        elif np.ptp(diff) == 0:  # every user gained alike: no spread for a t-test (scipy warns)
            p = 0.0 if diff[0] > 0 else 1.0
        else:
            from scipy.stats import ttest_rel  # scipy.stats loads scipy.optimize: kept off the cold path

            p = float(ttest_rel(recall[:, best], recall[:, 0], alternative="greater").pvalue)
        taken = best if p < ALPHA else 0
        by_size.append((q.label, tuple(zip(q.names, points[taken].tolist()))))
        facts[q.label] = {
            "users": len(plan),
            "k": k,
            "queries": QUERIES if q.size is not None else 1,
            "configured": dict(zip(q.names, q.configured)),
            "configured_recall": round(float(mean[0]), 4),
            "best": dict(zip(q.names, points[best].tolist())),
            "best_recall": round(float(mean[best]), 4),
            "se": round(se, 4),
            "p": round(p, 4),
            "taken": dict(zip(q.names, points[taken].tolist())),
            "seconds": round(time.perf_counter() - t, 1),
            "fit_seconds": fit_s,
        }
    return TierWeights(tuple(by_size), facts)
