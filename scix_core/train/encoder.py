"""Fine-tune the bi-encoder on a gold set's training queries — locally, from the bundled checkpoint.

Loss: MultipleNegativesRanking (in-batch negatives, Henderson et al. 2017; the sentence-transformers recipe
for retrieval) on (query, relevant paper, hard negative) triples. Hard negatives are mined from the index's
own hybrid ranking: papers ranked ``skip``+1 … ``depth`` for the query and not judged relevant (the very top
is skipped: sparse judgments leave relevant papers unjudged there). Papers are encoded as the index encodes
them (title + abstract, ``Paper.text``).

:func:`train_encoder` trains on every judged query of the split and saves the model into the workspace
(``models/encoders/NAME``) with a manifest naming the training queries, so ``scix eval`` never scores them on
an index built with it (``scix ingest … --model NAME``). :func:`cross_validate` answers "does training help on
this gold set?" honestly: K folds, each model trained on the other folds' queries and scored on its own, so
every judged query is scored once by a model that never saw it; dense and hybrid (RRF k=60 with the index's
lexical lane, exact cosine over the fold model's vectors) against the untrained ones, with the evaluation's
paired tests. ``convex-trained`` fuses the same two lanes by min-max convex combination, its α chosen per fold
on the other folds (as ``scix eval``'s ``convex_minmax``), so no query's judgments pick its own weight;
``convex3-trained`` adds the untrained dense lane as a third (the two encoders err differently), its three
weights chosen the same way on a 0.1 simplex grid. The fold models encode as the index does (its backend: an
ONNX/OpenVINO export of each fold model when the index was built so), and on an index with passage vectors
they score by MaxP over the same passages, so ``dense-trained`` is the lane ``scix ingest --model`` would
build. ``runs_dir`` keeps every run as a TREC run file (top ``DEPTH``, with scores) for fusions tried
afterwards without training again, and each finished fold (``folds/fold-K.json``, exact scores, keyed by
everything the fold depends on): a run stopped part way — a CV costs hours on a laptop CPU — resumes from its
finished folds when started again with the same ``runs_dir``.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scix_core import __version__
from scix_core.config import Config, load_config
from scix_core.embeddings.encoder import Encoder, index_embedding, resolve_model
from scix_core.embeddings.passages import STRIDE, WINDOW, corpus_passages
from scix_core.errors import ConfigError, ScixError
from scix_core.evaluate.gold import from_index
from scix_core.evaluate.metrics import METRICS, PRIMARY, means, per_query
from scix_core.evaluate.provenance import buckets, provenance
from scix_core.evaluate.report import EvalReport, write_trec_runs
from scix_core.evaluate.runs import DEPTH
from scix_core.evaluate.score_fusion import cross_validated, weight_grid
from scix_core.evaluate.significance import compare, gate, holm
from scix_core.fusion import rrf
from scix_core.search import Searcher
from scix_core.types import Ranking
from scix_core.workspace import Workspace, write_json_atomic

LOSS = "MultipleNegativesRankingLoss"
KIND = "encoders"


@dataclass(frozen=True)
class Recipe:
    """The training recipe; every field is recorded in the model's manifest."""

    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-5
    negatives: int = 1  # hard negatives per (query, relevant paper)
    skip: int = 2  # hybrid ranks not mined for negatives (likely unjudged relevant papers)
    depth: int = 30  # mine negatives from the hybrid top ``depth``
    max_length: int = 256
    seed: int = 13


@dataclass(frozen=True)
class EncoderTrainReport:
    name: str
    path: Path
    queries: int
    triples: int
    steps: int
    seconds: float


def encoder_model(cfg: Config, name: str) -> str:
    """``name`` as ``embedding.model``: the path of a workspace encoder of that name, else ``name`` itself."""

    try:
        folder = Workspace(cfg.home).model_dir(KIND, name)
    except ScixError:  # not a workspace name (a path, a hub id with a slash): the model itself
        return name
    return str(folder) if (folder / "scix_manifest.json").exists() else name


def hybrid_rankings(
    searcher, queries: Mapping[str, str], depth: int = 100, progress: bool = False
) -> dict[str, object]:
    """query id -> the untrained pipeline's result (its hybrid ranking and lane rankings), no optional
    stages."""
    from tqdm.auto import tqdm

    return {
        q: searcher.search(text, "hybrid", limit=depth, boosts=False, rerank="off", rewrite="off", lanes="")
        for q, text in tqdm(queries.items(), desc="hybrid pass", disable=not progress, leave=False)
    }


def triples(
    gold,
    query_ids: Sequence[str],
    ranked: Mapping[str, Sequence[str]],
    texts: Mapping[str, str],
    recipe: Recipe,
) -> list[tuple[str, str, str]]:
    """(query, relevant paper, hard negative) for every relevant paper of every query in ``query_ids``."""
    rng = random.Random(recipe.seed)
    out = []
    for q in query_ids:
        relevant = gold.relevant(q)
        pool = [d for d in ranked[q][recipe.skip : recipe.depth] if d not in relevant and d in texts]
        for pos in sorted(relevant):
            if pos not in texts:
                continue
            for _ in range(recipe.negatives):
                neg = rng.choice(pool) if pool else rng.choice(list(texts))
                out.append((gold.queries[q], texts[pos], texts[neg]))
    return out


def load_base(base: str, seed: int, max_length: int, device: str | None = None):
    """The checkpoint a fine-tuning starts from: loaded offline after seeding torch, its sequence length
    capped at ``max_length``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    model = SentenceTransformer(resolve_model(base), device=device)
    model.max_seq_length = min(max_length, model.max_seq_length or max_length)
    return model


def fine_tune(
    base: str,
    examples: list[tuple[str, str, str]],
    recipe: Recipe,
    device: str | None = None,
    progress: bool = False,
):
    """A SentenceTransformer fine-tuned on ``examples``; returns (model, optimiser steps)."""
    if not examples:
        raise ConfigError("no training examples: the split has no judged query with a paper in the index")
    model = load_base(base, recipe.seed, recipe.max_length, device)
    import torch
    from sentence_transformers import InputExample, losses
    from torch.utils.data import DataLoader

    loader = DataLoader(
        [InputExample(texts=list(t)) for t in examples],
        shuffle=True,
        batch_size=recipe.batch_size,
        generator=torch.Generator().manual_seed(recipe.seed),
    )
    loss = losses.MultipleNegativesRankingLoss(model)
    model.old_fit(
        train_objectives=[(loader, loss)],
        epochs=recipe.epochs,
        warmup_steps=max(1, len(loader) * recipe.epochs // 10),
        optimizer_params={"lr": recipe.lr, "fused": True},  # AdamW's one kernel for every tensor
        show_progress_bar=progress,
    )
    return model, len(loader) * recipe.epochs


def _corpus(searcher) -> tuple[list, dict[str, str]]:
    """The index's papers, in store order, and paper id -> its text as the index encodes it."""
    papers = list(searcher.store.papers())
    return papers, {p.paper_id: p.text for p in papers}


def _passages(manifest: dict, cfg: Config, papers: list) -> tuple[list[int], list[str]]:
    """The corpus's passages (owner's position in ``papers``, text) when the index has passage vectors and
    ``search.passages`` is on — the fold models then score by MaxP like the index's own dense lane."""

    if not (manifest.get("passages") and cfg.search.passages):
        return [], []
    return corpus_passages(
        papers, manifest.get("passage_window", WINDOW), manifest.get("passage_stride", STRIDE)
    )


def train_encoder(
    index: str,
    name: str,
    config: Config | None = None,
    split: str = "train",
    recipe: Recipe = Recipe(),
    base_model: str | None = None,
    progress: bool = True,
    gold=None,
) -> EncoderTrainReport:
    """Train on every judged query of ``gold`` (default: the index's qrels of ``split``)."""
    cfg = config or load_config()
    t = time.perf_counter()
    searcher = Searcher(index, cfg)
    gold = gold or from_index(searcher.store, split)
    ids = gold.judged
    results = hybrid_rankings(searcher, {q: gold.queries[q] for q in ids}, recipe.depth, progress)
    _, texts = _corpus(searcher)
    searcher.close(keep_vectors=False)  # training takes minutes to hours: free the index for other processes
    examples = triples(gold, ids, {q: r.ids for q, r in results.items()}, texts, recipe)
    base = base_model or cfg.embedding.model
    model, steps = fine_tune(base, examples, recipe, cfg.embedding.device, progress)
    ws = Workspace(cfg.home)
    with ws.new_model(KIND, name) as folder:
        model.save(str(folder))
        write_json_atomic(
            folder / "scix_manifest.json",
            {
                "name": name,
                "kind": "bi-encoder",
                "base_model": base,
                "loss": LOSS,
                "hard_negatives": f"hybrid ranks {recipe.skip + 1}-{recipe.depth} not judged relevant",
                "index": index,
                "corpus_hash": searcher.manifest.get("corpus_hash"),
                "split": split,
                "query_ids": sorted(ids),
                "triples": len(examples),
                "steps": steps,
                **recipe.__dict__,
                "scix_core": __version__,
                "seconds": round(time.perf_counter() - t, 1),
            },
        )
    return EncoderTrainReport(
        name, ws.model_dir(KIND, name), len(ids), len(examples), steps, time.perf_counter() - t
    )


def model_encoder(model, emb, folder: Path, progress: bool = False):
    """(corpus encode, query encode) for a fold model, on the index's backend: torch as trained, or saved
    into ``folder`` and exported as the index's ONNX/OpenVINO backend encodes, queries one at a time as the
    search pipeline encodes them (an int8 export quantises activations per batch) — so ``dense-trained`` is
    what ``scix ingest --model`` would build with this config."""
    from dataclasses import replace

    if emb.backend == "torch":

        def encode(texts):
            return model.encode(
                texts,
                batch_size=emb.batch_size,
                normalize_embeddings=True,
                show_progress_bar=progress,
                convert_to_numpy=True,
            ).astype(np.float32)

        return encode, encode
    model.save(str(folder / "model"))
    encoder = Encoder(replace(emb, model=str(folder / "model")), home=folder)
    return (lambda texts: encoder.encode(texts, progress)), one_by_one(encoder)


def one_by_one(encoder: Encoder):
    """Encode queries as the search pipeline does: each alone (``Encoder.encode_query``)."""

    def encode(texts):
        if not texts:
            return np.zeros((0, encoder.dim), dtype=np.float32)
        return np.stack([encoder.encode_query(t) for t in texts]).astype(np.float32)

    return encode


def exact_variants(
    encode,
    texts: list[str],
    ids: list[str],
    queries: Mapping[str, str],
    depth: int,
    passages: tuple[list[int], list[str]] | None = None,
    encode_queries=None,
) -> dict[str, dict[str, Ranking]]:
    """query id -> {"whole": exact cosine top ``depth``} and, given ``passages`` (owner position, text),
    "maxp": each paper scored by its best vector, whole or passage (MaxP, as the dense lane does with an
    index's passage vectors) — one encoding of the corpus for both. ``encode_queries``: default ``encode``."""
    docs = np.asarray(encode(texts), dtype=np.float32)
    qids = list(queries)
    qv = np.asarray((encode_queries or encode)([queries[q] for q in qids]), dtype=np.float32)
    whole = qv @ docs.T
    variants = {"whole": whole}
    if passages is not None:
        owners, ptexts = passages
        best = whole.copy()
        if ptexts:  # each paper's column: its best vector
            np.maximum.at(best.T, owners, (qv @ np.asarray(encode(ptexts), dtype=np.float32).T).T)
        variants["maxp"] = best
    out: dict[str, dict[str, Ranking]] = {q: {} for q in qids}
    for name, sims in variants.items():
        for i, q in enumerate(qids):
            top = np.argsort(-sims[i], kind="stable")[:depth]
            out[q][name] = Ranking.from_pairs("dense", [(ids[j], float(sims[i, j])) for j in top])
    return out


def _exact(
    encode,
    texts: list[str],
    ids: list[str],
    queries: Mapping[str, str],
    depth: int,
    passages: tuple[list[int], list[str]] = ([], []),
    encode_queries=None,
) -> dict[str, Ranking]:
    """:func:`exact_variants`' MaxP ranking when there are passages, else its whole-paper one."""
    use = passages if passages[1] else None
    variants = exact_variants(encode, texts, ids, queries, depth, use, encode_queries)
    return {q: v["maxp" if use else "whole"] for q, v in variants.items()}


def _fold_key(
    manifest: dict,
    split: str,
    folds: int,
    recipe: Recipe,
    base: str,
    backend: str,
    passages: int,
    ranked: Mapping[str, Sequence[str]],
) -> str:
    """What a fold's result depends on: the index build, the split and folds, the recipe, the base model, the
    encoding backend, the passages, and the rankings hard negatives are mined from."""
    import hashlib
    import json

    blob = json.dumps(
        {
            "build": manifest.get("build_key"),
            "corpus": manifest.get("corpus_hash"),
            "split": split,
            "folds": folds,
            "recipe": recipe.__dict__,
            "base": base,
            "backend": backend,
            "passages": passages,
            "ranked": {q: list(r) for q, r in sorted(ranked.items())},
            "scix_core": __version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _fold_path(runs_dir: Path, fold: int) -> Path:
    return Path(runs_dir) / "folds" / f"fold-{fold}.json"


def _load_fold(runs_dir: Path | None, fold: int, key: str) -> tuple[int, dict[str, Ranking]] | None:
    """A finished fold kept by an earlier run with the same key (exact scores), or None."""
    import json

    if runs_dir is None:
        return None
    try:
        saved = json.loads(_fold_path(runs_dir, fold).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("key") != key:
        return None
    return int(saved["steps"]), {
        q: Ranking.from_pairs("dense", [(p, float(v)) for p, v in pairs])
        for q, pairs in saved["rankings"].items()
    }


def _save_fold(
    runs_dir: Path | None, fold: int, key: str, steps: int, rankings: Mapping[str, Ranking]
) -> None:
    if runs_dir is not None:
        path = _fold_path(runs_dir, fold)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            path,
            {
                "key": key,
                "fold": fold,
                "steps": steps,
                "rankings": {q: [[i.paper_id, i.score] for i in r.items] for q, r in rankings.items()},
            },
        )


def cross_validate(
    index: str,
    config: Config | None = None,
    split: str = "train",
    folds: int = 5,
    recipe: Recipe = Recipe(),
    base_model: str | None = None,
    permutations: int = 10_000,
    progress: bool = True,
    runs_dir: Path | None = None,
):
    """K-fold cross-validated evaluation of training on ``split``: an
    :class:`~scix_core.evaluate.report.EvalReport` with runs ``lexical``, ``dense``, ``hybrid`` (untrained)
      and ``dense-trained``, ``hybrid-trained``,
    ``convex-trained``, ``convex3-trained``."""

    cfg = (config or load_config()).replace(**{"search.depth": DEPTH})
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    t0 = time.perf_counter()
    searcher = Searcher(index, cfg)
    gold = from_index(searcher.store, split)
    ids = gold.judged
    if len(ids) < folds:
        raise ConfigError(f"{len(ids)} judged queries cannot make {folds} folds")
    results = hybrid_rankings(searcher, {q: gold.queries[q] for q in ids}, DEPTH, progress)
    ranked = {q: r.ids for q, r in results.items()}
    papers, texts = _corpus(searcher)
    paper_ids = [p.paper_id for p in papers]
    corpus = [p.text for p in papers]
    shuffled = random.Random(recipe.seed).sample(ids, len(ids))
    fold_of = {q: i % folds for i, q in enumerate(shuffled)}
    base = base_model or cfg.embedding.model
    emb = index_embedding(cfg.embedding, searcher.manifest)
    passages = _passages(searcher.manifest, cfg, papers)
    searcher.close(
        keep_vectors=False
    )  # the folds take hours on a laptop CPU: free the index for other processes
    trained: dict[str, Ranking] = {}
    steps = []
    key = _fold_key(searcher.manifest, split, folds, recipe, base, emb.backend, len(passages[1]), ranked)
    for f in range(folds):
        done = _load_fold(runs_dir, f, key)
        if done is not None:
            n, fold_rankings = done
        else:
            train_ids = [q for q in ids if fold_of[q] != f]
            model, n = fine_tune(
                base, triples(gold, train_ids, ranked, texts, recipe), recipe, cfg.embedding.device, progress
            )
            held = {q: gold.queries[q] for q in ids if fold_of[q] == f}
            with tempfile.TemporaryDirectory(prefix="scix-fold-") as folder:
                encode, encode_queries = model_encoder(model, emb, Path(folder), progress)
                fold_rankings = _exact(encode, corpus, paper_ids, held, DEPTH, passages, encode_queries)
            del model
            _save_fold(runs_dir, f, key, n, fold_rankings)
        steps.append(n)
        trained.update(fold_rankings)
    lanes = {
        q: {
            **{n: results[q].rankings[n] for n in results[q].metadata["lanes_run"]},
            "dense-trained": trained[q],
        }
        for q in ids
    }
    rankings = {
        "lexical": {q: lanes[q].get("lexical", Ranking("lexical")) for q in ids},
        "dense": {q: lanes[q].get("dense", Ranking("dense")) for q in ids},
        "hybrid": {q: results[q].ranking() for q in ids},
        "dense-trained": trained,
        "hybrid-trained": {
            q: rrf([r for n, r in lanes[q].items() if n != "dense"], k=cfg.search.rrf_k).top(DEPTH)
            for q in ids
        },
    }
    trained_lanes = {q: {"lexical": rankings["lexical"][q], "dense": trained[q]} for q in ids}
    rankings["convex-trained"], alphas = cross_validated(
        trained_lanes, gold, "minmax", DEPTH, folds, recipe.seed
    )
    three = {
        q: {"lexical": rankings["lexical"][q], "dense-trained": trained[q], "dense": rankings["dense"][q]}
        for q in ids
    }
    rankings["convex3-trained"], weights = cross_validated(
        three, gold, "minmax", DEPTH, folds, recipe.seed, weight_grid(tuple(three[ids[0]]))
    )
    if runs_dir is not None:
        write_trec_runs(rankings, runs_dir)
    values = {run: per_query(gold, r) for run, r in rankings.items()}
    fused_runs = ("hybrid-trained", "convex-trained", "convex3-trained")
    comparisons = []
    for baseline in ("hybrid", "lexical"):
        for run in fused_runs:
            comparisons += compare(baseline, run, values, METRICS, permutations)
    comparisons += compare("dense", "dense-trained", values, METRICS, permutations)
    comparisons = holm(comparisons)
    gates = {
        run: gate([c for c in comparisons if c.baseline == "hybrid" and c.candidate == run])
        for run in fused_runs
    }
    seconds = round(time.perf_counter() - t0, 1)
    return EvalReport(
        n_queries=len(ids),
        runs={r: means(v) for r, v in values.items()},
        per_query=values,
        comparisons=tuple(comparisons),
        provenance={r: provenance(gold, rankings[r], lanes) for r in rankings},
        dropped_lanes={},
        buckets={r: buckets(gold, v) for r, v in values.items()},
        seconds={r: seconds for r in rankings},
        skipped={},
        gates=gates,
        setup={
            "index": index,
            "gold": gold.name,
            "baseline": "hybrid",
            "depth": DEPTH,
            "primary": PRIMARY,
            "folds": folds,
            "steps_per_fold": steps,
            "score_fusion_alpha": {"convex-trained": alphas},
            "score_fusion_weights": {"convex3-trained": weights},
            "base_model": base,
            "loss": LOSS,
            "recipe": recipe.__dict__,
            "dense_trained": f"exact cosine over the fold model's vectors ({emb.backend})"
            + (f", MaxP over {len(passages[1])} passages" if passages[1] else ""),
            "permutations": permutations,
            "corpus_hash": searcher.manifest.get("corpus_hash"),
        },
    )
