"""Query-side fine-tuning on real engines: a query encoder trained against an index's own vectors (the
papers as built), run by the pipeline through ``embedding.query_model``, refused by an index encoded by
another model, and its training queries never scored by `scix eval`; folds that keep queries sharing a
relevant paper together."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scix_core.config import load_config
from scix_core.data.dataset import Dataset
from scix_core.embeddings.encoder import query_embedding
from scix_core.errors import ConfigError
from scix_core.evaluate import encoder_training_queries, evaluate
from scix_core.evaluate.gold import Gold, from_index
from scix_core.ingest import ingest
from scix_core.search import Searcher
from scix_core.train.query_side import QueryRecipe, Targets, positives, train_query_encoder
from scix_core.tune.pieces import Folds, query_groups
from scix_core.types import Paper, Query

pytestmark = [pytest.mark.model]

# Each query is a made-up nickname of one paper; the abstracts are about four unrelated topics. The shipped
# encoder has never seen the nicknames, so its dense ranking of a nickname is noise; a query encoder trained
# on the nicknames maps each to its paper's vector.
TOPICS = (
    "protein folding dynamics in living cells",
    "monetary policy and inflation expectations",
    "reinforcement learning for robot control",
    "coral reef bleaching under ocean warming",
)
N = 16


def _nickname(i: int) -> str:
    return (
        f"project {['amber', 'basalt', 'cobalt', 'dune'][i % 4]} {['fox', 'heron', 'lynx', 'orca'][i // 4]}"
    )


@pytest.fixture(scope="module")
def nicknames(tmp_path_factory):
    papers = tuple(Paper(f"p{i:02d}", f"Study {i}", f"{TOPICS[i % 4]}, variant {i}") for i in range(N))
    queries = tuple(Query(f"q{i:02d}", _nickname(i)) for i in range(N))
    qrels = {"train": {f"q{i:02d}": {f"p{i:02d}": 1} for i in range(N)}}
    home = tmp_path_factory.mktemp("query-side-home")
    cfg = load_config().replace(home=home, **{"embedding.backend": "torch"})
    ingest(Dataset("nicknames", "python", papers, queries, qrels), "nicknames", config=cfg, progress=False)
    return cfg


def _dense_hits(cfg) -> int:
    searcher = Searcher("nicknames", cfg)
    hits = sum(
        list(searcher.search(_nickname(i), "semantic", limit=1).ids[:1]) == [f"p{i:02d}"] for i in range(N)
    )
    searcher.close()
    return hits


def test_a_query_encoder_learns_the_index_vectors_and_the_pipeline_uses_it(nicknames):
    cfg = nicknames
    before = _dense_hits(cfg)
    recipe = QueryRecipe(epochs=20, batch_size=8, lr=2e-4, seed=1)
    report = train_query_encoder("nicknames", "nick-q", cfg, recipe=recipe, progress=False)
    manifest = json.loads((report.path / "scix_manifest.json").read_text())
    assert manifest["kind"] == "query-encoder" and manifest["query_ids"] == [f"q{i:02d}" for i in range(N)]
    index_model = Searcher("nicknames", cfg).manifest["model"]
    assert manifest["document_model"] == index_model
    tuned = cfg.replace(**{"embedding.query_model": "nick-q"})  # a workspace name, or its path
    after = _dense_hits(tuned)
    assert before <= N // 2 and after >= N - 2, (before, after)
    assert _dense_hits(cfg.replace(**{"embedding.query_model": str(report.path)})) == after
    # the papers are the index's own: nothing was re-encoded
    assert Searcher("nicknames", tuned).manifest["model"] == index_model
    # `scix eval` never scores a query the query encoder learnt from
    searcher = Searcher("nicknames", tuned)
    gold = from_index(searcher.store, "train")
    assert encoder_training_queries(searcher, gold) == set(gold.judged)
    searcher.close()
    with pytest.raises(ConfigError, match="the query encoder"):
        evaluate("nicknames", gold, config=tuned, runs=("dense",), progress=False)


def test_a_query_encoder_of_another_model_is_refused(nicknames, tmp_path):
    folder = tmp_path / "other-q"
    folder.mkdir()
    (folder / "scix_manifest.json").write_text(json.dumps({"document_model": "some-other-model"}))
    emb = nicknames.replace(**{"embedding.query_model": str(folder)}).embedding
    with pytest.raises(ConfigError, match="some-other-model"):
        query_embedding(emb, {"model": "bundled-minilm", "embedding_backend": "torch"})
    missing = nicknames.replace(**{"embedding.query_model": "no-such-encoder"}).embedding
    with pytest.raises(Exception, match="no such model folder"):
        query_embedding(missing, {"model": "bundled-minilm"}, nicknames.home)


def test_targets_hold_every_vector_and_its_paper():
    papers = [
        Paper("a", "A", "One is here. Two is here. Three is here. Four is here."),
        Paper("b", "B", "seven"),
    ]

    def corpus(texts):
        return np.stack([np.eye(3, dtype=np.float32)[len(t) % 3] for t in texts])

    whole = Targets.of(corpus, papers, {}, passages=False)
    assert whole.vectors.shape == (2, 3) and whole.owners.tolist() == [0, 1] and whole.papers == 2
    cut = Targets.of(corpus, papers, {"passage_window": 2, "passage_stride": 2}, passages=True)
    assert cut.vectors.shape[0] == 4 and cut.owners.tolist() == [0, 1, 0, 0]  # paper a's two passages
    gold = Gold("g", {"q1": "x", "q2": "y"}, {"q1": {"a": 1, "zz": 1}, "q2": {"gone": 1}})
    assert positives(gold, ["q1", "q2"], {"a": 0, "b": 1}) == [("x", [0])]


def test_folds_keep_queries_sharing_a_relevant_paper_together():
    qrels = {f"q{i}": {f"p{i // 2}": 1} for i in range(12)}  # pairs of queries share a paper
    gold = Gold("g", {q: q for q in qrels}, qrels)
    ids = list(qrels)
    assert sorted(map(len, query_groups(ids, gold))) == [2] * 6
    folds = Folds.deal(ids, 3, seed=4, gold=gold)
    assert folds.grouped and sorted(len(folds.queries(f)) for f in range(3)) == [4, 4, 4]
    assert all(folds.of[f"q{2 * i}"] == folds.of[f"q{2 * i + 1}"] for i in range(6))
    # one group larger than a fold: the folds are dealt at random
    qrels["q0"]["p1"] = qrels["q4"]["p1"] = qrels["q6"]["p1"] = qrels["q8"]["p1"] = 1
    wide = Folds.deal(ids, 3, seed=4, gold=Gold("g", {q: q for q in qrels}, qrels))
    assert not wide.grouped and sorted(len(wide.queries(f)) for f in range(3)) == [4, 4, 4]


def test_the_command_line(nicknames, monkeypatch, capsys):
    from scix_core.cli.main import main

    monkeypatch.setenv("SCIX_HOME", str(nicknames.home))
    monkeypatch.setenv("SCIX_EMBED_BACKEND", "torch")
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    argv = ["train-encoder", "--index", "nicknames", "--query-side"]
    assert main([*argv, "--name", "cli-q", "--epochs", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert 'query_model = "cli-q"' in printed and (nicknames.home / "models/encoders/cli-q").is_dir()
    assert main([*argv, "--folds", "3"]) == 2
    assert "scix tune" in capsys.readouterr().err


def test_the_preset_names_the_query_side_or_clears_it():
    import tomllib

    from scix_core.tune.preset import render
    from scix_core.tune.space import Candidate, Fusion

    query_side = tomllib.loads(render(Candidate(0, True, "auto", Fusion("zscore", 0.6), 2), None, {}, "/m/q"))
    assert query_side["embedding"] == {"query_model": "/m/q"} and query_side["search"]["passages"] is True
    # both towers: the papers are re-encoded, so a query side configured for the old vectors is cleared
    both = tomllib.loads(render(Candidate(1, False, "auto", Fusion("rrf", 60.0)), "/m/e", {}))
    assert both["embedding"] == {"model": "/m/e", "query_model": ""}
    assert "embedding" not in tomllib.loads(render(Candidate(0, False, "or", Fusion("rrf", 10.0)), None, {}))
