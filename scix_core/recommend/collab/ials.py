"""iALS through ``implicit`` (Hu, Koren & Volinsky, ICDM 2008): confidence 1 + α on a save.

Fitted by implicit's ALS; a user's factors are then solved in closed form
from the saves they have now (u = (YᵀY + α Σ_S y yᵀ + λI)⁻¹ (1 + α) Σ_S y,
what implicit's ``recalculate_user`` computes), so a truncated or grown
library is scored as it is, not as it was at training.

With ``cache_dir`` (the community's, ``SCIX_HOME/cache/collab``) a fit's item
factors are kept on disk under a hash of the parameters and the save matrix:
another process or recommender over the same saves — a restarted server
worker, the next test or evaluation of the same split — loads them instead of
refitting (4 s at CiteULike-a's 205k saves on two cores, and several times
that beside another busy process), processes fitting the same saves at once
take a file lock so one fits; the newest ``KEEP`` fits are kept.
A server's background refit runs in a child process at the lowest priority
(:func:`scix_core.recommend.fits.fit_in_child`) and is loaded from here.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scix_core.extras import require
from scix_core.locks import exclusive, mtime
from scix_core.recommend.collab.cache import save_fit
from scix_core.recommend.collab.matrix import binary

# fits kept per cache folder (8.7 MB each at CiteULike-a's 17k items): an evaluation fits its training
# community and one per per-tier part (1 + 3 · ⌈users / 1,000⌉: 19 on CiteULike-a); with three kept, the
# oldest went first, so the next evaluation of the same split (notebook 06 after `scix eval-recs`) refitted
# every one
KEEP = 24


@dataclass
class Ials:
    name = "ials"
    factors: int = 128
    alpha: float = 40.0
    regularization: float = 0.1
    iterations: int = 15
    seed: int = 7
    cache_dir: Path | None = field(default=None, compare=False)
    # how long the fit took, kept with a cached one: a loaded fit is still refitted in the background, not
    # in a request (scix_core.recommend.community.INLINE_FIT_S)
    fit_seconds: float | None = field(default=None, compare=False)
    # a server's first fit: when these saves were never fitted, the newest cached fit of the same parameters
    # and items that saw at least this share of them is taken (and refitted in the background), as EASE's
    stale_share: float | None = field(default=None, compare=False)
    fitted_saves: int | None = field(default=None, compare=False)  # set when a stale fit was taken
    fitted_at: float | None = field(default=None, compare=False)  # when the fit in use was made (as EASE's)
    stale_from: frozenset[str] | None = field(default=None, compare=False)  # as EASE's
    cache_file: str | None = field(default=None, compare=False)  # the cached fit in use (its file name)
    _fitted: tuple = field(default=(), repr=False)

    def fit(self, matrix) -> Ials:
        x = by_library(binary(matrix))
        path = self._cached(x)
        if path is None:
            y = self._solve(x)
        else:
            with exclusive(path):  # processes fitting the same saves at once: one fits, the others load
                self.cache_file = path.name
                y, self.fit_seconds, self.fitted_at = _load(path)
                if y is None and self.stale_share is not None:
                    y = self._load_stale(path.parent, self.stale_share * x.nnz, x.shape[1])
                if y is None:
                    y = self._solve(x)
                    note = {"seconds": self.fit_seconds, "saves": int(x.nnz), "at": self.fitted_at}
                    _save(path, y, {**note, **self._params()})
        self._fitted = (y, y.T @ y + self.regularization * np.eye(y.shape[1]))
        self._y32 = np.ascontiguousarray(
            y, dtype=np.float32
        )  # the scores' product in float32: half the memory traffic
        return self

    def _solve(self, x) -> np.ndarray:
        """A fit of ``x``'s item factors; :attr:`fit_seconds` is how long it took."""
        import threadpoolctl

        t = time.perf_counter()

        als = require("implicit.cpu.als", None, "the ials model")
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
        self._model = model  # implicit's own (a fit loaded from the cache has none)
        self.fit_seconds, self.fitted_at = time.perf_counter() - t, time.time()
        return np.asarray(model.item_factors, dtype=np.float64)

    def _params(self) -> dict:
        return {"params": [self.factors, self.alpha, self.regularization, self.iterations, self.seed]}

    def _load_stale(self, folder: Path, least: float, items: int) -> np.ndarray | None:
        """The item factors of the newest cached fit with these parameters that saw at least ``least`` saves,
        of ``items`` items or of a smaller catalogue it grew from (an append adds rows at the end, unsaved:
        their factors are zeros, as a fit gives an item nobody saved); None when there is none. (A user's
        factors are solved from their saves as they are now, so older item factors still score every user;
        a paper saved for the first time since has none until the refit.)"""
        for path in sorted(folder.glob("ials-*.npy"), key=mtime, reverse=True):
            if self.stale_from is not None and path.name not in self.stale_from:
                continue
            try:
                note = json.loads(path.with_suffix(".json").read_text())
            except (OSError, ValueError):
                continue
            if note.get("params") != self._params()["params"] or note.get("saves", -1) < least:
                continue
            y, seconds, at = _load(path)
            if y is not None and 0 < len(y) <= items:
                y = np.vstack([y, np.zeros((items - len(y), y.shape[1]))]) if len(y) < items else y
                self.fit_seconds, self.fitted_saves, self.fitted_at = seconds, int(note["saves"]), at
                self.cache_file = path.name
                return y
        return None

    def _cached(self, x) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(
            repr(("ials", self.factors, self.alpha, self.regularization, self.iterations, self.seed)).encode()
            + repr(x.shape).encode()
        )
        x = x.tocsr()
        for array in (x.indptr, x.indices):
            digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
        return Path(self.cache_dir) / f"ials-{digest.hexdigest()[:24]}.npy"

    @property
    def item_factors(self) -> np.ndarray:
        """The fitted item factors (items × factors, float64)."""
        return self._fitted[0]

    def scores(self, rows: np.ndarray) -> np.ndarray:
        y, gram = self._fitted
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(len(y), dtype=np.float32)
        ys = y[rows]
        user = np.linalg.solve(gram + self.alpha * ys.T @ ys, (1.0 + self.alpha) * ys.sum(axis=0))
        return self._y32 @ user.astype(np.float32)


def by_library(x):
    """``x``'s rows (users) in the order of their libraries' contents. The item factors depend on the order
    of the rows (each user's factors start from a seeded draw in row order), and nothing after the fit
    needs a user's row: the same libraries in another user order — another process's arrival order, an
    evaluation's replay with or without its per-tier sample — are now the same fit (and the same cache
    entry), where they differed in the last digits and moved a few users' lists."""
    x = x.tocsr()
    x.sort_indices()
    libraries = [x.indices[x.indptr[u] : x.indptr[u + 1]].tobytes() for u in range(x.shape[0])]
    return x[sorted(range(len(libraries)), key=libraries.__getitem__)]


def _load(path: Path) -> tuple[np.ndarray | None, float | None, float | None]:
    """A cached fit's item factors, how long that fit took and when it was made; (None, None, None) when
    there is none or it cannot be read (then refitted)."""
    try:
        y = np.load(path)
        note = json.loads(path.with_suffix(".json").read_text())
        seconds, at = note.get("seconds"), note.get("at")
    except (OSError, ValueError, AttributeError):
        return None, None, None
    os.utime(path)  # the newest used is kept longest
    return np.asarray(y, dtype=np.float64), seconds, at


def _save(path: Path, y: np.ndarray, note: dict) -> None:
    save_fit(path, y, note, "ials", KEEP)
