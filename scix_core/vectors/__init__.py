"""Vector stores: one contract, qdrant-edge (embedded default) and qdrant-client backends."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path

from scix_core.config import VectorConfig
from scix_core.errors import BackendUnavailableError, UnknownNameError
from scix_core.vectors.base import VectorFilter, VectorHit, VectorStore
from scix_core.vectors.client import ClientVectorStore
from scix_core.vectors.edge import EdgeVectorStore
from scix_core.vectors.replica import held_elsewhere

BACKENDS = ("edge", "qdrant")


def payload(paper) -> dict:
    out = {"paper_id": paper.paper_id, "year": paper.year, "categories": list(paper.categories)}
    if paper.listed is not None:
        out["listed"] = paper.listed.toordinal()
    return out


PARTS = (
    "vectors",
    "passages",
)  # a build's vector stores: one point per paper; one per passage (``--passages``)


def store_folder(config: VectorConfig, build_dir: Path, part: str = "vectors") -> Path | None:
    """The folder in ``build_dir`` that holds a vector store part; None when it lives on a Qdrant server."""
    if part not in PARTS:
        raise UnknownNameError("vector store part", part, PARTS)
    if config.backend == "edge":
        return Path(build_dir) / part
    if config.backend == "qdrant":
        suffix = "" if part == "vectors" else f"-{part}"
        return None if config.url else Path(build_dir) / f"qdrant-local{suffix}"
    raise UnknownNameError("vector backend", config.backend, BACKENDS)


def open_store(
    config: VectorConfig, build_dir: Path, index: str, dim: int | None = None, part: str = "vectors"
) -> VectorStore:
    """Open (``dim=None``) or create a vector store of an index build: its papers' (``part="vectors"``) or its
    passages' (``"passages"``: a shard, collection or local folder of its own)."""
    folder = store_folder(config, build_dir, part)
    if config.backend == "edge":
        return EdgeVectorStore(folder, dim, config.hnsw_m, config.hnsw_ef_construct)
    collection = f"scix-{index}" + ("" if part == "vectors" else f"-{part}")
    if folder is None:
        return ClientVectorStore(collection, dim, url=config.url, timeout_s=config.timeout_s)
    return ClientVectorStore(collection, dim, path=str(folder))


_READERS: dict[tuple, VectorStore] = {}
_READERS_LOCK = threading.Lock()
_USERS: dict[tuple, int] = {}  # open_reader calls not yet released, per shared store


def open_reader(config: VectorConfig, build_dir: Path, index: str, part: str = "vectors") -> VectorStore:
    """The vector store of a built index, opened once per process and shared.

    An embedded shard can be opened only once at a time, and every
    searcher over the same build should reuse it anyway.
    """
    key = _reader_key(config, build_dir, index, part)
    with _READERS_LOCK:
        if not _READERS:
            atexit.register(close_readers)
        if key not in _READERS:
            _READERS[key] = _open_or_copy(config, build_dir, index, part)
        _USERS[key] = _USERS.get(key, 0) + 1
        return _READERS[key]


def _open_or_copy(config: VectorConfig, build_dir: Path, index: str, part: str) -> VectorStore:
    """The build's store; an embedded shard another process holds is read from a private copy
    (``vectors.replicas``)."""
    try:
        return open_store(config, build_dir, index, part=part)
    except BackendUnavailableError as exc:
        if config.backend != "edge" or not config.replicas or not held_elsewhere(exc):
            raise
        return EdgeVectorStore.replica_of(build_dir / part)


def release_reader(
    config: VectorConfig, build_dir: Path, index: str, keep: bool, part: str = "vectors"
) -> None:
    """One user of :func:`open_reader`'s store is done with it. The last one closes it unless ``keep`` — the
    caller says whether the build is still current — so a long-lived process that follows rebuilds does not
    keep every superseded build's shard (memory, file handles) open."""
    key = _reader_key(config, build_dir, index, part)
    with _READERS_LOCK:
        users = _USERS.get(key, 0) - 1
        if users > 0:
            _USERS[key] = users
            return
        _USERS.pop(key, None)
        if not keep and key in _READERS:
            _READERS.pop(key).close()


def _reader_key(config: VectorConfig, build_dir: Path, index: str, part: str) -> tuple:
    return (config.backend, config.url, str(Path(build_dir).resolve()), index, part)


def close_readers() -> None:
    """Close every shared reader (at exit, or before deleting a build in tests)."""
    with _READERS_LOCK:
        _USERS.clear()
        while _READERS:
            _READERS.popitem()[1].close()


__all__ = [
    "BACKENDS",
    "PARTS",
    "VectorFilter",
    "VectorHit",
    "VectorStore",
    "close_readers",
    "open_reader",
    "open_store",
    "payload",
    "store_folder",
    "release_reader",
]
