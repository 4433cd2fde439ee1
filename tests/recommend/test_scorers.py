"""Scorer selection and health: a real LightGBM model scores when it loads; otherwise the heuristic, said
loudly."""

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
    booster = lightgbm.train(
        {"objective": "binary", "verbose": -1, "num_leaves": 4},
        lightgbm.Dataset(x, y, feature_name=list(names)),
        num_boost_round=20,
    )
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
    assert (health["configured"], health["model_loaded"], health["last_scored_with"]) == (
        "lightgbm",
        True,
        "lightgbm",
    )
    assert result.scorer["scoring_with"] == "lightgbm" and not result.notes
    scored = result.stage("score").output
    assert all(dict(c.scores)["lightgbm"] == c.score for c in scored)
    assert [c.score for c in scored] == sorted((c.score for c in scored), reverse=True)


@pytest.mark.parametrize("problem", ["missing", "foreign-features"])
def test_a_model_that_cannot_score_falls_back_to_the_heuristic_and_says_so(
    rec_indexes, user, tmp_path, problem
):
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

    values = np.zeros((2, len(FEATURES)))
    values[:, :3] = [[0.9, 0.8, 0.5], [0.1, 0.2, 0.7]]
    values[:, FEATURES.index("cosave")] = [0.0, 0.4]
    table = FeatureTable(FEATURES, values, False)
    assert HeuristicScorer(RecommendConfig()).score(table) == pytest.approx(
        [0.65 * 0.5, 0.65 * 0.7 + 0.7 * 0.4]
    )
    with_ewma = FeatureTable(table.names, table.values, True)
    assert HeuristicScorer(RecommendConfig()).score(
        with_ewma
    ) == pytest.approx(  # the default reads the cosine
        [0.65 * 0.5, 0.65 * 0.7 + 0.7 * 0.4]
    )
    assert HeuristicScorer(RecommendConfig(heuristic="profile")).score(with_ewma) == pytest.approx(
        [0.4 * 0.9 + 0.25 * 0.8, 0.4 * 0.1 + 0.25 * 0.2 + 0.7 * 0.4]
    )
    spec = RecommendConfig(weight_cosave=0.0, heuristic="profile")  # the reference design's formula exactly
    assert HeuristicScorer(spec).score(with_ewma) == pytest.approx(
        [0.4 * 0.9 + 0.25 * 0.8, 0.4 * 0.1 + 0.25 * 0.2]
    )
    # past the page over a pool: the co-save part at pool_later_cosave; none without one or without a change
    assert HeuristicScorer(RecommendConfig()).later(table) == pytest.approx(
        [0.65 * 0.5, 0.65 * 0.7 + 1.4 * 0.4]
    )
    assert HeuristicScorer(spec).later(with_ewma) is None
    assert HeuristicScorer(RecommendConfig(pool_later_cosave=0.7)).later(table) is None


def test_audit_flags_constant_and_zero_split_features():
    import lightgbm

    from scix_core.train.scorer import audit

    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, len(FEATURES)))
    x[:, FEATURES.index("citation_count")] = 0.0  # the reference design's hard-coded serving value
    x[:, FEATURES.index("age_months")] = rng.integers(0, 2, size=500) * 1e-9  # varies, but carries nothing
    y = (x[:, 0] > 0).astype(int)
    booster = lightgbm.train(
        {"objective": "binary", "verbose": -1, "num_leaves": 4, "min_data_in_leaf": 50},
        lightgbm.Dataset(x, y, feature_name=list(FEATURES)),
        num_boost_round=5,
    )
    report = audit(booster, x)
    assert report["features"]["citation_count"] == {"splits": 0, "gain": 0.0, "constant": True}
    assert report["features"]["longterm_sim"]["splits"] > 0
    assert any("'citation_count' is constant" in e for e in report["errors"])
    zero = [f for f, a in report["features"].items() if a["splits"] == 0 and not a["constant"]]
    assert all(any(f"'{f}' has zero splits" in e for e in report["errors"]) for f in zero)


def test_the_log_labels_served_items_by_what_the_user_did_next(rec_indexes, user):
    from scix_core.train.scorer import log_examples

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    _saved_user(rec, user)
    served = rec.recommend(user, limit=3)
    picked = [i.paper_id for i in served.items if not i.exploration]
    rec.interact(user, picked[0], "save")
    rec.interact(user, picked[1], "dismiss")
    mine = log_examples(rec)
    assert mine.from_log >= 2 and set(mine.labels.tolist()) == {0, 1}
    row = dict(served.items[0].scores)
    assert any(np.allclose(v, [row[f] for f in FEATURES]) for v in mine.values)


@pytest.mark.realdata
def test_train_scorer_on_real_libraries_writes_model_manifest_and_audit(
    citeulike_home, capsys, monkeypatch, tmp_path
):
    from scix_core.cli.main import main

    monkeypatch.setenv("SCIX_HOME", str(citeulike_home.home))
    monkeypatch.setenv("SCIX_DATA_DIR", str(citeulike_home.data_dir))
    # trained on the co-saves it is served with below, the fixture's (RP3beta alone): the default ensemble's
    # EASE and iALS fits cost 90 s here; the offline-evaluation test and notebook 06 run the defaults
    settings = tmp_path / "scix.toml"
    settings.write_text('[recommend]\ncollab = "rp3beta"\ntier_collab = ""\n')
    monkeypatch.setenv("SCIX_CONFIG", str(settings))
    out = tmp_path / "scorer"
    assert main(["train-scorer", "--index", "cul", "--users", "40", "--rounds", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "feature audit" in printed and "age_months" in printed and "audit error" in printed
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["users"] == 40 and manifest["positives"] > 0 and manifest["features"] == list(FEATURES)
    assert manifest["audit"]["features"]["age_months"]["constant"]  # CiteULike has no dates
    cfg = citeulike_home.replace(
        **{"recommend.scorer": "lightgbm", "recommend.scorer_model": str(out / "model.txt")}
    )
    rec = Recommender("cul", cfg)
    user = next(u["user"] for u in rec.state.users("cul") if u["saves"] >= 50)
    result = rec.recommend(user, log=False)
    health = rec.health()
    assert result.scorer["scoring_with"] == "lightgbm" and health["model_loaded"]
    assert any("age_months" in e for e in health["audit_errors"])


def test_the_profile_heuristic_is_configuration(rec_indexes, user):
    cfg = rec_indexes.config.replace(**{"recommend.heuristic": "profile"})
    rec = Recommender(rec_indexes.edge, cfg)
    _saved_user(rec, user)
    for c in rec.recommend(user, limit=3).stage("score").output:
        scores = dict(c.scores)
        assert scores["heuristic"] == pytest.approx(
            0.40 * scores["longterm_sim"] + 0.25 * scores["shortterm_sim"] + 0.7 * scores["cosave"]
        )
    with pytest.raises(UnknownNameError, match="cosine, profile"):
        Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.heuristic": "magic"}))
