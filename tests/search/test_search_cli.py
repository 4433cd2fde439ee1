"""`scix search` and `scix ingest --backend postgres` end to end."""

from __future__ import annotations

import json

import pytest

from scix_core.cli.main import main

pytestmark = [pytest.mark.model]


@pytest.fixture
def on_fixture(built, monkeypatch):
    monkeypatch.setenv("SCIX_HOME", str(built.config.home))
    return built


def test_json_is_one_object_with_the_contract_keys(on_fixture, capsys):
    assert main(["search", "graph neural networks", "--index", "fixture", "--json", "--limit", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"hits", "total", "timing_ms", "metadata"} and len(doc["hits"]) == 3
    assert {"lanes_run", "dropped_lanes"} <= set(doc["metadata"])
    assert all({"paper_id", "title", "score", "lanes"} <= set(h) for h in doc["hits"])


def test_filters_from_the_command_line(on_fixture, capsys):
    argv = [
        "search",
        "galaxies",
        "--index",
        "fixture",
        "--json",
        "--year",
        "2019-2021",
        "--category",
        "astro-ph.GA",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metadata"]["filters"] == {"year_min": 2019, "year_max": 2021, "categories": ["astro-ph.GA"]}
    assert [h["paper_id"] for h in doc["hits"]] == ["p03"]


def test_explain_shows_lane_ranks_and_timings(on_fixture, capsys):
    assert main(["search", "dark matter", "--index", "fixture", "--explain", "--limit", "4"]) == 0
    out = capsys.readouterr().out
    for word in ("lexical", "body", "dense", "fused", "stage timings", "encode", "total", "concurrent"):
        assert word in out


def test_fusion_from_the_command_line(on_fixture, capsys):
    argv = ["search", "dark matter", "--index", "fixture", "--json", "--fusion", "convex", "--alpha", "0.7"]
    assert main(argv) == 0
    meta = json.loads(capsys.readouterr().out)["metadata"]
    assert meta["fusion"] == "convex" and meta["convex_alpha"] == 0.7
    assert main(["search", "dark matter", "--index", "fixture", "--explain", "--fusion", "convex"]) == 0
    assert "convex α=0.5" in capsys.readouterr().out
    assert main(["search", "dark matter", "--index", "fixture", "--fusion", "convex", "--alpha", "2"]) == 2
    assert "convex_alpha must be in [0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, code",
    [
        (["search", "  ", "--index", "fixture"], "invalid_query"),
        (["search", "x", "--index", "fixture", "--year", "2021-2019"], "invalid_filter"),
        (["search", "x", "--index", "nope"], "index_not_found"),
    ],
)
def test_typed_errors_exit_2(on_fixture, capsys, argv, code):
    assert main(argv) == 2
    assert f"[{code}]" in capsys.readouterr().err


@pytest.mark.postgres
def test_ingest_with_postgres_backend_then_search(home, postgresql, monkeypatch, capsys, tmp_path):
    from tests.conftest import FIXTURES

    monkeypatch.setenv("SCIX_PG_DSN", postgresql.info.dsn)
    argv = [
        "ingest",
        "--path",
        str(FIXTURES / "beir"),
        "--index",
        "beirfix",
        "--no-embed",
        "--backend",
        "postgres",
        "--quiet",
    ]
    assert main(argv) == 0
    assert "postgres: synced" in capsys.readouterr().out
    assert main(argv) == 0
    assert "postgres: unchanged" in capsys.readouterr().out
    assert (
        main(["search", "halo", "--index", "beirfix", "--mode", "keyword", "--backend", "postgres", "--json"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["metadata"]["lexical_backend"] == "postgres" and doc["metadata"]["dropped_lanes"] == {}
    assert {h["paper_id"] for h in doc["hits"]} == {"d1", "d3"}


def test_explain_shows_stage_moves(on_fixture, tiny_reranker, capsys):
    argv = [
        "search",
        "CNN for galaxy morphology",
        "--index",
        "fixture",
        "--explain",
        "--limit",
        "4",
        "--rerank",
        tiny_reranker,
        "--rewrite",
        "local",
        "--lanes",
        "alias",
        "--boosts",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for word in (
        "fused#",
        "rerank#",
        "boosts#",
        "rewrite: rewritten",
        "convolutional neural network",
        "rerank ",
    ):
        assert word in out, word


def test_stage_switches_from_the_command_line(on_fixture, capsys):
    assert (
        main(["search", "Graph theory of social networks", "--index", "fixture", "--json", "--no-boosts"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["metadata"]["stages"]["boosts"] == "off" and all(h["boosts"] == {} for h in doc["hits"])
    assert main(["search", "x", "--index", "fixture", "--lanes", "nope"]) == 2
    assert "[unknown_name]" in capsys.readouterr().err


def test_train_reranker_command(on_fixture, capsys):
    argv = ["train-reranker", "--index", "fixture", "--name", "cli-tiny", "--max-queries", "2", "--quiet"]
    assert main(argv) == 0
    assert "trained cli-tiny on 2 queries" in capsys.readouterr().out
    assert main(["search", "dark matter", "--index", "fixture", "--json", "--rerank", "cli-tiny"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["reranked"] is True


def test_train_reranker_curve_and_bad_recipes(on_fixture, capsys, tmp_path):
    out = tmp_path / "curve.json"
    argv = [
        "train-reranker",
        "--index",
        "fixture",
        "--curve",
        "2",
        "--folds",
        "3",
        "--window",
        "5",
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--quiet",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())  # the table title wraps
    assert "learning curve on fixture: 2 held-out queries (trained on 4)" in text and "score spread" in text
    curve = json.loads(out.read_text())
    assert curve["points"][0]["step"] == 0 and curve["recipe"]["loss"] == "bce"
    assert main(["train-reranker", "--index", "fixture"]) == 2  # neither --name nor --curve
    assert "--curve" in capsys.readouterr().err
    assert main(["train-reranker", "--index", "fixture", "--name", "x", "--loss", "pointwise"]) == 2
    assert "[unknown_name]" in capsys.readouterr().err
    assert main(["train-reranker", "--index", "fixture", "--name", "x", "--negatives", "0"]) == 2
