"""Crash stress: ``scix ingest --force`` SIGKILLed at seeded random moments, in every phase.

One uninterrupted build first (its results are the reference; a second one, without cached vectors, times the
kill window); then, per
kill, the embedding cache is deleted or kept (a coin flip, so the embedding phase is there to be hit), a
rebuild starts in a new process and is killed: every other kill ``U(0.05, wall)`` seconds later, the others
the moment the build reaches a target phase (store+fts, embed, vectors+index, after the switch — in turn), so
short phases are hit as often as long ones. The phase it died in is read
from what it left (no build folder yet: parse; a store only: store+fts; a term matrix: embed; vectors:
vectors+index; a new ``current``: the PostgreSQL mirror). After each kill the index must answer the reference
queries — keyword and hybrid — exactly as before (the previous build, or the new one if it had been switched
in); PostgreSQL must hold a complete mirror of the old or the new build; and at the end one more run must
complete, reusing the cache.

``python -m scix_core.bench.kills --dataset cranfield --kills 200`` (the stress run; the test suite runs 20).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from scix_core.bench import TEXT
from scix_core.config import load_config
from scix_core.stores.papers import PaperStore
from scix_core.stores.postgres import connect, schema_name, synced_build_key
from scix_core.workspace import read_json

QUERIES = 5
AFTER_SWITCH = "postgres mirror / after switch"
TARGETS = ("store+fts", "embed", "vectors+index", AFTER_SWITCH)  # the phases targeted kills aim at, in turn


@dataclass(frozen=True)
class KillReport:
    kills: int
    survived: int  # the index answered exactly as before, PostgreSQL mirror complete
    phases: dict[str, int]
    failures: tuple[str, ...]
    final_reused: int  # embedding chunks the last, uninterrupted run reused
    wall_s: float
    extra: dict = field(default_factory=dict)


def _command(dataset: Path, index: str, limit: int | None, postgres: bool) -> list[str]:
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
    ]
    if limit:
        cmd += ["--limit", str(limit)]
    return cmd + (["--backend", "postgres"] if postgres else [])


def answers_of(home: Path, index: str, queries: list[str], env: dict) -> list[tuple]:
    """Keyword and hybrid top 10 of each query, in a fresh process (it owns the vector shard while it
    reads)."""
    code = (
        "import json, sys\nfrom scix_core.search import Searcher\n"
        f"s = Searcher({index!r})\nqs = json.loads(sys.stdin.read())\n"
        "print(json.dumps([[list(s.search(q, m, limit=10).ids) for m in ('keyword', 'hybrid')] for q in qs]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(queries),
        env=env,
        capture_output=True,
        **TEXT,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"search after a kill failed: {done.stderr[-1500:]}")
    return [tuple(map(tuple, pair)) for pair in json.loads(done.stdout)]


def build_phase(root: Path, before: str, stale: frozenset[Path] = frozenset()) -> str:
    """The phase a build left behind; ``stale``: build folders an earlier killed run left (not this run's)."""
    current = (root / "current").resolve().name if (root / "current").exists() else ""
    if current != before:
        return AFTER_SWITCH
    partial = sorted(set((root / "builds").glob(".building-*")) - stale)
    if not partial:
        return "parse"
    build = partial[-1]
    if (build / "vectors").exists():
        return "vectors+index"
    if (build / "terms").exists():
        return "embed"
    return "store+fts" if (build / "papers.sqlite").exists() else "parse"


def await_phase(
    proc: subprocess.Popen, root: Path, before: str, stale: frozenset[Path], target: str, deadline: float
) -> bool:
    """Poll the build every 2 ms until it is in ``target``; False if the process ended or the deadline
    passed."""
    while proc.poll() is None and time.perf_counter() < deadline:
        if build_phase(root, before, stale) == target:
            return True
        time.sleep(0.002)
    return False


def _mirror_key(dsn: str, index: str) -> str | None:
    with connect(dsn) as conn:
        return synced_build_key(conn, schema_name(index))


def run(
    dataset: Path,
    kills: int,
    home: Path,
    seed: int = 0,
    limit: int | None = None,
    pg_dsn: str | None = None,
    index: str = "killed",
    log=print,
) -> KillReport:
    t0 = time.perf_counter()
    env = {**os.environ, "SCIX_HOME": str(home)}
    env.pop("SCIX_CONFIG", None)
    if pg_dsn:
        env["SCIX_PG_DSN"] = pg_dsn
    cmd = _command(dataset, index, limit, bool(pg_dsn))
    first = subprocess.run(cmd, env=env, capture_output=True, **TEXT, timeout=1800, check=False)
    if first.returncode != 0:
        raise RuntimeError(f"the reference build failed: {first.stderr[-1500:]}")
    # the kill moments span a rebuild without cached vectors (the first build also paid one-off costs: the
    # model's ONNX export), so kills land in every phase rather than after most builds have finished
    shutil.rmtree(home / "cache" / "embeddings", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, capture_output=True, **TEXT, timeout=1800, check=True)
    wall = time.perf_counter() - start
    root = home / "indexes" / index

    store = PaperStore(root / "current" / "papers.sqlite")
    queries = [p.title for p in list(store.papers())[:QUERIES]]
    store.close()
    reference = answers_of(home, index, queries, env)
    key = read_json(root / "current" / "manifest.json")["build_key"]
    rng = random.Random(seed)
    phases: Counter[str] = Counter()
    failures: list[str] = []
    failed: set[int] = set()
    for i in range(kills):
        if rng.random() < 0.5:
            shutil.rmtree(home / "cache" / "embeddings", ignore_errors=True)
        before = (root / "current").resolve().name
        # even kills: at a random moment (most land in the longest phase, embedding); odd kills: as soon as
        # the build reaches a target phase (each in turn), so the short phases (vector upsert, the mirror) are
        # hit too
        target = TARGETS[(i // 2) % len(TARGETS)] if i % 2 else None
        delay = rng.uniform(0.05, wall)
        stale = frozenset((root / "builds").glob(".building-*"))
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if target:
            reached = await_phase(proc, root, before, stale, target, started + 4 * wall + 30)
            if reached:
                time.sleep(rng.uniform(0, 0.02))
        else:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                pass
        delay = time.perf_counter() - started
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            phase = build_phase(root, before, stale)
        else:
            phase = "finished before the kill"
        phases[phase] += 1
        try:
            answers = answers_of(home, index, queries, env)
            if answers != reference:
                failures.append(f"kill {i} ({phase}, {delay:.2f} s): results changed")
            if read_json(root / "current" / "manifest.json")["build_key"] != key:  # unreadable or foreign
                failures.append(f"kill {i} ({phase}): current is not a complete build of the data")
            if pg_dsn and _mirror_key(pg_dsn, index) != key:
                failures.append(f"kill {i} ({phase}): the PostgreSQL mirror is not the build's")
        except Exception as exc:  # noqa: BLE001 — any failure to answer is what this counts
            failures.append(f"kill {i} ({phase}, {delay:.2f} s): {exc}")
        failed |= {i} if failures and failures[-1].startswith(f"kill {i} ") else set()
        log(f"kill {i + 1}/{kills}: {delay:5.2f} s, {phase}, failures so far {len(failures)}")
    last = subprocess.run(cmd, env=env, capture_output=True, **TEXT, timeout=1800, check=False)
    if last.returncode != 0:
        failures.append(f"the run after the kills failed: {last.stderr[-1500:]}")
    reused = re.search(r"embeddings: (\d+) encoded, (\d+) reused", last.stdout)
    if last.returncode == 0 and answers_of(home, index, queries, env) != reference:
        failures.append("the run after the kills answers differently")
    return KillReport(
        kills,
        kills - len(failed),
        dict(phases),
        tuple(failures),
        int(reused.group(2)) if reused else 0,
        time.perf_counter() - t0,
        {"reference_build_s": round(wall, 2)},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cranfield", help="a folder under the data directory, or a path")
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--limit", type=int, default=400, help="papers per build (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--home", help="workspace to build in (default: a temporary folder)")
    args = ap.parse_args()
    import tempfile

    cfg = load_config()
    dataset = Path(args.dataset) if Path(args.dataset).exists() else cfg.data_dir / args.dataset
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="scix-kills-"))
    report = run(dataset, args.kills, home, args.seed, args.limit or None, cfg.postgres.dsn)
    print(
        f"kills survived {report.survived}/{report.kills}; phases {report.phases}; "
        f"final run reused {report.final_reused} cached vectors; {report.wall_s:.0f} s "
        f"(reference build {report.extra['reference_build_s']} s)"
    )
    for f in report.failures:
        print("FAILURE:", f)
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
