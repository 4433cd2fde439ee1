"""Score-fusion runs: α chosen on the other folds only, hand-checkable lanes."""

from __future__ import annotations

from scix_core.evaluate.gold import Gold
from scix_core.evaluate.score_fusion import ALPHAS, cross_validated, fused, weight_grid
from scix_core.types import Ranking


def _lanes(dense_right: bool) -> dict[str, Ranking]:
    """The relevant paper 'r' is first in one lane and last in the other."""
    good = Ranking.from_pairs("x", [("r", 3.0), ("a", 2.0), ("b", 1.0)])
    bad = Ranking.from_pairs("x", [("a", 0.9), ("b", 0.8), ("r", 0.1)])
    return {"lexical": bad if dense_right else good, "dense": good if dense_right else bad}


def test_alpha_follows_the_lane_that_is_right():
    queries = {f"q{i}": "text" for i in range(10)}
    gold = Gold("g", queries, {q: {"r": 1} for q in queries})
    rankings, alphas = cross_validated({q: _lanes(True) for q in queries}, gold, "minmax", 10)
    assert len(alphas) == 5 and all(a > 0.5 for a in alphas)
    assert all(r.ids[0] == "r" for r in rankings.values())
    _, alphas = cross_validated({q: _lanes(False) for q in queries}, gold, "zscore", 10)
    assert all(a < 0.5 for a in alphas)


def test_a_query_never_chooses_its_own_alpha():
    """Nine queries want the dense lane, one the lexical lane: that one is ranked with the others' α."""
    queries = {f"q{i}": "text" for i in range(10)}
    gold = Gold("g", queries, {q: {"r": 1} for q in queries})
    lanes = {q: _lanes(q != "q0") for q in queries}
    rankings, alphas = cross_validated(lanes, gold, "minmax", 10)
    assert all(a > 0.5 for a in alphas)
    assert rankings["q0"].ids[0] != "r"  # with α chosen on q0 itself it would be first


def test_fused_weights_and_single_query():
    lanes = _lanes(True)
    assert fused(lanes, 1.0, "minmax", 10).ids == lanes["dense"].ids
    assert fused(lanes, 0.0, "minmax", 10).ids == lanes["lexical"].ids
    gold = Gold("g", {"q": "t"}, {"q": {"r": 1}})
    rankings, alphas = cross_validated({"q": lanes}, gold, "minmax", 10)
    assert alphas == [0.5] and set(rankings) == {"q"}
    assert ALPHAS[0] == 0.0 and ALPHAS[-1] == 1.0


def test_weight_grid_is_the_simplex():
    grid = weight_grid(("lexical", "dense", "dense-trained"))
    assert len(grid) == 66 and len({tuple(w.values()) for w in grid}) == 66
    assert all(abs(sum(w.values()) - 1) < 1e-9 and min(w.values()) >= 0 for w in grid)
    assert {"lexical": 1.0, "dense": 0.0, "dense-trained": 0.0} in grid
    assert [w["dense"] for w in weight_grid(("lexical", "dense"))] == list(ALPHAS)[::-1]


def test_three_lanes_weigh_the_lane_that_is_right():
    """'r' is last in two lanes and first in the third: every fold gives the third most weight, and a lane of
    weight 0 is left out of the fusion."""
    queries = {f"q{i}": "text" for i in range(10)}
    gold = Gold("g", queries, {q: {"r": 1} for q in queries})
    bad = _lanes(False)["dense"]
    lanes = {q: {"lexical": bad, "dense": bad, "dense-trained": _lanes(True)["dense"]} for q in queries}
    rankings, weights = cross_validated(lanes, gold, "minmax", 10, grid=weight_grid(tuple(lanes["q0"])))
    assert len(weights) == 5 and all(w["dense-trained"] == max(w.values()) > 0.5 for w in weights)
    assert all(r.ids[0] == "r" for r in rankings.values())
    only = fused(lanes["q0"], {"lexical": 1.0, "dense": 0.0, "dense-trained": 0.0}, "minmax", 10)
    assert only.ids == bad.ids
