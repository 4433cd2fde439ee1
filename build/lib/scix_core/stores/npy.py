"""``numpy.load`` safe to call from several threads at once.

A ``.npy`` header is parsed with ``ast.literal_eval``; on CPython 3.11 before 3.11.9 concurrent ``ast`` calls
can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905) — seen here when
three threads opened searchers at once. Loads are serialised by one lock; the data itself is memory-mapped or
read after the header, so the lock is held for microseconds.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

_LOCK = threading.Lock()


def load(path: Path | str, mmap_mode: str | None = None) -> np.ndarray:
    with _LOCK:
        return np.load(path, mmap_mode=mmap_mode)
