"""Stage 9: Maximal Marginal Relevance (Carbonell & Goldstein 1998) down to top_k, λ =
``recommend.mmr_lambda`` (0.8; the reference design's 0.6 in ``scix_core/data/reference.toml``).

pick = argmax λ · rel(d) − (1 − λ) · max_{s ∈ picked} cos(d, s), on the
candidates' real vectors. Relevance is min-max scaled to [0, 1] over the
pool first (all 1 when every score is equal), so λ trades the same units
whatever the scorer's range. λ below ~0.5 degrades relevance visibly; above
~0.8 the feed collapses toward one interest (reference design).

MMR over the pooled scores still lets the dominant interest take most of
the slots. ``recommend.mmr_quota_bonus`` β (0: the reference design's MMR
exactly) adds β to the gain of every candidate whose interest cluster has
fewer picks than its share of the final slots — the clusters' quotas
re-allocated over ``limit`` by largest remainder, at least one each while
slots last (:func:`slot_targets`) — so the quotas of stage 4 shape the
final list too, softly: a candidate far less relevant than the rest still
loses its slot.

A list longer than the configured ``limit`` (``recommend.tail_reach``): past
the first ``limit`` picks every n-th is a reach pick (:func:`tail_of`), at
λ ``mmr_tail_lambda`` (0: the candidate least like every pick so far), the
only picks that may take the co-saved papers past ``cosave_candidates``
(``Candidate.reach``). The other picks are the list without them.

Over a candidate pool (a feed's window, the cold-item protocol's new papers)
there is nothing to reach; there a user of at most ``pool_spread_clusters``
interest clusters gets the page's last pick at λ ``pool_spread_lambda`` instead
(the spread pick, :func:`tail_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.interests import neighbourhood
from scix_core.recommend.stages.base import Tier1State
from scix_core.recommend.stages.quota import allocate

QUOTA_SHAPES = ("step", "deficit")

#: MMR's picks at another λ: (head, λ', n) — after the first ``head`` picks every n-th — and, with a fourth
#: element, only the picks before it
Tail = tuple[int, float, int] | tuple[int, float, int, int]


def slot_targets(state: Tier1State, pool, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(group index per pool candidate, -1 for none; each group's share of ``k`` slots by its cluster's
    quota)."""
    clusters = [c for c in state.clusters if any(x.cluster_id == c.cluster_id and not x.reach for x in pool)]
    index = {c.cluster_id: i for i, c in enumerate(clusters)}
    targets = allocate([c.quota for c in clusters], k, 1) if clusters else []
    return (
        np.array([index.get(x.cluster_id, -1) for x in pool], dtype=np.int64),
        np.array(targets, dtype=np.int64),
    )


def mmr(relevance: np.ndarray, vectors: np.ndarray, k: int, lam: float, *args, **kwargs) -> list[int]:
    """Indices into the pool in pick order at ``lam``: :func:`mmr_many` at that one λ (its other parameters,
    positional or by name)."""
    return mmr_many(relevance, vectors, k, (lam,), *args, **kwargs)[0]


def mmr_many(
    relevance: np.ndarray,
    vectors: np.ndarray,
    k: int,
    lams: Sequence[float],
    groups: np.ndarray | None = None,
    targets: np.ndarray | None = None,
    bonus: float = 0.0,
    shape: str = "step",
    cover: tuple[np.ndarray, np.ndarray] | None = None,
    cover_gain: float = 0.0,
    tail: Tail | None = None,
    reach: np.ndarray | None = None,
    later: tuple[int, np.ndarray] | None = None,
) -> list[list[int]]:
    """MMR at each of ``lams`` over the same pool: per λ, indices into the pool in pick order. ``tail``
    (:data:`Tail`): after the first ``head`` picks, every n-th at λ' instead of the row's λ — the only picks
    that may take a candidate marked in ``reach`` (while others remain), whose scores do not set the
    relevance scale either; ``bonus`` for a candidate whose group is below its target — all of it
    (``shape="step"``), or in proportion to the share of the target still missing (``"deficit"``: a group
    with no pick yet gets all of it, one near its target little). ``cover``
    (:meth:`~scix_core.recommend.interests.Neighbourhood.cover`: each candidate's interest per neighbour, each
    interest's weight): + ``cover_gain`` × the weight of the interests a candidate would cover first.
    ``later`` (first pick, relevance): from that 0-based pick on, every pick but the tail's trades that
    relevance instead (min-max scaled the same way).

    The picks of every λ are made in step, one row per λ in each array, so a sweep costs about one MMR's
    array operations, not one per λ (the evaluation's λ sweep); each row's arithmetic is that λ's alone, to
    the bit, so a row is what :func:`mmr` at its λ picks."""
    n, m = len(relevance), len(lams)  # candidates, λs (a row each)
    if n == 0 or k <= 0:
        return [[] for _ in lams]
    rel = np.asarray(relevance, dtype=np.float64)
    held = np.zeros(n, dtype=bool) if reach is None or reach.all() else np.asarray(reach, dtype=bool)
    scaled = _scaled(rel, held)
    lam = np.asarray(lams, dtype=np.float64)[:, None]
    lam = (lam, np.full_like(lam, tail[1]) if tail is not None else lam)  # (λ, the reach picks' λ) per row
    rels, keep = (lam[0] * scaled, lam[1] * scaled), (1 - lam[0], 1 - lam[1])
    vecs = np.asarray(vectors, dtype=np.float32)  # only the picked rows of the similarity matrix are needed
    similar: dict[int, np.ndarray] = {}  # a picked candidate's similarities, shared by the λs that pick it
    picked = np.zeros((m, min(k, n)), dtype=np.int64)
    closest = np.full((m, n), -np.inf)  # max similarity to anything picked so far
    blocked = np.zeros((m, n))  # −inf where the row's λ has picked the candidate, added to its gain
    # the candidates held for the reach picks: −inf to the other picks while a row has a free one left
    shut, any_held = np.where(held, -np.inf, 0.0), bool(held.any())
    free = np.full(m, n - int(held.sum()))  # per λ: the unpicked candidates not held
    quota = bonus > 0 and groups is not None and targets is not None and len(targets) > 0
    if quota:
        # per λ, each group's picks so far; a last column for the candidates of no group (target 0: no bonus)
        counts = np.zeros((m, len(targets) + 1), dtype=np.int64)
        slot = np.where(groups >= 0, groups, len(targets))
        goal = np.append(np.asarray(targets, dtype=np.int64), 0)
        share = np.maximum(goal, 1)
    covering = cover is not None and cover_gain > 0
    if covering:
        from scipy import sparse  # imported where used (collab/matrix.py)

        assign, weight = cover
        # each candidate's weight in the interest it falls in per neighbour, a sparse candidates × interests
        # matrix: the cover term is its product with the interests no pick covers yet (a dense gather over
        # candidates × neighbours at every pick took 1.3 ms of MMR's 1.5 at 100 neighbours)
        reaches = sparse.csr_array(
            (weight[assign].ravel(), assign.ravel(), np.arange(0, assign.size + 1, assign.shape[1])),
            shape=(n, len(weight)),
        )
        live = np.ones((m, len(weight)))  # λs × interests
    if later is not None:
        second = lam[0] * _scaled(np.asarray(later[1], dtype=np.float64), held)
    for i in range(min(k, n)):
        reaching = is_reach(tail, i)
        past_page = later is not None and i >= later[0] and not reaching
        trade, kept = (second, keep[0]) if past_page else (rels[reaching], keep[reaching])
        gain = trade - kept * closest if i else trade.copy()
        if quota:
            missing = np.maximum(goal - counts, 0)  # per group, then per candidate by its group
            gain += bonus * (missing / share if shape == "deficit" else missing > 0)[:, slot]
        if covering:
            # (one λ: the matrix-vector product, which sums each row in the same order as the matrix one)
            gain += cover_gain * ((reaches @ live[0])[None, :] if m == 1 else (reaches @ live.T).T)
        gain += blocked
        if not reaching and any_held:
            if free.all():
                gain += shut
            else:
                gain[free > 0] += shut
        best = np.argmax(gain, axis=1)
        picked[:, i] = best
        for row, b in enumerate(best.tolist()):  # (element updates: cheaper than array ones at a few λs)
            blocked[row, b] = -np.inf
            free[row] -= not held[b]
            if quota:
                counts[row, slot[b]] += 1
            if covering:
                live[row, assign[b]] = 0.0
            if b not in similar:
                similar[b] = (vecs @ vecs[b]).astype(np.float64)
            np.maximum(closest[row], similar[b], out=closest[row])
    return picked.tolist()


def _scaled(relevance: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Min-max scaled by the candidates not ``held`` (all 1 when those are equal)."""
    low, span = relevance[~held].min(), np.ptp(relevance[~held])
    return (relevance - low) / span if span > 0 else np.ones(len(relevance))


def is_reach(tail: Tail | None, pick: int) -> bool:
    """Whether the 0-based ``pick`` is one of the tail's picks: every n-th after the first ``head`` (and
    before the end, where the tail has one)."""
    if tail is None or pick < tail[0] or (len(tail) > 3 and pick >= tail[3]):
        return False
    return (pick - tail[0]) % tail[2] == tail[2] - 1


def tail_of(cfg: RecommendConfig, tier: int = 1, pooled: bool = False, clusters: int = 0) -> Tail | None:
    """MMR's picks at another λ in ``tier``. Outside a candidate pool, the reach picks past the configured
    list length: (``limit``, ``mmr_tail_lambda``, every ``mmr_tail_every`` — ``tier_tail_every`` in Tier 3,
    ``tier2_tail_every`` in Tier 2), or None without ``tail_reach``. They take the co-saved papers past
    ``cosave_candidates``; a paper nobody saved has no co-saves to reach into (its co-save score is the
    pool's estimate, recommend/pool.py), and over a pool (``pooled``: a day's listing, the cold-item
    protocol's new papers) they only spent a long list's slots on the candidates least like the rest.

    Over a pool, Tier 1's spread pick instead, for a user of at most ``pool_spread_clusters`` interest
    ``clusters``: the page's last pick (the ``limit``-th) at λ ``pool_spread_lambda``. Outside a pool the
    co-saved candidates carry the neighbourhood's other interests into the list; a pool has none, and a
    library that has shown few interests so far likely holds others (docs/history.md#cold-items)."""
    if pooled:
        spread = tier == 1 and 0 < clusters <= cfg.pool_spread_clusters and cfg.limit > 0
        return (cfg.limit - 1, cfg.pool_spread_lambda, 1, cfg.limit) if spread else None
    every = {3: cfg.tier_tail_every, 2: cfg.tier2_tail_every}.get(tier, cfg.mmr_tail_every)
    return (cfg.limit, cfg.mmr_tail_lambda, every) if cfg.tail_reach else None


def tier1_tail(state: Tier1State) -> Tail | None:
    """:func:`tail_of` for a Tier-1 state: over a pool or not, and its number of clusters."""
    return tail_of(state.side.config, 1, state.side.pool is not None, len(state.clusters))


@dataclass(frozen=True)
class PickInputs:
    """What stage 9's pick reads besides λ: the pool's vectors, each candidate's cluster group and each
    group's slot target, the neighbourhood's cover (None when the gain is off) and how many neighbours were
    read (None when it is off). The same for every λ: the evaluation's λ sweep reads them once."""

    vectors: np.ndarray
    groups: np.ndarray
    targets: np.ndarray
    cover: tuple[np.ndarray, np.ndarray] | None
    neighbours: int | None
    reach: np.ndarray  # per candidate: only the tail's picks may take it


def pick_inputs(state: Tier1State, pool, k: int) -> PickInputs:
    cfg = state.side.config
    vecs = state.side.vectors.get([c.row for c in pool])
    groups, targets = slot_targets(state, pool, k)
    cover, neighbours, cos = None, None, state.ctx.cosaves
    if cfg.tier1_neighbour_cover > 0 and cos is not None and cos.libraries is not None:
        hood = neighbourhood(cos.libraries, state.saved_rows, state.side.interests, state.side.vectors, cfg)
        cover = hood.cover(vecs, [c.row for c in pool]) if hood is not None else None
        neighbours = hood.users if hood is not None else 0
    return PickInputs(vecs, groups, targets, cover, neighbours, np.array([c.reach for c in pool], dtype=bool))


def tier1_picks(
    state: Tier1State, pool, k: int, lam: float, inputs: PickInputs | None = None
) -> tuple[list[int], np.ndarray, int | None]:
    """Stage 9's pick over ``pool`` (what the evaluation's Tier-1 runs finish with too): MMR at ``lam`` with
    the clusters' quota bonus and the neighbourhood's cover gain. (Picks, each cluster's slot target, how
    many users who saved the same papers were read — None when the gain is off.) ``inputs``:
    :func:`pick_inputs` of the same state, pool and ``k`` when already read."""
    got = inputs if inputs is not None else pick_inputs(state, pool, k)
    return tier1_sweep(state, pool, k, (lam,), got)[0], got.targets, got.neighbours


def tier1_sweep(
    state: Tier1State, pool, k: int, lams: Sequence[float], inputs: PickInputs
) -> list[list[int]]:
    """:func:`tier1_picks`'s picks at each of ``lams`` in one pass (:func:`mmr_many`: the evaluation's λ
    sweep)."""
    cfg = state.side.config
    return mmr_many(
        np.array([c.score for c in pool]),
        inputs.vectors,
        k,
        lams,
        inputs.groups,
        inputs.targets,
        cfg.mmr_quota_bonus,
        cfg.mmr_quota_shape,
        inputs.cover,
        cfg.tier1_neighbour_cover,
        tier1_tail(state),
        inputs.reach,
        later_of(state, pool),
    )


def later_of(state: Tier1State, pool) -> tuple[int, np.ndarray] | None:
    """Over a candidate pool, the picks past the page (``limit``) by each candidate's ``later`` score (the
    scorer's, :meth:`HeuristicScorer.later <scix_core.recommend.scorers.heuristic.HeuristicScorer.later>`);
    None outside a pool or when the scorer gave none."""
    if not ranks_later(state, pool):
        return None
    return state.side.config.limit, np.array([c.later for c in pool], dtype=np.float64)


def ranks_later(state: Tier1State, pool) -> bool:
    """Whether the picks past the page rank by a later score (:func:`later_of` gives one)."""
    return state.side.pool is not None and bool(pool) and all(c.later is not None for c in pool)


class Mmr:
    name, writes = "mmr", "selected"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        pool = state.kept
        cfg = state.side.config
        lam, bonus = cfg.mmr_lambda, cfg.mmr_quota_bonus
        tail = tier1_tail(state)
        picks, targets, neighbours = tier1_picks(state, pool, state.limit, lam)
        selected = tuple(pool[i] for i in picks)
        moves = tuple((pool[i].paper_id, i + 1, pos) for pos, i in enumerate(picks, start=1))
        summary = {
            "lambda": lam,
            "quota_bonus": bonus,
            "quota_shape": cfg.mmr_quota_shape,
            "slot_targets": {
                c.cluster_id: int(t)
                for c, t in zip(
                    [c for c in state.clusters if any(x.cluster_id == c.cluster_id for x in pool)], targets
                )
            },
            "pool": len(pool),
            "neighbours": neighbours,  # users who saved the same papers, read for their interests
            "picked": len(selected),
            "moved": sum(1 for _, rel, pos in moves if rel != pos),
            "moves": [list(m) for m in moves],
            "clusters_picked": sorted({c.cluster_id for c in selected if c.cluster_id is not None}),
        }
        tails = [c.paper_id for i, c in enumerate(selected) if is_reach(tail, i)]
        if state.side.pool is None:  # the tail's picks past the limit that could take the further co-saves
            summary["reach_picks"] = tails
        else:  # the page's last pick, spread for a library of few interests (none: not this user)
            summary["spread_pick"] = tails[0] if tails else None
            # the picks past the page, ranked by the scorer's later score (none: the one ranking throughout)
            summary["later_from_pick"] = cfg.limit + 1 if ranks_later(state, pool) else None
        return replace(state, selected=selected, mmr_moves=moves), summary
