"""Shared fixtures: real data, a private workspace, the real model, PostgreSQL.

Missing data or services are never skipped silently: with
``SCIX_REQUIRE_DATA=1`` (CI) missing data fails the run, and the PostgreSQL
tests fail when the test command did not start the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pytest_postgresql import factories

from scix_core.config import load_config

FIXTURES = Path(__file__).parent / "fixtures"

# The server is started by `make test` (scripts/postgres.sh); without it these tests error, never skip.
_dsn = urlparse(os.environ.get("SCIX_PG_DSN", "postgresql://postgres@127.0.0.1:54329/postgres"))
postgresql_noproc = factories.postgresql_noproc(
    host=_dsn.hostname, port=_dsn.port, user=_dsn.username or "postgres"
)
postgresql = factories.postgresql("postgresql_noproc")


def _shared_data() -> Path | None:
    env = os.environ.get("SCIX_DATA_DIR")
    candidates = [Path(env)] if env else [Path(__file__).resolve().parents[2] / "shared" / "data"]
    return next((p.resolve() for p in candidates if (p / "scifact").exists()), None)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = _shared_data()
    if path is None:
        msg = "real data not found: set SCIX_DATA_DIR to the folder holding scifact/, cranfield/, ..."
        if os.environ.get("SCIX_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A private workspace (SCIX_HOME) per test."""
    monkeypatch.setenv("SCIX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    return tmp_path / "home"


@pytest.fixture
def config(home):
    return load_config()


@pytest.fixture(scope="session")
def encoder():
    from scix_core.embeddings import Encoder

    return Encoder()


@pytest.fixture(scope="session")
def scifact(tmp_path_factory, data_dir, encoder):
    """The real SciFact corpus (5,183 papers) ingested with MiniLM vectors into a private workspace.

    Returns ``(config, index name)``. Cold, this encodes the whole corpus once per test session (~3 min).
    """
    from scix_core.ingest import ingest

    cfg = load_config().replace(home=tmp_path_factory.mktemp("scifact-home"), data_dir=data_dir)
    ingest(data_dir / "scifact", "scifact", config=cfg, progress=False, encoder=encoder)
    return cfg, "scifact"


@pytest.fixture(scope="session")
def citeulike_home(tmp_path_factory, data_dir, encoder):
    """Real citeulike-a (16,980 titles, MiniLM vectors in qdrant-edge) with every library imported; and the
    same vectors in qdrant-client local mode (exact reference) for the congruence test."""
    from scix_core.ingest import ingest
    from scix_core.recommend import Recommender
    from scix_core.recommend.library import import_libraries

    cfg = load_config().replace(home=tmp_path_factory.mktemp("citeulike-home"), data_dir=data_dir)
    ingest(data_dir / "citeulike-a", "cul", config=cfg, progress=False, encoder=encoder)
    ingest(
        data_dir / "citeulike-a",
        "cul-client",
        config=cfg.replace(**{"vectors.backend": "qdrant"}),
        progress=False,
        encoder=encoder,
    )
    report = import_libraries(Recommender("cul", cfg))
    assert (report.users, report.saves, report.unknown_papers) == (5551, 204986, 0)
    return cfg


@pytest.fixture(scope="session")
def notebook_home(tmp_path_factory, scifact, citeulike_home, data_dir) -> Path:
    """Real SciFact and CiteULike-a under their default names in a workspace this test process never opens
    (the ingests run in their own processes too), so the notebooks' kernels (nbmake, JupyterLab) own the
    vector shards. Vectors come from the session fixtures' embedding caches: nothing is encoded twice."""
    import shutil
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("notebook-home")
    for source in (scifact[0].home, citeulike_home.home):
        shutil.copytree(source / "cache", home / "cache", dirs_exist_ok=True)
    env = {**os.environ, "SCIX_HOME": str(home), "SCIX_DATA_DIR": str(data_dir)}
    env.pop("SCIX_CONFIG", None)
    for dataset in ("scifact", "citeulike-a"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "scix_core",
                "ingest",
                "--dataset",
                dataset,
                "--index",
                dataset,
                "--quiet",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "embeddings: 0 encoded" in done.stdout, done.stdout[-2000:]
    return home


def pytest_collection_modifyitems(config, items):
    """Notebook and browser tests last: they start kernels, JupyterLab and Chromium beside this process."""
    items.sort(key=lambda item: "tests/notebooks/" in str(item.fspath).replace(os.sep, "/"))
