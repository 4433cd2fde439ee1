"""`scix eval` end to end on the fixture index (it lives beside the search fixtures), and on real SciFact."""

from __future__ import annotations

import json

import pytest

from scix_core.cli.main import main
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.model]


@pytest.fixture
def on_fixture(built, monkeypatch):
    monkeypatch.setenv("SCIX_HOME", str(built.config.home))
    return built


def test_sweep_json_has_the_contract_keys(on_fixture, tiny_reranker, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = [
        "eval",
        "--index",
        "fixture",
        "--sweep",
        "--baseline",
        "hybrid",
        "--reranker",
        tiny_reranker,
        "--permutations",
        "1000",
        "--json",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert {"n_queries", "runs", "comparisons", "provenance", "dropped_lanes", "buckets"} <= set(doc)
    assert (
        doc["n_queries"] == 2 and doc["setup"]["excluded_training_queries"] == 4
    )  # the reranker saw the other 4
    assert set(doc["runs"]) == {
        "lexical",
        "body",
        "dense",
        "hybrid",
        "rrf_k10",
        "rrf_k30",
        "rrf_k60",
        "rrf_k100",
        "convex_minmax",
        "convex_zscore",
        "hybrid+boosts",
        "hybrid+rerank",
        "hybrid+rewrite",
        "hybrid-body",
    }
    for values in doc["runs"].values():
        assert set(values) == {"ndcg@10", "mrr@10", "recall@50", "recall@100"}
        assert all(0.0 <= v <= 1.0 for v in values.values())
    assert doc["runs"]["rrf_k60"] == doc["runs"]["hybrid"]  # the default pipeline is RRF k=60
    comparison = doc["comparisons"][0]
    assert set(comparison) >= {"baseline", "candidate", "metric", "delta", "p", "p_adj", "significant"}
    assert len(doc["comparisons"]) == 13 * 4 and doc["gates"]["dense"]["decision"] in ("ship", "no-ship")
    assert doc["provenance"]["hybrid"]["relevant_in_top10"] >= 2
    assert {"len<=3", "len4-8"} & set(doc["buckets"]["hybrid"])
    printed = capsys.readouterr().out
    assert "paired comparisons" in printed and "gate hybrid -> hybrid+rerank" in printed
    assert main(["eval", "--index", "fixture", "--quiet", "--permutations", "500"]) == 0  # no reranker: all 6
    assert "6 queries" in capsys.readouterr().out
    assert main(["eval", "--index", "fixture", "--quiet", "--permutations", "500", "--sample", "3"]) == 0
    assert "3 queries" in capsys.readouterr().out


def test_gold_from_files_and_from_a_folder(on_fixture, tmp_path, capsys):
    queries = tmp_path / "queries.jsonl"
    qrels = tmp_path / "qrels.tsv"
    queries.write_text('{"_id": "x1", "text": "dark matter halos"}\n{"_id": "x2", "text": "prime gaps"}\n')
    qrels.write_text("query-id\tcorpus-id\tscore\r\nx1\tp03\t1\r\nx2\tp06\t1\r\n")
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "eval",
                "--index",
                "fixture",
                "--queries",
                str(queries),
                "--qrels",
                str(qrels),
                "--json",
                str(out),
                "--quiet",
                "--permutations",
                "500",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert doc["n_queries"] == 2 and doc["runs"]["hybrid"]["recall@100"] == 1.0
    assert (
        main(
            [
                "eval",
                "--index",
                "fixture",
                "--gold",
                str(FIXTURES / "beir"),
                "--format",
                "beir",
                "--quiet",
                "--permutations",
                "500",
            ]
        )
        == 0
    )
    assert main(["eval", "--index", "fixture", "--queries", str(queries), "--quiet"]) == 2
    assert "--queries and --qrels go together" in capsys.readouterr().err
    assert main(["eval", "--index", "fixture", "--runs", "hybrid,bogus"]) == 2


@pytest.mark.realdata
def test_hybrid_beats_each_lane_on_scifact_train(scifact):
    from scix_core.evaluate import evaluate

    cfg, index = scifact
    report = evaluate(
        index,
        runs=("lexical", "dense", "hybrid"),
        baseline="hybrid",
        config=cfg.replace(**{"search.lexical_mode": "or"}),
        permutations=2000,
    )
    assert report.n_queries == 809 and report.dropped_lanes == {}
    ndcg = {r: v["ndcg@10"] for r, v in report.runs.items()}
    assert ndcg["hybrid"] > ndcg["lexical"] and ndcg["hybrid"] > ndcg["dense"], ndcg
    # on the suite's slice (tests/conftest.py): lexical 0.799, dense 0.800, hybrid 0.834
    assert 0.75 <= ndcg["dense"] <= 0.84 and ndcg["hybrid"] >= 0.80, (ndcg, report.setup, cfg.search)


def test_runs_dir_holds_the_runs_that_were_scored(on_fixture, tmp_path):
    """The TREC run files score, under trec_eval itself (pytrec_eval, not our wrapper), exactly what the
    report says."""
    import pytrec_eval

    from scix_core.evaluate.gold import for_index

    out, runs = tmp_path / "eval.json", tmp_path / "runs"
    assert (
        main(
            [
                "eval",
                "--index",
                "fixture",
                "--runs",
                "lexical,hybrid,convex_minmax",
                "--runs-dir",
                str(runs),
                "--json",
                str(out),
                "--quiet",
                "--permutations",
                "200",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert sorted(p.name for p in runs.iterdir()) == ["convex_minmax.trec", "hybrid.trec", "lexical.trec"]
    gold = for_index("fixture", on_fixture.config)
    qrels = {q: {p: int(g) for p, g in gold.qrels[q].items() if g > 0} for q in gold.judged}
    for name in ("lexical", "hybrid", "convex_minmax"):
        lines = (runs / f"{name}.trec").read_text().splitlines()
        assert lines and all(len(line.split()) == 6 and line.split()[5] == name for line in lines)
        run = pytrec_eval.parse_run(lines)
        per = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
        ndcg = sum(per[q]["ndcg_cut_10"] if q in per else 0.0 for q in qrels) / len(qrels)
        assert ndcg == pytest.approx(doc["runs"][name]["ndcg@10"], abs=1e-6)


@pytest.fixture(scope="module")
def bm25s_run(scifact, tmp_path_factory):
    """A TREC run of another system on the real SciFact index (:mod:`scix_core.bench.peer_run`: bm25s, the
    train split's 809 judged queries, 100 deep), one line naming a paper the index does not hold; the gold."""
    from scix_core.bench.peer_run import bm25s_run
    from scix_core.evaluate.gold import for_index

    cfg, index = scifact
    path = bm25s_run(index, "train", tmp_path_factory.mktemp("external") / "bm25s.trec", config=cfg)
    gold = for_index(index, cfg, "train")
    with open(path, "a") as fh:
        fh.write(f"{gold.judged[0]} Q0 not-a-paper-of-the-index 101 -1.0 bm25s\n")  # counted, not relevant
    return path, gold


@pytest.mark.realdata
def test_any_metric_and_an_external_run_equal_trec_eval_on_scifact_train(
    scifact, bm25s_run, tmp_path, monkeypatch, capsys
):
    """`scix eval --metrics map,p@10,r-prec,bpref,ndcg@10 --run-file bm25s=PATH --table md`: the project's
    hybrid and bm25s's run in one table with paired tests; each mean equals trec_eval's (ir-measures over
    pytrec_eval, on the TREC files and the qrels alone) to 4 decimals."""
    import ir_measures
    from ir_measures import AP, Bpref, P, Rprec, nDCG

    cfg, index = scifact
    monkeypatch.setenv("SCIX_HOME", str(cfg.home))
    path, gold = bm25s_run
    out, runs = tmp_path / "eval.json", tmp_path / "runs"
    argv = ["eval", "--index", index, "--split", "train", "--runs", "hybrid", "--baseline", "hybrid"]
    argv += ["--metrics", "map,p@10,r-prec,bpref,ndcg@10", "--run-file", f"bm25s={path}", "--table", "md"]
    argv += ["--runs-dir", str(runs), "--json", str(out), "--permutations", "1000", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert (
        doc["setup"]["metrics"] == ["AP", "P@10", "Rprec", "Bpref", "ndcg@10"]
        and doc["setup"]["primary"] == "AP"
    )
    ext = doc["setup"]["external_runs"]["bm25s"]
    assert ext["unknown_paper_ids"] == 1 and ext["queries"] == 809 and ext["gold_queries_without_a_line"] == 0
    assert {(c["candidate"], c["metric"]) for c in doc["comparisons"]} == {
        ("bm25s", m) for m in doc["setup"]["metrics"]
    }
    assert "| run | AP | P@10 | Rprec | Bpref | ndcg@10 |" in printed and "| bm25s |" in printed.replace(
        "†", ""
    ).replace("‡", "")
    qrels = [ir_measures.Qrel(q, d, int(g)) for q in gold.judged for d, g in gold.qrels[q].items()]
    measures = {"AP": AP, "P@10": P @ 10, "Rprec": Rprec, "Bpref": Bpref, "ndcg@10": nDCG @ 10}
    for name, file in (("hybrid", runs / "hybrid.trec"), ("bm25s", path)):
        truth = ir_measures.calc_aggregate(
            list(measures.values()), qrels, ir_measures.read_trec_run(str(file))
        )
        for metric, measure in measures.items():
            assert doc["runs"][name][metric] == pytest.approx(truth[measure], abs=5e-5), (name, metric)
    assert doc["runs"]["hybrid"]["ndcg@10"] > doc["runs"]["bm25s"]["ndcg@10"]


def test_a_malformed_run_file_is_an_error_naming_file_and_line(on_fixture, tmp_path, capsys):
    bad = tmp_path / "other.trec"
    bad.write_text("1 Q0 d1 1 2.5 other\n1 Q0 d2 2 other\n")
    assert main(["eval", "--index", "fixture", "--run-file", f"other={bad}", "--quiet"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert main(["eval", "--index", "fixture", "--run-file", "hybrid=x.trec", "--quiet"]) == 2
    assert "taken" in capsys.readouterr().err
    assert main(["eval", "--index", "fixture", "--metrics", "ndcg@10,nonsense@3", "--quiet"]) == 2
    assert "unknown metric 'nonsense@3'" in capsys.readouterr().err
