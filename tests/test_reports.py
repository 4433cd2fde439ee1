"""``scix report``: papermill runs a real notebook in a real kernel against a real index."""

from __future__ import annotations

import json
import re

import pytest

from scix_core.errors import ConfigError, ReportError, UnknownNameError
from scix_core.reports import parameters, parse_value, run_report

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def report_home(tmp_path_factory, encoder):
    """The fixture corpus in a workspace this test process never opens (a kernel must own its vector
    shard)."""
    from scix_core.config import load_config
    from scix_core.ingest import ingest

    from .conftest import CORPUS

    home = tmp_path_factory.mktemp("report-home")
    ingest(CORPUS, "fixture", config=load_config().replace(home=home), progress=False, encoder=encoder)
    return home


@pytest.fixture
def kernel_env(report_home, monkeypatch, tmp_path):
    monkeypatch.setenv("SCIX_HOME", str(report_home))
    monkeypatch.setenv("SCIX_REPORTS_DIR", str(tmp_path / "reports"))
    return tmp_path / "reports"


def test_parse_value():
    assert parse_value("30") == 30 and parse_value("0.5") == 0.5 and parse_value("true") is True
    assert parse_value("False") is False and parse_value("None") is None and parse_value("null") is None
    assert parse_value('["a", "b"]') == ["a", "b"] and parse_value('{"year": "2019-"}') == {"year": "2019-"}
    assert parse_value("graph neural networks") == "graph neural networks"


def test_unknown_report_and_parameter_are_typed_errors():
    with pytest.raises(UnknownNameError, match="query-inspector"):
        run_report("nonsense")
    with pytest.raises(ConfigError, match="has no parameter 'qeury'.*query"):
        run_report("query-inspector", {"qeury": "x"})
    assert parameters("query-inspector")["rrf_k"] == 60 and parameters("fusion-sweep")["sweep_json"] is None


def test_report_runs_the_notebook_into_its_folder(kernel_env, capfd):
    done = run_report(
        "query-inspector",
        {
            "index": "fixture",
            "query": "graph neural networks for molecules",
            "lexical_mode": "or",
            "rrf_k": 30,
        },
    )
    assert done.folder == kernel_env / "query-inspector"
    assert {p.name for p in done.folder.iterdir()} == {
        "query-inspector.ipynb",
        "query-inspector.html",
        "run.json",
        "figures",
    }
    assert len(done.figures) == 2 and all(p.read_bytes()[:4] == b"\x89PNG" for p in done.figures)
    page = done.html.read_text()
    assert '<table class="scix-hits">' in page and "p01" in page and "RRF k=30" in page
    assert "DEGRADED" not in page  # the kernel opened the dense lane itself
    assert "application/vnd.jupyter.widget" not in done.notebook.read_text()  # static: no widget state
    meta = json.loads((done.folder / "run.json").read_text())
    assert meta["overrides"]["rrf_k"] == 30 and meta["parameters"]["mode"] == "hybrid"
    assert re.fullmatch(r"[0-9a-f]{40}", meta["code_version"]["git_commit"])
    assert meta["figures"] == [p.name for p in done.figures]
    # the kernel runs over IPC sockets: ipykernel has no unencrypted-TCP warning to print (nor anything else)
    assert "TCP" not in capfd.readouterr().err


def test_a_failed_report_keeps_the_previous_one(kernel_env):
    good = run_report("query-inspector", {"index": "fixture", "query": "dark matter"})
    before = good.html.read_text()
    with pytest.raises(ReportError, match="index_not_found|IndexNotFoundError"):
        run_report("query-inspector", {"index": "no-such-index"})
    assert good.html.read_text() == before
    assert (kernel_env / "query-inspector.failed.ipynb").exists()
    assert not [p for p in kernel_env.iterdir() if p.name.startswith(".")]  # no scratch folder left behind


def test_report_cli(kernel_env, capsys):
    from scix_core.cli.main import main

    assert main(["report", "list"]) == 0
    assert "lane-attribution" in capsys.readouterr().out
    assert (
        main(
            [
                "report",
                "lane-attribution",
                "-p",
                "index",
                "fixture",
                "-p",
                "sample",
                "0",
                "-p",
                "lexical_mode",
                "or",
            ]
        )
        == 0
    )
    assert "lane-attribution.html" in capsys.readouterr().out
    assert "scix-per-query" in (kernel_env / "lane-attribution" / "lane-attribution.html").read_text()
    assert main(["report", "nonsense"]) == 2
    # a set: each report gets only the parameters it has (`query` is the inspector's, and refused alone), and
    # --skip leaves some out; a misspelt name anywhere is refused before any report runs
    assert main(["report", "lane-attribution", "-p", "index", "fixture", "-p", "query", "x"]) != 0
    capsys.readouterr()
    argv = [
        "report",
        "query-inspector,lane-attribution",
        "--skip",
        "query-inspector",
        "-p",
        "index",
        "fixture",
    ]
    assert main([*argv, "-p", "sample", "0", "-p", "query", "dark matter"]) == 0
    out = capsys.readouterr().out
    assert "lane-attribution.html" in out and "query-inspector" not in out
    assert main(["report", "lane-attribution,nonsense"]) == 2 and main(["report", "all", "--skip", "x"]) == 2
    assert "running" not in capsys.readouterr().out


def test_the_report_commands_help_names_every_report(capsys):
    from scix_core.cli.main import main
    from scix_core.reports import NOTEBOOKS

    with pytest.raises(SystemExit):
        main(["report", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the help text
    assert all(name in shown for name in NOTEBOOKS)
