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

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

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
        s = -scores[idx]
        if k < len(idx) // 4:  # the k best and every tie of the k-th, then sorted: the same k, fewer sorted
            kth = np.partition(s, k - 1)[k - 1]
            if not np.isnan(kth):
                near = np.flatnonzero(s <= kth)
                idx, s = idx[near], s[near]
        best = idx[np.lexsort((self.rows[idx], s))[:k]]  # ties by row, as an exact engine's
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


@dataclass(frozen=True, eq=False)
class Bridge:
    """How a paper nobody saved — a new paper — gets a co-save score from the papers outside the pool that
    were saved: the collaborative signal carried onto it through its text (:meth:`estimate`). Built once per
    pool (:func:`bridge_for`); its neighbours found at the first use, by the index's own vector store."""

    rows: np.ndarray  # the pool's rows, ascending
    store: object  # the index's vector store (not the pool's)
    vectors: object  # the index's local vectors
    m: int
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _weights: list = field(default_factory=list, repr=False)
    _maps: dict = field(default_factory=dict, repr=False)
    _pool_vectors: list = field(default_factory=list, repr=False)

    @property
    def weights(self):
        """(pool rows × catalogue rows) CSR: each pool row's neighbours' cosines, summing to 1 per row."""
        from scipy.sparse import csr_matrix

        with self._lock:
            if not self._weights:
                inside = set(self.rows.tolist())
                queries = self.vectors.get(self.rows)
                ask = self.m + min(len(self.rows), 4 * self.m)  # room for the pool's own papers among them
                r, c, w = [], [], []
                for start in range(0, len(self.rows), 256):
                    batch = queries[start : start + 256]
                    found = self.store.search_batch(batch, [ask] * len(batch), None, ids=False)
                    for i, hits in enumerate(found, start=start):
                        near = [h for h in hits if h.point_id not in inside and h.score > 0][: self.m]
                        total = sum(h.score for h in near)
                        r += [i] * len(near)
                        c += [h.point_id for h in near]
                        w += [h.score / total for h in near]
                n = len(self.vectors)
                self._weights.append(
                    csr_matrix((np.array(w, dtype=np.float32), (r, c)), shape=(len(self.rows), n))
                )
            return self._weights[0]

    def neighbours(self, scores: np.ndarray) -> np.ndarray:
        """Every pool row's neighbour-weighted mean of ``scores`` (one per catalogue row)."""
        return np.asarray(self.weights @ np.asarray(scores, dtype=np.float32)).ravel()

    def linear(self, scores: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Every pool row's score by the ridge map from an embedding to ``scores``, fitted on the ``known``
        rows (a bool mask): the user's co-save scores as a direction in the embedding space."""
        key = hashlib.sha256(np.packbits(known).tobytes()).hexdigest()
        with self._lock:
            got = self._maps.get(key)
            if got is None:
                rows = np.flatnonzero(known)
                e = self.vectors.get(rows).astype(np.float64)
                gram = e.T @ e + RIDGE * np.eye(e.shape[1])
                got = (rows, np.linalg.solve(gram, e.T).astype(np.float32))  # dims × known rows
                self._maps.clear()
                self._maps[key] = got
            if not len(self._pool_vectors):
                self._pool_vectors.append(self.vectors.get(self.rows))
        rows, m = got
        return self._pool_vectors[0] @ (m @ np.asarray(scores, dtype=np.float32)[rows])

    def estimate(self, scores: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Every pool row's co-save estimate: the mean of :meth:`neighbours` (local: the papers most like it)
        and :meth:`linear` (global: the direction of the user's co-saves in the embedding space) rescaled to
        the neighbours' best — the two together ranked new papers better than either alone on a validation
        split of CiteULike-a (docs/history.md#cold-items)."""
        knn = self.neighbours(scores)
        lin = np.maximum(self.linear(scores, known), 0.0)
        best = float(lin.max()) if len(lin) else 0.0
        if best > 0:
            lin *= float(knn.max()) / best
        return 0.5 * (knn + lin)


#: the ridge of :meth:`Bridge.linear` (unit embeddings: the Gram matrix's trace is the number of papers)
RIDGE = 10.0

#: bridges kept per process, by index side and pool: a day's feed is read by every user
_BRIDGES: OrderedDict = OrderedDict()
_BRIDGES_LOCK = threading.Lock()
BRIDGES_KEPT = 8


def bridge_for(side: IndexSide, rows: np.ndarray) -> Bridge | None:
    """The pool's bridge (None: ``recommend.cold_neighbours`` 0 or no vectors), shared by every request
    over the same build's store and pool."""
    m = side.config.cold_neighbours
    if m <= 0 or side.vectors is None or side.store is None or not len(rows):
        return None
    key = (id(side.store), m, hashlib.sha256(np.ascontiguousarray(rows).tobytes()).hexdigest())
    with _BRIDGES_LOCK:
        if key not in _BRIDGES:
            _BRIDGES[key] = Bridge(rows, side.store, side.vectors, m)
            while len(_BRIDGES) > BRIDGES_KEPT:
                _BRIDGES.popitem(last=False)
        _BRIDGES.move_to_end(key)
        return _BRIDGES[key]


def pooled_cosaves(cosaves: CoSaves | None, mask: np.ndarray, bridge: Bridge | None = None) -> CoSaves | None:
    """The same co-save scores, zero outside the pool (the candidates' and the tiers' parts); with a
    ``bridge``, a pool paper nobody saved scores its neighbours' mean (:class:`Bridge`)."""
    if cosaves is None:
        return None
    outside = ~mask
    cold = None
    if bridge is not None:
        savers = np.asarray(cosaves.savers)
        cold = savers[bridge.rows] == 0
        known = (savers > 0) & outside

    def masked(scores: np.ndarray) -> np.ndarray:
        out = np.array(scores, copy=True)
        out[outside] = 0.0
        if cold is not None and cold.any():
            out[bridge.rows[cold]] = bridge.estimate(scores, known)[cold]
        return out

    return replace(
        cosaves,
        scores=masked(cosaves.scores),
        tier_scores=(lambda: masked(cosaves.for_tiers)) if cosaves.tier_scores is not None else None,
        kept={},
    )


def within(side: IndexSide, rows: Sequence[int]) -> IndexSide:
    """``side`` with every tier restricted to ``rows`` (catalogue rows); its ``bridge`` maps the co-save
    scores onto the pool's papers nobody saved."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    mask = np.zeros(len(side.catalog), dtype=bool)
    mask[rows] = True
    if side.vectors is None:
        return replace(side, pool=mask)
    store = PoolStore(rows, side.vectors.get(rows), side.catalog.ids)
    return replace(side, store=store, pool=mask, bridge=bridge_for(side, rows))
