"""A finished build's embedded shard held by another opener is read from a private copy."""

import os
import subprocess
import sys

import numpy as np
import pytest

from scix_core.config import VectorConfig
from scix_core.errors import BackendUnavailableError
from scix_core.vectors import open_reader, release_reader
from scix_core.vectors.edge import EdgeVectorStore
from scix_core.vectors.replica import ROOT, remove_stale

POINTS = np.eye(3, dtype=np.float32)


@pytest.fixture
def held(tmp_path):
    """A three-point shard in a build folder, left open (locked) as a serving process holds it."""
    build = tmp_path / "indexes" / "x" / "builds" / "b1"
    store = EdgeVectorStore(build / "vectors", dim=3)
    store.upsert([0, 1, 2], POINTS, [{"paper_id": f"p{i}", "year": 2020, "categories": []} for i in range(3)])
    store.finish()
    yield build
    store.close()


def test_a_held_shard_is_read_from_a_copy_that_goes_when_it_closes(held):
    cfg = VectorConfig()
    store = open_reader(cfg, held, "x")
    try:
        copy = held.parent.parent / ROOT / "b1" / f"vectors-{os.getpid()}"
        assert store.replica == copy and copy.is_dir()
        assert [h.paper_id for h in store.search(POINTS[2], 2)][0] == "p2" and store.count() == 3
        assert not list(copy.parent.glob(".*partial"))  # made under a temporary name, then renamed
    finally:
        release_reader(cfg, held, "x", keep=False)
    assert not copy.exists()


def test_without_replicas_the_held_shard_is_a_typed_error(held):
    with pytest.raises(BackendUnavailableError, match="WAL"):
        open_reader(VectorConfig(replicas=False), held, "x")
    assert not (held.parent.parent / ROOT).exists()


def test_copies_of_dead_processes_and_deleted_builds_are_removed(held):
    root = held.parent.parent / ROOT
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead = root / "b1" / f"vectors-{int(gone.stdout)}"
    alive = root / "b1" / f"vectors-{os.getpid()}"
    old_build = root / "b0" / f"vectors-{os.getpid()}"
    for folder in (dead, alive, old_build):
        folder.mkdir(parents=True)
    assert set(remove_stale(held.parent.parent)) == {dead, old_build}
    assert alive.is_dir() and not (root / "b0").exists()
