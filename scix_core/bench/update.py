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
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

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


def _scix(*args: str, nice: int = 0) -> dict:
    """One ``scix`` command in its own process (``nice``: at that lower priority); its JSON answer plus wall
    seconds."""
    t = time.perf_counter()
    low = ["ionice", "-c", "3"] if nice and shutil.which("ionice") else []  # its disk too, where it can
    done = subprocess.run(
        [*low, sys.executable, "-m", "scix_core", *args, "--json"],
        capture_output=True,
        preexec_fn=(lambda: os.nice(nice)) if nice else None,
        **TEXT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scix {' '.join(args)} failed: {done.stderr[-2000:]}")
    res = json.loads(done.stdout)
    res["wall_s"] = time.perf_counter() - t
    return res


PROBE = """
import json, random, statistics, sys, tempfile, time
from pathlib import Path
from scix_core.recommend.recommender import Recommender
from scix_core.recommend.state import UserState
from scix_core.search import Searcher
index, titles, saves = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
s = Searcher(index)
s.warm()
for t in titles[:5]:
    s.search(t, "hybrid")
took = []
for t in titles:
    t0 = time.perf_counter(); s.search(t, "hybrid"); took.append(time.perf_counter() - t0)
rec = Recommender(index, state=UserState(Path(tempfile.mkdtemp()) / "users.sqlite"))
for u, library in enumerate(saves):
    rec.create_user(f"u{u}", [])
    for paper in library:
        rec.interact(f"u{u}", paper, "save")
rec.recommend("u0")
recs = []
for _ in range(3):
    for u in range(len(saves)):
        t0 = time.perf_counter(); rec.recommend(f"u{u}"); recs.append(time.perf_counter() - t0)
print(json.dumps({"search_p50_ms": 1000 * statistics.median(took),
                  "recommend_p50_ms": 1000 * statistics.median(recs)}))
"""


def probe(index: str, titles: list[str], saves: list[list[str]]) -> dict:
    """Search (hybrid, the titles as queries) and recommendation (users with the ``saves``) p50, warm, in a
    process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, index, json.dumps(titles), json.dumps(saves)],
        capture_output=True,
        **TEXT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the latency probe failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _records(day_files: list[Path]) -> list[dict]:
    return [json.loads(line) for f in day_files for line in f.read_text(encoding="utf-8").splitlines()]


def _sample(records: list[dict], n: int, seed: int = 0) -> list[dict]:
    return random.Random(seed).sample(records, min(n, len(records)))


def _linked(files: list[Path], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        if not (folder / f.name).exists():
            os.link(f, folder / f.name)
    return folder


def replay(index: str, daily: list[Path], on_day=None, nice: int = 0) -> list[dict]:
    """``scix ingest --append`` of each day file in turn, each in its own process."""
    out = []
    for day in daily:
        res = _scix("ingest", "--path", str(day), "--index", index, "--append", nice=nice)
        res["day"] = day.stem
        out.append(res)
        if on_day:
            on_day(res)
    return out


NICE = 19  # the served replay's appends run at the lowest priority, as the documented daily job does


def _served(index: str, daily: list[Path], seconds: float, rate: float, console: Console) -> dict:
    """The replay while :mod:`scix_core.bench.serve` drives ``scix serve`` on the index at ``rate``."""
    cmd = [sys.executable, "-m", "scix_core.bench.serve", "--index", index, "--seconds", str(seconds)]
    cmd += ["--rate", str(rate), "--no-kill", "--clients", "16"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **TEXT)
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # until the load starts
        lines.append(line)
        if line.startswith("server up"):
            break
    time.sleep(2)
    t = time.perf_counter()
    days = replay(index, daily, nice=NICE)  # as the daily job runs beside a server (docs/living-corpus.md)
    replay_s = time.perf_counter() - t
    rest, _ = proc.communicate()
    lines.append(rest)
    console.print("".join(lines), markup=False, highlight=False)
    return {
        "replay_s": replay_s,
        "days": len(days),
        "within_load": replay_s < seconds,
        "exit": proc.returncode,
    }


def sequential(
    args, base: list[Path], base_dir: Path, daily: list[Path], work: Path, console: Console
) -> dict:
    """The base build, the appends one day at a time, the latency probes and the full rebuild."""
    built = _scix(
        "ingest", "--path", str(base_dir), "--format", "arxiv-jsonl", "--index", args.index, "--force"
    )
    console.print(
        f"base: {built['papers']} papers built in {built['wall_s']:.1f} s ({built['encoded']} encoded)"
    )
    records = _records(base)
    titles = [r["title"] for r in _sample(records, 60)]
    saves = [[r["id"] for r in _sample(records, 8, seed=u + 1)] for u in range(4)]
    first = probe(args.index, titles, saves)
    table = Table(
        "day",
        "added",
        "replaced",
        "unchanged",
        "seconds",
        "encode s",
        "other s",
        "peak RSS MB",
        "papers",
        title=f"appends to {args.index}, one process each",
    )

    def row(res: dict) -> None:
        table.add_row(
            res["day"],
            str(res["added"]),
            str(res["replaced"]),
            str(res["unchanged"]),
            f"{res['wall_s']:.1f}",
            f"{res['stages'].get('embed', 0):.1f}",
            f"{res['wall_s'] - res['stages'].get('embed', 0):.1f}",
            f"{res['peak_rss_mb']:.0f}",
            str(res["papers"]),
        )

    days = replay(args.index, daily, row)
    console.print(table)
    after = probe(args.index, titles, saves)
    walls = [d["wall_s"] for d in days]
    median_day = sorted(days, key=lambda d: d["added"] + d["replaced"])[len(days) // 2]
    largest = max(days, key=lambda d: d["added"] + d["replaced"])
    summary = {
        "base_papers": built["papers"],
        "appended_papers": sum(d["added"] for d in days),
        "append_p50_s": statistics.median(walls),
        "append_max_s": max(walls),
        "median_day": {k: median_day[k] for k in ("day", "added", "wall_s")},
        "largest_day": {k: largest[k] for k in ("day", "added", "wall_s")},
        "append_peak_rss_mb": max(d["peak_rss_mb"] for d in days),
        "append_encode_p50_s": statistics.median(d["stages"].get("embed", 0) for d in days),
        # everything but the encoding (process start and model load included): what grows with the corpus
        "append_other_p50_s": statistics.median(d["wall_s"] - d["stages"].get("embed", 0) for d in days),
        "append_other_max_s": max(d["wall_s"] - d["stages"].get("embed", 0) for d in days),
        "search_p50_ms": {"first_day": first["search_p50_ms"], "last_day": after["search_p50_ms"]},
        "recommend_p50_ms": {"first_day": first["recommend_p50_ms"], "last_day": after["recommend_p50_ms"]},
    }
    if not args.no_rebuild:
        everything = _linked([*base, *daily], work / f"rebuild-{base[0].stem}-{daily[-1].stem}")
        full = _scix(
            "ingest",
            "--path",
            str(everything),
            "--format",
            "arxiv-jsonl",
            "--index",
            args.index + "-full",
            "--force",
        )
        fresh = probe(args.index + "-full", titles, saves)
        summary["rebuild"] = {
            "papers": full["papers"],
            "wall_s": full["wall_s"],
            "encoded": full["encoded"],
            "peak_rss_mb": full["peak_rss_mb"],
            "stages": full["stages"],
        }
        summary["fresh_search_p50_ms"] = fresh["search_p50_ms"]
        summary["fresh_recommend_p50_ms"] = fresh["recommend_p50_ms"]
        summary["append_p50_share_of_rebuild"] = summary["append_p50_s"] / full["wall_s"]
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="arxiv")
    ap.add_argument("--days", type=int, default=30, help="days appended one at a time")
    ap.add_argument(
        "--base-days",
        type=int,
        default=0,
        help="build the index from only this many days before the appended ones (0: every earlier day)",
    )
    ap.add_argument("--last", type=dt.date.fromisoformat, help="the last day appended")
    ap.add_argument("--work", type=Path, help="where the day files go (default: a temporary folder)")
    ap.add_argument("--split-only", action="store_true", help="write the day files and stop")
    ap.add_argument("--no-rebuild", action="store_true", help="skip the full rebuild at the end")
    ap.add_argument("--serve-seconds", type=float, default=0, help="then the served replay for this long")
    ap.add_argument("--rate", type=float, default=100.0, help="requests a second of the served replay")
    ap.add_argument("--served-only", action="store_true", help="only the served replay")
    args = ap.parse_args(argv)
    console = Console(width=160)
    source = resolve_dataset("arxiv-daily")
    last = args.last or default_last(source)
    work = args.work or Path(tempfile.mkdtemp(prefix="scix-update-"))
    files = split_days(source, work / "all", last)
    base, daily = files[: -args.days], files[-args.days :]
    if args.base_days:
        base = base[-args.base_days :]
    base_dir = _linked(base, work / f"base-{base[0].stem}")
    console.print(
        f"{len(base)} base days {base[0].stem} to {base[-1].stem}, {len(daily)} days appended: {work}"
    )
    if args.split_only:
        return 0
    summary = {} if args.served_only else sequential(args, base, base_dir, daily, work, console)
    if args.serve_seconds:
        served = args.index + "-served"
        _scix("ingest", "--path", str(base_dir), "--format", "arxiv-jsonl", "--index", served, "--force")
        summary["served"] = _served(served, daily, args.serve_seconds, args.rate, console)
    console.print_json(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
