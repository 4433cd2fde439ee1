"""Corpus vectors read locally, in one batch, by point id — never one call per paper.

The reference design fetched saved-paper vectors from its vector database
one request at a time (1,247 ms for 20); Tier 1 needs 100+ vectors for
scoring and MMR. Every build that has vectors keeps a float16 copy of them
beside the shard (``vectors.f16.npy``, row = point id = ``papers.idx``),
memory-mapped here, so a batch read is a fancy-index into the page cache.
Builds made before that file existed are served from the embedding cache
chunks the build manifest names.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scix_core.errors import VectorIndexUnavailableError
from scix_core.stores import npy

FILE = "vectors.f16.npy"


def write_local(build: Path, vectors: np.ndarray) -> None:
    """Write the float16 copy into a build folder being assembled (the build swap makes it atomic)."""
    np.save(build / FILE, np.asarray(vectors, dtype=np.float16))


def _from_cache(cache_dir: Path, corpus_hash: str) -> np.ndarray | None:
    manifest = cache_dir / f"corpus-{corpus_hash[:24]}.json"
    if not manifest.exists():
        return None
    import json

    chunks = json.loads(manifest.read_text())["chunks"]
    paths = [cache_dir / f"{key}.npy" for key in chunks]
    if not all(p.exists() for p in paths):
        return None
    return np.concatenate([npy.load(p) for p in paths])


class LocalVectors:
    """Read-only unit vectors of one build: ``get(point_ids) -> float32 (n, dim)``."""

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix

    @classmethod
    def open(cls, build_dir: Path, manifest: dict, cache_dir: Path | None = None) -> LocalVectors:
        if not manifest.get("vectors"):
            raise VectorIndexUnavailableError(
                f"index {manifest.get('index')!r} was built without vectors (--no-embed); "
                "re-run `scix ingest` without --no-embed to get recommendations beyond trending"
            )
        path = Path(build_dir) / FILE
        if path.exists():
            return cls(npy.load(path, mmap_mode="r"))
        matrix = _from_cache(cache_dir, manifest.get("corpus_hash", "")) if cache_dir else None
        if matrix is None or len(matrix) != manifest["vectors"]:
            raise VectorIndexUnavailableError(
                f"index {manifest.get('index')!r} has no local vector copy ({path.name}) and its embedding "
                "cache is "
                "gone; rebuild it with `scix ingest --force` (the vectors are reused where cached)"
            )
        return cls(matrix)

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def get(self, point_ids: Sequence[int]) -> np.ndarray:
        """float32 rows for ``point_ids`` in the given order (one vectorised read)."""
        ids = np.asarray(point_ids, dtype=np.int64)
        if ids.size == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.matrix[ids], dtype=np.float32)


_OPEN: dict[str, LocalVectors] = {}
_LOCK = threading.Lock()


def shared_local(build_dir: Path, manifest: dict, cache_dir: Path | None = None) -> LocalVectors:
    """One memory map per build per process."""
    key = str(Path(build_dir).resolve())
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = LocalVectors.open(build_dir, manifest, cache_dir)
        return _OPEN[key]
