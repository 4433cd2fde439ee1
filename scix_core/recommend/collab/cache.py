"""Fitted arrays kept on disk (``SCIX_HOME/cache/collab``): written whole or not at all, the newest kept.

EASE's P and iALS's item factors are stored the same way: the note (``<name>.json``) first, the array under
a temporary name renamed into place (a reader never maps half a file), then only the newest ``keep`` fits
with the same prefix stay. A full disk costs the cache, never the fit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from scix_core.locks import lock_path, mtime


def save_fit(path: Path, array: np.ndarray, note: dict, prefix: str, keep: int) -> None:
    """Write ``array`` to ``path`` with its ``note``; then drop all but the newest ``keep`` ``prefix-*.npy``
    fits of the folder (with their notes and locks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.with_suffix(".json").write_text(json.dumps(note))
        with open(tmp, "wb") as fh:
            np.save(fh, array)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return
    fits = sorted(path.parent.glob(f"{prefix}-*.npy"), key=mtime, reverse=True)
    for old in fits[keep:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".json").unlink(missing_ok=True)
        lock_path(old).unlink(missing_ok=True)
