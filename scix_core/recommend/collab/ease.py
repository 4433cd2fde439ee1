"""EASE^R (Steck, WWW 2019): B = I − P · diag(1 / diag P), P = (XᵀX + λI)⁻¹, diag B = 0; score = 1_S B.

A dense item × item model: P is one float32 n × n array, factorised and
inverted in place by LAPACK's Cholesky (``spotrf`` + ``spotri``; XᵀX + λI
is symmetric positive definite), so the peak is about one n² float32 array
(1.2 GB at CiteULike-a's 16,980 items, 70 s on 2 cores) — not the several
float64 copies of ``np.linalg.inv``, which crashed inside OpenBLAS at 26k
items. :func:`check_fits` refuses, with a typed error before allocating, an
item set whose array would not fit in ``memory_share`` of the memory
available now or exceeds ``max_items``; rp3beta and item-knn are the
sparse item–item models for larger catalogues.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scix_core.errors import ConfigError
from scix_core.recommend.collab.matrix import binary

MAX_ITEMS = 40_000


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (Linux); a large number where it cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def check_fits(n_items: int, max_items: int = MAX_ITEMS, memory_share: float = 0.5) -> int:
    """Bytes EASE needs for ``n_items``; a ``ConfigError`` naming the alternatives when it does not fit."""
    need = int(n_items) ** 2 * 4 * 2  # P in float32, plus the Gram product's sparse→dense staging
    have = available_bytes()
    if n_items > max_items or need > memory_share * have:
        raise ConfigError(
            f"ease needs a dense {n_items:,} x {n_items:,} float32 matrix (~{need / 2**30:.1f} GiB; limit "
            f"{max_items:,} items and {memory_share:.0%} of the {have / 2**30:.1f} GiB available): use the "
            "sparse "
            f"item-item models rp3beta or item-knn for this catalogue"
        )
    return need


@dataclass
class Ease:
    name = "ease"
    lam: float = 250.0
    max_items: int = MAX_ITEMS
    _b: np.ndarray | None = field(default=None, repr=False)

    def fit(self, matrix) -> Ease:
        import scipy.linalg.lapack as lapack
        import threadpoolctl

        x = binary(matrix)
        n = x.shape[1]
        check_fits(n, self.max_items)
        p = np.asarray((x.T @ x).toarray(), dtype=np.float32, order="F")
        p[np.diag_indices(n)] += self.lam
        with threadpoolctl.threadpool_limits(None):
            p, info = lapack.spotrf(p, lower=1, overwrite_a=1, clean=0)
            if info != 0:
                raise ConfigError(
                    f"ease: the Gram matrix + {self.lam} I is not positive definite (LAPACK info {info})"
                )
            p, info = lapack.spotri(p, lower=1, overwrite_c=1)
        if info != 0:
            raise ConfigError(f"ease: inversion failed (LAPACK info {info})")
        for lo in range(
            0, n, 2048
        ):  # mirror the lower triangle into the upper, a block at a time (no n² temporary)
            hi = min(n, lo + 2048)
            block = p[lo:hi, lo:hi]
            p[lo:hi, lo:hi] = np.tril(block) + np.tril(block, -1).T
            p[lo:hi, hi:] = p[hi:, lo:hi].T
        diag = np.diag(p).copy()
        p /= -diag[None, :]
        p[np.diag_indices(n)] = 0.0
        self._b = p
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        return (
            self._b[rows].sum(axis=0, dtype=np.float32)
            if len(rows)
            else np.zeros(self._b.shape[0], np.float32)
        )
