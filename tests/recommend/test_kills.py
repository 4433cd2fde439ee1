"""A process recording saves and asking for recommendations (which recluster and persist medoids) is SIGKILLed
at seeded moments, 10 times, on real Cranfield papers: every save it acknowledged is in the user state, the
database is intact, and the stored medoid set is one whole set (one write, ids below the counter)."""

import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from scix_core.config import load_config
from scix_core.ingest import ingest
from scix_core.recommend.state import UserState
from scix_core.stores.papers import PaperStore
from scix_core.workspace import Workspace

pytestmark = [pytest.mark.model, pytest.mark.realdata]

CHILD = """
import random, sys
from scix_core.config import load_config
from scix_core.recommend import Recommender
from pathlib import Path
rec = Recommender("k", load_config().replace(home=Path(sys.argv[1])))
rec.create_user("u")
ids, rng = sys.argv[2].split(","), random.Random(int(sys.argv[3]))
while True:
    paper = rng.choice(ids)
    rec.interact("u", paper, "save")
    print("ack", paper, flush=True)
    rec.recommend("u", 10)
"""


def test_kills_while_saving_and_reclustering_lose_no_acknowledged_save(tmp_path, data_dir):
    home = tmp_path / "home"
    cfg = load_config().replace(home=home)
    ingest(data_dir / "cranfield", "k", config=cfg, limit=150, progress=False)
    # this process never opens the index's vector shard (one process at a time may): the child must own it
    store = PaperStore(Workspace(home).index_dir("k") / "papers.sqlite")
    ids = [p.paper_id for p in store.papers()][::7][
        :20
    ]  # spread over the corpus: several topics, several clusters
    store.close()
    rng, acknowledged, reclustered = random.Random(3), set(), 0
    for kill in range(6):  # suite-sized
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(home), ",".join(ids), str(kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + rng.uniform(2.0, 6.0)
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acknowledged.add(line.split()[1])
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL, child.stderr.read()[-2000:]
        state = sqlite3.connect(home / "state" / "users.sqlite")
        assert state.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = state.execute("SELECT cluster_id, size, updated FROM clusters WHERE user_id = 'u'").fetchall()
        counter = state.execute("SELECT next_id FROM cluster_counters WHERE user_id = 'u'").fetchone()
        state.close()
        saved = {e.paper_id for e in UserState.for_home(home).events("k", "u") if e.kind == "save"}
        assert acknowledged <= saved, f"kill {kill}: lost {sorted(acknowledged - saved)}"
        if rows:
            reclustered += 1
            assert len({r[2] for r in rows}) == 1, f"kill {kill}: medoids from two writes"
            assert all(r[0] < counter[0] for r in rows) and sum(r[1] for r in rows) <= len(saved)
    assert len(acknowledged) >= 15 and reclustered >= 3, (len(acknowledged), reclustered)
