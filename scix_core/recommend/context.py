"""What every tier reads: the index's side (catalog, local vectors, vector store) and one user's side."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.catalog import Catalog
from scix_core.recommend.community import CoSaves
from scix_core.recommend.state import Event, Profile, Reading, StoredCluster, User
from scix_core.vectors.base import VectorFilter, VectorHit, VectorStore
from scix_core.vectors.local import LocalVectors


@dataclass(frozen=True, eq=False)
class IndexSide:
    """An index as the recommender sees it. ``vectors``/``store`` are None with ``unavailable`` saying why."""

    index: str
    model: str
    catalog: Catalog
    config: RecommendConfig
    vectors: LocalVectors | None = None
    store: VectorStore | None = None
    unavailable: str = ""
    interests: object = (
        None  # the build's InterestCache (scix_core.recommend.interests), set by the recommender
    )
    # bool per row: the papers every tier may recommend (None: all) — scix_core.recommend.pool.within
    pool: np.ndarray | None = None
    bridge: object = None  # the pool's co-save bridge to the papers outside it (recommend.pool.Bridge)

    def rows(self, paper_ids) -> np.ndarray:
        return np.array([self.catalog.row[p] for p in paper_ids], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class UserContext:
    """One user at one moment: interactions in time order and the stored profiles.

    ``saved`` holds each saved paper once, in the order of its first save;
    ``dismissed`` likewise. Neither ever comes back in a recommendation.
    """

    user: User
    events: tuple[Event, ...]
    saved: tuple[str, ...]
    dismissed: tuple[str, ...]
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    cosaves: CoSaves | None = None  # what the index's other users saved alongside (``community``)
    # Tier 1's persisted medoids and next cluster id as read with the rest; None: Tier 1 reads them itself
    medoids: tuple[list[StoredCluster], int] | None = None

    @classmethod
    def build(
        cls,
        user: User,
        events: list[Event],
        profiles: Mapping[str, Profile],
        medoids: tuple[list[StoredCluster], int] | None = None,
    ) -> UserContext:
        saved = tuple(dict.fromkeys(e.paper_id for e in events if e.kind == "save"))
        dismissed = tuple(dict.fromkeys(e.paper_id for e in events if e.kind == "dismiss"))
        return cls(user, tuple(events), saved, dismissed, dict(profiles), medoids=medoids)

    @classmethod
    def read(cls, reading: Reading) -> UserContext:
        return cls.build(reading.user, reading.events, reading.profiles, reading.medoids)

    @property
    def user_id(self) -> str:
        return self.user.user_id

    @property
    def seen(self) -> frozenset[str]:
        return frozenset(self.saved) | frozenset(self.dismissed)

    @property
    def newest(self) -> dt.datetime | None:
        return max((e.at for e in self.events), default=None)

    def exclusion(self, side: IndexSide) -> VectorFilter:
        """The payload filter that keeps every saved and dismissed paper out of a kNN."""
        return VectorFilter(exclude_points=tuple(int(r) for r in side.rows(self.seen)))


def hits_minus(hits: list[VectorHit], seen: frozenset[str]) -> list[VectorHit]:
    """Belt and braces after the engine's own exclusion filter."""
    return [h for h in hits if h.paper_id not in seen]


def papers_minus(side: IndexSide, hits: list[VectorHit], seen: frozenset[str]) -> list[tuple[str, VectorHit]]:
    """(paper, hit) of hits read without their payload (``ids=False``): each point's paper from the catalogue
    by its row; the ``seen`` ones left out, as :func:`hits_minus` does."""
    ids = side.catalog.ids
    return [(ids[h.point_id], h) for h in hits if ids[h.point_id] not in seen]


def cosaved_count(cfg: RecommendConfig, limit: int, pooled: bool = False) -> int:
    """How many co-saved papers join the candidates of a list of ``limit``: ``cosave_candidates``, or with
    MMR's tail reach on (``tail_reach``; never over a candidate pool: ``pooled``,
    :func:`~scix_core.recommend.stages.mmr.tail_of`) ``cosave_per_slot`` × ``limit`` when that is more —
    those past ``cosave_candidates`` the tail's reach (:func:`~scix_core.recommend.stages.mmr.mmr`)."""
    if not cfg.tail_reach or pooled or limit <= cfg.limit:
        return cfg.cosave_candidates
    return max(cfg.cosave_candidates, math.ceil(cfg.cosave_per_slot * limit))
