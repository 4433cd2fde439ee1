"""Shared fixtures: real data, a private workspace, the real model, PostgreSQL.

Missing data or services are never skipped silently: with
``SCIX_REQUIRE_DATA=1`` (CI) missing data fails the run, and the PostgreSQL
tests fail when the test command did not start the server.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pytest_postgresql import factories

from scix_core.config import load_config
from scix_core.ingest import ingest
from scix_core.stores.postgres import sync_index
from scix_core.train.reranker import RerankRecipe, train_reranker
from scix_core.workspace import Workspace
from tests.corpus import CORPUS, Built
from tests.slices import citeulike_slice, library_counts, scifact_slice

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


def _shared(tmp_path_factory) -> Path:
    """An embedding cache every pytest-xdist worker of this run shares (a plain run: its own)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-embeddings"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shared_caches(tmp_path_factory, home: Path) -> Path:
    """``home/cache`` whose embedding and co-save-model caches are the run's shared ones: a corpus is encoded
    once per run, and a community's EASE fitted once, whichever worker needs it first; the others read the
    cache (the keys are model + corpus, λ + the saves)."""
    (home / "cache").mkdir()
    (home / "cache" / "embeddings").symlink_to(_shared(tmp_path_factory), target_is_directory=True)
    collab = _shared(tmp_path_factory).parent / "shared-collab"
    collab.mkdir(exist_ok=True)
    (home / "cache" / "collab").symlink_to(collab, target_is_directory=True)
    return home


def _home(tmp_path_factory, name: str) -> Path:
    """A private workspace with the run's shared caches (:func:`_shared_caches`)."""
    return _shared_caches(tmp_path_factory, tmp_path_factory.mktemp(name))


@contextmanager
def _corpus_lock(tmp_path_factory, corpus: str):
    """One worker encodes a corpus at a time; the next waits, then finds it in the shared cache."""
    with open(_shared(tmp_path_factory) / f".{corpus}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def scifact_data(tmp_path_factory, data_dir) -> Path:
    """:func:`scifact_slice` of the real data, for this worker."""
    return scifact_slice(data_dir, tmp_path_factory.mktemp("scifact-data"))


@pytest.fixture(scope="session")
def scifact(tmp_path_factory, scifact_data, data_dir, encoder):
    """Real SciFact (:data:`SCIFACT_SLICE` papers, every judged one) ingested with MiniLM vectors into a
    private workspace. Returns ``(config, index name)``. Cold, this encodes the slice once per test session.
    """
    cfg = load_config().replace(home=_home(tmp_path_factory, "scifact-home"), data_dir=data_dir)
    with _corpus_lock(tmp_path_factory, "scifact"):
        ingest(scifact_data, "scifact", config=cfg, progress=False, encoder=encoder)
    return cfg, "scifact"


@pytest.fixture(scope="session")
def citeulike_data(tmp_path_factory, data_dir) -> Path:
    """:func:`~tests.slices.citeulike_slice` of the real data, for this worker."""
    return citeulike_slice(data_dir, tmp_path_factory.mktemp("citeulike-data"))


@pytest.fixture(scope="session")
def citeulike_index(tmp_path_factory, citeulike_data, data_dir, encoder):
    """Real CiteULike-a's dense core (:func:`~tests.slices.citeulike_slice`: 6,000 papers, MiniLM vectors in
    qdrant-edge) as index ``cul``; its config."""
    cfg = load_config().replace(home=_home(tmp_path_factory, "citeulike-home"), data_dir=data_dir)
    with _corpus_lock(tmp_path_factory, "citeulike-a"):
        ingest(citeulike_data, "cul", config=cfg, progress=False, encoder=encoder)
    return cfg


@pytest.fixture(scope="session")
def citeulike_home(citeulike_index, citeulike_data):
    """:func:`citeulike_index` with every library imported."""
    from scix_core.recommend import Recommender
    from scix_core.recommend.library import import_libraries

    cfg = citeulike_index
    report = import_libraries(Recommender("cul", cfg))
    assert (report.users, report.saves, report.unknown_papers) == (*library_counts(citeulike_data), 0)
    # RP3beta alone in every tier (tier_collab "" = as collab): no EASE or iALS fit per test; the defaults'
    # parts are tested on these libraries by the evaluation test and notebook 06, which share one cached fit
    return cfg.replace(**{"recommend.collab": "rp3beta", "recommend.tier_collab": ""})


@pytest.fixture(scope="session")
def citeulike_client(citeulike_home, citeulike_data, encoder):
    """:func:`citeulike_home`, and the same papers and vectors as index ``cul-client`` in qdrant-client local
    mode (the exact reference) for the congruence test."""
    ingest(
        citeulike_data,
        "cul-client",
        config=citeulike_home.replace(**{"vectors.backend": "qdrant"}),
        progress=False,
        encoder=encoder,
    )
    return citeulike_home


def _notebook_home(tmp_path_factory, data_dir: Path, dataset: str, source: list[str]) -> Path:
    """Real ``dataset`` (read by ``scix ingest`` from ``source``) under its default name in a workspace this
    test process never opens (the ingest runs in its own process too), so the notebooks' kernels (nbmake,
    JupyterLab) own the vector shards. Vectors come from the run's shared embedding cache a session fixture
    filled: nothing is encoded twice."""
    import subprocess
    import sys

    home = _shared_caches(tmp_path_factory, tmp_path_factory.mktemp(f"notebook-{dataset}"))
    env = {**os.environ, "SCIX_HOME": str(home), "SCIX_DATA_DIR": str(data_dir)}
    env.pop("SCIX_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "scix_core", "ingest", *source, "--index", dataset, "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "embeddings: 0 encoded" in done.stdout, done.stdout[-2000:]
    return home


@pytest.fixture(scope="session")
def scifact_notebook_home(tmp_path_factory, scifact, scifact_data, data_dir) -> Path:
    """The SciFact slice as ``scifact`` for notebooks 01-05 and the browser tests (:func:`_notebook_home`)."""
    return _notebook_home(tmp_path_factory, data_dir, "scifact", ["--path", str(scifact_data)])


@pytest.fixture(scope="session")
def citeulike_notebook_home(tmp_path_factory, citeulike_index, citeulike_data, data_dir) -> Path:
    """CiteULike-a's dense core as ``citeulike-a`` (its libraries the community) for notebook 06
    (:func:`_notebook_home`)."""
    return _notebook_home(tmp_path_factory, data_dir, "citeulike-a", ["--path", str(citeulike_data)])


# -- the hand-checkable corpus (tests/corpus.py) in real indexes, once per session


@pytest.fixture(scope="session")
def fixture_home(tmp_path_factory):
    return tmp_path_factory.mktemp("search-home")


@pytest.fixture(scope="session")
def built(fixture_home, encoder) -> Built:
    """The fixture corpus ingested with vectors in qdrant-edge (the default) and the optional sparse
    vectors."""
    cfg = load_config().replace(home=fixture_home)
    ingest(CORPUS, "fixture", config=cfg, progress=False, encoder=encoder, sparse=True)
    return Built(cfg, "fixture")


@pytest.fixture(scope="session")
def built_client(fixture_home, encoder) -> Built:
    """The same corpus with vectors in qdrant-client local mode (exact reference)."""
    cfg = load_config().replace(home=fixture_home, **{"vectors.backend": "qdrant"})
    ingest(CORPUS, "fixture-client", config=cfg, progress=False, encoder=encoder)
    return Built(cfg, "fixture-client")


@pytest.fixture
def pg_built(built, postgresql) -> Built:
    """The fixture index mirrored into a fresh PostgreSQL database (pytest-postgresql)."""
    dsn = postgresql.info.dsn
    sync_index(built.index, Workspace(built.config.home).index_dir(built.index), dsn)
    return Built(
        built.config.replace(**{"postgres.dsn": dsn, "search.lexical_backend": "postgres"}), built.index
    )


@pytest.fixture
def pg_ts_built(pg_built) -> Built:
    """The same mirror, its title/abstract lane ranked by PostgreSQL's own ``ts_rank_cd`` (not the term
    matrix)."""
    return _ts_rank(pg_built)


def _ts_rank(built: Built) -> Built:
    return Built(built.config.replace(**{"postgres.ranking": "ts_rank_cd"}), built.index)


@pytest.fixture(scope="session")
def pg_mirror(built, postgresql_noproc):
    """The fixture index mirrored once a test worker into a database of its own, for the tests that only
    search it (:func:`pg_built`'s fresh database and mirror cost 0.16 s a test, some 260 times a run)."""
    import psycopg
    from pytest_postgresql.janitor import DatabaseJanitor

    proc = postgresql_noproc
    name = f"{proc.dbname}_mirror"
    with DatabaseJanitor(user=proc.user, host=proc.host, port=proc.port, dbname=name, password=proc.password):
        dsn = psycopg.conninfo.make_conninfo(
            host=proc.host, port=proc.port, user=proc.user, password=proc.password, dbname=name
        )
        sync_index(built.index, Workspace(built.config.home).index_dir(built.index), dsn)
        yield Built(
            built.config.replace(**{"postgres.dsn": dsn, "search.lexical_backend": "postgres"}), built.index
        )


@pytest.fixture(scope="session")
def pg_ts_mirror(pg_mirror) -> Built:
    """:func:`pg_mirror` ranked by ``ts_rank_cd`` (:func:`pg_ts_built`)."""
    return _ts_rank(pg_mirror)


@pytest.fixture(scope="session")
def tiny_reranker(built) -> str:
    """A cross-encoder fine-tuned from the bundled MiniLM for a few steps on 4 of the fixture's 6 train
    queries."""
    report = train_reranker(
        built.index,
        "tiny",
        built.config,
        recipe=RerankRecipe(epochs=2, batch_size=8, negatives=2),
        max_queries=4,
        progress=False,
    )
    assert report.queries == 4 and report.positives >= 4 and report.negatives > 0
    return "tiny"


SLOW = ("model", "realdata", "postgres", "browser")

# The files whose tests use a real corpus's session fixture run on one pytest-xdist worker, in turn, first
# (`make test`'s --dist loadfile, :func:`pytest_xdist_make_scheduler`): the corpus is encoded and its
# libraries imported once, and no worker sits waiting on another's encoding (a slow machine's worker waited
# seven minutes on SciFact's). A test that uses the fixture from another file fails the collection.
CORPUS_FIXTURES = {"scifact": "scifact", "citeulike_index": "citeulike-a"}
CORPUS_FILES = {
    "tests/search/test_scifact.py": "scifact",
    "tests/evaluate/test_eval_cli.py": "scifact",
    "tests/notebooks/test_notebooks.py": "scifact",
    "tests/notebooks/test_browser.py": "scifact",
    "tests/tune/test_tune_scifact.py": "scifact",
    # CiteULike-a's in two units: the evaluation test (the encoding, EASE's fit and the tier weights' choice
    # on the whole community: alone, half the suite's length on a slow machine) and the rest, which reads
    # those from the run's shared caches on the other worker once SciFact's unit is done
    "tests/evaluate/test_recs.py": "citeulike-a",
    "tests/recommend/test_real_data.py": "citeulike-a (more)",
    "tests/notebooks/test_recommendation_notebook.py": "citeulike-a (more)",
    "tests/recommend/test_scorers.py": "citeulike-a (more)",
}
# Files that never load the model, one unit handed out second: the first worker's corpus fixture exports
# the model (24 s of a fast core, once a run) and a second worker whose first test needed it too sat waiting
NO_MODEL_FILES = (
    "tests/recommend/test_tier_weights.py",
    "tests/recommend/test_units.py",
    "tests/recommend/test_state.py",
    "tests/evaluate/test_stats.py",
    "tests/devtools/test_checks.py",
    "tests/recommend/test_collab.py",
    "tests/vectors/test_replica.py",
    "tests/recommend/test_reuse.py",
    "tests/evaluate/test_score_fusion.py",
    "tests/test_config.py",
    "tests/search/test_query.py",
    "tests/fusion/test_fusion.py",
    "tests/embeddings/test_batching.py",
    "tests/data/test_arxiv_ids.py",
    "tests/bench/test_scale.py",
    "tests/serve/test_exposition.py",
    "tests/data/test_real_counts.py",
    "tests/data/test_thin.py",
    "tests/test_slices.py",
    "tests/search/test_sql_binding.py",
)
# the files that take minutes on a slow machine, handed out next: a long file last leaves a worker idle
LONG_FILES = (
    "tests/stores/test_kills.py",
    "tests/embeddings/test_onnx.py",
    "tests/evaluate/test_evidence.py",
    "tests/vectors/test_congruence.py",
    "tests/stores/test_soak.py",
    "tests/recommend/test_kills.py",
    "tests/bench/test_serve.py",
    "tests/search/test_rerank.py",
)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (the test extra installs it)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with each corpus's files (:data:`CORPUS_FILES`) one work unit and
    :data:`NO_MODEL_FILES` another: SciFact's unit handed out first, then the files without the model, the
    other corpus units (CiteULike-a's evaluation, CiteULike-a's other tests), :data:`LONG_FILES`, the rest."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class CorpusScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            if file in NO_MODEL_FILES:
                return "no-model"
            return f"corpus:{CORPUS_FILES[file]}" if file in CORPUS_FILES else file

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the units above, then the long files: first, so no worker ends alone
                self.ordered = True
                corpora = [f"corpus:{c}" for c in dict.fromkeys(CORPUS_FILES.values())]
                first = [corpora[0], "no-model", *corpora[1:], *LONG_FILES]
                for scope in reversed([s for s in first if s in self.workqueue]):
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return CorpusScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Notebook and browser tests last: they start kernels, JupyterLab and Chromium beside this process.
    Every test that loads the model, reads real data, needs PostgreSQL or drives a browser is also ``slow``:
    ``make check`` runs the rest (``-m "not slow"``). A file runs whole on one worker, in order (`make test`
    passes ``--dist loadfile``: module fixtures, tests that build on the one before)."""
    for item in items:
        file = item.nodeid.split("::")[0]
        for fixture, corpus in CORPUS_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and not CORPUS_FILES.get(file, "").startswith(
                corpus
            ):
                raise pytest.UsageError(
                    f"{item.nodeid} uses {fixture}: add {file} to CORPUS_FILES as {corpus!r}"
                )
        if any(item.get_closest_marker(m) for m in SLOW):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: "tests/notebooks/" in str(item.fspath).replace(os.sep, "/"))
