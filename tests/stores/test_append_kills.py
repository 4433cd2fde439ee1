"""`scix ingest --append` SIGKILLed the moment it reaches each phase (store+FTS5, embedding, vectors, after
the switch), each time a new real listing day: the index answers exactly as before the append (or, killed
after the switch, as after it), and the next appends finish the work — the result equal to a full ingest of
the same days."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from scix_core.bench.kills import AFTER_SWITCH, TARGETS, answers_of, await_phase, build_phase
from scix_core.config import load_config
from scix_core.data import Dataset, load_dataset
from scix_core.data.dataset import PaperCollector
from scix_core.ingest import ingest
from scix_core.workspace import Workspace
from tests.stores.test_append import _days, _rows

pytestmark = [pytest.mark.model, pytest.mark.realdata]


def test_a_kill_in_every_phase_of_an_append_leaves_a_whole_corpus(tmp_path, data_dir, encoder):
    home = tmp_path / "home"
    env = {**os.environ, "SCIX_HOME": str(home)}
    env.pop("SCIX_CONFIG", None)
    cfg = load_config().replace(home=home)
    days = _days(data_dir, tmp_path, 2 + len(TARGETS))
    ingest(days[0], "killed", "arxiv-jsonl", config=cfg, progress=False, encoder=encoder)
    root = Workspace(home).index_root("killed")
    queries = [line.split('"title": "')[1].split('"')[0] for line in days[1].read_text().splitlines()[:3]]
    queries.append("prime numbers and modular forms")
    order = [days[0]]  # the order the days went in
    for target, day in zip(TARGETS, days[1:]):
        reference = answers_of(home, "killed", queries, env)
        shutil.rmtree(home / "cache" / "embeddings", ignore_errors=True)  # the embedding phase takes time
        before = (root / "current").resolve().name
        stale = frozenset((root / "builds").glob(".building-*"))
        proc = subprocess.Popen(_append(day), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert await_phase(proc, root, before, stale, target, time.perf_counter() + 120), target
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        phase = build_phase(root, before, stale)
        after = answers_of(home, "killed", queries, env)
        if phase == AFTER_SWITCH:  # the new build was whole before the kill
            order.append(day)
        else:
            assert after == reference, phase  # the old corpus, exactly
            assert (root / "current").resolve().name == before
    for day in days[1:]:  # the next appends finish what the kills stopped (the others: unchanged)
        subprocess.run(_append(day), env=env, check=True, capture_output=True)
        order += [] if day in order else [day]
    same = PaperCollector(newer_wins=True)  # the same records in the order they went in
    for day in order:
        for paper in load_dataset(day, "arxiv-jsonl").papers:
            same.add(paper)
    ingest(Dataset("days", "arxiv-jsonl", same.papers), "full", config=cfg, progress=False, encoder=encoder)
    assert _rows(Workspace(home).index_dir("killed")) == _rows(Workspace(home).index_dir("full"))
    assert not list((root / "builds").glob(".building-*"))  # what the kills left half-built is gone


def _append(day) -> list[str]:
    return [
        sys.executable,
        "-m",
        "scix_core",
        "ingest",
        "--path",
        str(day),
        "--index",
        "killed",
        "--append",
        "--quiet",
    ]
