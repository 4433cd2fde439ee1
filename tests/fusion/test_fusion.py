"""Fusers with expected values written as arithmetic you can check by hand."""

import copy

import pytest

from scix_core.errors import UnknownNameError
from scix_core.fusion import FUSERS, combmnz, combsum, convex, dbsf, get_fuser, rrf, weighted_rrf
from scix_core.types import Ranking

LEX = Ranking.from_pairs("lexical", [("a", 9.0), ("b", 5.0), ("c", 1.0)])
DENSE = Ranking.from_pairs("dense", [("c", 0.9), ("a", 0.8), ("d", 0.7)])


def scores(r: Ranking) -> dict[str, float]:
    return {i.paper_id: i.score for i in r.items}


def test_rrf_values_and_order():
    fused = rrf([LEX, DENSE], k=60)
    assert scores(fused) == pytest.approx(
        {
            "a": 1 / (60 + 1) + 1 / (60 + 2),
            "c": 1 / (60 + 3) + 1 / (60 + 1),
            "b": 1 / (60 + 2),
            "d": 1 / (60 + 3),
        }
    )
    assert fused.ids == ("a", "c", "b", "d")


def test_rrf_tie_break_is_deterministic():
    x = Ranking.from_pairs("x", [("p", 1.0), ("q", 0.5)])
    y = Ranking.from_pairs("y", [("q", 1.0), ("p", 0.5)])
    # p and q both score 1/61 + 1/62; both have best rank 1; p's rank 1 is in the earlier input
    assert rrf([x, y]).ids == ("p", "q")
    assert rrf([y, x]).ids == ("q", "p")


def test_weighted_rrf():
    fused = weighted_rrf([LEX, DENSE], [2.0, 0.5], k=10)
    assert scores(fused)["a"] == pytest.approx(2 / 11 + 0.5 / 12)
    with pytest.raises(ValueError):
        weighted_rrf([LEX], [1.0, 2.0])


def test_inputs_are_not_mutated():
    before = copy.deepcopy((LEX, DENSE))
    for name in ("rrf", "combsum", "combmnz", "dbsf"):
        get_fuser(name)([LEX, DENSE])
    convex([LEX, DENSE], [0.5, 0.5], "zscore")
    assert (LEX, DENSE) == before


def test_combsum_and_combmnz_with_guarded_minmax():
    # LEX normalised: a=1, b=(5-1)/8=0.5, c=0; DENSE: c=1, a=(0.8-0.7)/0.2=0.5, d=0
    assert scores(combsum([LEX, DENSE])) == pytest.approx({"a": 1.5, "b": 0.5, "c": 1.0, "d": 0.0})
    assert scores(combmnz([LEX, DENSE])) == pytest.approx({"a": 3.0, "b": 0.5, "c": 2.0, "d": 0.0})
    flat = Ranking.from_pairs("flat", [("x", 3.0), ("y", 3.0)])
    assert scores(combsum([flat])) == {"x": 1.0, "y": 1.0}  # max == min: no division by zero


def test_dbsf_guarded_and_bounded():
    flat = Ranking.from_pairs("flat", [("x", 2.0), ("y", 2.0)])
    assert scores(dbsf([flat])) == {"x": 0.5, "y": 0.5}
    fused = scores(dbsf([LEX, DENSE]))
    assert all(0 <= v <= 2 for v in fused.values()) and fused["a"] > fused["d"]


def test_convex_minmax_and_zscore():
    # min-max as above; absent papers get the ranking's floor 0: a = .3*1 + .7*.5, b = .3*.5, c = .7*1, d = 0
    assert scores(convex([LEX, DENSE], [0.3, 0.7])) == pytest.approx(
        {"a": 0.65, "b": 0.15, "c": 0.7, "d": 0.0}
    )
    assert convex([LEX, DENSE], [1.0, 0.0]).ids[:3] == ("a", "b", "c")  # alpha 1: the first ranking's order
    # z-scores: LEX mean 5, sd sqrt(32/3) -> a = 4/sd, b = 0, c = -4/sd (the floor, given to d)
    sd = (32 / 3) ** 0.5
    dsd = (0.02 / 3) ** 0.5  # DENSE: mean 0.8 -> c = .1/dsd, a = 0, d = -.1/dsd (the floor, given to b)
    z = scores(convex([LEX, DENSE], [0.5, 0.5], "zscore"))
    assert z == pytest.approx(
        {
            "a": 0.5 * 4 / sd,
            "b": -0.5 * 0.1 / dsd,
            "c": 0.5 * (-4 / sd + 0.1 / dsd),
            "d": 0.5 * (-4 / sd - 0.1 / dsd),
        }
    )
    flat = Ranking.from_pairs("flat", [("x", 3.0), ("y", 3.0)])
    assert scores(convex([flat], [1.0], "zscore")) == {"x": 0.0, "y": 0.0}
    with pytest.raises(ValueError):
        convex([LEX], [0.5, 0.5])
    with pytest.raises(UnknownNameError):
        convex([LEX], [1.0], "rank")


def test_empty_inputs():
    assert rrf([]).items == () and combsum([Ranking("e")]).items == ()


def test_unknown_fuser_lists_valid_names():
    with pytest.raises(UnknownNameError) as err:
        get_fuser("borda")
    assert all(name in str(err.value) for name in FUSERS)
