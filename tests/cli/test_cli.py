"""The scix command in-process: ingest, info, doctor, data fetch (loopback HTTP only)."""

import hashlib
import http.server
import json
import threading
import zipfile
from functools import partial

import pytest

from scix_core.cli.main import main
from tests.conftest import FIXTURES


def test_ingest_then_info_json(home, capsys):
    assert main(["ingest", "--path", str(FIXTURES / "smart"), "--index", "sm", "--no-embed", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "taken 3 papers" in out and "rejected 0" in out and "neither title nor abstract" not in out
    assert main(["info", "--index", "sm", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["papers"] == 3 and info["counts"]["queries"] == 3 and info["format"] == "smart"
    assert info["sizes_bytes"]["papers.sqlite"] > 0


def test_ingest_reports_rejections_with_file_and_line(home, capsys):
    assert main(["ingest", "--path", str(FIXTURES / "beir"), "--index", "b", "--no-embed", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "rejected 1" in out and "corpus.jsonl:3" in out and "duplicate ids dropped 1" in out


def test_ingest_says_how_many_papers_have_no_text(home, capsys, tmp_path):
    import shutil

    shutil.copytree(FIXTURES / "citeulike", tmp_path / "c")
    (tmp_path / "c" / "citeutitles.txt").unlink()  # items 0 and 2 keep their tags as text; item 1 has none
    assert main(["ingest", "--path", str(tmp_path / "c"), "--index", "c", "--no-embed", "--quiet"]) == 0
    assert "1 papers have neither title nor abstract" in capsys.readouterr().out


def test_typed_errors_exit_cleanly(home, capsys, tmp_path):
    assert main(["ingest", "--path", str(tmp_path / "nowhere"), "--index", "x"]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert main(["ingest", "--path", str(FIXTURES / "beir"), "--index", "x", "--format", "nope"]) == 2
    assert "valid: arxiv-jsonl, arxiv-kaggle, beir" in capsys.readouterr().err
    assert main(["info", "--index", "never-built"]) == 2
    assert main(["ingest", "--path", str(FIXTURES / "beir"), "--index", "../escape"]) == 2


@pytest.mark.realdata
def test_ingest_dataset_by_name(home, data_dir, monkeypatch, capsys):
    monkeypatch.setenv("SCIX_DATA_DIR", str(data_dir))
    assert main(["ingest", "--dataset", "cacm", "--index", "cacm", "--no-embed", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["info", "--index", "cacm", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["papers"] == 3204 and counts["queries"] == 64 and counts["qrels"] == 796
    assert counts["with_abstract"] == 1587


@pytest.mark.postgres
def test_doctor_reports_every_backend(home, postgresql, monkeypatch, capsys):
    info = postgresql.info  # a fresh database on the server the test command started
    monkeypatch.setenv("SCIX_PG_DSN", f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for name in ("sqlite-fts5", "postgresql", "vectors", "model", "user-state"):
        assert name in out
    assert "PostgreSQL" in out and "reachable" in out and "FAIL" not in out


def test_doctor_fails_on_unreachable_postgres(home, monkeypatch, capsys):
    monkeypatch.setenv("SCIX_PG_DSN", "postgresql://postgres@127.0.0.1:1/none")
    assert main(["doctor"]) == 1
    assert "FAIL postgresql" in capsys.readouterr().out


@pytest.fixture
def loopback(tmp_path):
    """A real HTTP server on 127.0.0.1 serving a zip of the BEIR fixture."""
    served = tmp_path / "served"
    served.mkdir()
    archive = served / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in (FIXTURES / "beir").rglob("*"):
            if f.is_file():
                zf.write(f, "tiny/" + str(f.relative_to(FIXTURES / "beir")))
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield (
        f"http://127.0.0.1:{server.server_address[1]}/tiny.zip",
        hashlib.sha256(archive.read_bytes()).hexdigest(),
    )
    server.shutdown()


def test_fetch_verifies_checksum_and_unpacks(home, tmp_path, loopback, capsys):
    url, sha = loopback
    dest = tmp_path / "data"
    assert main(["data", "fetch", "tiny", "--url", url, "--sha256", sha, "--dest", str(dest)]) == 0
    assert (dest / "tiny" / "corpus.jsonl").exists()
    assert main(["ingest", "--path", str(dest / "tiny"), "--index", "t", "--no-embed", "--quiet"]) == 0


def test_fetch_rejects_mismatch_and_leaves_nothing(home, tmp_path, loopback, capsys):
    url, _ = loopback
    dest = tmp_path / "data"
    assert main(["data", "fetch", "tiny", "--url", url, "--sha256", "0" * 64, "--dest", str(dest)]) == 2
    assert "checksum" in capsys.readouterr().err
    assert not (dest / "tiny").exists() and not list(dest.glob(".fetch-*"))


def test_fetch_refuses_unknown_source_without_checksum(home, tmp_path, loopback, capsys):
    url, _ = loopback
    assert main(["data", "fetch", "tiny", "--url", url, "--dest", str(tmp_path / "d")]) == 2
    assert "no checksum" in capsys.readouterr().err
    assert main(["data", "fetch", "nonesuch", "--dest", str(tmp_path / "d")]) == 2
    assert "scifact" in capsys.readouterr().err


def test_doctor_fails_on_an_unreadable_user_state(home, capsys):
    (home / "state").mkdir(parents=True)
    (home / "state" / "users.sqlite").write_bytes(b"this is not a database" * 100)
    assert main(["doctor"]) == 1
    assert "FAIL user-state" in capsys.readouterr().out


def test_server_deployment_file_names_real_settings(monkeypatch):
    """deploy/compose.yaml: both servers and the API, every setting its header exports is one the config
    reads, and the API service's settings point at the two servers."""
    import re
    from pathlib import Path

    import yaml

    from scix_core.config import load_config

    path = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"
    text = path.read_text()
    services = yaml.safe_load(text)["services"]
    assert set(services) == {"qdrant", "postgres", "api"}
    with monkeypatch.context() as mp:  # the API container's settings, read as the config reads them
        for name, value in services["api"]["environment"].items():
            mp.setenv(name, str(value))
        inside = load_config()
    assert inside.vectors.backend == "qdrant" and inside.vectors.url == "http://qdrant:6333"
    assert inside.search.lexical_backend == "postgres" and "@postgres:5432/" in inside.postgres.state_dsn
    exported = dict(re.findall(r"(SCIX_[A-Z_]+)=(\S+)", text))
    assert {"SCIX_QDRANT_URL", "SCIX_VECTOR_BACKEND", "SCIX_PG_DSN", "SCIX_LEXICAL_BACKEND"} <= set(exported)
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    cfg = load_config()
    assert cfg.vectors.backend == "qdrant" and cfg.vectors.url == "http://localhost:6333"
    assert cfg.postgres.dsn.startswith("postgresql://scix") and cfg.search.lexical_backend == "postgres"


HOSTILE_NAMES = ["../escape", "/tmp/abs", "a/b", "a\x00b", "x" * 300, "", ".hidden", "name\n", "..", "~root"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_names_from_users_are_never_paths(home, capsys, tmp_path, name):
    """Every command that turns a user's name into a workspace path refuses a name that is not one plain
    name."""
    commands = [
        ["ingest", "--path", str(FIXTURES / "smart"), "--index", name, "--no-embed", "--quiet"],
        ["search", "heat", "--index", name],
        *([["info", "--index", name]] if name else []),  # info --index "" lists the indexes, like no --index
        ["train-reranker", "--index", name, "--name", "r"],
        ["train-encoder", "--index", name, "--name", "e"],
        ["recommend", "--index", name, "--user", "u"],
    ]
    for argv in commands:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "error [" in err and "Traceback" not in err, (argv, err)
    assert not (home / "escape").exists() and not (home.parent / "escape").exists()
    assert not any(p.name in ("escape", "abs") for p in home.rglob("*"))


def test_model_and_report_names_are_checked_before_any_work(home, capsys):
    assert main(["ingest", "--path", str(FIXTURES / "smart"), "--index", "ok", "--no-embed", "--quiet"]) == 0
    capsys.readouterr()
    for argv in (
        ["train-reranker", "--index", "ok", "--name", "../../evil"],
        ["train-encoder", "--index", "ok", "--name", "/etc/evil"],
        ["report", "../../etc/passwd"],
        ["users", "create", "--index", "ok", "--user", "a\x00b"],
        ["users", "create", "--index", "ok", "--user", "u" * 500],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "error [" in err and "Traceback" not in err, (argv, err)
    assert not (home.parent.parent / "evil").exists()


@pytest.mark.parametrize(
    "member",
    [
        "../evil.txt",
        "tiny/../../evil.txt",
        "/tmp/evil.txt",
        "..\\evil.txt",
        "C:/evil.txt",
        "tiny/sub/../../../evil.txt",
    ],
)
def test_fetch_refuses_archive_members_outside_the_target(home, tmp_path, member, capsys):
    """Zip-slip: an archive (checksum correct) with one member escaping the target is refused whole."""
    served = tmp_path / "served"
    served.mkdir()
    archive = served / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("tiny/corpus.jsonl", '{"_id": "1", "title": "t", "text": "x"}\n')
        zf.writestr(member, "pwned")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/evil.zip"
        sha = hashlib.sha256(archive.read_bytes()).hexdigest()
        dest = tmp_path / "data" / "deep"
        assert main(["data", "fetch", "tiny", "--url", url, "--sha256", sha, "--dest", str(dest)]) == 2
    finally:
        server.shutdown()
    assert "outside the target" in capsys.readouterr().err
    assert (
        not list(tmp_path.rglob("evil.txt"))
        and not (dest / "tiny").exists()
        and not list(dest.glob(".fetch-*"))
    )


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x.zip", "/etc/passwd"])
def test_fetch_takes_only_http_urls(home, tmp_path, url, capsys):
    assert (
        main(["data", "fetch", "tiny", "--url", url, "--sha256", "0" * 64, "--dest", str(tmp_path / "d")])
        == 2
    )
    assert "only http(s)" in capsys.readouterr().err and not (tmp_path / "d" / "tiny").exists()


def test_each_command_imports_only_the_module_that_holds_it():
    """``scix interact`` starts without the evaluation and search stacks: :data:`OWNERS` names each command's
    module, and it must name every registered command, with the module that registers it."""
    import subprocess
    import sys

    from scix_core.cli import main as cli_main
    from scix_core.cli.registry import COMMANDS

    cli_main.load([])  # no command named: every module
    assert {name: run.__module__ for name, (_, _, run) in COMMANDS.items()} == {
        name: f"scix_core.cli.{module}" for name, module in cli_main.OWNERS.items()
    }
    assert cli_main._named(["--config", "interact", "recommend", "--index", "x"]) == "recommend"
    assert cli_main._named(["--help"]) is None and cli_main._named(["nonsense"]) is None
    probe = (
        "import sys; from scix_core.cli.main import load; load(['interact', '--index', 'x']); "
        "wanted = ('scix_core.cli.', 'scix_core.evaluate', 'scipy'); "
        "print(sorted(m for m in sys.modules if m.startswith(wanted)))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "scix_core.cli.recommend" in loaded and "scix_core.cli.evaluate" not in loaded
    assert "scix_core.evaluate" not in loaded and "scipy" not in loaded
