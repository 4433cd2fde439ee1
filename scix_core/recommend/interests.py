"""The interests of the users who saved what a user saved — where a library of one or three saves may lead.

With one or three saves a user's interest clusters are not known yet. The users who saved the same papers
have whole libraries, and their Ward clusters (Tier 1's rule, and the one ``scix eval-recs`` measures
interest coverage with) are the interests a library that starts like theirs tends to grow into. Tiers 3
and 2 pick their list by MMR with a gain for every such interest a candidate reaches first
(:meth:`Neighbourhood.cover`; ``recommend.tier3_neighbour_cover`` / ``tier2_neighbour_cover`` /
``tier1_neighbour_cover``): a candidate
nearest an interest of many of those users that no pick covers yet is worth more than one beside the
papers already picked. Each library's centroids are computed once and kept (:class:`InterestCache`,
bounded); the greedy itself is a few small matrix products.

A server computes every library's centroids before its first request (:meth:`InterestCache.warm`): in a
request, a neighbour's library not seen before costs a Ward clustering (a few ms each, up to
``recommend.neighbours`` of them), and a fresh worker answered its first seconds of requests that way
(docs/history.md#serving). The centroids are kept in a file under ``SCIX_HOME/cache/interests`` too, so a
restarted worker reads them instead of clustering the community again.
"""

from __future__ import annotations

import hashlib
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.collab.cache import keep_newest, write_whole
from scix_core.recommend.context import IndexSide, UserContext
from scix_core.recommend.stages.cluster import ward_labels

#: interest files kept per workspace (one per index build and clustering setting), the newest first
FILES_KEPT = 8
UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)  # a file missing or cut short


class InterestCache:
    """Unit centroids of a library's Ward clusters (one cluster below ``tier1_min_saves`` saves), by
    library, the ``size`` most recently used kept."""

    def __init__(self, size: int = 50_000, build: str = ""):
        self.size, self.build = size, build  # build: the index build whose vectors the centroids are of
        self._kept: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _settings(cfg: RecommendConfig) -> bytes:
        """What the clustering depends on besides the library."""
        return repr((cfg.max_clusters, cfg.min_silhouette, cfg.tier1_min_saves)).encode()

    def _key(self, rows: np.ndarray, cfg: RecommendConfig) -> bytes:
        return np.asarray(rows, dtype=np.int64).tobytes() + self._settings(cfg)

    def warm(self, libraries, vectors, cfg: RecommendConfig, folder: Path | None = None) -> dict:
        """Every library of ``libraries`` (:class:`~scix_core.recommend.community.Libraries`) in the cache:
        read from ``folder``'s file of an earlier warm of this build with these clustering settings (by
        each library's digest), the rest computed, and the file rewritten when any was. Returns how many
        libraries there were, were read and were computed."""
        users = libraries.by_user
        libs = [users.indices[users.indptr[u] : users.indptr[u + 1]] for u in range(users.shape[0])]
        keys = [self._key(rows, cfg) for rows in libs if len(rows)]
        libs = [rows for rows in libs if len(rows)]
        tag = _digest(self.build.encode() + self._settings(cfg))
        path = folder / f"interests-{tag}.npz" if folder is not None else None
        kept = _read(path) if path is not None else {}
        read = computed = 0
        for rows, key in zip(libs, keys):
            with self._lock:
                if key in self._kept:
                    continue
                stored = kept.get(_digest(key))
                if stored is not None:
                    self._kept[key] = stored
                    read += 1
                    continue
            self.centroids(rows, vectors, cfg)
            computed += 1
        if path is not None and computed:
            with self._lock:
                placed = {_digest(k): self._kept[k] for k in keys if k in self._kept}
            _write(path, placed)
        return {"libraries": len(keys), "read": read, "computed": computed}

    def centroids(self, rows: np.ndarray, vectors, cfg: RecommendConfig) -> np.ndarray:
        key = self._key(rows, cfg)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        vecs = np.asarray(vectors.get(rows), dtype=np.float32)
        labels = (
            ward_labels(vecs, cfg.max_clusters, cfg.min_silhouette)[0]
            if len(vecs) >= cfg.tier1_min_saves
            else np.zeros(len(vecs), dtype=np.int64)
        )
        means = np.stack([vecs[labels == k].mean(axis=0) for k in range(int(labels.max()) + 1)])
        out = (means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        with self._lock:
            self._kept[key] = out
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return out


def _digest(key: bytes) -> str:
    return hashlib.blake2b(key, digest_size=16).hexdigest()


def _read(path: Path) -> dict[str, np.ndarray]:
    """An interest file's centroids by library digest; {} when there is none or it cannot be read."""
    try:
        with np.load(path) as f:
            digests, ends, centroids = f["digests"], f["ends"], f["centroids"]
    except UNREADABLE:  # none yet, or cut short: computed again
        return {}
    starts = np.concatenate([[0], ends[:-1]])
    return {str(d): centroids[a:b] for d, a, b in zip(digests, starts, ends)}


def _write(path: Path, kept: dict[str, np.ndarray]) -> None:
    """Write the file whole (:func:`~scix_core.recommend.collab.cache.write_whole`); keep the newest
    ``FILES_KEPT``. A full disk costs the file, never the centroids."""
    arrays = list(kept.values())

    def write(fh) -> None:
        np.savez(
            fh,
            digests=np.array(list(kept), dtype="U32"),
            ends=np.cumsum([len(a) for a in arrays], dtype=np.int64),
            centroids=np.concatenate(arrays) if arrays else np.zeros((0, 0), dtype=np.float32),
        )

    if write_whole(path, write):
        keep_newest(path.parent, "interests-*.npz", FILES_KEPT)


_SHARED: dict[str, InterestCache] = {}
_SHARED_LOCK = threading.Lock()


def shared_interests(build: str) -> InterestCache:
    """One cache per index build in this process: every recommender over it (the evaluation's per-tier
    runs make several) reuses the centroids."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(build, InterestCache(build=build))


@dataclass(frozen=True, eq=False)
class Neighbourhood:
    """The interests of the users who saved the same papers as one user: every such user's interest
    centroids, one after the other (``starts``/``sizes`` mark each user's), and each interest's share of the
    cover gain — the user's weight (papers shared) over their number of interests, summing to 1 over one
    interest of every such user."""

    centroids: np.ndarray  # float32, interests × dimensions
    starts: np.ndarray
    sizes: np.ndarray
    weight: np.ndarray
    users: int

    assigned: dict = field(default_factory=dict)  # catalogue row -> its interest per user, once computed

    def cover(self, candidates: np.ndarray, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """For :func:`~scix_core.recommend.stages.mmr.mmr`'s cover term: the interest each candidate falls in
        for each user (its nearest centroid among theirs: an index into all the interests, candidates ×
        users), and each interest's weight. With the candidates' catalogue ``rows`` each row is placed once
        and kept (the evaluation's Tier-1 runs finish the same pool several times)."""
        if rows is None:
            return self._place(candidates), self.weight
        rows = [int(r) for r in rows]
        if not rows:  # an empty pool (a feed's window of papers already seen)
            return np.zeros((0, len(self.sizes)), dtype=np.int64), self.weight
        missing = [i for i, r in enumerate(rows) if r not in self.assigned]
        if missing:
            for i, placed in zip(missing, self._place(np.asarray(candidates)[missing])):
                self.assigned[rows[i]] = placed
        return np.stack([self.assigned[r] for r in rows]), self.weight

    @cached_property
    def _slots(self) -> np.ndarray:
        """Each user's interests as a row of indices into ``centroids``, padded with one past the last."""
        slots = np.full((len(self.sizes), int(self.sizes.max())), len(self.centroids), dtype=np.int64)
        for user, (start, size) in enumerate(zip(self.starts, self.sizes)):
            slots[user, :size] = np.arange(start, start + size)
        return slots

    def _place(self, candidates: np.ndarray) -> np.ndarray:
        # similarities gathered into candidates × users × interests (padding at -inf), the nearest by one
        # argmax (the first of equals): a segmented max and min over the flat columns cost twice as much
        candidates = np.asarray(candidates, dtype=np.float32)
        sims = np.empty((len(candidates), len(self.centroids) + 1), dtype=np.float32)
        np.matmul(candidates, self.centroids.T, out=sims[:, :-1])
        sims[:, -1] = -np.inf
        slots = self._slots
        return slots[np.arange(len(slots)), sims[:, slots].argmax(axis=2)]


#: neighbourhoods kept per snapshot of the community's libraries — about a megabyte each with their placed
#: rows; the evaluation asks for one user's in every run before the next user's, a server within seconds
MEMO_SIZE = 64


def neighbourhood(
    libraries, saved_rows: np.ndarray, cache: InterestCache, vectors, cfg
) -> Neighbourhood | None:
    """The neighbourhood of a user who saved ``saved_rows`` (:meth:`Libraries.savers_of`, at most
    ``recommend.neighbours`` users), kept with the community snapshot ``libraries`` it was read from (the
    evaluation asks for it once per run and user); None when nobody else saved those papers."""
    key = (
        np.asarray(saved_rows, dtype=np.int64).tobytes()
        + repr((cfg.neighbours, cfg.max_clusters, cfg.min_silhouette, cfg.tier1_min_saves)).encode()
    )
    memo = libraries.memo
    if key in memo:
        return memo[key]
    users = libraries.savers_of(saved_rows, cfg.neighbours)
    hood = None
    if users:
        cents = [cache.centroids(rows, vectors, cfg) for rows, _ in users]
        sizes = np.array([len(c) for c in cents])
        shared = np.array([w for _, w in users], dtype=np.float64)
        hood = Neighbourhood(
            np.concatenate(cents),
            np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
            sizes,
            np.repeat(shared / shared.sum() / sizes, sizes),
            len(users),
        )
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = hood
    return hood


def interest_rows(
    side: IndexSide, ctx: UserContext, hood: Neighbourhood | None, taken: set[int], n: int
) -> list[int]:
    """Over a candidate pool (new papers, a feed's window): the pool papers nearest the neighbourhood's ``n``
    heaviest interests (``recommend.pool_interest_hits`` each, unseen), the heaviest interest first, those
    not ``taken`` already (and now taken); [] outside a pool, without neighbours, or with ``n`` or the hits 0.
    Outside a pool the co-saved papers are those users' own saves, spread over their interests; a pool holds
    none of them, and its nearest papers to the user's own lie in the user's own topic."""
    hits = side.config.pool_interest_hits
    if side.pool is None or hood is None or min(n, hits) <= 0:
        return []
    top = np.argsort(-hood.weight, kind="stable")[:n]
    found = side.store.search_batch(hood.centroids[top], [hits] * len(top), ctx.exclusion(side), ids=False)
    out: list[int] = []
    for near in found:
        for h in near:
            if h.point_id not in taken:
                taken.add(h.point_id)
                out.append(int(h.point_id))
    return out
