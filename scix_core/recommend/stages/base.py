"""The state Tier-1 stages pass along, and the stage contract.

Every stage takes a :class:`Tier1State` and returns a new one (``replace``;
nothing is mutated) plus a few headline facts; the pipeline records, per
stage, its timing, those facts and the field it wrote, so the cluster view
can show every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from scix_core.recommend.context import IndexSide, UserContext


@dataclass(frozen=True, eq=False)
class Cluster:
    """One interest cluster of the saved papers; ``cluster_id`` is stable across reclusters (Hungarian)."""

    cluster_id: int
    members: tuple[str, ...]  # saved paper ids, in save order
    medoid: str
    centroid: np.ndarray  # unit vector: the kNN query of this cluster
    medoid_vector: np.ndarray
    radius: float  # lowest member-to-centroid cosine: inside the cluster is at least this similar
    matched_from: int | None = None  # the persisted id it kept, None when new
    match_similarity: float | None = None
    importance: float = 0.0
    quota: int = 0


class Features:
    """A scored candidate's features and score by name: the score stage's row, read as (name, value) pairs
    only when asked — a few hundred candidates are scored for a list and a dozen shown, and building every
    candidate's pairs took half the stage (docs/history.md)."""

    __slots__ = ("names", "values")

    def __init__(self, names: tuple[str, ...], values: tuple[float, ...]):
        self.names, self.values = names, values

    def __iter__(self):
        return zip(self.names, self.values)

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"Features({tuple(self)!r})"


@dataclass(frozen=True, eq=False)
class Candidate:
    paper_id: str
    row: int
    source: str  # cluster-knn | supplement | co-saved | exploration
    cluster_id: int | None
    # similarity to the query that found it (cluster centroid or short-term profile; co-saved: nearest
    # centroid)
    cosine: float
    scores: tuple[tuple[str, float], ...] | Features = ()  # (name, value) pairs
    score: float = 0.0
    reach: bool = False  # a co-saved paper past cosave_candidates: only MMR's tail picks take it
    later: float | None = None  # over a pool, the score past the page (the scorer's `later`; None: `score`)


@dataclass(frozen=True, eq=False)
class Tier1State:
    side: IndexSide
    ctx: UserContext
    limit: int
    saved_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    saved_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    labels: np.ndarray = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64)
    )  # Ward label per saved paper
    silhouettes: Mapping[int, float] = field(default_factory=dict)
    clusters: tuple[Cluster, ...] = ()
    next_cluster_id: int = 0
    candidates: tuple[Candidate, ...] = ()
    scored: tuple[Candidate, ...] = ()
    suppressed: Mapping[str, int] = field(default_factory=dict)  # code -> dismissals in the window
    kept: tuple[Candidate, ...] = ()  # after suppression
    selected: tuple[Candidate, ...] = ()  # MMR picks, in pick order
    mmr_moves: tuple[tuple[str, int, int], ...] = ()  # (paper id, relevance rank, MMR position)
    explore: tuple[Candidate, ...] = ()
    scorer: Mapping[str, Any] = field(default_factory=dict)


class Stage(Protocol):
    name: str
    writes: str  # the Tier1State field holding the stage's output

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]: ...
