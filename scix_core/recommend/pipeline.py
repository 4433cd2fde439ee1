"""Tier 1: the real pipeline — an explicit ordered list of stages, each recorded.

(1) saved-paper vectors, one local batch; (2) Ward clustering, k by
silhouette; (3) Hungarian matching to the persisted medoids; (4) quota over
clusters by importance, total 100, min 3; (5) per-cluster kNN, limit =
quota × 3, one batch; (6) short-term supplement of 20; (6b) co-saved papers
of the index's other users; (6c) over a candidate pool, the papers nearest
the interests of the users who saved the same papers; (7) scoring, heuristic
or LightGBM; (8) category suppression; (9) MMR down to the limit; (10) exploration,
+ n_explore. Every stage's timing, headline
facts and output land in the result (:class:`StageRecord`), which is what
``scix recommend --explain`` and the cluster view show.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

import numpy as np

from scix_core.recommend.context import IndexSide, UserContext
from scix_core.recommend.result import RecItem, StageRecord
from scix_core.recommend.stages.base import Candidate, Stage, Tier1State
from scix_core.recommend.stages.candidates import ClusterKnn, CoSaved, NeighbourInterest, ShortTermSupplement
from scix_core.recommend.stages.cluster import SavedVectors, WardClustering, ward_labels
from scix_core.recommend.stages.explore import Explore
from scix_core.recommend.stages.match import HungarianMatch, match_ids
from scix_core.recommend.stages.mmr import Mmr
from scix_core.recommend.stages.quota import QuotaAllocation
from scix_core.recommend.stages.score import Score
from scix_core.recommend.stages.suppress import Suppress
from scix_core.recommend.state import StoredCluster, UserState
from scix_core.recommend.tiers import TierRun


def warm_stages() -> None:
    """Run Ward clustering and the Hungarian cluster match once on a tiny input, so the libraries they
    import on first use (scipy.cluster.hierarchy, scipy.optimize) are loaded before a server's first
    request."""
    points = np.eye(4, 8, dtype=np.float32)
    ward_labels(points, 2, 0.0)
    match_ids(points[:2], [StoredCluster(0, "", points[0], 1)], 1, 0.5)


def candidate_stages(stored: Sequence[StoredCluster] = (), next_id: int = 0) -> list[Stage]:
    """Stages 1-6c: from the saved papers to the candidate pool."""
    return [
        SavedVectors(),
        WardClustering(len(stored)),
        HungarianMatch(stored, next_id),
        QuotaAllocation(),
        ClusterKnn(),
        ShortTermSupplement(),
        CoSaved(),
        NeighbourInterest(),
    ]


def ranking_stages(scorer, health: dict, table=None) -> list[Stage]:
    """Stages 7-8: scoring (``table``: the candidates' features, when already read) and category
    suppression."""
    return [Score(scorer, health, table), Suppress()]


def stages(stored: Sequence[StoredCluster], next_id: int, scorer, health: dict) -> list[Stage]:
    return [*candidate_stages(stored, next_id), *ranking_stages(scorer, health), Mmr(), Explore()]


def run_stages(state: Tier1State, pipeline: Sequence[Stage]) -> tuple[Tier1State, tuple[StageRecord, ...]]:
    records = []
    for stage in pipeline:
        t = time.perf_counter()
        state, summary = stage.run(state)
        records.append(
            StageRecord(stage.name, (time.perf_counter() - t) * 1000, summary, getattr(state, stage.writes))
        )
    return state, tuple(records)


def _item(c: Candidate, rank: int, side: IndexSide, mmr_position: int | None) -> RecItem:
    return RecItem(
        c.paper_id,
        "",
        rank,
        c.score if c.source != "exploration" else 0.0,
        1,
        c.source,
        c.cluster_id,
        tuple(c.scores),
        mmr_position,
        c.source == "exploration",
        side.catalog.codes[c.row],
    )


class ClusterTier:
    """Tier 1. Leaves the matched medoids' write (one transaction) to its caller after each run, when they
    changed (:attr:`TierRun.write`); ``persist=False`` for dry runs."""

    number = 1

    def __init__(self, state: UserState, scorer, health: dict, persist: bool = True):
        self.store, self.scorer, self.health, self.persist = state, scorer, health, persist

    def run(self, side: IndexSide, ctx: UserContext, limit: int) -> TierRun:
        stored, next_id = (
            ctx.medoids if ctx.medoids is not None else self.store.clusters(side.index, ctx.user_id)
        )
        state, records = run_stages(
            Tier1State(side, ctx, limit), stages(stored, next_id, self.scorer, self.health)
        )
        new = [StoredCluster(c.cluster_id, c.medoid, c.medoid_vector, len(c.members)) for c in state.clusters]
        unchanged = next_id == state.next_cluster_id and [
            (c.cluster_id, c.medoid_paper, c.size) for c in stored
        ] == sorted((c.cluster_id, c.medoid_paper, c.size) for c in new)
        write = None
        if self.persist and not unchanged:
            write = partial(self.store.replace_clusters, side.index, ctx.user_id, new, state.next_cluster_id)
        items = [_item(c, pos, side, pos) for pos, c in enumerate(state.selected, start=1)]
        items += [_item(c, len(items) + i, side, None) for i, c in enumerate(state.explore, start=1)]
        notes = ()
        if state.scorer.get("configured") != state.scorer.get("scoring_with"):
            notes = (
                f"scorer {state.scorer['configured']!r} configured but {state.scorer['scoring_with']!r} "
                "scored: "
                f"{state.scorer.get('error')}",
            )
        return TierRun(tuple(items), records, notes, state.scorer, write)
