"""`scix tune` on the real SciFact slice: the tune's pieces are the pipeline's lanes, so its defaults
candidate scores as `scix eval`'s hybrid run does."""

from __future__ import annotations

import pytest

from scix_core.evaluate import evaluate, sample_queries
from scix_core.evaluate.config_runs import ConfigRun
from scix_core.evaluate.gold import for_index
from scix_core.tune import defaults_of, tune
from scix_core.tune.select import TUNED
from scix_core.tune.space import Candidate, Fusion, Space

pytestmark = [pytest.mark.model]


@pytest.mark.realdata
def test_on_the_scifact_slice_the_defaults_row_is_scix_eval(scifact):
    cfg, index = scifact
    space = Space(
        query_epochs=(),
        epochs=(0,),
        passages=(False,),
        lexical=("auto",),
        rrf_k=(60,),
        normalise=("zscore",),
        alphas=(0.3,),
    )
    gold = sample_queries(for_index(index, cfg, "train"), 200, seed=5)
    report = tune(
        index, gold, config=cfg, space=space, folds=5, permutations=1000, progress=False, write=False
    )
    assert report.n_queries == 200 and report.defaults == defaults_of(cfg, {"passages": False})
    convex = Candidate(0, False, "auto", Fusion("zscore", 0.3))
    assert {r.candidate for r in report.table} == {report.defaults, convex}
    # the pipeline run as `scix eval` runs it: the defaults, and the convex candidate as a configured run
    run = ConfigRun("convex", convex.overrides(), "convex")
    own = evaluate(index, gold, runs=("hybrid",), config=cfg, configured=(run,), permutations=200)
    for name, candidate in (("hybrid", report.defaults), ("convex", convex)):
        for metric, value in own.runs[name].items():
            assert report.row(candidate).means[metric] == pytest.approx(value, abs=1e-3), (name, metric)
    assert set(report.worth) == {"fusion"}
    assert {c.candidate for c in report.comparisons} >= {TUNED}
