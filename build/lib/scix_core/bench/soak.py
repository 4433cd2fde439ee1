"""Soak: searching threads, a rebuild loop and an interaction writer on one index, for a bounded time.

``threads`` threads search the index (keyword and hybrid, paper titles as queries; each thread opens a new
``Searcher`` every 20 queries, so it follows the rebuilds), a subprocess rebuilds the same index
(``scix ingest --force``) over and over, and one thread records saves for a few users and asks for their
recommendations. At the end every acknowledged save must be in the user state, and no search or
recommendation may have failed. RSS is sampled every second (after a warm-up, it should stay flat).

``python -m scix_core.bench.soak --dataset cranfield --seconds 600``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from scix_core.bench import TEXT
from scix_core.config import load_config
from scix_core.ingest import ingest
from scix_core.recommend import Recommender
from scix_core.search import Searcher


@dataclass(frozen=True)
class SoakReport:
    seconds: float
    queries: int
    recommendations: int
    rebuilds: int
    errors: tuple[str, ...]
    saves_acknowledged: int
    saves_found: int
    rss_mb: tuple[float, ...]  # one sample per second

    def summary(self) -> str:
        rss = self.rss_mb
        warm = rss[min(len(rss) - 1, max(1, len(rss) // 5))] if rss else 0.0
        return (
            f"{self.seconds:.0f} s: {self.queries} queries, {self.recommendations} recommendations, "
            f"{self.rebuilds} rebuilds, {len(self.errors)} errors; saves acknowledged "
            f"{self.saves_acknowledged}, "
            f"found afterwards {self.saves_found}; RSS MB start {rss[0] if rss else 0:.0f}, after warm-up "
            f"{warm:.0f}, end {rss[-1] if rss else 0:.0f}, max {max(rss, default=0):.0f}; by tenth of the "
            "run "
            f"{' '.join(f'{x:.0f}' for x in self.rss_tenths)}"
        )

    @property
    def rss_tenths(self) -> tuple[float, ...]:
        """RSS at the end of each tenth of the run: a leak climbs through them, a warm-up settles."""
        rss = self.rss_mb
        return tuple(rss[min(len(rss) - 1, (len(rss) * i) // 10)] for i in range(1, 11)) if rss else ()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(
    dataset: Path,
    home: Path,
    seconds: float,
    threads: int = 3,
    limit: int | None = 300,
    index: str = "soak",
    seed: int = 0,
) -> SoakReport:
    cfg = load_config().replace(home=home)
    ingest(dataset, index, config=cfg, limit=limit, progress=False)
    first = Searcher(index, cfg)
    papers = list(first.store.papers())
    first.close()
    titles = [p.title for p in papers if p.title][:200]
    ids = [p.paper_id for p in papers]
    stop, lock = threading.Event(), threading.Lock()
    counts = {"queries": 0, "recommendations": 0, "rebuilds": 0}
    errors: list[str] = []
    acknowledged: dict[str, set[str]] = {}
    rss: list[float] = []

    def fail(where: str) -> None:
        with lock:
            errors.append(f"{where}: {traceback.format_exc(limit=3).strip().splitlines()[-1]}")

    def searcher(n: int) -> None:
        rng = random.Random(seed + n)
        while not stop.is_set():
            try:
                s = Searcher(index, cfg)
                try:
                    for _ in range(20):
                        if stop.is_set():
                            break
                        s.search(rng.choice(titles), rng.choice(["keyword", "hybrid"]), limit=10)
                        with lock:
                            counts["queries"] += 1
                finally:
                    s.close()
            except Exception:  # noqa: BLE001 — every failure is counted, none may happen
                fail(f"search thread {n}")

    def rebuilder() -> None:
        env = {**os.environ, "SCIX_HOME": str(home)}
        env.pop("SCIX_CONFIG", None)
        cmd = [
            sys.executable,
            "-m",
            "scix_core",
            "ingest",
            "--path",
            str(dataset),
            "--index",
            index,
            "--force",
            "--quiet",
            *(["--limit", str(limit)] if limit else []),
        ]
        while not stop.is_set():
            done = subprocess.run(cmd, env=env, capture_output=True, **TEXT, check=False)
            if done.returncode != 0:
                with lock:
                    errors.append(f"rebuild: {done.stderr.strip()[-300:]}")
            else:
                with lock:
                    counts["rebuilds"] += 1

    def writer() -> None:
        rng = random.Random(seed)
        users = [f"soak-user-{i}" for i in range(3)]
        try:
            rec = Recommender(index, cfg)
            for u in users:
                rec.create_user(u)
        except Exception:  # noqa: BLE001
            fail("writer set-up")
            return
        while not stop.is_set():
            user = rng.choice(users)
            paper = rng.choice(ids)
            try:
                rec.interact(user, paper, "save")
                acknowledged.setdefault(user, set()).add(paper)
                rec.recommend(user, 10, log=False)
                with lock:
                    counts["recommendations"] += 1
            except Exception:  # noqa: BLE001
                fail("writer")
            time.sleep(0.2)
        rec.close()

    workers = [threading.Thread(target=searcher, args=(n,), daemon=True) for n in range(threads)]
    workers += [threading.Thread(target=rebuilder, daemon=True), threading.Thread(target=writer, daemon=True)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    while time.perf_counter() - t0 < seconds:
        rss.append(_rss_mb())
        time.sleep(1)
    stop.set()
    for w in workers:
        w.join(timeout=600)
    elapsed = time.perf_counter() - t0
    check = Recommender(index, cfg)
    found = sum(len(acknowledged[u] & set(check.context(u).saved)) for u in acknowledged)
    check.close()
    return SoakReport(
        elapsed,
        counts["queries"],
        counts["recommendations"],
        counts["rebuilds"],
        tuple(errors),
        sum(map(len, acknowledged.values())),
        found,
        tuple(rss),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cranfield", help="a folder under the data directory, or a path")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--limit", type=int, default=300, help="papers per build (0 = all)")
    ap.add_argument("--home", help="workspace (default: a temporary folder)")
    args = ap.parse_args()
    import tempfile

    cfg = load_config()
    dataset = Path(args.dataset) if Path(args.dataset).exists() else cfg.data_dir / args.dataset
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="scix-soak-"))
    report = run(dataset, home, args.seconds, args.threads, args.limit or None)
    print(report.summary())
    for e in report.errors[:20]:
        print("ERROR:", e)
    sys.exit(1 if report.errors or report.saves_found != report.saves_acknowledged else 0)


if __name__ == "__main__":
    main()
