"""Stage 3: Hungarian matching of the new clusters to the persisted medoids.

Without it a user's "NLP cluster" becomes ``cluster_7`` after the next
recluster and instrumentation loses continuity (reference design). Cost =
1 − cosine between new and persisted medoid vectors; ``scipy``'s
``linear_sum_assignment`` pairs them; a pair less similar than
``recommend.match_min_similarity`` is not the same interest, so that new
cluster gets a fresh id. Ids are never reused (a per-user counter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from scix_core.recommend.profile import unit
from scix_core.recommend.stages.base import Cluster, Tier1State
from scix_core.recommend.stages.cluster import medoid
from scix_core.recommend.state import StoredCluster


def match_ids(
    new_medoids: np.ndarray, old: Sequence[StoredCluster], next_id: int, min_similarity: float
) -> tuple[list[int], list[int | None], list[float | None], int]:
    """Stable ids for the new clusters: (ids, matched old id or None, similarity or None, next free id)."""
    from scipy.optimize import linear_sum_assignment

    n = len(new_medoids)
    ids: list[int | None] = [None] * n
    sims: list[float | None] = [None] * n
    if old and n:
        sim = (
            np.asarray(new_medoids, dtype=np.float64) @ np.stack([o.medoid for o in old]).astype(np.float64).T
        )
        for i, j in zip(*linear_sum_assignment(-sim)):
            if sim[i, j] >= min_similarity:
                ids[i], sims[i] = old[j].cluster_id, float(sim[i, j])
    matched = list(ids)
    next_id = max([next_id, *(o.cluster_id + 1 for o in old)])
    for i in range(n):
        if ids[i] is None:
            ids[i], next_id = next_id, next_id + 1
    return [int(i) for i in ids], matched, sims, next_id


class HungarianMatch:
    name, writes = "match", "clusters"

    def __init__(self, stored: Sequence[StoredCluster], next_id: int):
        self.stored, self.next_id = tuple(stored), next_id

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        saved = [p for p in state.ctx.saved if p in state.side.catalog.row]
        groups = [np.flatnonzero(state.labels == k) for k in range(int(state.labels.max()) + 1)]
        groups.sort(key=lambda g: (-len(g), g[0]))  # new ids go to bigger clusters first
        medoids = [g[medoid(state.saved_vectors[g])] for g in groups]
        ids, matched, sims, next_id = match_ids(
            state.saved_vectors[medoids], self.stored, self.next_id, state.side.config.match_min_similarity
        )
        clusters = []
        for g, m, cid, old, s in zip(groups, medoids, ids, matched, sims):
            vecs = state.saved_vectors[g]
            centroid = unit(vecs.mean(axis=0))
            clusters.append(
                Cluster(
                    cid,
                    tuple(saved[i] for i in g),
                    saved[m],
                    centroid,
                    state.saved_vectors[m],
                    float((vecs @ centroid).min()),
                    old,
                    s,
                )
            )
        kept = sum(c.matched_from is not None for c in clusters)
        summary = {
            "persisted": len(self.stored),
            "kept_ids": kept,
            "new_ids": len(clusters) - kept,
            "ids": [c.cluster_id for c in clusters],
        }
        return replace(state, clusters=tuple(clusters), next_cluster_id=next_id), summary
