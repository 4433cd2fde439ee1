"""Corpus vectors cached on disk, so a second ingest re-encodes nothing.

Vectors are stored float16 in content-addressed chunks of ``CHUNK`` texts
(key: model, max length, texts). A corpus manifest records the model, the
dimension, the corpus content hash, the count and its chunk keys. Chunks
make a long encode resumable after Ctrl-C, and let a ``--limit`` run's
prefix serve the full run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from scix_core.stores import npy
from scix_core.workspace import read_json, write_json_atomic

CHUNK = 2048


def _hash(parts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def corpus_hash(texts: Sequence[str]) -> str:
    return _hash(texts)


def _save_npy(path: Path, array: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npy", dir=path.parent)
    os.close(fd)
    try:
        np.save(tmp, array)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class EmbeddingCache:
    def __init__(self, folder: Path, model: str, max_length: int):
        self.folder, self.model, self.max_length = Path(folder), model, max_length
        self.hits = self.misses = 0

    def _chunk_key(self, texts: Sequence[str]) -> str:
        return _hash([self.model, str(self.max_length), *texts])

    def vectors(
        self,
        texts: Sequence[str],
        encode: Callable[[Sequence[str]], np.ndarray],
        on_chunk: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """float16 vectors for ``texts``, encoding only the chunks not cached yet."""
        self.folder.mkdir(parents=True, exist_ok=True)
        c_hash = corpus_hash(texts)
        manifest = self.folder / f"corpus-{c_hash[:24]}.json"
        parts, keys = [], []
        for start in range(0, len(texts), CHUNK):
            chunk = texts[start : start + CHUNK]
            key = self._chunk_key(chunk)
            path = self.folder / f"{key[:32]}.npy"
            if path.exists():
                self.hits += len(chunk)
                part = npy.load(path)
            else:
                self.misses += len(chunk)
                part = np.asarray(encode(chunk), dtype=np.float16)
                _save_npy(path, part)
            parts.append(part)
            keys.append(key[:32])
            if on_chunk:
                on_chunk(len(chunk))
        vecs = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float16)
        write_json_atomic(
            manifest,
            {
                "model": self.model,
                "max_length": self.max_length,
                "dim": int(vecs.shape[1]) if vecs.size else 0,
                "corpus_hash": c_hash,
                "count": len(texts),
                "chunks": keys,
                "dtype": "float16",
            },
        )
        return vecs

    def manifest(self, texts: Sequence[str]) -> dict | None:
        path = self.folder / f"corpus-{corpus_hash(texts)[:24]}.json"
        return read_json(path) if path.exists() else None
