"""Where a community's fits live besides the fit cache's arrays: the record of each index's community, the
refit lock, and the child process a background refit fits in.

The record (``community-INDEX-STATE.json`` in the fit cache, one per index and user state) names the fit
each part last used and when it was made, the saves it saw and the last interaction read, and the cached
fits — newest first — that a lagging community of that index and state may start from: never another
community's (an offline evaluation's split, a test's state over the same index), whose fits are of other
saves. Written after every fit by whichever process made or used it (a server worker, the command line, a
refit), read by the next.
"""

from __future__ import annotations

import ctypes
import hashlib
import multiprocessing
import os
import signal
from dataclasses import replace
from pathlib import Path

from scix_core.workspace import read_json, write_json_atomic

# the last fits of an index's community over one user state, beside the fits (:func:`read_record`)
RECORD = "community-{index}-{state}.json"
RECORD_FILES = 4  # the cached fits of each part a record names: the ones a lagging community may start from


def refit_lock(folder: Path, index: str) -> Path:
    """What a refit of ``index``'s community holds (:func:`scix_core.locks.try_exclusive`), in the fit cache
    ``folder``: one refit of an index at a time, whichever process (a server worker, ``scix users refit``, a
    detached refit) makes it."""
    return Path(folder) / f"refit-{index}"


def record_path(folder: Path, index: str, location: str) -> Path:
    """Where the fit record of ``index``'s community over the user state at ``location`` is kept."""
    state = hashlib.sha1(location.encode()).hexdigest()[:12]
    return Path(folder) / RECORD.format(index=index, state=state)


def read_record(folder: Path, index: str, location: str) -> dict | None:
    """The last fit of ``index``'s community over the user state at ``location`` that any process used
    (written after each fit of a lagging community): the saves, each part's saves, fit time and age, and the
    cached fits each part may start from; None when there is none."""
    try:
        return read_json(record_path(folder, index, location))
    except (OSError, ValueError):
        return None


def write_record(folder: Path, index: str, location: str, record: dict, used: list) -> None:
    """``record`` as the record of ``index``'s community over the state at ``location``, its ``files`` the
    ones it had with ``used`` — (part, cached fit file name or None) pairs — put first, at most
    ``RECORD_FILES`` a part. A full disk costs the record, never the fit."""
    files = (read_record(folder, index, location) or {}).get("files", {})
    for part, name in used:
        if name:
            files[part] = [name, *(f for f in files.get(part, ()) if f != name)][:RECORD_FILES]
    try:
        write_json_atomic(record_path(folder, index, location), {**record, "files": files})
    except OSError:
        pass


BACKGROUND_NICE = 19  # a background refit runs on the cycles requests leave idle
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def follow_parent(parent: int) -> None:
    """End this process with the one that started it (Linux ``PR_SET_PDEATHSIG``): a refit child outlived
    a stopped or killed server worker, fitting on for a minute with nobody to take its fit."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the child finishes its fit and ends
        return
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(0)


def lowest_priority() -> None:
    """This process on the cycles nothing else wants: at 125 requests/s a refit at the workers' priority held
    the cores ~20 s and the requests arriving meanwhile waited seconds (bench.serve --rate)."""
    try:
        os.nice(BACKGROUND_NICE)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        pass


def fit_into_cache(model, matrix, parent: int) -> None:
    follow_parent(parent)
    lowest_priority()
    replace(model).fit(matrix)


def fit_in_child(model, matrix) -> None:
    """Fit ``model`` (one whose fits are cached on disk) in a spawned process at the lowest priority: an EASE
    fit holds the GIL for most of its minute (the Gram matrix made dense, LAPACK through f2py), which in a
    thread would stall the process's requests and make a server's supervisor take the worker for hung. A
    child that cannot be started or fails leaves the fit to the caller, in its thread."""
    try:
        child = multiprocessing.get_context("spawn").Process(
            target=fit_into_cache, args=(model, matrix, os.getpid())
        )
        child.start()
        child.join()
    except (AssertionError, OSError):  # a daemonic process may not have children; no process to spare
        return
