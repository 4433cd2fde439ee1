"""Searches while the same index is rebuilt: every searcher keeps one complete build, none fails."""

import threading
import traceback

from scix_core.ingest import ingest
from scix_core.search import Searcher
from scix_core.workspace import Workspace
from tests.conftest import FIXTURES


def _builds(config, name):
    return sorted(p.name for p in (Workspace(config.home).index_root(name) / "builds").iterdir()
                  if not p.name.startswith("."))


def test_a_leased_build_outlives_a_rebuild_and_is_pruned_after(config):
    ingest(FIXTURES / "smart", "l", config=config, embed=False, progress=False)
    searcher = Searcher("l", config)
    old = searcher.build_dir
    ingest(FIXTURES / "smart", "l", config=config, embed=False, progress=False, force=True)
    assert old.exists() and Workspace(config.home).index_dir("l") != old  # current moved on, the lease kept it
    assert searcher.search("panel flutter", "keyword", limit=3).ids
    searcher.close()
    searcher.close()  # idempotent
    ingest(FIXTURES / "smart", "l", config=config, embed=False, progress=False, force=True)
    assert not old.exists() and len(_builds(config, "l")) == 1


def test_searches_during_rebuilds_never_fail(config):
    ingest(FIXTURES / "smart", "c", config=config, embed=False, progress=False)
    errors, served, stop = [], [0], threading.Event()
    lock = threading.Lock()

    def reader():
        while not stop.is_set():
            try:
                searcher = Searcher("c", config)
                try:
                    hits = searcher.search("heat transfer", "keyword", limit=3).ids
                finally:
                    searcher.close()
                with lock:
                    served[0] += 1
                    if not hits:
                        errors.append("no hits")
            except Exception as exc:  # noqa: BLE001 — the test counts every kind
                errors.append(traceback.format_exc())

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(8):
            ingest(FIXTURES / "smart", "c", config=config, embed=False, progress=False, force=True)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == [] and served[0] >= 20
    ingest(FIXTURES / "smart", "c", config=config, embed=False, progress=False, force=True)
    assert len(_builds(config, "c")) == 1  # nothing leased any more: every older build pruned
