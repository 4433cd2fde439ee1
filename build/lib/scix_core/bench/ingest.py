"""Ingest benchmark on the arXiv listings (~91k papers).

    python -m scix_core.bench.ingest [--limit N] [--index NAME]

Runs a cold build (embedding what the cache lacks) and then a forced
rebuild of the same input, which must reuse every cached vector; prints
records/s per stage (parse, store+FTS, embed, vector upsert + HNSW) and the
peak RSS of each run (each in its own process, so the figures are not
mixed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

from scix_core.bench import TEXT
from scix_core.data import resolve_dataset
from scix_core.ingest import ingest


def _one_run(args: argparse.Namespace, force: bool) -> dict:
    t = time.perf_counter()
    report = ingest(
        resolve_dataset("arxiv-daily"),
        args.index,
        "arxiv-jsonl",
        limit=args.limit,
        force=force,
        progress=False,
    )
    return {
        "wall_s": time.perf_counter() - t,
        "papers": report.taken,
        "encoded": report.encoded,
        "reused": report.reused,
        "peak_rss_mb": report.peak_rss_mb,
        "stages": [(s.stage, s.seconds, s.records, s.per_second) for s in report.stages],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, help="first N papers only (the full set encodes for about an hour)")
    ap.add_argument("--index", default="bench-arxiv")
    ap.add_argument("--child", choices=["cold", "warm"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_one_run(args, force=True)))
        return 0
    console = Console()
    base = [sys.executable, "-m", "scix_core.bench.ingest", "--index", args.index] + (
        ["--limit", str(args.limit)] if args.limit else []
    )
    for run in ("cold", "warm"):
        out = subprocess.run(base + ["--child", run], check=True, capture_output=True, **TEXT).stdout
        res = json.loads(out.strip().splitlines()[-1])
        table = Table(
            "stage",
            "seconds",
            "records",
            "records/s",
            title=f"{run} run: {res['papers']} papers, {res['encoded']} encoded, {res['reused']} reused, "
            f"wall {res['wall_s']:.1f} s, peak RSS {res['peak_rss_mb']:.0f} MB",
        )
        for stage, secs, recs, rate in res["stages"]:
            table.add_row(stage, f"{secs:.2f}", str(recs), f"{rate:,.0f}")
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
