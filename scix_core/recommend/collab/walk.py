"""RP3beta: a three-step random walk item → user → item, popularity-penalised (Paudel et al., ACM TiiS 2017).

For a binary save matrix X (users × items) with n_u saves per user and n_i
savers per item, the walk from item s to item c has weight

    W[s, c] = Σ_u (X[u,s] / n_s)^α · (X[u,c] / n_u)^α  /  n_c^β

and a user who saved S gets score(c) = Σ_{s∈S} W[s, c]. With binary X the
powers fall on the degrees, so score = n^-β ⊙ Xᵀ (n_u^-α ⊙ X (n^-α ⊙ 1_S)):
two sparse products per user, no item–item matrix (Dacrema et al. keep each
item's top-k neighbours of W; the full walk was as good or better on
CiteULike-a, see docs/history.md). α = 0.5, β = 0.5 with the user step
un-powered (α_user = 0) is item-kNN cosine without shrinkage, which is how
``recommend.collab = "cosine"`` keeps the previous co-save score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scix_core.recommend.collab.matrix import binary


@dataclass
class RP3Beta:
    name = "rp3beta"
    alpha: float = 0.8
    beta: float = 0.4
    alpha_user: float | None = None  # None: the same α on the user step (RP3beta); 0: item-kNN cosine
    _fitted: tuple = field(default=(), repr=False)

    def fit(self, matrix) -> RP3Beta:
        x = binary(matrix)
        n_user = np.maximum(np.asarray(x.sum(axis=1)).ravel(), 1.0)
        n_item = np.maximum(np.asarray(x.sum(axis=0)).ravel(), 1.0)
        a_user = self.alpha if self.alpha_user is None else self.alpha_user
        self._fitted = (
            x,
            x.T.tocsr(),
            np.power(n_item, -self.alpha).astype(np.float32),
            np.power(n_user, -a_user).astype(np.float32),
            np.power(n_item, -self.beta).astype(np.float32),
        )
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        x, xt, item_step, user_step, penalty = self._fitted
        rows = np.asarray(rows, dtype=np.int64)
        q = np.zeros(x.shape[1], dtype=np.float32)
        q[rows] = item_step[rows]
        return np.asarray(xt @ (user_step * (x @ q)), dtype=np.float32) * penalty

    def scores_many(self, queries: list) -> list[np.ndarray]:
        """:meth:`scores` of each of ``queries``, the same numbers: the two sparse products of many queries at
        once (a sparse matrix times a block of columns sums each column as it sums one vector) — the tier
        weights' choice asks 11,000 queries of one fit."""
        if len(queries) <= 1:
            return [self.scores(rows) for rows in queries]
        x, xt, item_step, user_step, penalty = self._fitted
        q = np.zeros((x.shape[1], len(queries)), dtype=np.float32)
        for j, rows in enumerate(queries):
            rows = np.asarray(rows, dtype=np.int64)
            q[rows, j] = item_step[rows]
        users = x @ q
        users *= user_step[:, None]
        out = np.asarray(xt @ users, dtype=np.float32)
        out *= penalty[:, None]
        return list(np.ascontiguousarray(out.T))


@dataclass
class CosineWalk(RP3Beta):
    """Item-kNN cosine as the walk — α 0.5 on items, none on users, β 0.5 (``recommend.collab = "cosine"``);
    a name of its own, so a Tier 1 on cosine and tiers on RP3beta fit both."""

    name = "cosine"
    alpha: float = 0.5
    beta: float = 0.5
    alpha_user: float | None = 0.0
