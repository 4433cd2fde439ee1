"""Evidence studies on the fixture index: shape, sanity and the written report."""

from __future__ import annotations

import json

import pytest

from scix_core.cli.main import main
from scix_core.evaluate import evidence

pytestmark = [pytest.mark.model]


def test_quantization_exact_is_perfect_and_rescoring_helps(built):
    result = evidence.quantization(built.index, built.config, k=5)
    rows = result["rows"]
    assert rows["float32 (exact)"]["recall@10_vs_float32"] == 1.0
    assert rows["float16"]["recall@10_vs_float32"] >= 0.99
    assert rows["binary + rescore x4"]["recall@10_vs_float32"] >= rows["binary"]["recall@10_vs_float32"]
    assert (
        rows["binary + rescore x4"]["recall@10_vs_float32"] == 1.0
    )  # 20 of 12 papers: the shortlist holds all
    assert result["bytes_per_vector"] == {"float32": 1536, "float16": 768, "int8": 384, "binary": 48}


def test_pool_overlap_is_one_when_the_cap_exceeds_the_matches(built):
    result = evidence.pool(built.index, built.config, n_queries=12, caps=(1, 1000))
    assert result["rows"]["OR cap 1,000"]["overlap@20"] == 1.0
    assert result["rows"]["OR cap 1"]["overlap@20"] < 1.0


def test_backends_study_measures_each_backend_against_torch(built):
    result = evidence.backends(built.index, built.config, sample=12, query_sample=6, permutations=200)
    rows = result["rows"]
    assert (
        list(rows) == ["torch", "onnx", "onnx-int8", "openvino", "openvino-int8"]
        and result["baseline"] == "torch"
    )
    assert rows["torch"]["recall@10_vs_float32"] == 1.0 and rows["torch"]["speedup_docs"] == 1.0
    assert rows["onnx"]["recall@10_vs_float32"] == 1.0  # float32 on another runtime: the same neighbours
    assert abs(rows["onnx"]["ndcg@10"] - rows["torch"]["ndcg@10"]) < 1e-9
    assert all(r["docs_per_s"] > 0 and r["query_p50_ms"] > 0 for r in rows.values())
    assert result["chosen"] in rows and "p_adj" in rows["onnx-int8"] and "p_adj" in rows["openvino-int8"]
    assert result["chosen"] == max(
        (b for b in rows if not rows[b].get("significant")), key=lambda b: rows[b]["docs_per_s"]
    )
    assert result["cpu"] in (
        "int8 dot-product (VNNI/AMX)",
        "no int8 dot-product instructions",
    )  # the speeds depend on it


def test_cli_writes_json_and_markdown(on_fixture_home, tiny_reranker, tmp_path, capsys):
    for study, extra in (
        ("rrf-k", []),
        ("reranker", ["--reranker", tiny_reranker]),
        ("pool", ["--queries", "5"]),
    ):
        assert main(["evidence", study, "--index", "fixture", "--out", str(tmp_path), *extra]) == 0
        (written,) = tmp_path.glob(
            f"evidence-{study}-fixture*.json"
        )  # rrf-k adds the lexical mode to the name
        doc = json.loads(written.read_text())
        assert doc["study"] == study and doc["rows"]
        assert written.with_suffix(".md").read_text().startswith(f"# Evidence: {study}")
    assert "gate" in json.loads((tmp_path / "evidence-reranker-fixture.json").read_text())
    assert main(["evidence", "reranker", "--index", "fixture", "--out", str(tmp_path)]) == 2
    assert "needs --reranker" in capsys.readouterr().err


@pytest.fixture
def on_fixture_home(built, monkeypatch):
    monkeypatch.setenv("SCIX_HOME", str(built.config.home))
    return built
