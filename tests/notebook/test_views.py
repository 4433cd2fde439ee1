"""The notebook views as plain Python, on the hand-checkable fixture corpus (real FTS5, qdrant-edge,
MiniLM)."""

from __future__ import annotations

import re

import pytest

from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate.attribution import NO_LANE, attribute, attribute_runs
from scix_core.evaluate.gold import Gold
from scix_core.notebook import EvidenceView, LaneAttributionView, QueryInspector, SweepView, is_static
from scix_core.notebook.inspector import contributions
from scix_core.notebook.sweep import evidence_results
from scix_core.types import Ranking

pytestmark = pytest.mark.model


def _rows(html: str, css: str) -> list[str]:
    body = re.search(rf'<table class="{css}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, f"no table {css}"
    return re.findall(r"<tr[^>]*>.*?</tr>", body.group(1), re.S)


@pytest.fixture
def inspector(built):
    return QueryInspector(built.index, built.config, gold="train", query_id="q2", lexical_mode="or")


def test_inspector_marks_relevant_and_breaks_down_the_fused_score(inspector):
    rendered = inspector.render()
    result = inspector.result
    assert result.query == "graph neural networks for molecules" and result.ids[0] == "p01"
    rows = _rows(rendered.html, "scix-hits")
    assert len(rows) == len(result.hits)
    assert rows[0].startswith('<tr class="relevant">') and "p01" in rows[0]
    assert all(not r.startswith('<tr class="relevant">') for r in rows[1:])  # q2 has one relevant paper
    shares = contributions(result)
    assert set(shares) == set(result.metadata["lanes_run"]) >= {"lexical", "dense"}
    for i, hit in enumerate(result.hits):  # the breakdown adds up to the fused score
        assert sum(s[i] for s in shares.values()) == pytest.approx(hit.fused_score, rel=1e-9)
    assert "gold query q2: 1 relevant judged, 1 in these" in rendered.html
    assert "none: every relevant paper is in the hits" in rendered.html
    assert len(rendered.figures) == 2  # fused breakdown + stage timing


def test_inspector_breaks_down_a_convex_fused_score(built):
    qi = QueryInspector(
        built.index,
        built.config.replace(**{"search.fusion": "convex"}),
        gold="train",
        query_id="q2",
        lexical_mode="or",
    )
    rendered = qi.render()
    shares = contributions(qi.result)
    for i, hit in enumerate(qi.result.hits):
        assert sum(s[i] for s in shares.values()) == pytest.approx(hit.fused_score, rel=1e-9)
    assert max(shares["dense"]) <= 0.5 + 1e-12 and "convex α=0.5" in rendered.html


def test_inspector_lists_missed_relevant_with_lane_ranks(built):
    qi = QueryInspector(built.index, built.config, gold="train", query_id="q1", lexical_mode="or", limit=1)
    rendered = qi.render()
    (missed_id,) = {"p03", "p04"} - set(qi.result.ids)
    rows = _rows(rendered.html, "scix-missed")
    assert len(rows) == 1 and missed_id in rows[0]
    fused_rank = qi.result.rankings["fused"].ranks()[missed_id]
    dense_rank = qi.result.rankings["dense"].ranks()[missed_id]
    cells = re.findall(r"<td>(.*?)</td>", rows[0])
    assert cells[3] == str(fused_rank) and str(dense_rank) in cells[4:]


def test_inspector_shows_each_stage_rank_and_the_boosts(built, tiny_reranker):
    qi = QueryInspector(
        built.index,
        built.config,
        gold="train",
        query_id="q4",
        lexical_mode="or",
        boosts=True,
        rerank=tiny_reranker,
    )
    rendered = qi.render()
    head = re.search(r'<table class="scix-hits"><thead><tr>(.*?)</tr>', rendered.html).group(1)
    assert all(f"<th>{c}</th>" in head for c in ("fused#", "rerank#", "boosts#", "boosts"))
    assert qi.result.metadata["reranked"] and "citation" in rendered.html  # every hit lists its boosts
    first = re.findall(r"<td>(.*?)</td>", _rows(rendered.html, "scix-hits")[0])
    columns = re.findall(r"<th>(.*?)</th>", head)
    assert first[columns.index("boosts#")] == "1"  # the hits are in the last stage's order


def test_inspector_banner_when_a_lane_is_dropped(built):
    cfg = built.config.replace(
        **{"postgres.dsn": "postgresql://postgres@127.0.0.1:9/nowhere", "postgres.connect_timeout_s": 1}
    )
    rendered = QueryInspector(built.index, cfg, gold=False, query="dark matter", backend="postgres").render()
    assert re.search(r'<div class="banner">DEGRADED — lane &#x27;lexical&#x27; was dropped: ', rendered.html)
    assert "scix-hits" in rendered.html  # the dense lane still answered


def test_inspector_reports_bad_input_as_a_banner(built):
    qi = QueryInspector(built.index, built.config, gold=False, query="   ")
    rendered = qi.render()
    assert "error — invalid_query" in rendered.html and qi.result is None
    with pytest.raises(ConfigError, match="query id 'nope'"):
        QueryInspector(built.index, built.config, gold="train", query_id="nope")
    with pytest.raises(ConfigError, match="no qrels split 'test'"):
        QueryInspector(built.index, built.config, gold="test")


def test_inspector_widget_controls_drive_the_search(inspector, monkeypatch):
    monkeypatch.delenv("SCIX_NOTEBOOK_STATIC", raising=False)
    assert not is_static()
    assert inspector.widget is not None  # built on first use
    c = inspector.controls
    c["query"].value = "galaxy images deep learning"
    assert "Results for &quot;galaxy images deep learning&quot;" in inspector.last.html
    c["rrf_k"].value = 10
    assert inspector.result.metadata["rrf_k"] == 10
    assert contributions(inspector.result)["dense"][0] in (0.0, *(1 / (10 + r) for r in range(1, 61)))
    c["lane_sparse"].value = True
    assert "sparse" in inspector.result.metadata["lanes_run"]
    c["year"].value = "2019-2021"
    assert inspector.result.metadata["filters"] == {"year_min": 2019, "year_max": 2021}
    c["mode"].value = "keyword"
    assert "dense" not in inspector.result.metadata["lanes_run"]
    c["gold"].value = "q3"  # picking a gold query fills the box and marks its relevant papers
    assert c["query"].value == "primes and the zeta function"
    assert "gold query q3" in inspector.last.html
    c["year"].value = "not a year"
    assert "error — invalid_filter" in inspector.last.html


def test_static_display_builds_no_widget(built, monkeypatch):
    monkeypatch.setenv("SCIX_NOTEBOOK_STATIC", "1")
    qi = QueryInspector(built.index, built.config, gold=False, query="dark matter")
    qi._ipython_display_()
    assert qi._widget is None and qi.last is not None
    monkeypatch.setenv("SCIX_NOTEBOOK_STATIC", "0")
    qi._ipython_display_()
    assert qi._widget is not None


def test_attribution_by_hand():
    gold = Gold(
        "g", {"a": "one two", "b": "x"}, {"a": {"d1": 1, "d3": 1}, "b": {"d9": 1}}, {"a": {"kind": "k1"}}
    )
    lex = {
        "a": Ranking.from_pairs(
            "lexical", [("d1", 3), ("d2", 2)] + [(f"f{i}", 1 - i / 100) for i in range(12)]
        ),
        "b": Ranking.from_pairs("lexical", [("d5", 1)]),
    }
    den = {
        "a": Ranking.from_pairs(
            "dense", [("d1", 0.9)] + [(f"f{i}", 0.8 - i / 100) for i in range(10)] + [("d3", 0.1)]
        ),
        "b": Ranking.from_pairs("dense", [("d5", 0.5)]),
    }
    run = {
        "a": Ranking.from_pairs("hybrid", [("d1", 3), ("d2", 2), ("d3", 1)]),
        "b": Ranking.from_pairs("hybrid", [("d5", 1)]),
    }
    lanes = {q: {"lexical": lex[q], "dense": den[q]} for q in ("a", "b")}
    att = attribute_runs(gold, run, lanes, {"a": 0.9, "b": 0.0})
    # top-10 hits: a: d1 (lexical#1, dense#1), d2 (lexical#2 only), d3 (dense#12: no lane's top 10); b: d5
    # (both)
    agg = att.aggregate()
    assert agg["lexical"]["share_top10"] == pytest.approx(3 / 4) and agg["dense"][
        "share_top10"
    ] == pytest.approx(2 / 4)
    assert agg["lexical"]["share_relevant_top10"] == pytest.approx(1 / 2)  # relevant top 10: d1, d3
    assert agg["lexical"]["unique_top10"] == pytest.approx(1 / 4) and agg["dense"]["unique_top10"] == 0
    assert att.overlap() == {
        frozenset({"lexical", "dense"}): 2,
        frozenset({"lexical"}): 1,
        frozenset({NO_LANE}): 1,
    }
    assert att.overlap(relevant_only=True) == {frozenset({"lexical", "dense"}): 1, frozenset({NO_LANE}): 1}
    assert att.buckets() == {"kind=k1": 1, "len<=3": 2}
    assert att.by_bucket()["kind=k1"]["ndcg@10"] == 0.9
    assert att.for_query("a").hits[2].ranks == {"dense": 12}
    frame = att.frame()
    assert list(frame["relevant_in_top10"]) == [2, 0] and list(frame["lexical top10"]) == [2 / 3, 1.0]
    with pytest.raises(UnknownNameError):
        att.for_query("zzz")


def test_attribution_view_on_the_fixture_index(built):
    view = LaneAttributionView(
        built.index, built.config, gold="train", lexical_mode="or", sample=0, query_id="q4"
    )
    att = view.attribution
    assert len(att.queries) == 6 and {"lexical", "dense"} <= set(att.lanes)
    assert sum(att.overlap().values()) == sum(len(q.hits) for q in att.queries)
    rendered = view.render()
    assert len(_rows(rendered.html, "scix-per-query")) == 6
    assert "q4: classifying galaxy images with deep learning" in rendered.html
    assert len(rendered.figures) == 3
    assert view.inspector("q4").state["query"] == "classifying galaxy images with deep learning"
    assert view.widget is not None  # built on first use
    view.bucket_control.value = "len4-8"
    assert "bucket len4-8" in view.last.html
    with pytest.raises(UnknownNameError):
        attribute(built.index, run="hybrid+boosts", config=built.config)


def test_sweep_view_from_a_live_evaluation_and_from_json(built, tmp_path):
    view = SweepView(
        index=built.index,
        gold="train",
        runs="lexical,dense,hybrid,rrf_k10",
        sample=0,
        lexical_mode="or",
        permutations=200,
        config=built.config,
    )
    (report,) = view.reports
    rows = _rows(view.render().html, "scix-sweep")
    assert [re.findall(r"<td>(.*?)</td>", r)[0] for r in rows] == ["lexical", "dense", "hybrid", "rrf_k10"]
    verdicts = [re.findall(r"<td>(.*?)</td>", r)[-2] for r in rows]
    assert verdicts[2] == "baseline" and {verdicts[i] for i in (0, 1, 3)} <= {"SHIP", "NO-SHIP"}
    import json

    path = tmp_path / "eval.json"
    path.write_text(json.dumps(report))
    both = SweepView([str(path), report], metric="recall@50")
    assert both.render().html.count('scix-sweep"') == 2 and "Δ recall@50" in both.render().html
    with pytest.raises(ConfigError, match="no sweep report"):
        SweepView(str(tmp_path / "missing.json"))
    with pytest.raises(UnknownNameError):
        SweepView(report, metric="map")


def test_sweep_view_shows_an_external_run_in_any_metric(built, tmp_path):
    """The eval notebook's view with ``metrics`` and ``run_files``: another system's TREC run (here an oracle
    that ranks each query's relevant papers first) beside the project's, in MAP, as the primary metric."""
    from scix_core.evaluate.gold import for_index

    gold = for_index(built.index, built.config, "train")
    oracle = tmp_path / "oracle.trec"
    oracle.write_text(
        "".join(
            f"{q} Q0 {paper} {rank} {10 - rank} oracle\n"
            for q in gold.judged
            for rank, paper in enumerate(sorted(gold.relevant(q)), 1)
        )
    )
    view = SweepView(
        index=built.index,
        gold="train",
        runs="hybrid",
        sample=0,
        permutations=200,
        config=built.config,
        metrics="map,p@5,ndcg@10",
        run_files={"oracle": str(oracle)},
    )
    (report,) = view.reports
    assert view.metrics == ("AP", "P@5", "ndcg@10") and view.metric == "AP"
    assert (
        report["runs"]["oracle"]["AP"] == 1.0 and report["setup"]["external_runs"]["oracle"]["queries"] == 6
    )
    assert {(c["candidate"], c["metric"]) for c in report["comparisons"]} == {
        ("oracle", m) for m in ("AP", "P@5", "ndcg@10")
    }
    html = view.render().html
    assert "Δ AP" in html and "oracle: an external TREC run" in html
    assert [re.findall(r"<td>(.*?)</td>", r)[0] for r in _rows(html, "scix-sweep")] == ["hybrid", "oracle"]


def test_evidence_view_loads_saved_results_and_runs_missing_ones(built, tmp_path):
    import json

    saved = {
        "study": "pool",
        "index": built.index,
        "papers": 12,
        "queries": 3,
        "rows": {"AND cap 1,000": {"overlap@20": 1.0, "queries_with_matches": 3}},
    }
    (tmp_path / f"evidence-pool-{built.index}.json").write_text(json.dumps(saved))
    results = evidence_results(built.index, "pool,quantization", tmp_path, config=built.config, max_queries=4)
    assert results[0] == saved and results[1]["study"] == "quantization" and results[1]["queries"] == 4
    rendered = EvidenceView(results).render()
    assert rendered.html.count('class="scix-evidence"') == 2 and len(rendered.figures) == 2
    assert evidence_results(built.index, "rrf-k", tmp_path, run_missing=False) == []
    assert "no evidence results" in EvidenceView([]).render().html
    with pytest.raises(UnknownNameError):
        evidence_results(built.index, "nonsense", tmp_path)
