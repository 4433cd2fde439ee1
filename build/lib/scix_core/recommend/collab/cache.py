"""Fitted arrays kept on disk (``SCIX_HOME/cache/collab``): written whole or not at all, the newest kept.

EASE's P and iALS's item factors (and the interests' centroids, :mod:`scix_core.recommend.interests`) are
stored the same way: the note (``<name>.json``) first, the array under
a temporary name renamed into place (a reader never maps half a file), then only the newest ``keep`` fits
with the same prefix stay. A full disk costs the cache, never the fit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from scix_core.locks import lock_path, mtime


def write_whole(path: Path, write: Callable[[BinaryIO], None]) -> bool:
    """``write`` into a temporary file beside ``path``, then rename it into place: a reader never sees half a
    file. False (nothing left behind) when the disk refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    return True


def keep_newest(folder: Path, pattern: str, keep: int) -> list[Path]:
    """Drop all but the newest ``keep`` files of ``folder`` matching ``pattern``; returns those dropped."""
    dropped = sorted(folder.glob(pattern), key=mtime, reverse=True)[keep:]
    for old in dropped:
        old.unlink(missing_ok=True)
    return dropped


def save_fit(path: Path, array: np.ndarray, note: dict, prefix: str, keep: int) -> None:
    """Write ``array`` to ``path`` with its ``note``; then drop all but the newest ``keep`` ``prefix-*.npy``
    fits of the folder (with their notes and locks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.with_suffix(".json").write_text(json.dumps(note))
    except OSError:
        return
    if not write_whole(path, lambda fh: np.save(fh, array)):
        return
    for old in keep_newest(path.parent, f"{prefix}-*.npy", keep):
        old.with_suffix(".json").unlink(missing_ok=True)
        lock_path(old).unlink(missing_ok=True)
