"""Recommendation benchmark: Tier-1 latency for 50-save users, each stage's share, Tiers 0/2/3.

    python -m scix_core.bench.recommend [--index arxiv] [--users 20] [--repeat 5] [--saves 50] [--community]

Users are built from the index's real papers and vectors, seeded: each has
``--interests`` interests of an anchor paper and its nearest neighbours
(exact, from the local vectors), saved in interleaved order — a library with
real cluster structure. Their state lives in a temporary user-state
database, never the workspace's. Beside the Tier-1 figures the run measures
the reference design's hot spot in the same process: the saved vectors read
one id at a time from the vector store versus the one local batch read.
``--community`` first imports the user libraries the index was built with
(CiteULike: 5,551 users, 205k saves) so the co-saves run at full size, and
times the co-save scores and the matrix refresh after a new save.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from scix_core.config import load_config
from scix_core.recommend import Recommender, UserState
from scix_core.recommend.library import import_libraries

console = Console(width=170)


def _pct(values) -> str:
    return f"{np.percentile(values, 50):.2f} / {np.percentile(values, 95):.2f}"


def libraries(rec: Recommender, users: int, saves: int, interests: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    matrix = rec.side.vectors
    ids = rec.side.catalog.ids
    out = []
    per = saves // interests
    for _ in range(users):
        groups = []
        for anchor in rng.choice(len(ids), size=interests, replace=False):
            sims = np.asarray(matrix.matrix, dtype=np.float32) @ matrix.get([anchor])[0]
            groups.append(
                [ids[i] for i in np.argsort(-sims)[: per * 3 : 3]]
            )  # every 3rd neighbour: a spread cluster
        library = [p for tup in zip(*groups) for p in tup]
        out.append(list(dict.fromkeys(library))[:saves])
    return out


def _make_user(rec: Recommender, name: str, papers: list[str], categories=()) -> None:
    rec.create_user(name, categories)
    t0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    for i, paper in enumerate(papers):
        rec.interact(name, paper, "save", at=t0 + dt.timedelta(hours=i))


def run(args: argparse.Namespace) -> None:
    cfg = load_config()
    with tempfile.TemporaryDirectory(prefix="scix-bench-recs-") as tmp:
        rec = Recommender(args.index, cfg, state=UserState(Path(tmp) / "users.sqlite"), build_community=False)
        if rec.side.vectors is None:
            raise SystemExit(f"index {args.index!r} has no vectors: {rec.side.unavailable}")
        console.print(
            f"index {args.index}: {len(rec.side.catalog):,} papers, {rec.side.vectors.dim}-d vectors "
            f"({rec.manifest.get('vector_backend')}); {args.users} users x {args.saves} saves, "
            f"{args.repeat} calls each after one warm-up",
            highlight=False,
        )
        if args.community:
            imported = import_libraries(rec)
            console.print(
                f"community: {imported.users:,} users, {imported.saves:,} saves imported in "
                f"{imported.seconds:.1f} s",
                highlight=False,
            )
            # as a server starts: the co-save fit, and every library's interest centroids (read from the
            # workspace's cache when an earlier warm-up left them)
            rec.warm(serving=True)
        libs = libraries(rec, args.users, args.saves, args.interests, args.seed)
        for n, lib in enumerate(libs):
            _make_user(rec, f"bench-{n}", lib)
        totals, tier_ms, stages, first = [], [], {}, []
        ks = []
        for n in range(len(libs)):
            # a library's first list reads its neighbourhood afresh, as a served list does after every save
            # (a repeat without one is a kept list); the first user's also pays the first call's imports
            t = time.perf_counter()
            rec.recommend(f"bench-{n}", log=False)
            if n:
                first.append((time.perf_counter() - t) * 1000)
            for _ in range(args.repeat):
                t = time.perf_counter()
                result = rec.recommend(f"bench-{n}", log=False)
                totals.append((time.perf_counter() - t) * 1000)
                tier_ms.append(result.timing_ms["tier1"])
                for s in result.stages:
                    stages.setdefault(s.name, []).append(s.ms)
            ks.append(result.stage("cluster").summary["k"])
        logged = []
        for n in range(len(libs)):
            t = time.perf_counter()
            rec.recommend(f"bench-{n}")
            logged.append((time.perf_counter() - t) * 1000)
        table = Table(
            "what",
            "p50 / p95 ms",
            "share of Tier 1",
            title=f"Tier 1, {args.saves}-save users (k chosen: "
            f"{min(ks)}-{max(ks)} clusters, median {int(np.median(ks))})",
        )
        whole = sum(np.mean(v) for v in stages.values())
        for name, values in stages.items():
            table.add_row(f"  stage {name}", _pct(values), f"{100 * np.mean(values) / whole:.1f}%")
        table.add_row("Tier 1 pipeline (stages + cluster persist)", _pct(tier_ms), "")
        table.add_row("recommend() call (+ context read)", _pct(totals), "")
        if first:
            table.add_row("recommend() call, a library's first (as after a save)", _pct(first), "")
        table.add_row("recommend() call + log write", _pct(logged), "")
        console.print(table)
        _cosaves(rec, libs)
        _other_tiers(rec, libs, args)
        _vector_reads(rec, libs[0])


def _cosaves(rec: Recommender, libs: list[list[str]]) -> None:
    """Co-save scores for one user (matrix current), and the refresh a new save costs the next call."""
    scores, refresh = [], []
    for n, lib in enumerate(libs):
        rows = rec.side.rows(lib)
        t = time.perf_counter()
        rec.community.cosaves(rows)
        scores.append((time.perf_counter() - t) * 1000)
        have = set(lib)
        fresh = next(p for p in rec.side.catalog.ids if p not in have)
        rec.interact(f"bench-{n}", fresh, "save")
        t = time.perf_counter()
        rec.community.cosaves(rows)
        refresh.append((time.perf_counter() - t) * 1000)
    table = Table("what", "p50 / p95 ms", title=f"co-saves ({rec.community.saves:,} saves in the matrix)")
    table.add_row("co-save scores of one user (matrix current)", _pct(scores))
    table.add_row("the same after a new save (matrix rebuilt)", _pct(refresh))
    console.print(table)


def _other_tiers(rec: Recommender, libs: list[list[str]], args: argparse.Namespace) -> None:
    codes = sorted(rec.side.catalog.all_codes())
    rng = np.random.default_rng(args.seed + 1)
    table = Table("tier", "trigger", "p50 / p95 ms (call)", title="other tiers")
    for tier, saves in ((0, 0), (3, 2), (2, 4)):
        times = []
        for n, lib in enumerate(libs):
            name = f"bench-t{tier}-{n}"
            cats = [codes[i] for i in rng.choice(len(codes), size=2, replace=False)] if tier == 0 else []
            _make_user(rec, name, lib[:saves], cats)
            rec.recommend(name, log=False)
            for _ in range(args.repeat):
                t = time.perf_counter()
                result = rec.recommend(name, log=False)
                times.append((time.perf_counter() - t) * 1000)
            assert result.tier == tier, result.reason
        table.add_row(str(tier), f"{saves} saves" + (", 2 categories" if tier == 0 else ""), _pct(times))
    console.print(table)


def _vector_reads(rec: Recommender, library: list[str]) -> None:
    """The reference design's hot spot: vectors fetched per id (1,247 ms for 20) vs one local batch read."""
    rows = rec.side.rows(library)
    shard = getattr(rec.side.store, "shard", None)
    local, remote = [], []
    for _ in range(20):
        t = time.perf_counter()
        rec.side.vectors.get(rows)
        local.append((time.perf_counter() - t) * 1000)
        if shard is not None:
            t = time.perf_counter()
            for r in rows.tolist():
                shard.retrieve([int(r)], with_payload=False, with_vector=True)
            remote.append((time.perf_counter() - t) * 1000)
    table = Table("read", f"{len(rows)} saved vectors, p50 / p95 ms", title="saved-vector reads")
    table.add_row("local batch (memory-mapped float16)", _pct(local))
    if remote:
        table.add_row("one qdrant-edge retrieve per id (in-process, no network)", _pct(remote))
    console.print(table)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default="arxiv")
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--saves", type=int, default=50)
    p.add_argument("--interests", type=int, default=5)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--community", action="store_true", help="import the index's user libraries first")
    run(p.parse_args())


if __name__ == "__main__":
    main()
