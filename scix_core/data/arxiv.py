"""arXiv metadata: daily-listing JSON Lines (``*.jsonl.gz``) and the Kaggle CSV."""

from __future__ import annotations

import ast
import datetime as dt
import re
from email.utils import parsedate_to_datetime
from pathlib import Path

from scix_core.data.arxiv_ids import arxiv_categories, published_from_id, repair_float_id
from scix_core.data.dataset import Dataset, PaperCollector
from scix_core.data.textio import one_line as _clean
from scix_core.data.textio import read_csv_rows, read_jsonl, read_lines
from scix_core.errors import DataPathError
from scix_core.types import Paper


def _listing_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.glob("*.jsonl*") if not p.name.endswith(".index.tsv.gz"))
    if not files:
        raise DataPathError(f"{path} holds no *.jsonl or *.jsonl.gz listing files")
    return files


_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})(?:\.jsonl)?(?:\.gz)?")


def _day(text: str) -> dt.date | None:
    """``2025-03-18`` or ``2025-03-18.jsonl[.gz]`` -> that date; anything else -> None."""
    match = _DAY.fullmatch(text.strip())
    try:
        return dt.date.fromisoformat(match.group(1)) if match else None
    except ValueError:
        return None


def listing_days(file: Path) -> dict[int, dt.date]:
    """line number -> listing day of a concatenated listing file, from the ``NAME.index.tsv.gz`` beside
    ``NAME.jsonl.gz`` (header ``line  id  source_file``, the source file named by its day); {} without one."""
    index = file.with_name(file.name.split(".jsonl")[0] + ".index.tsv.gz")
    if not index.is_file():
        return {}
    out = {}
    for lineno, line in read_lines(index):
        parts = line.split("\t")
        if lineno > 1 and len(parts) == 3 and parts[0].isdigit() and (day := _day(parts[2])):
            out[int(parts[0])] = day
    return out


def load_arxiv_jsonl(path: Path) -> Dataset:
    """Listings: keys ``id``, ``title``, ``summary``, ``authors``, ``categories``.

    Non-arXiv codes (ACM ``I.2.7``, MSC ``68T50``) are dropped from the
    categories. A paper's listing day comes from its record's ``listed``
    field, else its file's name (``YYYY-MM-DD.jsonl``, as arXiv's daily
    listings and ``scix data harvest`` write them), else the index file
    beside a concatenated listing (:func:`listing_days`). A repeated id is a
    newer version: it replaces the earlier record (:class:`PaperCollector`).
    """
    out = PaperCollector(newer_wins=True)
    files = _listing_files(path)
    for file in files:
        file_day, days = _day(file.name), listing_days(file)
        for lineno, rec in read_jsonl(file):
            if isinstance(rec, Exception):
                out.reject(file, lineno, str(rec))
                continue
            pid = _clean(rec.get("id")) if isinstance(rec, dict) else ""
            if not pid or not _clean(rec.get("title")):
                out.reject(file, lineno, "record has no id or title")
                continue
            authors = rec.get("authors") or []
            out.add(
                Paper(
                    pid,
                    _clean(rec.get("title")),
                    _clean(rec.get("summary") or rec.get("abstract")),
                    authors=tuple(
                        _clean(a) for a in (authors if isinstance(authors, list) else str(authors).split(","))
                    ),
                    categories=arxiv_categories(rec.get("categories")),
                    published=published_from_id(pid),
                    listed=_day(str(rec.get("listed") or "")) or file_day or days.get(lineno),
                )
            )
    return Dataset(
        name=path.stem.split(".")[0] if path.is_file() else path.name,
        format="arxiv-jsonl",
        papers=out.papers,
        rejected=tuple(out.rejected),
        duplicates=out.duplicates,
        sources=tuple(map(str, files)),
    )


def _first_version_date(versions: str) -> dt.date | None:
    try:
        first = ast.literal_eval(versions)[0]["created"]
        return parsedate_to_datetime(first).date()
    except (ValueError, SyntaxError, IndexError, KeyError, TypeError):
        return None


def _authors(row: dict) -> tuple[str, ...]:
    try:
        parsed = ast.literal_eval(row.get("authors_parsed") or "")
        return tuple(_clean(" ".join(p for p in (a[1], a[0]) if p)) for a in parsed)
    except (ValueError, SyntaxError, IndexError, TypeError):
        return tuple(
            _clean(a) for a in (row.get("authors") or "").replace(" and ", ",").split(",") if a.strip()
        )


def load_arxiv_kaggle(path: Path) -> Dataset:
    """The Kaggle snapshot schema as CSV; repairs float-mangled ids (``704.001``).

    ``published`` is the v1 creation date, else the id's month, and only as
    a last resort the ``update_date`` (``M/D/YYYY``), which is a revision date.
    """
    file = path if path.is_file() else next(iter(sorted(path.glob("*.csv"))), None)
    if file is None:
        raise DataPathError(f"{path} holds no CSV file")
    out = PaperCollector()
    for lineno, row in read_csv_rows(file):
        pid = repair_float_id(row.get("id") or "")
        if not pid or not _clean(row.get("title")):
            out.reject(file, lineno, "row has no id or title")
            continue
        out.add(
            Paper(
                pid,
                _clean(row.get("title")),
                _clean(row.get("abstract")),
                authors=_authors(row),
                categories=arxiv_categories(row.get("categories") or ""),
                published=(
                    _first_version_date(row.get("versions") or "")
                    or published_from_id(pid)
                    or parse_update_date(row.get("update_date") or "")
                ),
            )
        )
    return Dataset(
        name=file.parent.name if path.is_dir() else file.stem,
        format="arxiv-kaggle",
        papers=out.papers,
        rejected=tuple(out.rejected),
        duplicates=out.duplicates,
        sources=(str(file),),
    )


def parse_update_date(text: str) -> dt.date | None:
    """``5/23/2007`` -> 2007-05-23 (the Kaggle CSV's revision date)."""
    try:
        month, day, year = (int(x) for x in text.strip().split("/"))
        return dt.date(year, month, day)
    except ValueError:
        return None
