"""Searches while the same index is rebuilt: every searcher keeps one complete build, none fails."""

import threading
import traceback

from scix_core.ingest import ingest
from scix_core.search import Searcher
from scix_core.workspace import Workspace
from tests.conftest import FIXTURES


def _builds(config, name):
    return sorted(
        p.name
        for p in (Workspace(config.home).index_root(name) / "builds").iterdir()
        if not p.name.startswith(".")
    )


def test_a_leased_build_outlives_a_rebuild_and_is_pruned_after(config):
    ingest(FIXTURES / "smart", "l", config=config, embed=False, progress=False)
    searcher = Searcher("l", config)
    old = searcher.build_dir
    ingest(FIXTURES / "smart", "l", config=config, embed=False, progress=False, force=True)
    assert (
        old.exists() and Workspace(config.home).index_dir("l") != old
    )  # current moved on, the lease kept it
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
            except Exception:  # noqa: BLE001 — the test counts every kind
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


def test_a_second_ingest_of_an_index_being_built_fails_clearly_and_a_killed_builder_frees_it(config, capsys):
    """Another process inside a build of index ``b`` (its lock held, a partial folder written); it is
    SIGKILLed."""
    import signal
    import subprocess
    import sys

    import pytest

    from scix_core.cli.main import main
    from scix_core.errors import IndexBusyError

    ingest(FIXTURES / "smart", "b", config=config, embed=False, progress=False)
    before = Searcher("b", config).search("panel flutter", "keyword", limit=3).ids
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom scix_core.workspace import Workspace\n"
        f"with Workspace(Path({str(config.home)!r})).new_build('b', 'x') as b:\n"
        "    (b / 'partial').write_text('half')\n    print('in', flush=True)\n    time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "in"
        with pytest.raises(IndexBusyError, match=rf"index 'b' is being built by pid {holder.pid}"):
            ingest(FIXTURES / "smart", "b", config=config, embed=False, progress=False, force=True)
        assert (
            main(
                [
                    "ingest",
                    "--path",
                    str(FIXTURES / "smart"),
                    "--index",
                    "b",
                    "--no-embed",
                    "--force",
                    "--quiet",
                ]
            )
            == 2
        )  # the `home` fixture points SCIX_HOME at this workspace
        assert "[index_busy]" in capsys.readouterr().err
        assert Searcher("b", config).search("panel flutter", "keyword", limit=3).ids == before  # untouched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    builds = Workspace(config.home).index_root("b") / "builds"
    assert list(builds.glob(".building-*"))  # the killed builder's partial folder is still there...
    report = ingest(FIXTURES / "smart", "b", config=config, embed=False, progress=False, force=True)
    assert report.status != "unchanged" and not list(builds.glob(".building-*"))  # ...until the next build
    assert Searcher("b", config).search("panel flutter", "keyword", limit=3).ids == before


def test_a_superseded_builds_vector_reader_is_closed_by_its_last_user(config):
    """A process following rebuilds does not keep every old build's shard open: the last searcher on a
    superseded build closes its shared reader; the current build's reader stays for the next searcher."""
    from scix_core import vectors

    ingest(FIXTURES / "smart", "v", config=config, progress=False)
    first, second = Searcher("v", config), Searcher("v", config)
    old = first.build_dir

    def opened(build):
        return [k for k in vectors._READERS if k[2] == str(build.resolve())]

    assert len(opened(old)) == 1  # shared by both searchers
    ingest(FIXTURES / "smart", "v", config=config, progress=False, force=True)
    first.close()
    assert len(opened(old)) == 1  # the second searcher still uses it
    assert second.search("panel flutter", "semantic", limit=3).ids
    second.close()
    second.close()
    assert opened(old) == []  # superseded and unused: closed
    third = Searcher("v", config)
    assert third.search("panel flutter", "semantic", limit=3).ids
    third.close()
    assert len(opened(third.build_dir)) == 1  # current: kept open for the next searcher
