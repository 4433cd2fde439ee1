"""The main job's orchestration (scripts/main-job.sh): its two lanes, with a `scix` that only says what it was
asked (the commands themselves are tested where they live; `make run` runs them for real), and a real
throwaway PostgreSQL cluster of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# says what it was asked, and writes the files the job lists at its end
STUB = """#!/bin/bash
echo "scix $*" >> "$CALLS"
echo "ran $1"
[ "$1" = eval-recs ] && [ -n "$FAIL_RECS" ] && { echo "eval-recs went wrong" >&2; exit 3; }
[ "$1" = eval-recs ] && sleep 2
args=("$@")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --json) touch "${args[$((i + 1))]}";;
    --out) touch "${args[$((i + 1))]}/evidence-$2-scifact.md";;
  esac
done
[ "$1" = report ] && mkdir -p "$SCIX_REPORTS_DIR/$2" && touch "$SCIX_REPORTS_DIR/$2/$2.html"
exit 0
"""


def run_job(tmp_path: Path, pg_dir: Path, **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scix").write_text(STUB)
    (bin_dir / "scix").chmod(0o755)
    data = tmp_path / "data"
    for corpus in ("scifact", "citeulike-a"):
        (data / corpus).mkdir(parents=True, exist_ok=True)
    calls = tmp_path / "calls.txt"
    calls.write_text("")
    env = {
        **os.environ,
        "BIN": str(bin_dir),
        "SCIX_DATA_DIR": str(data),
        "SCIX_REPORTS_DIR": str(tmp_path / "reports"),
        "SCIX_PG_DIR": str(pg_dir),
        "SCIX_PG_PORT": "54341",  # not the suite's own cluster, which the job's exit would stop
        "CALLS": str(calls),
        "HEARTBEAT": "1",
        **env,
    }
    done = subprocess.run(
        [str(ROOT / "scripts" / "main-job.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    return done, calls.read_text().splitlines()


@pytest.mark.postgres  # a cluster of its own (the installed server), so also slow
def test_the_recommendation_lane_runs_beside_the_search_side_and_its_failure_fails_the_job(tmp_path):
    # the cluster's folder where the postgres user can reach it (pytest's own is the root user's alone)
    pg_dir = Path("/tmp") / f"scix-main-job-pg-{uuid.uuid4().hex[:8]}"
    try:
        check_the_lanes(tmp_path, pg_dir)
    finally:
        shutil.rmtree(pg_dir, ignore_errors=True)


def check_the_lanes(tmp_path: Path, pg_dir: Path) -> None:
    done, calls = run_job(tmp_path, pg_dir)
    assert done.returncode == 0, done.stderr
    verbs = [c.split()[1] for c in calls]
    # the search corpus first (encoding on both cores), the recommendation lane's report after everything
    assert calls[0].startswith("scix ingest --dataset scifact") and calls[-1].startswith(
        "scix report recommendation-eval -p report"
    )
    assert verbs.count("eval") == 3 and verbs.count("evidence") == 4 and verbs.count("eval-recs") == 1
    assert "scix report all --skip recommendation-eval" in " ".join(calls)
    # eval-recs sleeps 2 s: the search side's steps ran meanwhile, and its output came after the wait
    assert verbs.index("eval-recs") < max(i for i, v in enumerate(verbs) if v == "eval")
    assert done.stdout.index("waiting for the recommendation step") < done.stdout.index("ran eval-recs")

    done, calls = run_job(tmp_path, pg_dir, FAIL_RECS="1")
    assert done.returncode == 3
    assert "eval-recs went wrong" in done.stdout and "the recommendation step failed (exit 3" in done.stderr
    assert not any("recommendation-eval -p report" in c for c in calls)  # no report of a failed evaluation
    stopped = subprocess.run(["pgrep", "-f", str(pg_dir)], capture_output=True)
    assert stopped.returncode == 1  # the job's own PostgreSQL stopped on the way out
