"""A save from the command line: ``scix interact`` timed for every save of real libraries replayed one at a
time, beside the cold start of ``scix --help`` in the same run, and the list after the last save.

    python -m scix_core.bench.saves --index citeulike [--saves 30] [--users 2] [--seed 0]

Each user is new to the workspace (``bench-saves-<seed>-<n>``, kept in its user state as any new user
would be) and saves, one command each, the first ``--saves`` papers of a seeded pick among the index's own
libraries with at least that many. Every command is a new process, as a user's shell runs it. After the
last save ``scix recommend --json`` must answer Tier 1 with every saved paper in a cluster. Then the
cluster view's save button (:meth:`ClusterView.act <scix_core.notebook.clusters.ClusterView.act>`, what
the notebook's button calls) saves the top paper of its list ``--clicks`` times, each click timed with the
list it redraws, which must no longer hold that paper. The co-save
model is whatever the workspace holds: run one ``scix recommend`` (or ``scix users refit``) first so the
timings are of saves, not of an index's first fit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from scix_core.config import load_config
from scix_core.recommend.library import library_saves
from scix_core.workspace import Workspace

console = Console(width=150)
SCIX = [sys.executable, "-m", "scix_core"]


def _timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run([*SCIX, *args], capture_output=True, text=True)
    return time.perf_counter() - t, done


def _checked(args: list[str]) -> tuple[float, str]:
    seconds, done = _timed(args)
    if done.returncode != 0:
        raise SystemExit(f"scix {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, done.stdout


def _clicks(index: str, user: str, clicks: int) -> list[float]:
    """The cluster view's save button ``clicks`` times, on the top paper of the list it shows."""
    from scix_core.notebook.clusters import ClusterView  # lazy: the notebook stack, for this part only

    if clicks <= 0:
        return []
    view = ClusterView(index, user=user)
    view.render()
    out = []
    for _ in range(clicks):
        paper = view.result.items[0].paper_id
        t = time.perf_counter()
        view.act(paper, "save")
        out.append(time.perf_counter() - t)
        if paper in view.result.ids or paper not in view.rec.stored(user).saved:
            raise SystemExit(f"the list redrawn after saving {paper} does not reflect the save")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--index", required=True, help="an index built from a dataset with user libraries")
    p.add_argument("--saves", type=int, default=30, help="saves a user (default 30)")
    p.add_argument("--users", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clicks", type=int, default=5, help="the cluster view's save button (0: none)")
    args = p.parse_args(argv)
    build = Workspace(load_config().home).lease_build(args.index)
    try:
        long_enough = [ps for ps in library_saves(build.path).values() if len(ps) >= args.saves]
    finally:
        build.release()
    if not long_enough:
        raise SystemExit(f"index {args.index!r} holds no library of {args.saves} papers or more")
    rng = np.random.default_rng(args.seed)
    picks = rng.choice(len(long_enough), size=min(args.users, len(long_enough)), replace=False)
    help_s = [_checked(["--help"])[0] for _ in range(5)]
    saves_s: list[float] = []
    for n, pick in enumerate(picks):
        user = f"bench-saves-{args.seed}-{n}"
        seconds, created = _timed(["users", "create", "--index", args.index, "--user", user])
        if created.returncode != 0:
            raise SystemExit(f"cannot create {user}: {created.stderr.strip()}")
        library = long_enough[pick][: args.saves]
        for paper in library:
            seconds, _ = _checked(["interact", "--index", args.index, "--user", user, "--save", paper])
            saves_s.append(seconds)
        rec_s, out = _checked(["recommend", "--index", args.index, "--user", user, "--json", "--no-log"])
        result = json.loads(out)
        shown = json.loads(_checked(["users", "show", user, "--index", args.index, "--json"])[1])
        clustered = sum(c["size"] for c in shown["clusters"])  # Tier 1's clusters as the list left them
        console.print(
            f"{user}: {len(library)} saves, then Tier {result['tier']} with {clustered} of them clustered "
            f"(recommend {rec_s:.1f} s)",
            highlight=False,
        )
    clicks_s = _clicks(args.index, user, args.clicks)
    table = Table("command", "runs", "p50 s", "p95 s", "max s", "× scix --help (p50)", title="a save")
    base = float(np.median(help_s))
    rows = [
        ("scix --help", help_s),
        ("scix interact --save", saves_s),
        ("cluster view: save button", clicks_s),
    ]
    for name, values in (row for row in rows if row[1]):
        table.add_row(
            name,
            str(len(values)),
            f"{np.median(values):.2f}",
            f"{np.percentile(values, 95):.2f}",
            f"{max(values):.2f}",
            f"{np.median(values) / base:.1f}",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
