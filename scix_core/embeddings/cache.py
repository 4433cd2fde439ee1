"""Corpus vectors cached on disk, so a second ingest re-encodes nothing.

Vectors are stored float16 in content-addressed chunks of ``CHUNK`` texts
(key: model, max length, texts). A corpus manifest records the model, the
dimension, the corpus content hash, the count and its chunk keys. Chunks
make a long encode resumable after Ctrl-C, and let a ``--limit`` run's
prefix serve the full run.

A chunk that is not cached is not necessarily new text: every cached text is
also indexed by its own hash (``texts.sqlite``: text -> chunk file, row), so
a chunk is encoded only for the texts no chunk holds — a full rebuild after a
month of appends (``scix ingest --append``, whose chunks are each day's
papers) re-encodes nothing. Such a vector was encoded beside other texts than
a fresh encode would put it with: equal for float backends, to the
quantisation's tolerance for the int8 ones (activations quantised per batch).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from scix_core.stores import npy
from scix_core.workspace import read_json, write_json_atomic

CHUNK = 2048
TEXTS = "texts.sqlite"  # text hash -> (chunk file, row) of every cached text


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

    def _text_keys(self, texts: Sequence[str]) -> list[str]:
        return [_hash([self.model, str(self.max_length), t])[:32] for t in texts]

    def _texts_db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.folder / TEXTS, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS texts (key TEXT PRIMARY KEY, chunk TEXT NOT NULL, row INTEGER)"
        )
        conn.execute("CREATE TABLE IF NOT EXISTS chunks (key TEXT PRIMARY KEY)")
        return conn

    def _index_chunk(self, conn: sqlite3.Connection, key: str, texts: Sequence[str]) -> None:
        """Record where each text of the cached chunk ``key`` is (once per chunk)."""
        if conn.execute("SELECT 1 FROM chunks WHERE key = ?", (key,)).fetchone():
            return
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO texts VALUES (?, ?, ?)",
                ((k, key, row) for row, k in enumerate(self._text_keys(texts))),
            )
            conn.execute("INSERT OR IGNORE INTO chunks VALUES (?)", (key,))

    def _encoded(self, conn, chunk: Sequence[str], encode) -> tuple[np.ndarray, int]:
        """The chunk's vectors: those of texts another chunk holds read from it, the rest encoded; and how
        many were read."""
        keys = self._text_keys(chunk)
        found: dict[int, tuple[str, int]] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = dict(
                (k, (c, r))
                for k, c, r in conn.execute(f"SELECT key, chunk, row FROM texts WHERE key IN ({marks})", part)
            )
            found.update({i + j: rows[k] for j, k in enumerate(part) if k in rows})
        by_chunk: dict[str, list[tuple[int, int]]] = {}
        for at, (c, r) in found.items():
            by_chunk.setdefault(c, []).append((at, r))
        reused: dict[int, np.ndarray] = {}
        for c, pairs in by_chunk.items():
            try:
                stored = npy.load(self.folder / f"{c}.npy", mmap_mode="r")
                reused.update({at: np.asarray(stored[r]) for at, r in pairs})
            except (OSError, ValueError, IndexError):  # removed or cut short: encode those texts instead
                continue
        missing = [i for i in range(len(chunk)) if i not in reused]
        fresh = np.asarray(encode([chunk[i] for i in missing]), dtype=np.float16) if missing else None
        dim = fresh.shape[1] if fresh is not None else next(iter(reused.values())).shape[0]
        out = np.zeros((len(chunk), dim), dtype=np.float16)
        for at, vec in reused.items():
            out[at] = vec
        if fresh is not None:
            out[missing] = fresh
        return out, len(reused)

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
        conn = self._texts_db()
        try:
            for start in range(0, len(texts), CHUNK):
                chunk = texts[start : start + CHUNK]
                key = self._chunk_key(chunk)[:32]
                path = self.folder / f"{key}.npy"
                if path.exists():
                    self.hits += len(chunk)
                    part = npy.load(path)
                else:
                    part, reused = self._encoded(conn, chunk, encode)
                    self.hits, self.misses = self.hits + reused, self.misses + len(chunk) - reused
                    _save_npy(path, part)
                self._index_chunk(conn, key, chunk)
                parts.append(part)
                keys.append(key)
                if on_chunk:
                    on_chunk(len(chunk))
        finally:
            conn.close()
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
