"""Item-kNN with shrinkage (Sarwar et al. 2001; Dacrema et al., TOIS 2021, ItemKNNCF).

sim(i, j) = co(i, j) / (√(n_i · n_j) + shrink), co counting the users who
saved both; each item keeps its ``neighbours`` most similar items (the
sparse item–item matrix is built once, Xᵀ X, then pruned row by row); a
user's score for c is Σ_{s∈S} sim(s, c). Shrinkage damps similarities
resting on few co-savers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scix_core.recommend.collab.matrix import binary

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix


def top_per_row(matrix: csr_matrix, k: int) -> csr_matrix:
    """Keep each row's ``k`` largest entries (ties: lower column first)."""
    from scipy.sparse import csr_matrix

    matrix = matrix.tocsr()
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    keep = np.ones(len(data), dtype=bool)
    for i in np.flatnonzero(np.diff(indptr) > k):
        lo, hi = indptr[i], indptr[i + 1]
        order = np.lexsort((indices[lo:hi], -data[lo:hi]))
        keep[lo + order[k:]] = False
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(indptr))
    return csr_matrix((data[keep], (rows[keep], indices[keep])), shape=matrix.shape)


@dataclass
class ItemKnn:
    name = "item-knn"
    shrink: float = 10.0
    neighbours: int = 100
    _sim: csr_matrix | None = field(default=None, repr=False)

    def fit(self, matrix) -> ItemKnn:
        from scipy.sparse import csr_matrix

        x = binary(matrix)
        co = (x.T @ x).tocsr()
        co.setdiag(0.0)
        co.eliminate_zeros()
        root = np.sqrt(np.asarray(x.sum(axis=0)).ravel()).astype(np.float32)
        co = co.tocoo()
        sim = csr_matrix(
            (co.data / (root[co.row] * root[co.col] + self.shrink), (co.row, co.col)), shape=co.shape
        )
        self._sim = top_per_row(sim, self.neighbours)
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """Σ of the saved items' neighbour rows (a row slice: cheaper than a product with the whole
        matrix)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(self._sim.shape[1], dtype=np.float32)
        return np.asarray(self._sim[rows].sum(axis=0), dtype=np.float32).ravel()
