"""Content-side peers that score papers nobody has saved: arxiv-sanity-lite's SVM and collaborative factors
predicted from the text (the content-only limit of DropoutNet).

* ``svm`` — arxiv-sanity-lite's recommender (Karpathy): per user, a linear
  SVM (scikit-learn's ``LinearSVC``, balanced class weights, ``C``) over
  TF-IDF unigrams and bigrams of the item text (its vectoriser's settings:
  sublinear tf, English stop words, at most ``max_features`` terms, ``min_df``),
  the user's saves positive and every other paper negative — here a seeded
  sample of ``negatives`` of them, which keeps one fit to milliseconds; the
  score is the decision value.
* ``cf-from-text`` — iALS item factors fitted on the saves, a ridge
  regression from each saved item's embedding (the index's vectors) to its
  factors, and the factors of an item nobody saved predicted from its
  embedding (van den Oord et al., NeurIPS 2013; Volkovs et al.'s DropoutNet,
  NeurIPS 2017, at full dropout); the user's factors solved from their
  saves as iALS does. Items with saves keep their fitted factors.

Both follow the item-scorer contract (``fit(matrix)``, ``scores(rows)``);
their scores are signed (``signed = True``): a ranking takes every finite
score, not only the positive ones.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scix_core.errors import ConfigError
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.collab.matrix import binary

#: arxiv-sanity-lite's TfidfVectorizer, as in its compute.py
TOKENS = r"(?u)\b[a-zA-Z_][a-zA-Z0-9_]+\b"


@dataclass
class Svm:
    name = "svm"
    signed = True
    texts: Sequence[str] = ()
    C: float = 0.01
    negatives: int = 2000
    max_features: int = 20000
    min_df: int = 5
    seed: int = 7
    _x: object = field(default=None, repr=False)

    def fit(self, matrix) -> Svm:
        from sklearn.feature_extraction.text import TfidfVectorizer

        if len(self.texts) != matrix.shape[1]:
            raise ConfigError(f"svm: {len(self.texts)} texts for {matrix.shape[1]} catalogue items")
        if not any(t.strip() for t in self.texts):
            raise ConfigError("the svm peer needs item text: every item of this index has an empty text")
        vectoriser = TfidfVectorizer(
            strip_accents="unicode",
            lowercase=True,
            stop_words="english",
            token_pattern=TOKENS,
            ngram_range=(1, 2),
            max_features=self.max_features,
            sublinear_tf=True,
            min_df=min(self.min_df, max(1, len(self.texts) // 10)),
            dtype=np.float32,
        )
        try:
            self._x = vectoriser.fit_transform(self.texts).tocsr()
        except ValueError as exc:  # an empty vocabulary
            raise ConfigError(f"svm: no usable terms in the item texts ({exc})") from None
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        from sklearn.svm import LinearSVC

        x = self._x
        n = x.shape[0]
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if not len(rows):
            return np.zeros(n, dtype=np.float32)
        rng = np.random.default_rng([self.seed, zlib.crc32(rows.tobytes())])
        others = np.setdiff1d(np.arange(n), rows)
        neg = rng.choice(others, size=min(self.negatives, len(others)), replace=False)
        train = np.concatenate([rows, neg])
        y = np.concatenate([np.ones(len(rows)), np.zeros(len(neg))])
        svm = LinearSVC(class_weight="balanced", C=self.C, max_iter=10000, tol=1e-6, random_state=self.seed)
        svm.fit(x[train], y)
        return np.asarray(x @ svm.coef_[0] + svm.intercept_[0], dtype=np.float32)


#: iALS fits kept in this process, by parameters and save matrix: a tuning grid varies the ridge over the
#: same factors
_FITS: OrderedDict = OrderedDict()
_KEPT = 4


def _ials(params: dict, x) -> Ials:
    digest = hashlib.sha256(repr(sorted(params.items())).encode())
    for array in (x.indptr, x.indices):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    key = digest.hexdigest()
    if key not in _FITS:
        _FITS[key] = Ials(**params).fit(x)
        while len(_FITS) > _KEPT:
            _FITS.popitem(last=False)
    _FITS.move_to_end(key)
    return _FITS[key]


@dataclass
class CfFromText:
    name = "cf-from-text"
    signed = True
    vectors: np.ndarray | None = None  # the catalogue's embeddings, one row per item
    factors: int = 128
    alpha: float = 40.0
    regularization: float = 0.1
    ridge: float = 10.0
    seed: int = 7
    _fitted: tuple = field(default=(), repr=False)

    def fit(self, matrix) -> CfFromText:
        from sklearn.linear_model import Ridge

        x = binary(matrix)
        if self.vectors is None or len(self.vectors) != x.shape[1]:
            raise ConfigError("cf-from-text needs the index's vectors, one per catalogue item")
        params = {
            "factors": self.factors,
            "alpha": self.alpha,
            "regularization": self.regularization,
            "seed": self.seed,
        }
        ials = _ials(params, x)
        y = np.array(ials.item_factors, dtype=np.float64)
        saved = np.asarray(x.sum(axis=0)).ravel() > 0
        if saved.sum() < 2:
            raise ConfigError("cf-from-text needs saved items to learn the text → factors map from")
        e = np.asarray(self.vectors, dtype=np.float64)
        ridge = Ridge(alpha=self.ridge).fit(e[saved], y[saved])
        if not saved.all():
            y[~saved] = ridge.predict(e[~saved])  # nobody saved them: factors from the text alone
        gram = y[saved].T @ y[saved] + self.regularization * np.eye(y.shape[1])
        self._fitted = (y, gram, np.ascontiguousarray(y, dtype=np.float32), saved)
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        y, gram, y32, saved = self._fitted
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[saved[rows]] if len(rows) else rows
        if not len(rows):
            return np.zeros(len(y), dtype=np.float32)
        ys = y[rows]
        user = np.linalg.solve(gram + self.alpha * ys.T @ ys, (1.0 + self.alpha) * ys.sum(axis=0))
        return y32 @ user.astype(np.float32)
