"""`scix train-encoder` on the fixture gold set with the real MiniLM: a saved model with its manifest, an
index built with it by name, evaluation that never scores a training query, and K-fold cross-validation."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from scix_core.errors import ConfigError
from scix_core.evaluate import evaluate
from scix_core.evaluate.gold import Gold
from scix_core.train.encoder import (
    KIND,
    Recipe,
    _exact,
    cross_validate,
    encoder_model,
    train_encoder,
    triples,
)
from scix_core.workspace import Workspace
from tests.corpus import CORPUS

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
    assert (
        encoder_model(built.config, "sentence-transformers/all-mpnet-base-v2")
        == "sentence-transformers/all-mpnet-base-v2"
    )
    assert encoder_model(built.config, "../escape") == "../escape"  # never a workspace folder outside models/


def test_index_built_with_it_never_scores_its_training_queries(trained):
    from scix_core.ingest import ingest

    built, report = trained
    cfg = built.config.replace(**{"embedding.model": encoder_model(built.config, "fx-enc")})
    out = ingest(CORPUS, "fx-trained", config=cfg, progress=False)
    assert out.manifest["model"] == str(report.path) and out.manifest["dim"] == 384
    with pytest.raises(ConfigError, match="train the index's encoder"):
        evaluate("fx-trained", config=cfg, runs=("dense",), permutations=100)


def test_exact_scores_a_paper_by_its_best_vector_whole_or_passage():
    vectors = {"q": [1, 0], "paper a": [0, 1], "paper b": [0.6, 0.8], "a, its second half": [1, 0]}

    def encode(texts):
        return np.array([vectors[t] for t in texts], dtype=np.float32)

    whole = _exact(encode, ["paper a", "paper b"], ["a", "b"], {"q1": "q"}, 10)["q1"]
    maxp = _exact(encode, ["paper a", "paper b"], ["a", "b"], {"q1": "q"}, 10, ([0], ["a, its second half"]))[
        "q1"
    ]
    assert [(i.paper_id, round(i.score, 6)) for i in whole.items] == [("b", 0.6), ("a", 0)]
    assert [(i.paper_id, round(i.score, 6)) for i in maxp.items] == [("a", 1), ("b", 0.6)]  # b has no passage


@pytest.fixture(scope="module")
def with_passages(built, tmp_path_factory):
    """The fixture corpus with three more sentences in every abstract, ingested with passage vectors (in a
    workspace of its own), on ``onnx-int8``: the fold models then encode on it too (the index's backend), as
    on a CPU without int8 dot products — on one with them, ``auto``'s ``openvino-int8`` would calibrate each
    fold model with NNCF (21 s a fold; its calibration is ``tests/embeddings/test_onnx.py``'s)."""
    from scix_core.ingest import ingest

    more = " Samples were measured twice. The results agreed within error. Further work is planned."
    corpus = dataclasses.replace(
        CORPUS, papers=tuple(dataclasses.replace(p, abstract=p.abstract + more) for p in CORPUS.papers)
    )
    config = built.config.replace(
        home=tmp_path_factory.mktemp("cv-passages"), **{"embedding.backend": "onnx-int8"}
    )
    return config, ingest(corpus, "fx-passages", config=config, progress=False, passages=True).manifest


def test_cross_validation_scores_every_query_once(with_passages, tmp_path):
    config, manifest = with_passages
    report = cross_validate(
        "fx-passages", config, folds=2, recipe=SMALL, permutations=200, progress=False, runs_dir=tmp_path
    )
    # the fold models encode as the index did (its backend) and score by MaxP over the same passages
    assert report.setup["dense_trained"] == (
        f"exact cosine over the fold model's vectors "
        f"({manifest['embedding_backend']}), MaxP over {manifest['passages']} passages"
    )
    assert manifest["passages"] >= len(CORPUS.papers)
    runs = {
        "lexical",
        "dense",
        "hybrid",
        "dense-trained",
        "hybrid-trained",
        "convex-trained",
        "convex3-trained",
    }
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
    # done searching, the CV closed the index's vector shards (an embedded shard opens in one process at a
    # time)
    from scix_core import vectors

    assert not [key for key in vectors._READERS if key[3] == "fx-passages"]
    # run again with the same runs_dir: every fold is read back (not retrained), the figures are the same
    folds = sorted((tmp_path / "folds").glob("fold-*.json"))
    stamps = [f.stat().st_mtime_ns for f in folds]
    assert len(folds) == 2
    again = cross_validate(
        "fx-passages", config, folds=2, recipe=SMALL, permutations=200, progress=False, runs_dir=tmp_path
    )
    assert [f.stat().st_mtime_ns for f in folds] == stamps and again.per_query == report.per_query
    assert again.setup["steps_per_fold"] == report.setup["steps_per_fold"]
    with pytest.raises(ConfigError):
        cross_validate("fx-passages", config, folds=1, recipe=SMALL, progress=False)


def test_a_kept_fold_is_only_reused_by_a_run_with_the_same_key(tmp_path):
    from scix_core.train.encoder import _fold_key, _load_fold, _save_fold
    from scix_core.types import Ranking

    key = _fold_key({"build_key": "b1"}, "train", 5, SMALL, "base", "onnx-int8", 0, {"q": ["a", "b"]})
    assert key != _fold_key(
        {"build_key": "b1"}, "train", 5, Recipe(), "base", "onnx-int8", 0, {"q": ["a", "b"]}
    )
    assert key != _fold_key({"build_key": "b1"}, "train", 5, SMALL, "base", "onnx-int8", 0, {"q": ["b", "a"]})
    assert key != _fold_key(
        {"build_key": "b2"}, "train", 5, SMALL, "base", "onnx-int8", 10, {"q": ["a", "b"]}
    )
    ranking = Ranking.from_pairs("dense", [("a", 0.123456789123), ("b", 0.1)])
    _save_fold(tmp_path, 3, key, 7, {"q": ranking})
    steps, got = _load_fold(tmp_path, 3, key)
    assert steps == 7 and got["q"].items == ranking.items  # exact scores, not a TREC file's six decimals
    assert _load_fold(tmp_path, 3, "another") is None and _load_fold(tmp_path, 2, key) is None
    (tmp_path / "folds" / "fold-3.json").write_text("{truncated")
    assert _load_fold(tmp_path, 3, key) is None  # a torn file is a fold to train again
