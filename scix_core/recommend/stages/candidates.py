"""Stages 5-6: per-cluster kNN (limit = quota × oversample) and the short-term supplement.

The per-cluster queries go to the vector store as one planned batch
(qdrant-edge ``query_batch``, qdrant-client ``query_batch_points``): the
engine runs them together instead of one round trip per cluster. Saved and
dismissed papers are excluded by the engine's payload filter. A paper found
by several clusters keeps its most similar one.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.context import hits_minus
from scix_core.recommend.profile import unit
from scix_core.recommend.stages.base import Candidate, Tier1State
from scix_core.search import knobs


class ClusterKnn:
    name, writes = "candidates", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        queries = np.stack([c.centroid for c in state.clusters])
        limits = [c.quota * side.config.oversample for c in state.clusters]
        results = side.store.search_batch(queries, limits, ctx.exclusion(side), exact=knobs.qdrant_exact())
        best: dict[str, Candidate] = {}
        for cluster, hits in zip(state.clusters, results):
            for h in hits_minus(hits, ctx.seen):
                if h.paper_id not in best or h.score > best[h.paper_id].cosine:
                    best[h.paper_id] = Candidate(h.paper_id, h.point_id, "cluster-knn", cluster.cluster_id, h.score)
        per = {c.cluster_id: sum(1 for x in best.values() if x.cluster_id == c.cluster_id) for c in state.clusters}
        summary = {"limits": dict(zip((c.cluster_id for c in state.clusters), limits)), "unique": len(best),
                   "per_cluster": per}
        return replace(state, candidates=tuple(best.values())), summary


class ShortTermSupplement:
    name, writes = "supplement", "candidates"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side, ctx = state.side, state.ctx
        short = ctx.profiles.get("short")
        n = side.config.shortterm_supplement
        if short is None or n <= 0:
            return state, {"added": 0, "reason": "no short-term profile" if short is None else "disabled"}
        have = {c.paper_id for c in state.candidates}
        hits = hits_minus(side.store.search(unit(short.vector), n, ctx.exclusion(side), exact=knobs.qdrant_exact()), ctx.seen)
        new = [h for h in hits if h.paper_id not in have]
        centroids = np.stack([c.centroid for c in state.clusters])
        nearest = (side.vectors.get([h.point_id for h in new]) @ centroids.T).argmax(axis=1) if new else []
        added = tuple(Candidate(h.paper_id, h.point_id, "supplement", state.clusters[int(k)].cluster_id, h.score)
                      for h, k in zip(new, nearest))
        return replace(state, candidates=state.candidates + added), {"found": len(hits), "added": len(added)}
