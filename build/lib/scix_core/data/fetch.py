"""``scix data fetch``: download a public copy of a dataset, verify every file, then keep it.

A source (``sources.toml``) is one archive (a checksum; unpacked after it
verified) or several plain files, each with its own sha256. Every download
goes to a scratch folder beside the target; the dataset folder appears —
one rename — only when every file arrived whole and verified. A 404, a
truncated body or a checksum mismatch on any file is a typed error naming
that file, and leaves nothing behind. ``url_base`` fetches every file from
a mirror (``URL_BASE/<file name>``) against the same pinned checksums.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import tomllib
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from scix_core.errors import ChecksumError, ConfigError, DataPathError, UnknownNameError

SOURCES_FILE = Path(__file__).with_name("sources.toml")


@dataclass(frozen=True)
class File:
    """One plain file of a multi-file source, saved as ``name`` in the dataset folder."""

    name: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Source:
    name: str
    url: str = ""
    sha256: str | None = None
    md5: str | None = None
    archive: str = "zip"
    files: tuple[File, ...] = ()
    format: str | None = None
    about: str = ""

    def mirrored(self, url_base: str) -> Source:
        """The same files and checksums, each fetched from ``url_base`` + its file name."""
        base = url_base if url_base.endswith("/") else url_base + "/"
        if self.files:
            return replace(self, files=tuple(replace(f, url=base + f.name) for f in self.files))
        return replace(self, url=base + PurePosixPath(urllib.parse.urlsplit(self.url).path).name)


def sources(path: Path = SOURCES_FILE) -> dict[str, Source]:
    raw = tomllib.loads(path.read_text())
    return {
        name: Source(
            name,
            s.get("url", ""),
            s.get("sha256"),
            s.get("md5"),
            s.get("archive", "zip"),
            tuple(File(f["name"], f["url"], f["sha256"]) for f in s.get("files", ())),
            s.get("format"),
            s.get("about", ""),
        )
        for name, s in raw.items()
    }


def _digest(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verify(path: Path, label: str, url: str, sha256: str | None, md5: str | None = None) -> None:
    algo, expected = ("sha256", sha256) if sha256 else ("md5", md5)
    if not expected:
        raise ConfigError(f"{label} has no checksum; refusing to trust an unverified download")
    got = _digest(path, algo)
    if got != expected.lower():
        raise ChecksumError(f"{label} ({url}): {algo} {got} != expected {expected}; download discarded")


def _download(url: str, out: Path, label: str, timeout_s: float) -> None:
    """``url`` into ``out``; a body shorter than its Content-Length is an error, not a short file."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp, open(out, "wb") as fh:
            shutil.copyfileobj(resp, fh)
            length = resp.headers.get("Content-Length")
    except OSError as exc:  # HTTPError (a 404), URLError, a connection reset, http.client.IncompleteRead
        raise DataPathError(f"cannot download {label} from {url}: {exc}") from exc
    if length is not None and out.stat().st_size != int(length):
        raise DataPathError(f"{label} from {url} was truncated: {out.stat().st_size} of {length} bytes")


def _check_members(names: list[str], target: Path) -> None:
    """Every member lands inside ``target`` (no zip-slip): no absolute paths, drive letters, backslashes or
    ``..``."""
    root = target.resolve()
    for member in names:
        parts = Path(member).parts
        drive = bool(parts) and ":" in parts[0]
        if (
            member.startswith("/")
            or "\\" in member
            or drive
            or ".." in parts
            or not (root / member).resolve().is_relative_to(root)
        ):
            raise DataPathError(f"refusing archive member outside the target: {member!r}")


def _fetch_archive(source: Source, tmp: Path, timeout_s: float) -> Path:
    if source.archive != "zip":
        raise ConfigError(f"unsupported archive type {source.archive!r}")
    archive = tmp / "download"
    _download(source.url, archive, f"source {source.name!r}", timeout_s)
    _verify(archive, f"source {source.name!r}", source.url, source.sha256, source.md5)
    unpacked = tmp / "unpacked"
    with zipfile.ZipFile(archive) as zf:
        _check_members(zf.namelist(), unpacked)
        zf.extractall(unpacked)
    entries = list(unpacked.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked


def _fetch_files(source: Source, tmp: Path, timeout_s: float) -> Path:
    folder = tmp / source.name
    folder.mkdir()
    _check_members([f.name for f in source.files], folder)
    for f in source.files:
        label = f"{source.name}/{f.name}"
        _download(f.url, folder / f.name, label, timeout_s)
        _verify(folder / f.name, label, f.url, f.sha256)
    return folder


def fetch(source: Source, dest_root: Path, timeout_s: float = 60.0) -> Path:
    """Download, verify and unpack ``source`` into ``dest_root/NAME``; returns that folder. Only http(s)
    URLs."""
    for url in [f.url for f in source.files] or [source.url]:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            raise DataPathError(f"only http(s) URLs are fetched, not {scheme or 'a bare path'!r}: {url}")
    dest = dest_root / source.name
    if dest.exists():
        raise DataPathError(f"{dest} already exists; remove it to fetch again")
    dest_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_root, prefix=".fetch-") as tmp:
        done = (_fetch_files if source.files else _fetch_archive)(source, Path(tmp), timeout_s)
        shutil.move(str(done), dest)
    return dest


def fetch_named(
    name: str,
    dest_root: Path,
    url: str | None = None,
    sha256: str | None = None,
    url_base: str | None = None,
) -> Path:
    """A known source (optionally from a mirror, ``url_base``), or any one archive given by ``url`` and its
    ``sha256``."""
    known = sources()
    if name not in known and not url:
        raise UnknownNameError("fetchable dataset", name, list(known))
    base = known.get(name, Source(name, url or ""))
    if url or sha256:
        if base.files:
            raise ConfigError(f"{name!r} is several files; fetch it from a mirror with --url-base instead")
        base = replace(base, url=url or base.url, sha256=sha256 or None, md5=None if sha256 else base.md5)
    if url_base:
        base = base.mirrored(url_base)
    return fetch(base, dest_root)
