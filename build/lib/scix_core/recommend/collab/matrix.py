"""The two matrix helpers every item scorer shares.

scipy is imported where it is used throughout ``scix_core.recommend``: it is a third of the start of a
command that only records a save (``scix interact``), which never builds a matrix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix


def binary(matrix) -> csr_matrix:
    """The save matrix as float32 CSR with every stored entry 1 (a save is a save, whatever was stored)."""
    from scipy.sparse import csr_matrix

    x = csr_matrix(matrix, dtype=np.float32, copy=True)
    x.data[:] = 1.0
    return x


def row_normalise(matrix: csr_matrix) -> csr_matrix:
    """Rows scaled to unit ℓ2 norm; all-zero rows stay zero."""
    from scipy.sparse import diags

    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    return (diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix).tocsr()
