"""Scorer selection and health: a real LightGBM model scores when it loads; otherwise the heuristic, said loudly."""

from __future__ import annotations

import numpy as np
import pytest

from scix_core.errors import UnknownNameError
from scix_core.recommend import Recommender
from scix_core.recommend.scorers import FEATURES

pytestmark = pytest.mark.model


def _train(path, names):
    import lightgbm

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(names)))
    y = (x[:, 0] - x[:, 1] > 0).astype(int)  # learns "long-term sim minus short-term sim"
    booster = lightgbm.train({"objective": "binary", "verbose": -1, "num_leaves": 4},
                             lightgbm.Dataset(x, y, feature_name=list(names)), num_boost_round=20)
    booster.save_model(str(path))
    return path


def _saved_user(rec, user):
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04", "p06"]:
        rec.interact(user, paper, "save")


def test_lightgbm_model_scores_when_configured(rec_indexes, user, tmp_path):
    model = _train(tmp_path / "model.txt", FEATURES)
    cfg = rec_indexes.config.replace(**{"recommend.scorer": "lightgbm", "recommend.scorer_model": str(model)})
    rec = Recommender(rec_indexes.edge, cfg)
    _saved_user(rec, user)
    result = rec.recommend(user, limit=3)
    health = rec.health()
    assert (health["configured"], health["model_loaded"], health["last_scored_with"]) == ("lightgbm", True, "lightgbm")
    assert result.scorer["scoring_with"] == "lightgbm" and not result.notes
    scored = result.stage("score").output
    assert all(dict(c.scores)["lightgbm"] == c.score for c in scored)
    assert [c.score for c in scored] == sorted((c.score for c in scored), reverse=True)


@pytest.mark.parametrize("problem", ["missing", "foreign-features"])
def test_a_model_that_cannot_score_falls_back_to_the_heuristic_and_says_so(rec_indexes, user, tmp_path, problem):
    model = tmp_path / "model.txt"
    if problem == "foreign-features":
        _train(model, [f"f{i}" for i in range(len(FEATURES))])
    cfg = rec_indexes.config.replace(**{"recommend.scorer": "lightgbm", "recommend.scorer_model": str(model)})
    rec = Recommender(rec_indexes.edge, cfg)
    _saved_user(rec, user)
    result = rec.recommend(user, limit=3)
    assert rec.health()["model_loaded"] is False and rec.health()["error"]
    assert result.scorer["scoring_with"] == "heuristic" and rec.health()["last_scored_with"] == "heuristic"
    assert any("'lightgbm' configured but 'heuristic' scored" in n for n in result.notes)


def test_an_unknown_scorer_lists_the_valid_ones(rec_indexes):
    with pytest.raises(UnknownNameError, match="heuristic, lightgbm"):
        Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.scorer": "xgboost"}))


def test_without_ewma_the_heuristic_is_065_cosine(rec_indexes):
    from scix_core.config import RecommendConfig
    from scix_core.recommend.scorers.features import FeatureTable
    from scix_core.recommend.scorers.heuristic import HeuristicScorer

    table = FeatureTable(FEATURES, np.array([[0.9, 0.8, 0.5, 0, 0, 0, 0, 0], [0.1, 0.2, 0.7, 0, 0, 0, 0, 0]]), False)
    assert HeuristicScorer(RecommendConfig()).score(table) == pytest.approx([0.65 * 0.5, 0.65 * 0.7])
    with_ewma = FeatureTable(table.names, table.values, True)
    assert HeuristicScorer(RecommendConfig()).score(with_ewma) == pytest.approx([0.4 * 0.9 + 0.25 * 0.8, 0.4 * 0.1 + 0.25 * 0.2])
