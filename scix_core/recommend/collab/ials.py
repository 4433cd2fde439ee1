"""iALS through ``implicit`` (Hu, Koren & Volinsky, ICDM 2008): confidence 1 + α on a save.

Fitted by implicit's ALS; a user's factors are then solved in closed form
from the saves they have now (u = (YᵀY + α Σ_S y yᵀ + λI)⁻¹ (1 + α) Σ_S y,
what implicit's ``recalculate_user`` computes), so a truncated or grown
library is scored as it is, not as it was at training.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from scix_core.extras import require
from scix_core.recommend.collab.matrix import binary


@dataclass
class Ials:
    name = "ials"
    factors: int = 128
    alpha: float = 40.0
    regularization: float = 0.1
    iterations: int = 15
    seed: int = 7
    _fitted: tuple = field(default=(), repr=False)

    def fit(self, matrix) -> Ials:
        import threadpoolctl

        als = require("implicit.cpu.als", None, "the ials model")

        x = binary(matrix)
        with threadpoolctl.threadpool_limits(1, "blas"), warnings.catch_warnings():  # implicit's own advice
            warnings.simplefilter("ignore", RuntimeWarning)
            model = als.AlternatingLeastSquares(
                factors=self.factors,
                alpha=self.alpha,
                regularization=self.regularization,
                iterations=self.iterations,
                random_state=self.seed,
            )
            model.fit(x, show_progress=False)
        y = np.asarray(model.item_factors, dtype=np.float64)
        self._model = model
        self._fitted = (y, y.T @ y + self.regularization * np.eye(y.shape[1]))
        self._y32 = np.ascontiguousarray(
            y, dtype=np.float32
        )  # the scores' product in float32: half the memory traffic
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        y, gram = self._fitted
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(len(y), dtype=np.float32)
        ys = y[rows]
        user = np.linalg.solve(gram + self.alpha * ys.T @ ys, (1.0 + self.alpha) * ys.sum(axis=0))
        return self._y32 @ user.astype(np.float32)
