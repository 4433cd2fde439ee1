"""`scix tune` on the real SciFact slice: the tune's pieces are the pipeline's lanes, so its defaults
candidate scores as `scix eval`'s hybrid run does."""

from __future__ import annotations

import pytest

from scix_core.evaluate import evaluate
from scix_core.evaluate.gold import for_index
from scix_core.tune import defaults_of, tune
from scix_core.tune.select import TUNED
from scix_core.tune.space import Space

pytestmark = [pytest.mark.model]


@pytest.mark.realdata
def test_on_the_scifact_slice_the_defaults_row_is_scix_eval(scifact):
    cfg, index = scifact
    space = Space(
        epochs=(0,),
        passages=(False,),
        lexical=("auto", "or"),
        rrf_k=(30, 60),
        normalise=("minmax",),
        alphas=(0.3, 0.5),
    )
    report = tune(index, config=cfg, space=space, folds=5, permutations=1000, progress=False, write=False)
    gold = for_index(index, cfg, "train")
    assert report.n_queries == len(gold.judged) and report.defaults == defaults_of(cfg, {"passages": False})
    assert len(report.table) == len(space.candidates())
    own = evaluate(index, gold, runs=("hybrid",), config=cfg, permutations=200)
    assert report.row(report.defaults).means["ndcg@10"] == pytest.approx(
        own.runs["hybrid"]["ndcg@10"], abs=0.005
    )
    assert set(report.worth) <= {"lexical", "fusion"} and report.worth
    assert {c.candidate for c in report.comparisons} >= {TUNED}
