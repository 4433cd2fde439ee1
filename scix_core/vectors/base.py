"""The vector-store contract shared by every backend.

Points carry ``paper_id``, ``year`` and ``categories`` as payload; the
point id is the paper's position in the corpus (``papers.idx``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

#: ``listed``: the listing day as a date ordinal (``--since``); absent for a paper never listed
PAYLOAD_INDEXES = {"paper_id": "keyword", "year": "integer", "categories": "keyword", "listed": "integer"}


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """Conditions a vector store evaluates as payload filters (all must hold)."""

    year_min: int | None = None
    year_max: int | None = None
    categories: tuple[str, ...] = ()
    paper_ids: tuple[str, ...] = ()
    exclude_categories: tuple[str, ...] = ()
    exclude_points: tuple[int, ...] = ()  # point ids never to return (a user's saved and dismissed papers)
    listed_min: int | None = None  # listed on or after this day (a date ordinal)

    def __bool__(self) -> bool:
        return any(
            (
                self.year_min is not None,
                self.year_max is not None,
                self.categories,
                self.paper_ids,
                self.exclude_categories,
                self.exclude_points,
                self.listed_min is not None,
            )
        )


@dataclass(frozen=True, slots=True)
class VectorHit:
    point_id: int
    paper_id: str | None
    score: float


def with_payload(ids: bool = True) -> list[str] | bool:
    """What a query reads of each point's payload: its paper id, or nothing (``ids=False``)."""
    return ["paper_id"] if ids else False


def hits(points) -> list[VectorHit]:
    """Qdrant's scored points (qdrant-edge's or qdrant-client's) as hits; ``paper_id`` None when no payload
    was read."""
    return [VectorHit(int(p.id), (p.payload or {}).get("paper_id"), float(p.score)) for p in points]


class VectorStore(Protocol):
    """Cosine kNN over paper vectors."""

    name: str

    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None: ...

    def delete_papers(self, paper_ids: Sequence[str]) -> None:
        """Remove every point whose payload names one of these papers."""

    def finish(self) -> None:
        """Build indexes and flush after the last upsert."""

    def search(
        self,
        vector: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[VectorHit]:
        """The ``k`` nearest points. ``ids=False``: no payload is read, every hit's ``paper_id`` is None — for
        a caller that knows each point's paper by its id (the paper's row): the payload was 0.3 of a
        query's 0.8 ms on qdrant-edge (docs/history.md)."""

    def search_batch(
        self,
        vectors: np.ndarray,
        limits: Sequence[int],
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[list[VectorHit]]:
        """One kNN per row of ``vectors`` (limit per row), planned and run as one batch; ``ids`` as
        :meth:`search`'s."""

    def recommend(
        self,
        positives: np.ndarray,
        negatives: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        """Qdrant recommend, strategy BEST_SCORE, from example vectors (rows)."""

    def count(self) -> int: ...

    def close(self) -> None: ...
