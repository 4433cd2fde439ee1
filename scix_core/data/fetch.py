"""``scix data fetch``: download a public copy of a dataset, verify, unpack.

The download goes to a temporary file beside the target, is verified
against the published checksum (sha256 or md5) and only then unpacked into
the data directory; a failed or mismatching download leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import tomllib
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from scix_core.errors import ChecksumError, ConfigError, DataPathError, UnknownNameError

SOURCES_FILE = Path(__file__).with_name("sources.toml")


@dataclass(frozen=True)
class Source:
    name: str
    url: str
    sha256: str | None = None
    md5: str | None = None
    archive: str = "zip"


def sources(path: Path = SOURCES_FILE) -> dict[str, Source]:
    raw = tomllib.loads(path.read_text())
    return {
        name: Source(name, s["url"], s.get("sha256"), s.get("md5"), s.get("archive", "zip"))
        for name, s in raw.items()
    }


def _verify(path: Path, source: Source) -> None:
    algo, expected = ("sha256", source.sha256) if source.sha256 else ("md5", source.md5)
    if not expected:
        raise ConfigError(f"source {source.name!r} has no checksum; refusing to trust an unverified download")
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != expected.lower():
        raise ChecksumError(
            f"{source.url}: {algo} {h.hexdigest()} != expected {expected}; download discarded"
        )


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


def fetch(source: Source, dest_root: Path, timeout_s: float = 60.0) -> Path:
    """Download, verify and unpack ``source`` into ``dest_root/NAME``; returns that folder. Only http(s)
    URLs."""
    scheme = urllib.parse.urlsplit(source.url).scheme.lower()
    if scheme not in ("http", "https"):
        raise DataPathError(f"only http(s) URLs are fetched, not {scheme or 'a bare path'!r}: {source.url}")
    dest = dest_root / source.name
    if dest.exists():
        raise DataPathError(f"{dest} already exists; remove it to fetch again")
    dest_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_root, prefix=".fetch-") as tmp:
        archive = Path(tmp) / "download"
        try:
            with urllib.request.urlopen(source.url, timeout=timeout_s) as resp, open(archive, "wb") as out:
                shutil.copyfileobj(resp, out)
        except OSError as exc:
            raise DataPathError(f"cannot download {source.url}: {exc}") from exc
        _verify(archive, source)
        unpacked = Path(tmp) / "unpacked"
        if source.archive != "zip":
            raise ConfigError(f"unsupported archive type {source.archive!r}")
        with zipfile.ZipFile(archive) as zf:
            _check_members(zf.namelist(), unpacked)
            zf.extractall(unpacked)
        entries = list(unpacked.iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked
        shutil.move(str(top), dest)
    return dest


def fetch_named(name: str, dest_root: Path, url: str | None = None, sha256: str | None = None) -> Path:
    known = sources()
    if name not in known and not url:
        raise UnknownNameError("fetchable dataset", name, list(known))
    base = known.get(name, Source(name, url or ""))
    if url or sha256:
        base = Source(name, url or base.url, sha256 or None, None if sha256 else base.md5, base.archive)
    return fetch(base, dest_root)
