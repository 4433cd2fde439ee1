"""A cross-process exclusive lock on a file (``fcntl.flock``): one process at a time builds a shared
artefact (a model export, a conversion, a fit) while the others wait and then reuse it."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def mtime(path: Path) -> float:
    """``path``'s modification time; 0 when it is gone (removed by another process meanwhile)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def lock_path(target: Path) -> Path:
    """The hidden lock file beside ``target``."""
    return target.with_name(f".{target.stem}.lock")


@contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``target`` (:func:`lock_path`; its folder is created) for the block."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(target), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def try_exclusive(target: Path) -> Iterator[bool]:
    """Like :func:`exclusive`, without waiting: yields True holding the lock, False when another process
    holds it (the block then runs without it, to do something else)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(target), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def held(target: Path) -> bool:
    """Whether some open file description holds ``target``'s lock now — another process's, or another
    thread's of this one (a probe, taken and given back at once; False when its folder does not exist)."""
    if not target.parent.is_dir():
        return False
    with open(lock_path(target), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False
