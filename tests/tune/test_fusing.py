"""The tune's prepared fusion is the pipeline's fusion step, to the last bit and tie (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scix_core.tune.fusing import PreparedLanes
from scix_core.tune.space import Fusion
from scix_core.types import Ranking

PAPERS = [f"p{i:02d}" for i in range(25)]
# few distinct scores: ties in the fused score are common, so the tie-breaks are exercised
SCORES = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 3.0, -0.5])


@st.composite
def lane(draw, name: str) -> Ranking:
    papers = draw(st.lists(st.sampled_from(PAPERS), unique=True, max_size=12))
    scores = sorted((draw(SCORES) for _ in papers), reverse=True)
    return Ranking.from_pairs(name, zip(papers, scores))


@st.composite
def lanes(draw) -> dict[str, Ranking]:
    names = draw(st.sampled_from([("lexical", "dense"), ("dense", "lexical"), ("lexical", "body", "dense")]))
    return {n: draw(lane(n)) for n in names}


FUSIONS = st.one_of(
    st.builds(Fusion, st.just("rrf"), st.sampled_from([0.0, 1.0, 10.0, 60.0])),
    st.builds(Fusion, st.sampled_from(["minmax", "zscore"]), st.sampled_from([i / 10 for i in range(11)])),
)


@settings(max_examples=300, deadline=None)
@given(lanes(), FUSIONS, st.sampled_from([3, 10, 100]))
def test_prepared_lanes_fuse_as_the_pipeline_does(given_lanes, fusion, depth):
    expected = fusion.step().fuse(given_lanes).top(depth)
    got = PreparedLanes(given_lanes).fuse(fusion, depth)
    assert [(i.paper_id, i.score) for i in got.items] == [(i.paper_id, i.score) for i in expected.items]


def test_no_lanes_fuse_to_nothing():
    assert PreparedLanes({"lexical": Ranking("lexical")}).fuse(Fusion("rrf", 60.0), 10).items == ()
