"""Runs from configuration (`scix eval --run NAME:KEY=VALUE`, `--config-run NAME=FILE`): parsing, errors, and
a configured run that must reproduce a named one exactly."""

from __future__ import annotations

import json

import pytest

from scix_core.config import Config
from scix_core.errors import ConfigError
from scix_core.evaluate import ALL_RUNS, config_runs
from scix_core.evaluate.config_runs import parse_run


def test_a_run_spec_becomes_checked_overrides(tmp_path):
    (run,) = config_runs(["tw2:search.title_weight=2,search.rrf_k=10"], config=Config(), named=ALL_RUNS)
    assert run.name == "tw2" and dict(run.overrides) == {"search.title_weight": "2", "search.rrf_k": "10"}
    applied = run.apply(Config())
    assert applied.search.title_weight == 2.0 and applied.search.rrf_k == 10
    toml = tmp_path / "strict.toml"
    toml.write_text('[search]\nlexical_mode = "or"\nrrf_k = 30\n')
    (from_file,) = config_runs(files=[f"orish={toml}"], config=Config(), named=ALL_RUNS)
    assert (
        from_file.apply(Config()).search.rrf_k == 30 and from_file.apply(Config()).search.lexical_mode == "or"
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("tw2", "expected NAME:KEY=VALUE"),
        ("tw2:", "expected NAME:KEY=VALUE"),
        ("tw2:title_weight=2", "not a dotted KEY=VALUE"),
        ("tw2:search.title_weight", "not a dotted KEY=VALUE"),
        ("hybrid:search.rrf_k=10", "already a run"),
        ("../x:search.rrf_k=10", "letters, digits"),
        ("tw2:search.no_such_knob=1", "unknown config field"),
        ("tw2:search.rrf_k=ten", "is not a int"),
        ("tw2:search.boosts=maybe", "is not a boolean"),
    ],
)
def test_bad_run_specs_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        config_runs([spec], config=Config(), named=ALL_RUNS)


def test_bad_config_run_files_and_duplicate_names(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[search\n")
    with pytest.raises(ConfigError, match="not readable TOML"):
        config_runs(files=[f"x={bad}"], config=Config())
    with pytest.raises(ConfigError, match="no file"):
        config_runs(files=[f"x={tmp_path / 'missing.toml'}"], config=Config())
    with pytest.raises(ConfigError, match="already a run"):
        config_runs(["a:search.rrf_k=10", "a:search.rrf_k=30"], config=Config())
    assert parse_run("a.b+c-1:search.rrf_k=1").name == "a.b+c-1"


@pytest.mark.model
def test_a_configured_run_is_compared_gated_and_reproduces_the_named_run(
    built, monkeypatch, tmp_path, capsys
):
    from scix_core.cli.main import main

    monkeypatch.setenv("SCIX_HOME", str(built.config.home))
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "eval",
                "--index",
                "fixture",
                "--runs",
                "hybrid,rrf_k10",
                "--run",
                "k10:search.rrf_k=10",
                "--run",
                "orish:search.lexical_mode=or",
                "--baseline",
                "hybrid",
                "--permutations",
                "500",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert set(doc["runs"]) == {"hybrid", "rrf_k10", "k10", "orish"}
    assert doc["runs"]["k10"] == doc["runs"]["rrf_k10"]
    assert {c["candidate"] for c in doc["comparisons"]} == {"rrf_k10", "k10", "orish"}
    assert set(doc["gates"]) == {"rrf_k10", "k10", "orish"}
    assert doc["setup"]["configured_runs"] == {
        "k10": "k10:search.rrf_k=10",
        "orish": "orish:search.lexical_mode=or",
    }
    assert "k10" in capsys.readouterr().out
    assert main(["eval", "--index", "fixture", "--run", "hybrid:search.rrf_k=10", "--quiet"]) == 2
    assert "already a run" in capsys.readouterr().err
    from scix_core.evaluate import evaluate

    report = evaluate(
        "fixture",
        runs=("rrf_k10",),
        config=built.config,
        permutations=200,
        configured=config_runs(["k10:search.rrf_k=10"], config=built.config),
        baseline="k10",
    )
    # the pipeline with rrf_k = 10 is the base pass's lanes re-fused at k = 10: the same values, query by
    # query
    assert report.per_query["k10"] == report.per_query["rrf_k10"] and report.setup["baseline"] == "k10"
