"""The pipeline's fusion step (``search.fusion``): RRF, or convex over min-max normalised lane scores."""

from __future__ import annotations

import pytest

from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate.score_fusion import fused
from scix_core.search import Searcher
from scix_core.search.fusion import ConvexFusion, RrfFusion, from_metadata, fusion_step
from scix_core.types import Ranking

LEXICAL = Ranking.from_pairs("lexical", [("a", 10.0), ("b", 5.0), ("c", 0.0)])
DENSE = Ranking.from_pairs("dense", [("b", 0.9), ("d", 0.5)])


def test_convex_by_hand():
    lanes = {"lexical": LEXICAL, "dense": DENSE}
    out = ConvexFusion(0.5).fuse(lanes)
    # min-max: lexical a 1, b .5, c 0; dense b 1, d 0; each weighs .5 (dense α, the others 1 - α)
    assert out.scores() == pytest.approx({"b": 0.75, "a": 0.5, "c": 0.0, "d": 0.0})
    assert out.ids[:2] == ("b", "a")
    assert ConvexFusion(0.9).fuse(lanes).scores() == pytest.approx({"b": 0.95, "a": 0.1, "c": 0.0, "d": 0.0})
    terms = ConvexFusion(0.5).terms(lanes)
    for paper, score in out.scores().items():  # the attribution adds up to the fused score
        assert sum(t.get(paper, 0.0) for t in terms.values()) == pytest.approx(score)
    assert ConvexFusion(0.3).max_score(["lexical", "body", "dense"]) == pytest.approx(0.7 + 0.7 + 0.3)


def test_rrf_terms_and_scale():
    lanes = {"lexical": LEXICAL, "dense": DENSE}
    out, terms = RrfFusion(60).fuse(lanes), RrfFusion(60).terms(lanes)
    assert out.scores()["b"] == pytest.approx(1 / 62 + 1 / 61) == sum(t["b"] for t in terms.values())
    assert RrfFusion(60).max_score(["lexical", "dense"]) == pytest.approx(2 / 61)
    assert RrfFusion(60).describe() == "RRF k=60" and ConvexFusion(0.5).describe() == "convex α=0.5"


def test_bad_settings_are_typed_errors():
    with pytest.raises(UnknownNameError, match="rrf"):
        fusion_step("combsum", 60, 0.5)
    with pytest.raises(ConfigError, match="convex_alpha"):
        fusion_step("convex", 60, 1.5)
    with pytest.raises(ConfigError, match="rrf_k"):
        fusion_step("rrf", -1, 0.5)
    assert from_metadata({"rrf_k": 30}) == RrfFusion(30)  # results from before search.fusion were RRF
    assert from_metadata({"fusion": "convex", "rrf_k": 60, "convex_alpha": 0.0}) == ConvexFusion(0.0)


@pytest.mark.model
def test_the_pipeline_fuses_by_convex_as_the_evaluation_run_does(built):
    searcher = Searcher(
        built.index, built.config.replace(**{"search.fusion": "convex", "search.convex_alpha": 0.6})
    )
    result = searcher.search("graph neural networks", limit=8, boosts=False)
    meta = result.metadata
    assert (
        meta["fusion"] == "convex"
        and meta["convex_alpha"] == 0.6
        and meta["lanes_run"] == ["lexical", "body", "dense"]
    )
    lanes = {n: result.rankings[n] for n in meta["lanes_run"]}
    assert result.ids == fused(lanes, 0.6, "minmax", 8).ids  # scix eval's convex_minmax run at the same α
    for hit in result.hits:
        assert hit.fused_score == pytest.approx(
            sum(
                0.6 * v if n == "dense" else 0.4 * v
                for n, v in (
                    (
                        n,
                        (s.score - min(lanes[n].scores().values()))
                        / (max(lanes[n].scores().values()) - min(lanes[n].scores().values())),
                    )
                    for n, s in hit.lanes.items()
                )
            )
        )
    rrf_result = Searcher(built.index, built.config).search("graph neural networks", limit=8, boosts=False)
    assert rrf_result.metadata["fusion"] == "rrf" and rrf_result.metadata["convex_alpha"] is None


@pytest.mark.model
def test_a_bad_fusion_setting_fails_before_any_lane_runs(built):
    searcher = Searcher(built.index, built.config.replace(**{"search.fusion": "borda"}))
    with pytest.raises(UnknownNameError, match="fusion"):
        searcher.search("graph neural networks")
