"""EASE^R from the users' side: every λ's scores from one eigendecomposition of X Xᵀ.

For the binary users × items matrix X the push-through identity gives
λ P = λ (XᵀX + λI)⁻¹ = I − Xᵀ (X Xᵀ + λI)⁻¹ X, and with X Xᵀ = U diag(s) Uᵀ
that is I − T diag(d) Tᵀ with T = Xᵀ U (items × users) and d = 1 / (s + λ).
EASE's scores, 1_S − (P 1_S) / diag P, do not depend on P's scale, so for any
λ they are 1_S − (1_S − T (d ∘ Tᵀ 1_S)) / (1 − (T ∘ T) d).

A fit of P (:class:`~scix_core.recommend.collab.ease.Ease`) inverts an
n × n or r × r matrix for each λ; this side decomposes the users' r × r
Gram matrix once (about 4 r³) and then costs two products a query. With
fewer users than saved items — CiteULike-a's 5,551 users save 16,980 items
— a peer's λ search (:mod:`scix_core.evaluate.tuning`) scores its validation
users on every λ this way, the steps past the grid's edge included, and only
the λ chosen is fitted as :class:`Ease`'s P (from the users' side as well, by
a Cholesky inversion of theirs), whose query is one pass over |S| of P's
columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scix_core.recommend.collab.ease import positions
from scix_core.recommend.collab.matrix import binary

RESIDUE = 1e-4  # a numerator below this share of its terms' size is float32 rounding of a 0 (Ease._corrected)
CHUNK = 256  # queries scored in one product


def worth_it(matrix) -> bool:
    """Whether this side is the cheaper one for ``matrix``: fewer users with a save than items saved."""
    x = binary(matrix)
    users = int(np.count_nonzero(np.diff(x.tocsr().indptr)))
    return 0 < users < int(np.count_nonzero(np.diff(x.tocsc().indptr)))


@dataclass(frozen=True, eq=False)
class EaseSpectrum:
    """X Xᵀ's eigenvalues ``s`` and T = Xᵀ U over the items somebody saved (``items``, catalogue rows of
    ``n``); :meth:`at` is the fit at one λ."""

    t: np.ndarray  # saved items × users with a save, float32 (computed in float64)
    s: np.ndarray
    items: np.ndarray
    n: int
    t_norm: np.ndarray = field(repr=False)  # ‖T_i‖: each score's terms' size (the residue's bound)

    @classmethod
    def of(cls, matrix) -> EaseSpectrum:
        import scipy.linalg
        import threadpoolctl

        x = binary(matrix).tocsr()
        x = x[np.flatnonzero(np.diff(x.indptr))]  # a user with no save adds nothing to XᵀX
        items = np.flatnonzero(np.diff(x.tocsc().indptr))
        x = x[:, items].astype(np.float64)
        gram = (x @ x.T).toarray()
        with threadpoolctl.threadpool_limits(None):  # as the item side's inversion: every core for this
            s, u = scipy.linalg.eigh(gram, driver="evd", overwrite_a=True, check_finite=False)
            t = np.asarray(x.T @ u)
        s = np.maximum(s, 0.0)  # X Xᵀ is positive semi-definite: a negative eigenvalue is rounding
        return cls(
            np.ascontiguousarray(t, dtype=np.float32), s, items, matrix.shape[1], np.linalg.norm(t, axis=1)
        )

    def at(self, lam: float) -> EaseDual:
        d = 1.0 / (self.s + lam)
        diag = np.empty(len(self.items))
        for lo in range(0, len(diag), 4096):  # (T ∘ T) d a block at a time, summed in float64
            diag[lo : lo + 4096] = 1.0 - np.square(self.t[lo : lo + 4096]).astype(np.float64) @ d
        return EaseDual(self, float(lam), d.astype(np.float32), diag.astype(np.float32))


@dataclass(eq=False)
class EaseDual:
    """EASE^R at ``lam`` on the spectrum's saves: :meth:`scores` as :class:`Ease`'s, to float32 rounding."""

    spectrum: EaseSpectrum
    lam: float
    d: np.ndarray
    diag: np.ndarray  # λ P's diagonal over the saved items
    name = "ease"
    _primed: dict = field(default_factory=dict, repr=False)

    def _located(self, rows) -> np.ndarray:
        return positions(self.spectrum.items, rows)[0]

    def prime(self, queries: list) -> None:
        """Score ``queries`` in batches of ``CHUNK`` and keep them for :meth:`scores` (this batch's only)."""
        located = [at for at in map(self._located, queries) if len(at)]
        self._primed = dict(zip((at.tobytes() for at in located), self._scored(located)))

    def scores(self, rows: np.ndarray) -> np.ndarray:
        at = self._located(rows)
        if not len(at):  # rows nobody saved score nothing
            return np.zeros(self.spectrum.n, np.float32)
        got = self._primed.get(at.tobytes())
        return got if got is not None else self._scored([at])[0]

    def _scored(self, located: list[np.ndarray]) -> list[np.ndarray]:
        sp, out = self.spectrum, []
        for lo in range(0, len(located), CHUNK):
            chunk = located[lo : lo + CHUNK]
            ones = np.zeros((len(chunk), len(sp.items)), np.float32)
            for i, at in enumerate(chunk):
                ones[i, at] = 1.0
            y = np.stack([sp.t[at].sum(axis=0) for at in chunk]) * self.d  # d ∘ Tᵀ 1_S, a row each
            num = ones - y @ sp.t.T  # λ P 1_S
            num[np.abs(num) <= RESIDUE * (ones + np.outer(np.linalg.norm(y, axis=1), sp.t_norm))] = 0.0
            part = ones - num / self.diag
            for row in part:
                full = np.zeros(sp.n, np.float32)
                full[sp.items] = row
                out.append(full)
        return out
