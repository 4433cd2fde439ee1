"""Line-oriented reading shared by the loaders: CRLF, gzip, truncation."""

from __future__ import annotations

import csv
import gzip
import json
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

from scix_core.errors import DataFormatError, DataPathError


def one_line(text: object) -> str:
    """``text`` with every run of white space (line breaks, tabs, NBSP) as one space, trimmed; None -> ""."""
    return " ".join(str(text or "").split())


def require_file(path: Path) -> Path:
    if not path.exists():
        raise DataPathError(f"no such file: {path}")
    if not path.is_file():
        raise DataPathError(f"not a file: {path}")
    return path


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with line endings removed (LF or CRLF).

    Gzip files are decompressed on the fly; a truncated or corrupt stream
    or undecodable text raises :class:`DataFormatError` naming the line
    reached, so a broken file never half-loads silently.
    """
    require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            for lineno, line in enumerate(fh, start=1):
                yield lineno, line.rstrip("\r\n")
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:
        raise DataFormatError(path, lineno + 1, f"unreadable ({exc.__class__.__name__}: {exc})") from exc


def read_jsonl(path: Path) -> Iterator[tuple[int, object]]:
    """Yield ``(line_number, record)``; a bad line yields ``(n, ValueError)``."""
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, ValueError(f"invalid JSON: {exc.msg} at column {exc.colno}")


def read_csv_rows(path: Path, errors: str = "strict") -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` from an RFC-4180 CSV with a header (fields may span lines). ``errors``:
    how bytes that are not UTF-8 are read (``"strict"``: a typed error naming the line; ``"replace"``:
    U+FFFD)."""
    require_file(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # abstracts and bodies can be long
    with open(path, newline="", encoding="utf-8", errors=errors) as fh:
        reader = csv.DictReader(fh)
        try:
            for row in reader:
                yield reader.line_num, row
        except csv.Error as exc:
            raise DataFormatError(path, reader.line_num, f"malformed CSV: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise DataFormatError(path, reader.line_num + 1, f"not UTF-8 text ({exc.reason})") from exc
