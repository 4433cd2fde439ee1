"""`scix train-encoder` on the fixture gold set with the real MiniLM: a saved model with its manifest, an index
built with it by name, evaluation that never scores a training query, and K-fold cross-validation."""

from __future__ import annotations

import json

import pytest

from scix_core.embeddings.train import KIND, Recipe, cross_validate, encoder_model, train_encoder, triples
from scix_core.errors import ConfigError
from scix_core.evaluate import evaluate
from scix_core.evaluate.gold import Gold
from scix_core.workspace import Workspace
from tests.search.conftest import CORPUS

pytestmark = [pytest.mark.model]

SMALL = Recipe(epochs=1, batch_size=4, depth=10, skip=1)


@pytest.fixture(scope="module")
def trained(built):
    report = train_encoder(built.index, "fx-enc", built.config, recipe=SMALL, progress=False)
    return built, report


def test_triples_mine_negatives_from_the_ranking():
    gold = Gold("g", {"q": "text"}, {"q": {"a": 1, "b": 0}})
    texts = {p: f"paper {p}" for p in "abcde"}
    got = triples(gold, ["q"], {"q": ["c", "a", "b", "d", "e"]}, texts, Recipe(skip=1, depth=4))
    assert len(got) == 1 and got[0][:2] == ("text", "paper a")
    assert got[0][2] in ("paper b", "paper d")  # ranks 2-4, minus the relevant "a"; "c" (rank 1) is skipped


def test_saved_with_a_manifest(trained):
    built, report = trained
    manifest = json.loads((report.path / "scix_manifest.json").read_text())
    judged = sorted(q for q, judged in CORPUS.qrels["train"].items() if any(g > 0 for g in judged.values()))
    assert manifest["query_ids"] == judged and manifest["loss"] == "MultipleNegativesRankingLoss"
    assert manifest["index"] == built.index and manifest["steps"] == report.steps > 0
    assert report.path == Workspace(built.config.home).model_dir(KIND, "fx-enc")
    assert encoder_model(built.config, "fx-enc") == str(report.path)
    assert encoder_model(built.config, "sentence-transformers/all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"
    assert encoder_model(built.config, "../escape") == "../escape"  # never a workspace folder outside models/


def test_index_built_with_it_never_scores_its_training_queries(trained):
    from scix_core.ingest import ingest

    built, report = trained
    cfg = built.config.replace(**{"embedding.model": encoder_model(built.config, "fx-enc")})
    out = ingest(CORPUS, "fx-trained", config=cfg, progress=False)
    assert out.manifest["model"] == str(report.path) and out.manifest["dim"] == 384
    with pytest.raises(ConfigError, match="train the index's encoder"):
        evaluate("fx-trained", config=cfg, runs=("dense",), permutations=100)


def test_cross_validation_scores_every_query_once(built, tmp_path):
    report = cross_validate(built.index, built.config, folds=2, recipe=SMALL, permutations=200, progress=False,
                            runs_dir=tmp_path)
    runs = {"lexical", "dense", "hybrid", "dense-trained", "hybrid-trained", "convex-trained", "convex3-trained"}
    assert set(report.runs) == runs and {p.stem for p in tmp_path.glob("*.trec")} == runs
    judged = {q for q, judged in CORPUS.qrels["train"].items() if any(g > 0 for g in judged.values())}
    assert set(report.per_query["dense-trained"]["ndcg@10"]) == judged
    assert report.setup["folds"] == 2 and len(report.setup["steps_per_fold"]) == 2
    assert set(report.gates) == {"hybrid-trained", "convex-trained", "convex3-trained"}
    alphas = report.setup["score_fusion_alpha"]["convex-trained"]
    assert len(alphas) == 2 and all(0 <= a <= 1 for a in alphas)
    weights = report.setup["score_fusion_weights"]["convex3-trained"]
    assert len(weights) == 2 and all(set(w) == {"lexical", "dense-trained", "dense"} for w in weights)
    assert all(abs(sum(w.values()) - 1) < 1e-9 for w in weights)
    assert set(report.per_query["convex-trained"]["ndcg@10"]) == judged
    assert set(report.per_query["convex3-trained"]["ndcg@10"]) == judged
    with pytest.raises(ConfigError):
        cross_validate(built.index, built.config, folds=1, recipe=SMALL, progress=False)
