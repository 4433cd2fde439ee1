"""Ingest on real engines: idempotence, atomicity under interruption, bad input."""

import os
import signal
import subprocess
import sys
import time

import pytest

from scix_core.errors import DataFormatError, IndexNotFoundError
from scix_core.ingest import ingest
from scix_core.stores import PaperStore
from scix_core.workspace import Workspace
from tests.conftest import FIXTURES


def _store(config, name):
    return PaperStore(Workspace(config.home).index_dir(name) / "papers.sqlite")


def test_store_tables_and_fts(config):
    ingest(FIXTURES / "beir", "tiny", config=config, embed=False, progress=False)
    store = _store(config, "tiny")
    assert store.counts()["papers"] == 3 and store.counts()["qrels"] == 3
    rows = store.conn.execute(
        "SELECT p.paper_id FROM papers_fts f JOIN papers p ON p.idx = f.rowid WHERE papers_fts MATCH 'halos' "
        "ORDER BY bm25(papers_fts)"
    ).fetchall()
    assert [r[0] for r in rows] == ["d1", "d3"]  # porter: 'halos' matches 'Halo'; d1 has it twice
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.get(["d2"])["d2"].title == "Galaxy rotation curves"


def test_ingest_is_idempotent(config):
    first = ingest(FIXTURES / "smart", "s", config=config, embed=False, progress=False)
    dump = _store(config, "s").dump()
    again = ingest(FIXTURES / "smart", "s", config=config, embed=False, progress=False)
    assert (first.status, again.status) == ("built", "unchanged")
    forced = ingest(FIXTURES / "smart", "s", config=config, embed=False, progress=False, force=True)
    assert forced.status == "built" and _store(config, "s").dump() == dump
    assert len(list((Workspace(config.home).index_root("s") / "builds").iterdir())) == 1


def test_corrupt_input_leaves_previous_index(config, tmp_path):
    ingest(FIXTURES / "arxiv", "a", config=config, embed=False, progress=False)
    before = _store(config, "a").dump()
    data = (FIXTURES / "arxiv" / "listing.jsonl.gz").read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:40])
    with pytest.raises(DataFormatError):
        ingest(tmp_path / "cut.jsonl.gz", "a", config=config, embed=False, progress=False)
    assert _store(config, "a").dump() == before


def test_missing_index_is_a_typed_error(config):
    with pytest.raises(IndexNotFoundError, match="scix ingest"):
        Workspace(config.home).index_dir("nope")


@pytest.mark.realdata
@pytest.mark.model
def test_interrupted_build_keeps_previous_index(config, data_dir):
    """Ctrl-C during embedding: exit 130, previous build still current, no partial build left."""
    ingest(FIXTURES / "beir", "x", config=config, embed=False, progress=False)
    builds = Workspace(config.home).index_root("x") / "builds"
    env = {**os.environ, "SCIX_HOME": str(config.home)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scix_core",
            "ingest",
            "--path",
            str(data_dir / "scifact"),
            "--index",
            "x",
            "--limit",
            "3000",
            "--quiet",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # a test run started in the background inherits an ignored SIGINT: the child must see Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while (
        time.time() < deadline
        and proc.poll() is None
        and not any((b / "papers.sqlite").exists() for b in builds.glob(".building-*"))
    ):
        time.sleep(0.2)
    time.sleep(3)  # well into model load / encoding
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)  # a loaded machine finishes the current encode batch first
    assert proc.returncode == 130, err.decode()
    assert not list(builds.glob(".building-*"))
    assert _store(config, "x").counts()["papers"] == 3
