"""EASE^R (Steck, WWW 2019): B = I − P · diag(1 / diag P), P = (XᵀX + λI)⁻¹, diag B = 0; score = 1_S B.

B is never formed: P is symmetric, so a user's scores are 1_S − (P 1_S) / diag P
— a sum of |S| contiguous columns of the column-major P, one pass.

A dense item × item model: P is one float32 n × n array. With at least as many
users as saved items it is factorised and inverted in place by LAPACK's
Cholesky (``spotrf`` + ``spotri``; XᵀX + λI is symmetric positive definite),
so the peak is about one n² float32 array (1.2 GB at 17k items) — not the
several float64 copies of ``np.linalg.inv``, which crashed inside OpenBLAS at
26k items. With fewer users r than saved items n (CiteULike-a: 5,551 and
16,980) it comes from the users' side, by the push-through identity λP = I −
Xᵀ (X Xᵀ + λI)⁻¹ X: an r × r Cholesky inversion in float64 and two sparse
products (about r³ + nnz · (r + n) flops against n³), written into the same n²
float32 array a block of rows at a time. Both factorisations keep the exact
zeros of a block structure (two communities with no save in common have P = 0
between their items), which an eigendecomposition would not
(:mod:`~scix_core.recommend.collab.ease_dual`). n counts only the items
somebody saved: an item nobody saved has a zero row and column in XᵀX, so its
B row and column are exactly zero and the model is the same without it (a
sample of users, or a big catalogue with a small community, costs only what
its saves span). :func:`check_fits` refuses, with a typed error before
allocating, an item set whose array would not fit in ``memory_share`` of the
memory available now or exceeds ``max_items``; rp3beta and item-knn are the
sparse item–item models for larger catalogues.

With ``cache_dir`` a fit is kept on disk under a hash of λ and XᵀX (all B
depends on) and memory-mapped back: the same community — a restarted
server, a second evaluation of the same split — loads in milliseconds
instead of refitting, and processes that map the same file share its pages;
processes that need the same fit at once take a file lock, so one fits and
the others load.
The newest ``KEEP`` fits a folder holds are kept, each with a note of its λ,
item set, saves and fit time. With ``stale_share`` s a fit whose saves are
not cached loads the newest cached fit of the same λ and catalogue that saw
at least s × today's saves instead, and says so (``fitted_saves``,
``fit_seconds``). A server's community uses s = 0 for its first fit — a
worker restarted after some saves answers in seconds, not after a full
refit — and s = 1 / (1 + refit growth) in its background refits; those take a
per-folder lock, so the workers of one machine refit one at a time and the
others adopt the fit just made instead of repeating it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import ChainMap
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from scix_core.errors import ConfigError
from scix_core.locks import exclusive, mtime
from scix_core.recommend.collab.cache import save_fit
from scix_core.recommend.collab.matrix import binary

MAX_ITEMS = 40_000
KEEP = 3  # fits kept per cache folder (1.2 GB each at 17k items)
PAGE_IN_BYTES = 16 << 20  # read size when a cached fit's pages are read in
# a corrected fit's score is P's column sum minus W V's: where the two cancel to below this share of the
# terms' magnitude, what is left is float32 rounding, and it is 0 (see :meth:`Ease._corrected`)
RESIDUE = 1e-4


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


def _mapped(path: Path) -> np.ndarray:
    """A cached fit memory-mapped, its pages read in first — by plain reads, which let other threads run:
    touched cold, each page fault of a request's scores held the interpreter lock, and a server's first
    seconds on a fit loaded from disk (a start, a background refit adopted) stalled every request of the
    worker (docs/history.md#serving)."""
    p = np.load(path, mmap_mode="r")
    try:
        with open(path, "rb", buffering=0) as f:
            chunk = bytearray(PAGE_IN_BYTES)
            while f.readinto(chunk):
                pass
    except OSError:  # the pages come in as they are touched
        pass
    return p


def positions(items: np.ndarray, rows) -> tuple[np.ndarray, bool]:
    """Positions in the sorted fitted ``items`` of the catalogue ``rows`` among them (the saved ones), and
    whether every row was one of them."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    if not len(items):
        return np.zeros(0, np.int64), not len(rows)
    at = np.minimum(np.searchsorted(items, rows), len(items) - 1)
    hit = items[at] == rows
    return at[hit], bool(hit.all())


def _gram(x):
    """XᵀX of a binary users × items matrix, sparse."""
    return (x.T @ x).tocsr()


@dataclass
class Ease:
    name = "ease"
    lam: float = 250.0
    max_items: int = MAX_ITEMS
    cache_dir: Path | None = field(default=None, compare=False)
    _p: np.ndarray | None = field(default=None, repr=False)  # P, column-major (memory-mapped from the cache)
    _diag: np.ndarray | None = field(default=None, repr=False)
    _items: np.ndarray | None = field(default=None, repr=False)  # the saved items, B's rows and columns
    _n: int = 0
    # P − W V: a low-rank correction of a shared P (:meth:`with_rows_changed`); None: P as it is
    _w: np.ndarray | None = field(default=None, repr=False)
    _v: np.ndarray | None = field(default=None, repr=False)
    _w_norm: np.ndarray | None = field(default=None, repr=False)  # W's row norms: its terms' size
    stale_share: float | None = field(default=None, compare=False)
    # set by a fit loaded stale or from the cache: the saves it was fitted on and how long that fit took
    fitted_saves: int | None = field(default=None, compare=False)
    fit_seconds: float | None = field(default=None, compare=False)
    # when the fit in use was made (epoch seconds; a cached fit's own time, None for a note without one): the
    # community's refit clock (recommend.community_refit_age_s)
    fitted_at: float | None = field(default=None, compare=False)
    # the cached fits (file names) a stale load may take — one community's own (Community.lag); None: any
    stale_from: frozenset[str] | None = field(default=None, compare=False)
    cache_file: str | None = field(default=None, compare=False)  # the cached fit in use (its file name)

    def fit(self, matrix) -> Ease:
        x = binary(matrix)
        self._n = x.shape[1]
        self._items = np.flatnonzero(np.diff(x.tocsc().indptr))
        x = x[:, self._items]
        n = x.shape[1]
        check_fits(n, self.max_items)
        if not n:
            self._p, self._diag = np.zeros((0, 0), np.float32), np.zeros(0, np.float32)
            return self
        path = self._cached(x)
        if path is None:
            self._p, self.fitted_at = self._solve(x, n), time.time()
        elif not path.exists() and self.stale_share is not None:
            least = self.stale_share * x.nnz
            if not self._load_stale(path.parent, least):
                with exclusive(path.parent / "ease-refit"):  # one process of the machine refits at a time
                    # ... and the next takes its fit: of these very saves (another worker's first fit), or
                    # one it may start from
                    if not self._load_exact(path) and not self._load_stale(path.parent, least):
                        self._solve_and_save(path, x, n)
        else:
            with exclusive(path):  # processes fitting the same saves at once: one fits, the others load
                if not self._load_exact(path):
                    self._solve_and_save(path, x, n)
        self._diag = np.ascontiguousarray(np.diagonal(self._p), dtype=np.float32)
        return self

    def _load_exact(self, path: Path) -> bool:
        """The cached fit of these saves when it is there (False when not)."""
        if not path.exists():
            return False
        os.utime(path)
        self._p, self.cache_file = _mapped(path), path.name
        note = _note(path)
        self.fit_seconds, self.fitted_at = note.get("seconds"), note.get("at")
        return True

    def _solve_and_save(self, path: Path, x, n: int) -> None:
        t = time.perf_counter()
        self._p = self._solve(x, n)
        self.fit_seconds, self.fitted_at, self.cache_file = time.perf_counter() - t, time.time(), path.name
        _save(path, self._p, {"saves": int(x.nnz), "seconds": self.fit_seconds, "at": self.fitted_at}, self)

    def _load_stale(self, folder: Path, least: float) -> bool:
        """The newest cached fit of this λ that saw at least ``least`` saves, of this catalogue or of a
        smaller one it grew from (an append adds rows at the end, unsaved: a fit's items are rows of both);
        False when none."""
        for path in sorted(folder.glob("ease-*.npy"), key=mtime, reverse=True):
            if self.stale_from is not None and path.name not in self.stale_from:
                continue
            note = _note(path)
            if note.get("lam") != self.lam or not 0 < note.get("n", 0) <= self._n or "items" not in note:
                continue
            if note.get("saves", -1) < least:  # (newest = last used: an older file may have seen more)
                continue
            try:
                self._p = _mapped(path)
            except (OSError, ValueError):  # removed or cut short meanwhile: try the next
                continue
            self._items = np.asarray(note["items"], dtype=np.int64)
            self.fitted_saves, self.fit_seconds = int(note["saves"]), float(note["seconds"])
            self.fitted_at, self.cache_file = note.get("at"), path.name
            return True
        return False

    def _cached(self, x) -> Path | None:
        """The fit's file: by λ, the catalogue and the libraries in ``x`` — as a set of rows, so the same
        saves in another user order (another process's arrival order) are the same fit, as their Gram
        matrix is; hashing the libraries, not the Gram, keeps the Gram's product (seconds under a server's
        load, with its interpreter lock held) off a load from the cache."""
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(f"ease {self.lam!r} {self._n}".encode())
        digest.update(np.ascontiguousarray(self._items, dtype=np.int64).tobytes())
        x = x.tocsr()
        x.sort_indices()
        indptr, indices = x.indptr, np.asarray(x.indices, dtype=np.int64)
        libraries = sorted(indices[indptr[u] : indptr[u + 1]].tobytes() for u in range(x.shape[0]))
        for library in libraries:
            digest.update(len(library).to_bytes(8, "little"))
            digest.update(library)
        return Path(self.cache_dir) / f"ease-{digest.hexdigest()[:24]}.npy"

    def _solve(self, x, n: int) -> np.ndarray:
        """P, column-major float32, of the users × saved items ``x``: from whichever side is smaller."""
        x = x.tocsr()
        users = x[np.flatnonzero(np.diff(x.indptr))]  # a user with no save adds nothing to XᵀX
        if users.shape[0] < n:
            return _from_users(users, n, self.lam)
        return self._inverted(_gram(x), n)

    def _inverted(self, gram, n: int) -> np.ndarray:
        # XᵀX is symmetric, so its C-ordered dense array transposed is the column-major P with no copy (a
        # C → F conversion of 1.2 GB took 9 s, two thirds of LAPACK's factorisation and inversion)
        p = np.asarray(gram.toarray(), dtype=np.float32).T
        p[np.diag_indices(n)] += self.lam
        return _spd_inverse(p, f"the Gram matrix + {self.lam} I")

    def _located(self, rows) -> tuple[np.ndarray, bool]:
        return positions(self._items, rows)

    def with_rows_changed(self, changes) -> Ease:
        """This fit as if each ``(old, new)`` user's saved catalogue rows had been ``new`` instead of
        ``old``, by the Woodbury identity — (G + λI + U C Uᵀ)⁻¹ = P − PU (C + UᵀPU)⁻¹ UᵀP with the old
        rows as columns of U signed −1 and the new ones +1. The result shares this fit's P and keeps the
        correction as its two factors W = PU (n × 2r) and V = (C + UᵀPU)⁻¹ UᵀP (2r × n): r changed users
        cost about n² · 2r flops and n · 4r floats, never a second n × n array (1.2 GB at 17k items, whose
        first touch alone took 20 s on a VM that hands memory back to its host; the per-tier tables
        truncate a sample of libraries three times). Refits instead (None) when a new row is outside the
        fitted items or 2r passes n / 4."""
        cols, signs = [], []
        for old, new in changes:
            if set(np.asarray(old).tolist()) == set(np.asarray(new).tolist()):
                continue
            for rows, sign in ((old, -1.0), (new, 1.0)):
                at, known = self._located(rows)
                if not known:
                    return None
                if len(at):
                    cols.append(at)
                    signs.append(sign)
        if not cols:
            return self
        if 4 * len(cols) > len(self._items) > 2000:  # a refit is cheaper (a small one is cheap either way)
            return None
        w = np.stack([self._column_sum(at, np.float64) for at in cols], axis=1)
        k = np.diag(signs) + np.stack([w[at].sum(axis=0) for at in cols])
        try:
            v = np.linalg.solve(k, w.T).astype(np.float32)
        except np.linalg.LinAlgError:
            return None
        w = w.astype(np.float32)
        if self._w is not None:  # a corrected fit corrected again: the factors stack
            w, v = np.hstack([self._w, w]), np.vstack([self._v, v])
        out = replace(self, cache_dir=None, _w=w, _v=v, _w_norm=np.linalg.norm(w, axis=1))
        out._items, out._n, out._p = self._items, self._n, self._p
        out._diag = (np.diagonal(self._p) - np.einsum("ir,ri->i", w, v)).astype(np.float32)
        return out

    def _column_sum(self, at: np.ndarray, dtype=np.float32) -> np.ndarray:
        """Σ of the (corrected) P's columns ``at``."""
        total = self._p[:, at].sum(axis=1, dtype=dtype)
        if self._w is not None:
            total -= (self._w @ self._v[:, at].sum(axis=1)).astype(dtype)
        return total

    def _corrected(self, sums: np.ndarray, v_sums: np.ndarray) -> np.ndarray:
        """P's column sums (n × queries) minus the correction's, ``W @ v_sums``, with what only rounding left
        of a cancellation set to 0. Where a changed user's rows were the only tie between two items, the exact
        corrected P has 0 there, but float32 leaves a residue of the terms cancelled: largest exactly at those
        removed ties, so it ranked a removed user's own saves first among the items a query has no tie to
        (a validation user's set-aside saves, asked with one save only they had saved: on a sparse
        community the tier weights' choice saw recall@10 0.049 for EASE where a refit without those users
        gives 0.035). A difference below ``RESIDUE`` × (|P's sum| + ‖W's row‖ ‖v_sums‖) — the terms' size
        by Cauchy–Schwarz, at O(n) a query where |W| @ |v_sums| cost a second n × 2r product — is that
        residue."""
        out = sums - self._w @ v_sums
        bound = np.abs(sums) + self._w_norm[:, None] * np.linalg.norm(v_sums, axis=0)
        out[np.abs(out) <= RESIDUE * bound] = 0.0
        return out

    def scores(self, rows: np.ndarray) -> np.ndarray:
        return self.scores_many([rows])[0]

    def scores_many(self, queries: list) -> list[np.ndarray]:
        """:meth:`scores` of each of ``queries``; a corrected fit's correction for all of them in one matrix
        product (the tier weights' choice asks thousands of queries of a fit corrected for 1,000 users: one
        product a query read W, 70 MB at 17k items, each time), or taken from :meth:`prime`'s batch."""
        located = [self._located(rows)[0] for rows in queries]  # rows nobody saved score nothing
        if self._w is None:
            return [self._scored(at, self._column_sum(at) if len(at) else None) for at in located]
        primed = getattr(self, "_primed", {})
        missing = [at for at in located if len(at) and at.tobytes() not in primed]
        sums = ChainMap(dict(zip((at.tobytes() for at in missing), self._corrected_sums(missing))), primed)
        return [self._scored(at, sums[at.tobytes()] if len(at) else None) for at in located]

    def prime(self, queries: list) -> None:
        """Score ``queries`` of a corrected fit in one batch and keep the column sums for :meth:`scores_many`
        (only this batch's): the per-tier tables ask a corrected fit one user at a time, and each ask read
        all of W (the cascade's community and the EASE peer: 116 s of a run's 484 on CiteULike-a)."""
        if self._w is None:
            return
        located = [at for at in (self._located(rows)[0] for rows in queries) if len(at)]
        # an attribute, not a field: dataclasses.replace (a fit corrected again) never carries a batch along
        self._primed = dict(zip((at.tobytes() for at in located), self._corrected_sums(located)))

    def _corrected_sums(self, located: list[np.ndarray]) -> list[np.ndarray]:
        """The corrected P's column sums for each of ``located`` (fitted positions), 256 at a time."""
        out: list[np.ndarray] = []
        for lo in range(0, len(located), 256):
            chunk = located[lo : lo + 256]
            sums = np.stack([self._p[:, at].sum(axis=1, dtype=np.float32) for at in chunk], axis=1)
            sums = self._corrected(sums, np.stack([self._v[:, at].sum(axis=1) for at in chunk], axis=1))
            out += list(sums.T)
        return out

    def _scored(self, at: np.ndarray, column_sum: np.ndarray | None) -> np.ndarray:
        out = np.zeros(self._n, np.float32)
        if column_sum is not None:
            part = -column_sum / self._diag
            part[at] += 1.0  # B's zero diagonal: a saved item's own column does not count for it
            out[self._items] = part
        return out


def _spd_inverse(a: np.ndarray, what: str) -> np.ndarray:
    """The inverse of the symmetric positive definite column-major ``a`` (``what`` it is, for the error), in
    place by LAPACK's Cholesky in ``a``'s precision on every core, the lower triangle mirrored into the
    upper a block at a time (no second n × n array)."""
    import scipy.linalg.lapack as lapack
    import threadpoolctl

    potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), (a,))
    with threadpoolctl.threadpool_limits(None):
        a, info = potrf(a, lower=1, overwrite_a=1, clean=0)
        if info != 0:
            raise ConfigError(f"ease: {what} is not positive definite (LAPACK info {info})")
        a, info = potri(a, lower=1, overwrite_c=1)
    if info != 0:
        raise ConfigError(f"ease: inverting {what} failed (LAPACK info {info})")
    n = len(a)
    for lo in range(0, n, 2048):
        hi = min(n, lo + 2048)
        block = a[lo:hi, lo:hi]
        a[lo:hi, lo:hi] = np.tril(block) + np.tril(block, -1).T
        a[lo:hi, hi:] = a[hi:, lo:hi].T
    return a


def _from_users(x, n: int, lam: float) -> np.ndarray:
    """P = (I − Xᵀ M X) / λ with M = (X Xᵀ + λI)⁻¹, column-major float32, for users × saved items ``x``
    with fewer rows than columns. M is inverted in float64 (λP's diagonal is 1 minus a term near 1 for an
    item most users saved); the product Xᵀ (M X) is sparse × dense in float32, a block of P's rows at a
    time, and P is symmetric, so its C-ordered rows transposed are the columns LAPACK's side gives."""
    x = x.astype(np.float64)
    m = (x @ x.T).toarray().T  # symmetric: the transposed view is column-major, no copy
    m[np.diag_indices_from(m)] += lam
    m = _spd_inverse(m, f"the users' Gram matrix + {lam} I")
    mx = np.ascontiguousarray(np.asarray(x.T @ m).T, dtype=np.float32)  # M X, users × items
    del m
    xt = x.T.tocsr().astype(np.float32)
    p = np.empty((n, n), np.float32)
    for lo in range(0, n, 1024):
        hi = min(n, lo + 1024)
        rows = np.asarray(xt[lo:hi] @ mx)
        rows *= -1.0 / lam
        rows[np.arange(hi - lo), np.arange(lo, hi)] += 1.0 / lam
        p[lo:hi] = rows
    return p.T


def _note(path: Path) -> dict:
    """The note beside a cached fit (``ease-<key>.json``); {} when there is none or it is unreadable."""
    try:
        return json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return {}


def _save(path: Path, b: np.ndarray, facts: dict, model: Ease) -> None:
    """The fit and its note (λ, item set, saves, fit time) into the cache folder (:func:`save_fit`)."""
    note = {"lam": model.lam, "n": model._n, "items": model._items.tolist(), **facts}
    save_fit(path, b, note, "ease", KEEP)
