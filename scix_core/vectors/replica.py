"""A private read copy of a finished build's embedded shard that another process holds.

qdrant-edge locks a shard's write-ahead log, so one process at a time can open
it. A finished build's shard is never written again, so a second process (a
second ``scix serve`` worker, a notebook beside the server) copies it and opens
the copy: ``indexes/<index>/replicas/<build>/<part>-<pid>``. The copy is removed
when its store closes; one left by a killed process is removed by the next
process that makes a copy (its process is gone, or its build is). Disk cost:
one shard per extra process (50 MB for CiteULike-a's 16,980 papers).
``vectors.replicas = false`` turns this off: the second process then drops
its dense lane, as before (docs/backends.md#replicas).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = "replicas"
COPY_ATTEMPTS = 5


def held_elsewhere(exc: BaseException) -> bool:
    """Whether opening a shard failed because another process holds its write-ahead log."""
    return "WouldBlock" in str(exc) or "WouldBlock" in str(exc.__cause__ or "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _stale(folder: Path, builds: Path) -> bool:
    """A copy whose process is gone or whose build was replaced and deleted."""
    pid = folder.name.rsplit("-", 1)[-1]
    if not pid.isdigit() or not _alive(int(pid)):
        return True
    return not (builds / folder.parent.name).exists()


def remove_stale(index_dir: Path) -> list[Path]:
    """Remove the copies of dead processes and of deleted builds under one index's folder."""
    root, removed = Path(index_dir) / ROOT, []
    for folder in sorted(root.glob("*/*")) if root.is_dir() else []:
        if folder.is_dir() and _stale(folder, Path(index_dir) / "builds"):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    for build in root.glob("*") if root.is_dir() else []:
        if build.is_dir() and not any(build.iterdir()):
            build.rmdir()
    return removed


def replica_of(shard: Path) -> Path:
    """A fresh copy of ``shard`` (``<index>/builds/<build>/<part>``) for this process, made atomically (a
    temporary name, then a rename): a copy cut short by a kill is never opened."""
    shard = Path(shard).resolve()
    build = shard.parent
    index_dir = build.parent.parent
    remove_stale(index_dir)
    target = index_dir / ROOT / build.name / f"{shard.name}-{os.getpid()}"
    if target.exists():  # this process's copy, its store closed and reopened
        shutil.rmtree(target)
    partial = target.with_name(f".{target.name}.partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    copy_shard(shard, partial)
    partial.rename(target)
    return target


def copy_shard(shard: Path, target: Path) -> None:
    """Copy a finished shard folder to ``target`` (a new path): its lock files left out, its preallocated
    files kept sparse where ``cp`` can (a plain copy wrote a 50 MB shard out as 190 MB). Retried: the
    holder, opening the shard right now, replaces a few small config files as it loads it (two workers
    starting together, a worker following a build an append copies)."""
    for attempt in range(COPY_ATTEMPTS):
        shutil.rmtree(target, ignore_errors=True)
        try:
            try:
                subprocess.run(
                    ["cp", "-a", "--sparse=always", str(shard), str(target)], check=True, capture_output=True
                )
                for lock in Path(target).rglob("*.lock"):
                    lock.unlink()
            except (OSError, subprocess.CalledProcessError):  # no GNU cp here (or it failed): copy in Python
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(shard, target, ignore=shutil.ignore_patterns("*.lock"))
            return
        except (shutil.Error, FileNotFoundError):
            if attempt == COPY_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
