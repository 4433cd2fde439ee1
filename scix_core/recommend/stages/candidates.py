"""Stages 5-6c: per-cluster kNN (limit = quota × oversample), the short-term supplement, co-saved papers, and
over a candidate pool the papers nearest the neighbours' interests.

The per-cluster queries go to the vector store as one planned batch
(qdrant-edge ``query_batch``, qdrant-client ``query_batch_points``): the
engine runs them together instead of one round trip per cluster. Saved and
dismissed papers are excluded by the engine's payload filter. A paper found
by several clusters keeps its most similar one.

``CoSaved`` adds the ``recommend.cosave_candidates`` papers the index's other
users most often saved alongside this user's (``scix_core.recommend.community``)
that the vector queries missed, each in the cluster whose centroid is nearest
— collaborative candidates that content similarity alone never surfaces.

``NeighbourInterest`` (over a candidate pool only: new papers, a feed's window) adds the pool papers nearest
the ``recommend.tier1_pool_interests`` heaviest interests of the users who saved the same papers
(:func:`~scix_core.recommend.interests.interest_rows`), each in the cluster whose centroid is nearest.
Outside a pool their co-saved papers carry those interests; a pool holds none of them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.context import cosaved_count, papers_minus
from scix_core.recommend.interests import interest_rows, neighbourhood
from scix_core.recommend.profile import unit
from scix_core.recommend.stages.base import Candidate, Tier1State
from scix_core.search import knobs


class ClusterKnn:
    name, writes = "candidates", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        queries = np.stack([c.centroid for c in state.clusters])
        limits = [c.quota * side.config.oversample for c in state.clusters]
        # each point's paper read from the catalogue by its row, not from the store's payload
        results = side.store.search_batch(
            queries, limits, ctx.exclusion(side), exact=knobs.qdrant_exact(), ids=False
        )
        best: dict[str, Candidate] = {}
        for cluster, hits in zip(state.clusters, results):
            for paper, h in papers_minus(side, hits, ctx.seen):
                if paper not in best or h.score > best[paper].cosine:
                    best[paper] = Candidate(paper, h.point_id, "cluster-knn", cluster.cluster_id, h.score)
        per = {
            c.cluster_id: sum(1 for x in best.values() if x.cluster_id == c.cluster_id)
            for c in state.clusters
        }
        summary = {
            "limits": dict(zip((c.cluster_id for c in state.clusters), limits)),
            "unique": len(best),
            "per_cluster": per,
        }
        return replace(state, candidates=tuple(best.values())), summary


def nearest_clusters(state: Tier1State, rows) -> tuple[list[int], np.ndarray]:
    """(cluster id, cosine to its centroid) of the nearest cluster for each row."""
    if not len(rows):
        return [], np.zeros(0)
    sims = state.side.vectors.get(rows) @ np.stack([c.centroid for c in state.clusters]).T
    best = sims.argmax(axis=1)
    return [state.clusters[int(k)].cluster_id for k in best], sims[np.arange(len(best)), best]


class ShortTermSupplement:
    name, writes = "supplement", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        short = ctx.profiles.get("short")
        n = side.config.shortterm_supplement
        if short is None or n <= 0:
            return state, {"added": 0, "reason": "no short-term profile" if short is None else "disabled"}
        have = {c.paper_id for c in state.candidates}
        hits = papers_minus(
            side,
            side.store.search(
                unit(short.vector), n, ctx.exclusion(side), exact=knobs.qdrant_exact(), ids=False
            ),
            ctx.seen,
        )
        new = [(paper, h) for paper, h in hits if paper not in have]
        nearest, _ = nearest_clusters(state, [h.point_id for _, h in new])
        added = tuple(
            Candidate(paper, h.point_id, "supplement", k, h.score) for (paper, h), k in zip(new, nearest)
        )
        return replace(state, candidates=state.candidates + added), {"found": len(hits), "added": len(added)}


class CoSaved:
    name, writes = "co-saved", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        n = cosaved_count(side.config, state.limit, side.pool is not None)
        if ctx.cosaves is None or n <= 0:
            return state, {
                "added": 0,
                "reason": "disabled" if n <= 0 else "no other user saved any of these papers",
            }
        have = {c.row for c in state.candidates}
        exclude = np.array(
            sorted(have | set(side.rows(p for p in ctx.seen if p in side.catalog.row).tolist())),
            dtype=np.int64,
        )
        rows = ctx.cosaves.top(n, exclude)
        nearest, cosines = nearest_clusters(state, rows)
        ids = side.catalog.ids
        regular = side.config.cosave_candidates  # the rest are the MMR tail's reach
        added = tuple(
            Candidate(ids[int(r)], int(r), "co-saved", k, float(c), reach=i >= regular)
            for i, (r, k, c) in enumerate(zip(rows, nearest, cosines))
        )
        also = sum(1 for c in state.candidates if ctx.cosaves.scores[c.row] > 0)
        return replace(state, candidates=state.candidates + added), {
            "added": len(added),
            "reach": sum(c.reach for c in added),
            "model": ctx.cosaves.model,
            "vector_candidates_also_co_saved": also,
        }


class NeighbourInterest:
    name, writes = "neighbour-interest", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        cfg, cos = side.config, ctx.cosaves
        if side.pool is None:
            return state, {"added": 0, "reason": "not over a pool: the co-saved papers reach those interests"}
        if cfg.tier1_neighbour_cover <= 0 or cfg.tier1_pool_interests <= 0:
            return state, {"added": 0, "reason": "disabled"}
        if cos is None or cos.libraries is None:
            return state, {"added": 0, "reason": "no other user saved any of these papers"}
        hood = neighbourhood(cos.libraries, state.saved_rows, side.interests, side.vectors, cfg)
        rows = interest_rows(side, ctx, hood, {c.row for c in state.candidates}, cfg.tier1_pool_interests)
        nearest, cosines = nearest_clusters(state, rows)
        ids = side.catalog.ids
        added = tuple(
            Candidate(ids[r], r, "neighbour-interest", k, float(c)) for r, k, c in zip(rows, nearest, cosines)
        )
        return replace(state, candidates=state.candidates + added), {
            "added": len(added),
            "neighbours": hood.users if hood is not None else 0,
        }
