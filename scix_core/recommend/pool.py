"""A candidate pool: every tier ranking only some of the index's papers (a day's listing, a feed's window).

:func:`within` gives the recommender's view of an index restricted to a set
of rows: its vector store is replaced by :class:`PoolStore`, an exact kNN over
those rows' local vectors (a day's listing is a few hundred papers: a matrix
product is faster than any index, and exact), the co-save scores are zero
outside the pool, and Tier 0's trending and Tier 1's exploration read only
pool rows (``IndexSide.pool``). The tiers themselves are unchanged — the
same stages, the same provenance — which is the point: the feed is the
user's pipeline on the window's papers, not another ranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scix_core.errors import ConfigError
from scix_core.recommend.community import CoSaves
from scix_core.recommend.context import IndexSide
from scix_core.vectors.base import VectorFilter, VectorHit

#: the filter fields a pool store evaluates: the recommender's exclusion; anything else is a search lane's
SUPPORTED = ("exclude_points",)


@dataclass(frozen=True, eq=False)
class PoolStore:
    """The :class:`~scix_core.vectors.base.VectorStore` reading contract, exact, over ``rows`` only."""

    rows: np.ndarray  # int64 catalogue rows (= point ids), ascending
    matrix: np.ndarray  # float32 (len(rows), dim), unit rows
    ids: Sequence[str]  # the catalogue's paper ids by row
    name: str = "pool"

    def _allowed(self, flt: VectorFilter | None) -> np.ndarray:
        keep = np.ones(len(self.rows), dtype=bool)
        if flt is None:
            return keep
        other = [f for f in flt.__slots__ if f not in SUPPORTED and getattr(flt, f) not in (None, ())]
        if other:
            raise ConfigError(
                f"a candidate pool evaluates {', '.join(SUPPORTED)} only, not {', '.join(other)}"
            )
        if flt.exclude_points:
            keep &= ~np.isin(self.rows, np.asarray(flt.exclude_points, dtype=np.int64))
        return keep

    def _top(self, scores: np.ndarray, keep: np.ndarray, k: int, ids: bool) -> list[VectorHit]:
        idx = np.flatnonzero(keep)
        k = min(int(k), len(idx))
        if k <= 0:
            return []
        s = scores[idx]
        best = idx[np.lexsort((self.rows[idx], -s))[:k]]  # ties by row, as an exact engine's
        return [
            VectorHit(int(self.rows[i]), self.ids[int(self.rows[i])] if ids else None, float(scores[i]))
            for i in best
        ]

    def _cosines(self, vectors) -> np.ndarray:
        """(pool rows, queries) cosines: the queries normalised, as Qdrant's cosine distance does."""
        q = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        norms = np.linalg.norm(q, axis=1, keepdims=True)
        return self.matrix @ (q / np.where(norms > 0, norms, 1.0)).T

    def search(self, vector, k, flt=None, exact=False, ids=True) -> list[VectorHit]:
        return self._top(self._cosines(vector)[:, 0], self._allowed(flt), k, ids)

    def search_batch(self, vectors, limits, flt=None, exact=False, ids=True) -> list[list[VectorHit]]:
        if not len(limits):
            return []
        keep, sims = self._allowed(flt), self._cosines(vectors)
        return [self._top(sims[:, j], keep, k, ids) for j, k in enumerate(limits)]

    def recommend(self, positives, negatives, k, flt=None, exact=False) -> list[VectorHit]:
        """Qdrant's BEST_SCORE: the best positive similarity where it beats the best negative one, else the
        best negative similarity squared and negated."""
        pos = self._cosines(positives).max(axis=1)
        if len(negatives):
            neg = self._cosines(negatives).max(axis=1)
            pos = np.where(pos > neg, pos, -(neg * neg))
        return self._top(pos, self._allowed(flt), k, True)

    def count(self) -> int:
        return len(self.rows)

    def close(self) -> None:
        return None


def pooled_cosaves(cosaves: CoSaves | None, mask: np.ndarray) -> CoSaves | None:
    """The same co-save scores, zero outside the pool (the candidates' and the tiers' parts)."""
    if cosaves is None:
        return None
    outside = ~mask

    def masked(scores: np.ndarray) -> np.ndarray:
        out = np.array(scores, copy=True)
        out[outside] = 0.0
        return out

    return replace(
        cosaves,
        scores=masked(cosaves.scores),
        tier_scores=(lambda: masked(cosaves.for_tiers)) if cosaves.tier_scores is not None else None,
        kept={},
    )


def within(side: IndexSide, rows: Sequence[int]) -> IndexSide:
    """``side`` with every tier restricted to ``rows`` (catalogue rows)."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    mask = np.zeros(len(side.catalog), dtype=bool)
    mask[rows] = True
    if side.vectors is None:
        return replace(side, pool=mask)
    store = PoolStore(rows, side.vectors.get(rows), side.catalog.ids)
    return replace(side, store=store, pool=mask)
