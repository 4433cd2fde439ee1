"""`scix tune` on real engines: a planted corpus whose winner is known in advance, the honesty of the
nested cross-validation with fine-tuning, the preset the pipeline then runs, and the real SciFact slice
(the tune's pieces congruent with `scix eval`'s own runs)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scix_core.config import load_config
from scix_core.data.dataset import Dataset
from scix_core.errors import ConfigError, ModelUnavailableError, UnknownNameError
from scix_core.evaluate import evaluate
from scix_core.evaluate.config_runs import ConfigRun
from scix_core.evaluate.gold import from_index
from scix_core.ingest import ingest
from scix_core.notebook import TuneView
from scix_core.search.fusion import ConvexFusion
from scix_core.train.encoder import Recipe
from scix_core.train.query_side import QueryRecipe
from scix_core.train.reranker import RerankRecipe, train_reranker
from scix_core.tune import _ship, parse_budget, tune
from scix_core.tune.pieces import Folds, models_needed
from scix_core.tune.preset import preset_path
from scix_core.tune.rerank import fingerprint
from scix_core.tune.select import TUNED
from scix_core.tune.space import Candidate, Fusion, Space, load_space
from scix_core.types import Paper, Query
from scix_core.workspace import Workspace

pytestmark = [pytest.mark.model]

TOPICS = (
    "a survey of protein folding dynamics in cells",
    "monetary policy and inflation expectations",
    "deep reinforcement learning for robot control",
    "coral reef bleaching under ocean warming",
)
N = 24  # planted papers and queries


def _code(i: int) -> str:
    return f"qzv{i:02d}kx"


def _papers() -> tuple[Paper, ...]:
    return tuple(
        Paper(f"p{i:02d}", f"Report {_code(i)}", TOPICS[i % len(TOPICS)] + f" part {i}") for i in range(N)
    )


def _queries() -> tuple[Query, ...]:
    return tuple(Query(f"q{i:02d}", _code(i)) for i in range(N))


def _qrels() -> dict:
    return {"train": {f"q{i:02d}": {f"p{i:02d}": 1} for i in range(N)}}


def _fixed_encoder(**choices) -> Space:
    """A space without fine-tuning: whole papers, ``auto`` semantics unless ``choices`` say otherwise."""
    return Space(
        **{"query_epochs": (), "epochs": (0,), "passages": (False,), "lexical": ("auto",), **choices}
    )


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Each query is a made-up code word found in one paper's title; every abstract is about one of four
    unrelated topics. The lexical lane finds the one paper; the dense lane, shown a code word, ranks noise.
    So convex α = 0 (lexical alone) is perfect, α = 1 (dense alone) is not: the winner is known."""
    papers, queries, qrels = _papers(), _queries(), _qrels()
    home = tmp_path_factory.mktemp("tune-home")
    # the torch backend: the fine-tuned fold models then encode as trained, with no ONNX export each
    settings = {"search.fusion": "convex", "search.convex_alpha": 1.0, "embedding.backend": "torch"}
    cfg = load_config().replace(home=home, **settings)
    ingest(Dataset("planted", "python", papers, queries, qrels), "planted", config=cfg, progress=False)
    return cfg


def test_space_from_toml_and_its_errors(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(
        "[space]\nepochs = [0]\nquery_epochs = [2]\nlexical = ['or']\nrrf_k = [60]\nnormalise = []\n"
    )
    space = load_space(path)
    rrf = Fusion("rrf", 60.0)
    assert space.candidates() == (
        Candidate(0, False, "or", rrf),
        Candidate(0, True, "or", rrf),
        Candidate(0, False, "or", rrf, 2),
        Candidate(0, True, "or", rrf, 2),
    )
    assert space.candidates()[2].name == "q-ft2 · or · rrf k=60" and space.candidates()[2].encoder == "q2"
    assert load_space("fusion").query_epochs == () and load_space("full-fine-tuning").epochs == (0, 1, 2)
    path.write_text("[space]\nrerankers = ['fine-tuned', 'models/ce']\nrerank_window = 40\n")
    assert (load_space(path).rerankers, load_space(path).rerank_window) == (("fine-tuned", "models/ce"), 40)
    reranked = Candidate(0, False, "or", rrf).reranked("models/ce", 40)
    assert reranked.name == "shipped · or · rrf k=60 · rerank ce top 40"
    assert (
        reranked.overrides()["search.rerank"] == "models/ce"
        and reranked.overrides()["search.rerank_window"] == 40
    )
    assert reranked.changes(Candidate(0, False, "or", rrf)) == ("reranker",)
    assert reranked.first_stage == Candidate(0, False, "or", rrf)
    for body, message in (
        ("[space]\nepoch = [1]\n", "unknown key"),
        ("[space]\nquery_epochs = [0]\n", "query_epochs"),
        ("[space]\nlexical = ['xor']\n", "not among"),
        ("[space]\nalphas = ['half']\n", "expected a list of float"),
        ("[space]\nrrf_k = []\nnormalise = []\n", "no fusion"),
        ("epochs = [0]\n", "no \\[space\\] table"),
        ("[space]\nrerank_window = 20\n", "must exceed 20"),
        ("[space]\nrerank_window = '30'\n", "positive integer"),
        ("[space]\nrerankers = ['off']\n", "cross-encoder names or paths"),
    ):
        path.write_text(body)
        with pytest.raises(ConfigError, match=message):
            load_space(path)
    with pytest.raises(ConfigError, match="no file"):
        load_space(tmp_path / "missing.toml")
    assert [parse_budget(t) for t in ("2h", "90m", "1h30m", "45s", "600")] == [7200, 5400, 5400, 45, 600]
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget("two hours")


def test_models_needed_cover_every_fold_and_pair():
    folds = Folds.deal([f"q{i}" for i in range(10)], 4, seed=1)
    assert sorted(len(folds.queries(f)) for f in range(4)) == [2, 2, 3, 3]
    needed = models_needed(folds)
    assert needed[:4] == ((0,), (1,), (2,), (3,))
    assert set(needed[4:]) == {(f, g) for f in range(4) for g in range(f + 1, 4)}


def test_the_known_winner_ships_and_the_preset_runs_it(planted, monkeypatch):
    space = _fixed_encoder(rrf_k=(), normalise=("minmax",), alphas=(0.0, 1.0))
    report = tune("planted", config=planted, space=space, folds=4, permutations=2000, progress=False)
    assert report.defaults == Candidate(0, False, "auto", Fusion("minmax", 1.0))
    assert report.winner == Candidate(0, False, "auto", Fusion("minmax", 0.0))
    assert report.table[0].candidate == report.winner and report.table[0].means["ndcg@10"] == pytest.approx(
        1.0
    )
    assert all(c.fusion.value < 1.0 for c in report.fold_choices)
    assert report.runs[TUNED]["ndcg@10"] == pytest.approx(1.0)
    assert report.runs["defaults"]["ndcg@10"] < 0.8
    assert report.decision.ship, report.decision.reasons
    lo, hi = report.row(report.defaults).ci
    assert lo <= report.row(report.defaults).means["ndcg@10"] <= hi and hi - lo > 0
    # the preset beside the index, read over the user's configuration, is the pipeline the tune measured
    assert report.preset == str(preset_path(planted.home, "planted"))
    monkeypatch.setenv("SCIX_HOME", str(planted.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    tuned = load_config("tuned", "planted")
    assert (tuned.search.fusion, tuned.search.convex_alpha, tuned.search.lexical_mode) == (
        "convex",
        0.0,
        "auto",
    )
    run = ConfigRun("tuned", {"search": {"fusion": "convex", "convex_alpha": 0.0}}, "tuned")
    check = evaluate("planted", runs=("hybrid",), config=planted, configured=(run,), permutations=200)
    assert check.runs["tuned"]["ndcg@10"] == pytest.approx(1.0)
    # the report (notebook 08) renders the run: the gate, the runs against the defaults, the CV table
    rendered = TuneView(report.to_dict()).render()
    assert "SHIP" in rendered.html and "minmax α=0 (winner)" in rendered.html and rendered.figures
    assert "tuned (nested)" in rendered.html and "minmax α=1 (defaults)" in rendered.html
    with pytest.raises(ConfigError, match="needs the index"):
        load_config("tuned")
    with pytest.raises(ConfigError, match="no tuned preset"):
        load_config("tuned", "no-such-index")


def test_nothing_better_than_the_defaults_writes_nothing(planted):
    preset = preset_path(planted.home, "planted")
    before = preset.read_text() if preset.exists() else None
    space = _fixed_encoder(rrf_k=(), normalise=("minmax",), alphas=(1.0,))
    report = tune("planted", config=planted, space=space, folds=4, permutations=500, progress=False)
    assert report.winner == report.defaults and not report.decision.ship and report.preset is None
    assert "defaults are the best" in report.decision.reasons[0]
    assert (preset.read_text() if preset.exists() else None) == before


def test_no_test_query_reaches_its_folds_fine_tuning_or_choice(planted):
    """Fine-tuning in the space: each outer fold's models and its choice saw none of its test queries, and a
    model scores only the folds it left out — read from the pieces the run kept."""
    space = Space(
        epochs=(0, 1),
        query_epochs=(1,),
        passages=(False,),
        lexical=("auto",),
        rrf_k=(60,),
        normalise=("minmax",),
        alphas=(0.0, 1.0),
        min_train_queries=1,
    )
    recipe = Recipe(epochs=1, batch_size=8, depth=10, skip=1, seed=3)
    query_recipe = QueryRecipe(epochs=1, batch_size=8, seed=3)
    space = replace(space, rerankers=("fine-tuned",))
    report = tune(
        "planted",
        config=planted,
        space=space,
        folds=3,
        permutations=200,
        progress=False,
        write=False,
        recipe=recipe,
        query_recipe=query_recipe,
        rerank_recipe=RerankRecipe(epochs=1, batch_size=8, depth=10, skip=1, max_length=64, seed=3),
    )
    assert (
        report.covered["encoder_epochs"] == [0, 1]
        and report.covered["query_epochs"] == [0, 1]
        and report.covered["pieces_built"] == report.covered["pieces_planned"]
    )
    pieces = Path(report.setup["pieces"])
    fold_of = {q: int(f) for f, entry in report.ledger.items() for q in entry["test"]}
    assert sorted(fold_of) == sorted(f"q{i:02d}" for i in range(N))
    for entry in report.ledger.values():
        test = set(entry["test"])
        assert test and not test & set(entry["chose_on"])
        # per kind (both towers, the query side, the reranker) its folds-but-one model and the two
        # folds-but-two models
        assert len(entry["models"]) == 9 and sum(n.startswith("rerank-ft") for n in entry["models"]) == 3
        for name, trained_on in entry["models"].items():
            saved = json.loads((pieces / f"{name}.json").read_text())
            assert saved["trained_on"] == trained_on and not test & set(trained_on)
            # a model scores only the queries of the folds it left out
            assert set(saved["rankings"]) == {q for q, g in fold_of.items() if g in saved["excluded"]}
    assert any(row.candidate.epochs == 1 for row in report.table)
    # the reranker stage: each fold's choice is its first-stage choice, reranked or not; the defaults and
    # the first-stage winner are reranked in the table too
    assert report.covered["rerankers"] == ["fine-tuned"]
    reranked = {row.candidate for row in report.table if row.candidate.rerank}
    assert report.defaults.reranked("fine-tuned", 30) in reranked
    assert report.winner.first_stage.reranked("fine-tuned", 30) in reranked
    assert all(c.rerank in ("", "fine-tuned") for c in report.fold_choices)
    assert any(row.candidate.query_epochs == 1 for row in report.table)


def test_a_reranker_you_have_is_tuned_as_the_pipeline_reranks(planted):
    """A cross-encoder trained on 6 of the 24 queries: those are left out, and the tune's reranked defaults
    score what `scix eval`'s hybrid+rerank run scores on the same queries."""
    trained = train_reranker(
        "planted",
        "tiny",
        planted,
        recipe=RerankRecipe(epochs=1, batch_size=8, depth=10, skip=1, max_length=64, seed=3),
        max_queries=6,
        progress=False,
    )
    space = _fixed_encoder(rrf_k=(), normalise=("minmax",), alphas=(0.0, 1.0), rerankers=("tiny",))
    cfg = planted.replace(**{"search.rerank_window": 30})
    report = tune("planted", config=cfg, space=space, folds=3, permutations=200, progress=False, write=False)
    assert report.n_queries == N - trained.queries == 18
    assert any("the reranker 'tiny' was trained on are left out" in n for n in report.notes)
    row = report.row(report.defaults.reranked("tiny", 30))
    check = evaluate("planted", runs=("hybrid+rerank",), config=cfg, reranker="tiny", permutations=200)
    assert check.n_queries == 18
    for metric in ("ndcg@10", "mrr@10"):
        assert row.means[metric] == pytest.approx(check.runs["hybrid+rerank"][metric], abs=1e-9)
    # kept: a resumed run scores nothing again
    again = tune(
        "planted",
        config=cfg,
        space=space,
        folds=3,
        permutations=200,
        progress=False,
        write=False,
        resume=True,
        budget_s=0,
    )
    assert again.table == report.table and again.setup["run_key"] == report.setup["run_key"]
    # the run's key knows the model's files: one retrained under the same name is scored anew
    folder = Workspace(planted.home).model_dir("rerankers", "tiny")
    before = fingerprint(folder)
    (folder / "scix_manifest.json").write_text((folder / "scix_manifest.json").read_text() + " ")
    assert fingerprint(folder) != before
    # a configured reranker not in the space: the defaults are its first stage, and the report says so
    first = tune(
        "planted",
        config=cfg.replace(**{"search.rerank": "tiny"}),
        space=replace(space, rerankers=()),
        folds=3,
        permutations=200,
        progress=False,
        write=False,
    )
    assert any("your configuration reranks with 'tiny'" in n for n in first.notes)
    assert not any(row.candidate.rerank for row in first.table)
    with pytest.raises(ModelUnavailableError, match="no cross-encoder 'no-such-model'"):
        tune("planted", config=cfg, space=replace(space, rerankers=("no-such-model",)), progress=False)


def test_a_reranker_that_wins_ships_in_the_preset(planted, tmp_path, monkeypatch):
    """A cross-encoder that learnt the code words on another corpus (so none of this index's queries is
    left out) beats the dense-alone defaults by far: the reranked defaults win, every fold chooses the
    reranker, and the preset reranks. A fine-tuned winner's reranker is trained on every judged query."""
    copy = Dataset(
        "planted-copy", "python", (*_papers(), Paper("extra", "An extra paper")), _queries(), _qrels()
    )
    ingest(copy, "planted-copy", config=planted, progress=False)
    recipe = RerankRecipe(epochs=6, batch_size=8, depth=24, skip=0, max_length=32, lr=3e-4, seed=3)
    train_reranker("planted-copy", "code-words", planted, recipe=recipe, progress=False)
    space = _fixed_encoder(rrf_k=(), normalise=("minmax",), alphas=(1.0,), rerankers=("code-words",))
    report = tune("planted", config=planted, space=space, folds=4, permutations=2000, progress=False)
    assert report.n_queries == N and report.winner == report.defaults.reranked("code-words", 30)
    assert set(report.fold_choices) == {report.winner} and report.worth["reranker"] == report.winner
    assert report.runs[TUNED]["ndcg@10"] > report.runs["defaults"]["ndcg@10"] + 0.3
    assert report.decision.ship and report.preset
    monkeypatch.setenv("SCIX_HOME", str(planted.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    tuned = load_config("tuned", "planted")
    assert (tuned.search.rerank, tuned.search.rerank_window) == ("code-words", 30)
    from scix_core.search import Searcher

    result = Searcher("planted", tuned).search(_code(7), "hybrid", limit=10)
    assert "rerank" in result.rankings and result.ids[0] == "p07"
    # a winner reranked by a fine-tuned cross-encoder: trained on every judged query, named in the preset
    winner = report.defaults.reranked("fine-tuned", 30)
    fine = replace(report, winner=winner, table=(replace(report.table[0], candidate=winner), *report.table))
    searcher = Searcher("planted", planted)
    gold = from_index(searcher.store, "train")
    small = RerankRecipe(epochs=1, batch_size=8, depth=10, skip=1, max_length=32, seed=3)
    recipes = (Recipe(), QueryRecipe(), small)
    path = _ship(fine, planted, "planted", dict(searcher.manifest), gold, recipes, False, False)
    assert 'rerank = "planted-tuned-reranker"' in path.read_text()
    manifest = json.loads(
        (
            Workspace(planted.home).model_dir("rerankers", "planted-tuned-reranker") / "scix_manifest.json"
        ).read_text()
    )
    assert sorted(manifest["query_ids"]) == sorted(gold.judged)


def test_folds_too_small_to_fine_tune_tune_the_rest(planted):
    space = Space(
        epochs=(0, 1),
        query_epochs=(1,),
        passages=(False,),
        lexical=("auto",),
        rrf_k=(60,),
        normalise=(),
        alphas=(),
    )
    report = tune(
        "planted", config=planted, space=space, folds=3, permutations=200, progress=False, write=False
    )
    assert any("too small to fine-tune" in n for n in report.notes)
    assert report.covered["encoder_epochs"] == [0] and report.covered["query_epochs"] == [0]
    assert all(r.candidate.encoder == "shipped" for r in report.table)


def test_budget_and_resume(planted):
    space = _fixed_encoder(lexical=("auto", "or"), rrf_k=(60,), normalise=(), alphas=())
    with pytest.raises(ConfigError, match="budget ran out"):
        tune("planted", config=planted, space=space, folds=4, budget_s=0, progress=False, write=False)
    first = tune(
        "planted", config=planted, space=space, folds=4, permutations=200, progress=False, write=False
    )
    again = tune(
        "planted",
        config=planted,
        space=space,
        folds=4,
        permutations=200,
        progress=False,
        write=False,
        resume=True,
        budget_s=0,
    )
    assert (
        again.table == first.table
    )  # every piece came from the first run: nothing to build, no budget needed


def test_zscore_fusion_in_the_pipeline(planted):
    cfg = planted.replace(**{"search.convex_normalise": "zscore", "search.convex_alpha": 0.0})
    from scix_core.search import Searcher

    result = Searcher("planted", cfg).search(_code(3), "hybrid")
    assert result.ids[0] == "p03" and result.metadata["convex_normalise"] == "zscore"
    assert ConvexFusion(0.3, "zscore").describe() == "convex α=0.3 zscore"
    with pytest.raises(UnknownNameError, match="convex_normalise"):
        Searcher("planted", cfg.replace(**{"search.convex_normalise": "rank"})).search("x", "hybrid")


def test_the_command_line(planted, monkeypatch, tmp_path, capsys):
    from scix_core.cli.main import main

    monkeypatch.setenv("SCIX_HOME", str(planted.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    config = tmp_path / "scix.toml"  # the user's own file: the defaults the tune compares with
    config.write_text('[search]\nfusion = "convex"\nconvex_alpha = 1.0\n')
    space = tmp_path / "space.toml"
    space.write_text(
        "[space]\nepochs = [0]\nquery_epochs = []\npassages = [false]\nlexical = ['auto']\nrrf_k = []\n"
        "alphas = [0.0]\n"
    )
    out = tmp_path / "tune.json"
    argv = ["--config", str(config), "tune", "--index", "planted", "--space", str(space), "--folds", "4"]
    assert main([*argv, "--permutations", "500", "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "SHIP" in printed and f"wrote {out}" in printed
    saved = json.loads(out.read_text())
    assert saved["winner"] == "shipped · auto · minmax α=0" and saved["decision"]["decision"] == "ship"
    assert main(["--config", "tuned", "info", "--index", "planted", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["tuned_preset"]["chose"].endswith("shipped · auto · minmax α=0")
    assert main(["--config", "tuned", "search", "qzv05kx", "--index", "planted", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["paper_id"] == "p05"
    assert main([*argv, "--budget", "two hours"]) == 2
    assert "--budget" in capsys.readouterr().err
    assert main([*argv, "--reranker", "no-such-model", "--dry-run"]) != 0
    assert "no cross-encoder 'no-such-model'" in capsys.readouterr().err
    assert main(["--config", "tuned", "info"]) == 2  # whose preset? a typed error, not a traceback
    assert "needs the index" in capsys.readouterr().err


def test_a_winner_reading_passages_rebuilds_the_index_from_its_sources(tmp_path, monkeypatch):
    """The planted corpus on disk (BEIR): a winner that reads passage vectors ships with the index rebuilt
    from the files its manifest names, passage vectors and all, and `--config tuned` searches it."""
    folder = tmp_path / "planted-beir"
    (folder / "qrels").mkdir(parents=True)
    sentences = " ".join(f"Sentence {k} of the {TOPICS[0]} study." for k in range(6))
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"p{i:02d}", "title": f"Report {_code(i)}", "text": sentences}) + "\n"
            for i in range(N)
        )
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i:02d}", "text": _code(i)}) + "\n" for i in range(N))
    )
    (folder / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i:02d}\tp{i:02d}\t1\n" for i in range(N))
    )
    home = tmp_path / "home"
    settings = {"search.fusion": "convex", "search.convex_alpha": 1.0, "embedding.backend": "torch"}
    cfg = load_config().replace(home=home, **settings)
    ingest(folder, "beir", "beir", config=cfg, progress=False)
    space = _fixed_encoder(passages=(True,), rrf_k=(), normalise=("minmax",), alphas=(0.0,))
    report = tune("beir", config=cfg, space=space, folds=4, permutations=500, progress=False)
    assert report.winner == Candidate(0, True, "auto", Fusion("minmax", 0.0)) and report.decision.ship
    manifest = json.loads((Workspace(home).index_dir("beir") / "manifest.json").read_text())
    assert manifest["passages"] > 0 and manifest["papers"] == N  # rebuilt with passage vectors
    monkeypatch.setenv("SCIX_HOME", str(home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    tuned = load_config("tuned", "beir").replace(**{"embedding.backend": "torch"})
    assert tuned.search.passages and tuned.search.convex_alpha == 0.0
    from scix_core.search import Searcher

    assert Searcher("beir", tuned).search(_code(7), "hybrid").ids[0] == "p07"
    # the index has passage vectors now, so the defaults read them: a space without passages still has them
    fusion_only = _fixed_encoder(rrf_k=(60,), normalise=(), alphas=())
    again = tune(
        "beir", config=cfg, space=fusion_only, folds=4, permutations=200, progress=False, write=False
    )
    assert again.defaults.passages and {r.candidate.passages for r in again.table} == {False, True}


def test_serve_workers_read_the_tuned_preset(planted, monkeypatch):
    """`scix serve --config tuned --workers N`: each worker (``from_environment``) serves the preset."""
    from fastapi.testclient import TestClient

    from scix_core.serve.app import from_environment
    from scix_core.serve.front import INDEX_ENV, TUNED_ENV

    space = _fixed_encoder(rrf_k=(), normalise=("zscore",), alphas=(0.0,))
    assert tune("planted", config=planted, space=space, folds=4, permutations=500, progress=False).preset
    monkeypatch.setenv("SCIX_HOME", str(planted.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    monkeypatch.setenv(INDEX_ENV, "planted")
    monkeypatch.setenv(TUNED_ENV, "1")
    with TestClient(from_environment()) as client:
        meta = client.get("/search", params={"q": _code(9)}).json()
    assert meta["hits"][0]["paper_id"] == "p09"
    assert (meta["metadata"]["fusion"], meta["metadata"]["convex_alpha"]) == ("convex", 0.0)
    assert meta["metadata"]["convex_normalise"] == "zscore"
