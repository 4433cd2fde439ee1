"""The one module that lays out and writes the workspace on disk.

Layout under ``home`` (``SCIX_HOME``)::

    indexes/NAME/current -> builds/BUILD      symlink, swapped atomically
    indexes/NAME/builds/BUILD/papers.sqlite   paper store + FTS5 tables
    indexes/NAME/builds/BUILD/vectors/        embedded vector shard
    indexes/NAME/builds/BUILD/manifest.json   what the build holds
    cache/embeddings/MODEL/CHUNK.npy          float16 vectors, content-addressed
    models/rerankers/NAME/                    a trained cross-encoder + manifest.json

A build is written in a temporary folder beside the others and only then
becomes ``current`` through an atomic symlink replace, so a crash or Ctrl-C
at any point leaves the previous index usable.

Readers hold a **lease** on the build they opened (:meth:`Workspace.lease_build`: a shared ``flock`` on the
build's ``.readers`` file); pruning after a new build takes an exclusive lock without waiting and leaves a
leased build in place for a later build to remove. So a searcher opened while the index is rebuilt keeps one
complete build — the old or the new — and never finds its folder gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from scix_core.errors import BackendUnavailableError, ConfigError, IndexBusyError, IndexNotFoundError

LEASE = ".readers"
BUILD_LOCK = ".build.lock"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_index_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):  # fullmatch: "$" alone lets "name\n" through
        raise ConfigError(f"index name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return name


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to a temp file in the same folder, fsync, then rename over ``path``."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True, default=str))


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temp file in the same folder, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


class Workspace:
    def __init__(self, home: Path):
        self.home = Path(home)

    def index_root(self, name: str) -> Path:
        return self.home / "indexes" / check_index_name(name)

    def tuned_preset(self, name: str) -> Path:
        """The config preset `scix tune` writes beside the index ``name`` (``--config tuned``)."""
        return self.index_root(name) / "tuned.toml"

    def index_dir(self, name: str) -> Path:
        """The folder of the current build of ``name``; IndexNotFoundError if none."""
        current = self.index_root(name) / "current"
        if not current.exists():
            raise IndexNotFoundError(
                f"no index named {name!r} in {self.home}; build it with `scix ingest --index {name} ...`"
            )
        return current.resolve()

    def is_current(self, name: str, build_dir: Path) -> bool:
        """Whether ``build_dir`` is still the current build of ``name``."""
        current = self.index_root(name) / "current"
        return current.exists() and current.resolve() == Path(build_dir).resolve()

    def changed_at(self, name: str) -> float:
        """When ``current`` of ``name`` last moved (epoch seconds: the swapped-in link's own time)."""
        return os.lstat(self.index_root(name) / "current").st_mtime

    def indexes(self) -> list[str]:
        root = self.home / "indexes"
        return sorted(p.name for p in root.iterdir() if (p / "current").exists()) if root.exists() else []

    def model_dir(self, kind: str, name: str) -> Path:
        """``models/KIND/NAME`` (e.g. a cross-encoder the workbench trained)."""
        return self.home / "models" / kind / check_index_name(name)

    @contextmanager
    def new_model(self, kind: str, name: str) -> Iterator[Path]:
        """Yield an empty folder; on success it replaces ``model_dir(kind, name)`` (old copy removed last)."""
        target = self.model_dir(kind, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            yield tmp
            old = target.parent / f".{name}-old-{os.getpid()}"
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def embedding_cache(self, model_slug: str) -> Path:
        return self.home / "cache" / "embeddings" / model_slug

    @contextmanager
    def new_build(self, name: str, build_id: str, locked: bool = False) -> Iterator[Path]:
        """Yield an empty folder to build in; on success it becomes ``current``.

        On any exception (KeyboardInterrupt included) the partial build is
        removed and ``current`` still points at the previous build. ``locked``:
        the caller already holds :meth:`writing` (an append reads the current
        build under the same lock it writes the next one).
        """
        builds = self.index_root(name) / "builds"
        builds.mkdir(parents=True, exist_ok=True)
        with nullcontext() if locked else self.writing(name):
            tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=builds))
            try:
                yield tmp
                # a fresh folder name even for an identical rebuild, so `current` never dangles
                final = builds / f"{build_id}{tmp.name.removeprefix('.building')}"
                os.replace(tmp, final)
                self._point_current(name, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            self._prune(name, keep=final)

    @contextmanager
    def writing(self, name: str) -> Iterator[None]:
        """One writer of an index at a time (a build or an append): an exclusive ``flock`` on ``BUILD_LOCK``,
        not waited for (a second ``scix ingest`` fails at once with :class:`IndexBusyError`); the kernel
        releases it if the writer dies, and the next one removes what it left half-built."""
        root = self.index_root(name)
        (root / "builds").mkdir(parents=True, exist_ok=True)
        path = root / BUILD_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Path(path).read_text().strip() or "another process"
                raise IndexBusyError(
                    f"index {name!r} is being built by {holder}; wait for it to finish (nothing was changed)"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}".encode())
            for stale in (self.index_root(name) / "builds").glob(
                ".building-*"
            ):  # left by a builder that was killed
                shutil.rmtree(stale, ignore_errors=True)
            yield
        finally:
            os.close(fd)

    def _point_current(self, name: str, target: Path) -> None:
        root = self.index_root(name)
        link = root / f".current-{os.getpid()}"
        link.unlink(missing_ok=True)
        link.symlink_to(target.relative_to(root))
        os.replace(link, root / "current")

    def _prune(self, name: str, keep: Path) -> None:
        for old in (self.index_root(name) / "builds").iterdir():
            if old == keep or old.name.startswith(".building-"):
                continue
            try:
                fd = os.open(old / LEASE, os.O_RDONLY | os.O_CREAT, 0o644)
            except OSError:  # not a build folder (or already gone)
                shutil.rmtree(old, ignore_errors=True)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a reader holds it: the next build prunes it
                os.close(fd)
                continue
            try:
                shutil.rmtree(old, ignore_errors=True)
            finally:
                os.close(fd)

    def lease_build(self, name: str, attempts: int = 20) -> BuildLease:
        """The current build of ``name``, held against pruning until the lease is released."""
        for _ in range(attempts):
            path = self.index_dir(name)
            try:
                fd = os.open(path / LEASE, os.O_RDONLY | os.O_CREAT, 0o644)
            except FileNotFoundError:  # pruned between resolving `current` and opening it
                continue
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a prune of this very build is running
            if os.fstat(fd).st_nlink and (path / "manifest.json").exists():
                return BuildLease(path, fd)
            os.close(fd)  # it was being pruned: `current` has moved on
        raise BackendUnavailableError(f"index {name!r} changed {attempts} times while it was being opened")


class BuildLease:
    """A shared lock on one build folder (see the module docstring); ``release`` is idempotent and also runs
    when the lease is garbage-collected."""

    def __init__(self, path: Path, fd: int):
        import weakref

        self.path = path
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        self._finalizer()
