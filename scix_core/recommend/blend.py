"""The community in Tiers 3 and 2: content hits and co-saved papers, one weighted score.

The reference design's Tiers 3 and 2 are content-only (Qdrant recommend on
the saved vectors; kNN on the EWMA profile). On an index whose other users
saved papers (``ctx.cosaves``), what they saved next to a user's one or
three papers predicts the held-out ones better than what reads like them
(``scix eval-recs`` per-tier tables, docs/history.md). With
``recommend.community_tiers`` on, a tier's content hits (fetched
``oversample`` × the limit) and the ``cosave_candidates`` best co-saved
papers form one pool, scored

    weight_cosine · similarity + community_weight · cosave

(``tier2_community_weight`` in place of ``community_weight`` in Tier 2; over a candidate pool
``pool_community_weight`` and ``tier2_pool_community_weight``, 2.0 and 4.0: there a paper's co-save score is
its text's estimate, and beside one or three saves it knew more than their similarity did,
docs/history.md#cold-items;
the similarity is the tier's own: best cosine to a saved paper for Tier
3, cosine to the long-term profile for Tier 2, computed locally for the
co-saved papers too; cosave in [0, 1], by ``recommend.tier_collab``:
:attr:`CoSaves.for_tiers`, its parts weighted as chosen for the index on a validation split —
``recommend.tier_weights``, the facts' ``cosave_weights``); the best ``limit`` are returned,
each with both features — picked by MMR (``tier_mmr_lambda``; ``tier2_mmr_lambda`` in Tier 2) with a quota
bonus (``tier3_quota_bonus``; ``tier2_quota_bonus`` in Tier 2; shaped as
``mmr_quota_shape``) for the pool's own interests (:func:`pool_targets`):
with one or three saves the user's clusters are not known yet, but what the
community saves beside them shows where else they may lead, and a pool
cluster with no pick yet is reached before the dominant one takes every
slot (docs/history.md: at one save, more of the user's later interests
covered at the same recall; at three, where a co-save weight of 2.0 then
spread the list, it cost recall). Without other users, or switched off,
the tier is the reference design's exactly.

With ``tier3_neighbour_cover`` / ``tier2_neighbour_cover`` on (defaults 2.0 and 3.0), the interests of the
users who saved the same papers (:mod:`scix_core.recommend.interests`) take the pool clusters' place:
MMR adds that weight times the share of those users' interests a candidate reaches first. It spreads the
list where such libraries actually grow rather than over whatever the pool holds (docs/history.md: at one
and three saves, more of the user's later interests covered for less recall than the pool bonus took).
Over a candidate pool (new papers nobody saved, a feed's window) the co-saved papers are gone, and every
candidate lies near the user's own papers, so the cover has nothing elsewhere to pick. There the
``pool_interest_hits`` pool papers nearest each of the neighbourhood's ``pool_interests`` heaviest
interests join the candidates (source ``neighbour-interest``), on the same score (docs/history.md#cold-items:
at one and three saves, more of the user's later interests covered for 0.003–0.004 of recall@10).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.context import IndexSide, UserContext, cosaved_count
from scix_core.recommend.interests import interest_rows, neighbourhood
from scix_core.recommend.result import RecItem
from scix_core.recommend.stages.cluster import ward_labels
from scix_core.recommend.stages.mmr import is_reach, mmr, tail_of
from scix_core.recommend.stages.quota import allocate
from scix_core.vectors.base import VectorHit


@dataclass(frozen=True)
class Blended:
    row: int
    paper_id: str
    score: float
    similarity: float
    cosave: float
    source: str  # the tier's own source, "co-saved" or "neighbour-interest"


def active(side: IndexSide, ctx: UserContext) -> bool:
    return side.config.community_tiers and ctx.cosaves is not None


def depth(side: IndexSide, ctx: UserContext, limit: int) -> int:
    """How many content hits a tier fetches: ``oversample`` × the limit when co-saved papers will compete."""
    return limit * side.config.oversample if active(side, ctx) else limit


def tier_items(
    side: IndexSide,
    ctx: UserContext,
    hits: list[VectorHit],
    similarity: Callable[[np.ndarray], np.ndarray],
    limit: int,
    tier: int,
    source: str,
    feature: str,
) -> tuple[tuple[RecItem, ...], dict]:
    """A tier's items — its content hits as they are, or blended with the community — and summary facts.
    ``feature`` names the tier's similarity in each item's scores (``best_score``, ``longterm_sim``)."""
    codes = side.catalog.codes
    if not active(side, ctx):
        items = tuple(
            RecItem(
                h.paper_id,
                "",
                rank,
                h.score,
                tier,
                source,
                scores=((feature, h.score),),
                codes=codes[h.point_id],
            )
            for rank, h in enumerate(hits, start=1)
        )
        return items, {"community": False, "co_saved": 0}
    blended, pool = blend(side, ctx, hits, similarity, limit, source, tier)
    items = tuple(
        RecItem(
            b.paper_id,
            "",
            rank,
            b.score,
            tier,
            b.source,
            scores=((feature, b.similarity), ("cosave", b.cosave)),
            codes=codes[b.row],
        )
        for rank, b in enumerate(blended, start=1)
    )
    facts = {"community": True, "co_saved": sum(1 for i in items if i.source == "co-saved"), **pool}
    if ctx.cosaves.tier_weights is not None:  # the co-save parts' weights chosen for this index
        facts["cosave_weights"] = ctx.cosaves.tier_weights
    return items, facts


def pool_targets(
    vectors: np.ndarray, scores: np.ndarray, limit: int, cfg: RecommendConfig, bonus: float
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The interests the pool shows — Ward clusters of its vectors, Tier 1's rule — and each one's share of
    the ``limit`` slots by the sum of its best ``limit`` scores, at least one each while slots last
    (:func:`~scix_core.recommend.stages.quota.allocate`); (None, None) when the tier's bonus is off."""
    if bonus <= 0:
        return None, None
    groups = ward_labels(vectors, cfg.max_clusters, cfg.min_silhouette)[0]
    mass = [np.sort(scores[groups == g])[::-1][:limit].clip(0).sum() for g in range(int(groups.max()) + 1)]
    return groups, np.array(allocate(mass, limit, 1), dtype=np.int64)


def _community_weight(cfg: RecommendConfig, tier: int, pooled: bool) -> float:
    if pooled:
        return cfg.tier2_pool_community_weight if tier == 2 else cfg.pool_community_weight
    return cfg.tier2_community_weight if tier == 2 else cfg.community_weight


def blend(
    side: IndexSide,
    ctx: UserContext,
    hits: list[VectorHit],
    similarity: Callable[[np.ndarray], np.ndarray],
    limit: int,
    source: str,
    tier: int = 3,
) -> tuple[list[Blended], dict]:
    """``hits`` (the tier's content results) ∪ the top co-saved papers, scored and cut to ``limit``; and
    what the pick saw (pool size, the pool clusters' slot targets when the tier's quota bonus is on)."""
    cfg, cat, cos = side.config, side.catalog, ctx.cosaves
    content = {h.point_id: float(h.score) for h in hits}
    seen = side.rows(p for p in ctx.seen if p in cat.row)
    # the co-saved papers past cosave_candidates (cosave_per_slot × a long list's limit) are the tail's reach
    found = [int(r) for r in cos.top(cosaved_count(cfg, limit, side.pool is not None), seen, tiers=True)]
    regular = [r for r in found[: cfg.cosave_candidates] if r not in content]
    gamma = cfg.tier2_neighbour_cover if tier == 2 else cfg.tier3_neighbour_cover
    hood = None
    if gamma > 0 and cos.libraries is not None:
        saved = side.rows(p for p in ctx.saved if p in cat.row)
        hood = neighbourhood(cos.libraries, saved, side.interests, side.vectors, cfg)
    interest = interest_rows(side, ctx, hood, {*content, *regular}, cfg.pool_interests)
    regular += interest
    taken = set(regular)
    extra = regular + [r for r in found[cfg.cosave_candidates :] if r not in content and r not in taken]
    reach = np.arange(len(content) + len(extra)) >= len(content) + len(regular)
    extra_sims = similarity(np.array(extra, dtype=np.int64)) if extra else np.zeros(0)
    rows = [*content, *extra]
    sims = np.array([*content.values(), *extra_sims.tolist()], dtype=np.float64)
    collab = cos.for_tiers[np.array(rows, dtype=np.int64)].astype(np.float64) if rows else np.zeros(0)
    weight = _community_weight(cfg, tier, side.pool is not None)
    score = cfg.weight_cosine * sims + weight * collab
    order = np.lexsort((np.array(rows), -score))
    facts: dict = {"pool": len(order), "reach": int(reach.sum())}
    lam = cfg.tier2_mmr_lambda if tier == 2 else cfg.tier_mmr_lambda
    tail = tail_of(cfg, tier, pooled=side.pool is not None)
    if min(lam, tail[1] if tail is not None and limit > tail[0] else 1.0) < 1.0 and len(order) > 1:
        # MMR over the pool, in score order (ties by row)
        vecs = side.vectors.get([rows[i] for i in order])
        bonus = cfg.tier2_quota_bonus if tier == 2 else cfg.tier3_quota_bonus
        cover = None
        if gamma > 0 and cos.libraries is not None and len(order) > limit:
            cover = hood.cover(vecs, [rows[i] for i in order]) if hood is not None else None
            facts["neighbours"] = hood.users if hood is not None else 0
        core = ~reach[order]  # the pool's own clusters, without the tail's reach
        found, targets = (
            pool_targets(vecs[core], score[order][core], limit, cfg, bonus)
            if len(order) > limit and cover is None
            else (None, None)
        )
        groups = None
        if found is not None:  # the reach belongs to no pool cluster
            groups = np.full(len(order), -1, dtype=np.int64)
            groups[core] = found
        picks = mmr(
            score[order],
            vecs,
            limit,
            lam,
            groups,
            targets,
            bonus,
            cfg.mmr_quota_shape,
            cover,
            gamma,
            tail,
            reach[order],
        )
        if targets is not None:
            facts["pool_slot_targets"] = targets.tolist()  # per pool cluster, in cluster order
            facts["pool_clusters_picked"] = len({int(groups[i]) for i in picks} - {-1})
        if tail is not None and limit > tail[0]:
            facts["reach_picks"] = [cat.ids[rows[order[i]]] for n, i in enumerate(picks) if is_reach(tail, n)]
        order = order[picks]
    else:
        order = order[~reach[order]]
    order = order[:limit]
    if interest:
        facts["neighbour_interest"] = len(interest)
    interests = set(interest)
    return [
        Blended(
            rows[i],
            cat.ids[rows[i]],
            float(score[i]),
            float(sims[i]),
            float(collab[i]),
            source if rows[i] in content else "neighbour-interest" if rows[i] in interests else "co-saved",
        )
        for i in order
    ], facts
