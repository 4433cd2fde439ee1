"""The two matrix helpers every item scorer shares."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, diags


def binary(matrix) -> csr_matrix:
    """The save matrix as float32 CSR with every stored entry 1 (a save is a save, whatever was stored)."""
    x = csr_matrix(matrix, dtype=np.float32, copy=True)
    x.data[:] = 1.0
    return x


def row_normalise(matrix: csr_matrix) -> csr_matrix:
    """Rows scaled to unit ℓ2 norm; all-zero rows stay zero."""
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    return (diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix).tocsr()
