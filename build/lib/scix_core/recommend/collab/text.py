"""Text peers: TF-IDF item kNN and the CF + text hybrid (Dacrema et al., TOIS 2021: ItemKNNCBF, ItemKNNCFCBF).

An item's text is whatever the loader gave it — title and abstract, the
bag of words of a ``mult.dat``, or its tag names (:func:`load_texts`).
``text-knn`` scores c by Σ_{s∈S} cos(tfidf_s, tfidf_c); ``hybrid-knn`` by
the same sum over the rows [saves of the item (ℓ2-normalised) |
``text_weight`` · tfidf], re-normalised: cosine over both. Both are two
sparse products per user; the dense item–item matrix is never built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scix_core.errors import ConfigError
from scix_core.recommend.collab.matrix import binary, row_normalise
from scix_core.stores.papers import connect

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix


def load_texts(build_dir: Path) -> list[str]:
    """Title + abstract of every paper of a build, in catalogue row order."""
    conn = connect(Path(build_dir) / "papers.sqlite", readonly=True)
    try:
        return [f"{t} {a}" for t, a in conn.execute("SELECT title, abstract FROM papers ORDER BY idx")]
    finally:
        conn.close()


def tfidf(texts: Sequence[str], sublinear: bool = True, min_df: int = 1) -> csr_matrix:
    """ℓ2-normalised TF-IDF rows (sklearn), English stop words out; all-zero rows for empty texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not any(t.strip() for t in texts):
        raise ConfigError(
            "text peers need item text: every item of this index has an empty title and abstract"
        )
    try:
        return (
            TfidfVectorizer(sublinear_tf=sublinear, min_df=min_df, stop_words="english", dtype=np.float32)
            .fit_transform(texts)
            .tocsr()
        )
    except ValueError as exc:  # sklearn: "empty vocabulary" after min_df / stop words
        raise ConfigError(f"text peers: no usable terms in the item texts ({exc})") from None


@dataclass
class TextKnn:
    name = "text-knn"
    texts: Sequence[str] = ()
    sublinear: bool = True
    min_df: int = 1
    _features: csr_matrix | None = field(default=None, repr=False)

    def features(self, n_items: int) -> csr_matrix:
        if len(self.texts) != n_items:
            raise ConfigError(f"{self.name}: {len(self.texts)} texts for {n_items} catalogue items")
        return tfidf(self.texts, self.sublinear, self.min_df)

    def fit(self, matrix) -> TextKnn:
        self._features = self.features(matrix.shape[1])
        self._t = self._features.T.tocsr()
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        q = np.zeros(self._features.shape[0], dtype=np.float32)
        q[np.asarray(rows, dtype=np.int64)] = 1.0
        return np.asarray(self._features @ (self._t @ q), dtype=np.float32)


@dataclass
class HybridKnn(TextKnn):
    name = "hybrid-knn"
    text_weight: float = 0.3

    def fit(self, matrix) -> HybridKnn:
        from scipy.sparse import hstack  # imported where used (collab/matrix.py)

        x = binary(matrix)
        saves = row_normalise(x.T.tocsr())
        self._features = row_normalise(hstack([saves, self.text_weight * self.features(x.shape[1])]).tocsr())
        self._t = self._features.T.tocsr()
        return self
