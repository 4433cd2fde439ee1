"""Metrics, significance and the gate against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scix_core.errors import ConfigError
from scix_core.evaluate import Gold, gate, holm, per_query
from scix_core.evaluate.metrics import trec_values
from scix_core.evaluate.provenance import buckets, length_bucket, provenance
from scix_core.evaluate.significance import (
    Comparison,
    compare,
    paired,
    randomisation_p,
    randomisation_ps,
    t_test_p,
)
from scix_core.types import Ranking

GOLD = Gold(
    "hand",
    {"a": "one two", "b": "one two three four", "c": "never judged"},
    {"a": {"d1": 2, "d2": 1, "d9": -1}, "b": {"d3": 1}, "c": {"d4": 0}},
    {"a": {"bucket": "x"}, "b": {"bucket": "y"}},
)


def _r(*ids):
    return Ranking.from_pairs("run", ((d, 1.0 / (i + 1)) for i, d in enumerate(ids)))


def test_metrics_by_hand():
    values = per_query(GOLD, {"a": _r("d2", "d9", "d1"), "b": _r("x", "d3")})
    assert set(values["ndcg@10"]) == {"a", "b"}  # c has no relevant paper: not a judged query
    # linear gain, as trec_eval and BEIR: d2 (grade 1) at rank 1, d9 (judged -1: no gain), d1 (grade 2) at
    # rank 3
    dcg = 1 / math.log2(2) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert values["ndcg@10"]["a"] == pytest.approx(dcg / idcg)
    assert values["ndcg@10"]["b"] == pytest.approx((1 / math.log2(3)) / 1)
    assert values["mrr@10"] == {"a": 1.0, "b": 0.5}
    assert values["recall@50"] == {"a": 1.0, "b": 1.0}


def test_missing_ranking_scores_zero():
    values = per_query(GOLD, {"a": _r("d1")})
    assert values["ndcg@10"]["b"] == 0.0 and values["recall@100"]["b"] == 0.0


def test_paired_tests_align_by_query_id():
    a, b = paired({"q1": 0.1, "q2": 0.5}, {"q2": 0.7, "q1": 0.2})
    assert a.tolist() == [0.1, 0.5] and b.tolist() == [0.2, 0.7]
    with pytest.raises(ValueError, match="same queries"):
        paired({"q1": 0.1}, {"q2": 0.2})


def test_tests_on_constructed_cases():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.6, 200)
    win = base + 0.1 + rng.normal(0, 0.02, 200)
    noise = base + rng.normal(0, 0.05, 200)
    assert randomisation_p(base, win) < 0.001 and t_test_p(base, win) < 1e-10
    assert randomisation_p(base, noise) > 0.05 and t_test_p(base, noise) > 0.05
    assert randomisation_p(base, base.copy()) == 1.0 and t_test_p(base, base.copy()) == 1.0


def test_holm_by_hand():
    cs = [Comparison("b", "c", m, 0.1, p, p) for m, p in (("m1", 0.01), ("m2", 0.04), ("m3", 0.03))]
    adjusted = holm(cs)
    assert [c.p_adj for c in adjusted] == pytest.approx(
        [0.03, 0.06, 0.06]
    )  # 3*0.01, max(2*0.03, .03), max(1*0.04, .06)
    assert [c.significant for c in adjusted] == [True, False, False]


def _values(base, cand):
    ids = [f"q{i}" for i in range(len(base))]
    metrics = {"ndcg@10": 0, "mrr@10": 1}
    return {
        run: {m: {q: float(v[i][k]) for i, q in enumerate(ids)} for m, k in metrics.items()}
        for run, v in (("base", base), ("cand", cand))
    }


def test_gate_clear_win_clear_loss_and_noise():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.6, (300, 2))
    cases = {
        "win": base + [0.08, 0.05] + rng.normal(0, 0.02, (300, 2)),
        "loss": base - [0.08, 0.05] + rng.normal(0, 0.02, (300, 2)),
        "noise": base + rng.normal(0, 0.05, (300, 2)),
        "win but mrr regresses": base + [0.08, -0.05] + rng.normal(0, 0.02, (300, 2)),
    }
    decisions = {}
    for name, cand in cases.items():
        comps = holm(compare("base", "cand", _values(base, cand), ("ndcg@10", "mrr@10"), permutations=2000))
        decisions[name] = gate(comps)
    assert decisions["win"].ship and "no significant regression" in decisions["win"].reasons[0]
    assert not decisions["loss"].ship and "regresses significantly" in decisions["loss"].reasons[-1]
    assert not decisions["noise"].ship and "not a significant improvement" in decisions["noise"].reasons[0]
    mixed = decisions["win but mrr regresses"]
    assert not mixed.ship and mixed.reasons == (mixed.reasons[0],) and "mrr@10 regresses" in mixed.reasons[0]


def test_provenance_and_buckets_by_hand():
    lanes = {"a": {"lexical": _r("d1", "x"), "dense": _r("d2", "d1")}, "b": {"dense": _r("d3")}}
    run = {"a": _r("d1", "d2", "x"), "b": _r("d3")}
    p = provenance(GOLD, run, lanes)
    assert p["relevant_in_top10"] == 3
    assert p["per_query"]["a"] == {"d1": {"lexical": 1, "dense": 2}, "d2": {"dense": 1}}
    assert p["share"] == {"dense": 1.0, "lexical": pytest.approx(1 / 3)}
    assert p["only"] == {"dense": pytest.approx(2 / 3)}
    assert [length_bucket(t) for t in ("a b c", "a b c d", "a " * 9)] == ["len<=3", "len4-8", "len>=9"]
    b = buckets(GOLD, {"ndcg@10": {"a": 1.0, "b": 0.5}})
    assert b["len<=3"] == {"n": 1, "ndcg@10": 1.0} and b["bucket=y"] == {"n": 1, "ndcg@10": 0.5}


def test_mrr_counts_the_first_ten_and_unknown_metrics_are_refused():
    deep = [f"x{i}" for i in range(12)] + ["d1"]  # d1 at rank 13: outside RR@10, inside recall@50
    values = per_query(GOLD, {"a": _r(*deep)})
    assert values["mrr@10"]["a"] == 0.0 and values["recall@50"]["a"] == 0.5
    with pytest.raises(ConfigError, match="unknown metric 'nonsense@10'"):
        per_query(GOLD, {}, ("nonsense@10",))
    # any ir-measures measure by its name: AP within the first ten, d1 at rank 13 of 2 relevant
    assert per_query(GOLD, {"a": _r(*deep)}, ("AP@10", "AP"))["AP@10"]["a"] == 0.0


def test_trec_values_cover_every_judged_query_in_order():
    qrels = {"u2": {"a": 1}, "u1": {"b": 1, "c": 1}, "u3": {}}
    values = trec_values(qrels, {"u1": {"c": 2.0, "x": 1.0}}, ["hit@1", "recall@1", "hit@2"])
    assert list(values["hit@1"]) == ["u1", "u2", "u3"]  # sorted ids; the missed and the empty score 0
    assert values["hit@1"] == {"u1": 1.0, "u2": 0.0, "u3": 0.0} and values["recall@1"]["u1"] == 0.5


def test_a_cold_process_computes_figures_without_compiling():
    """trec_eval's C code: no numba (ranx compiled for 80 s in a cold process on the AVX2 machine kind)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from tests.evaluate.test_stats import GOLD, _r; "
        "from scix_core.evaluate import per_query; "
        "v = per_query(GOLD, {'a': _r('d2', 'd9', 'd1'), 'b': _r('x', 'd3')}); "
        "print(round(v['ndcg@10']['a'], 6), round(v['ndcg@10']['b'], 6), 'numba' in sys.modules)"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    dcg, idcg = 1 / math.log2(2) + 2 / math.log2(4), 2 / math.log2(2) + 1 / math.log2(3)
    assert done.stdout.split() == [str(round(dcg / idcg, 6)), str(round(1 / math.log2(3), 6)), "False"], (
        done.stderr
    )


def test_randomisation_p_is_scipys_permutation_test():
    """The sign-flip form of the paired test: scipy's exact p where 2^n fits the resamples, its p within
    Monte-Carlo error beyond (scipy's pair generator is 10x slower at thousands of users)."""
    from scipy.stats import permutation_test

    def theirs(a, b, r):
        return permutation_test(
            (b, a),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=r,
            vectorized=True,
            random_state=42,
        ).pvalue

    rng = np.random.default_rng(3)
    for n in (6, 10, 13):
        a = rng.random(n)
        b = a + rng.normal(0.05, 0.2, n)
        assert randomisation_p(a, b, 10_000) == pytest.approx(theirs(a, b, 10_000), abs=1e-12)
    a = rng.random(80)
    b = a + rng.normal(0.03, 0.2, 80)
    assert abs(randomisation_p(a, b, 10_000) - theirs(a, b, 10_000)) < 0.02
    assert randomisation_p(a[:1], b[:1]) == 1.0


def test_randomisation_ps_is_randomisation_p_per_column():
    """One draw of signs for all the metrics of a comparison gives each column the p it gets alone (an
    identical column: 1.0), exact and sampled alike."""
    rng = np.random.default_rng(5)
    for n in (8, 300):
        a = rng.random((n, 4))
        b = a + rng.normal([0.0, 0.05, 0.0, -0.1], 0.2, (n, 4))
        b[:, 2] = a[:, 2]
        got = randomisation_ps(a, b, 2_000)
        assert got == [randomisation_p(a[:, j], b[:, j], 2_000) for j in range(4)] and got[2] == 1.0
    assert got[1] < 0.05 and got[3] < 0.001
