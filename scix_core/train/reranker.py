"""Build a cross-encoder locally: none can be downloaded here.

Starts from the bundled MiniLM checkpoint (or any local one) with a fresh one-logit head and fine-tunes it on
a gold set's split. Each judged-relevant paper of a query is a positive, grouped with ``negatives`` hard
negatives drawn from the index's own hybrid ranks ``skip``+1 … ``depth`` that are not judged relevant (the
very top is skipped, as for the bi-encoder: sparse judgments leave relevant papers unjudged there).

The default loss is binary cross-entropy **balanced** by ``pos_weight = negatives``. The earlier recipe (plain
BCE, 1:3 labels, lr 2e-5, one epoch) collapsed to the class prior: a fresh head on a bi-encoder checkpoint met
three negatives per positive and learnt to say "no" to everything (SciFact rerank nDCG@10 0.696 → 0.100). With
the classes balanced and lr 5e-5 the scores spread and held-out nDCG@10 rises with every evaluation of the
learning curve (:func:`learning_curve`, ``scix train-reranker --curve``). ``mnrl`` (softmax over the group and
in-batch negatives) and ``lambda`` (LambdaLoss, listwise) are the library's alternatives, selectable by
recipe.

The model is saved into the workspace (``models/rerankers/NAME``) with a manifest naming its training queries,
atomically.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from scix_core import __version__
from scix_core.config import Config, load_config
from scix_core.embeddings.encoder import resolve_model
from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate.gold import Gold, from_index
from scix_core.evaluate.metrics import PRIMARY, means, per_query
from scix_core.search import Searcher
from scix_core.search.stages.rerank import passage
from scix_core.train.encoder import hybrid_rankings
from scix_core.types import Ranking
from scix_core.workspace import Workspace, write_json_atomic

LOSSES = ("bce", "mnrl", "lambda")
KIND = "rerankers"


@dataclass(frozen=True)
class RerankRecipe:
    """The training recipe; every field is recorded in the model's manifest."""

    epochs: int = 2
    batch_size: int = 16  # groups (query, positive, negatives) per step
    lr: float = 5e-5
    negatives: int = 3  # hard negatives per relevant paper
    skip: int = 2  # hybrid ranks never mined for negatives
    depth: int = 30  # mine negatives from the hybrid top ``depth``
    loss: str = "bce"  # balanced binary cross-entropy; "mnrl", "lambda"
    max_length: int = 256
    seed: int = 13

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise UnknownNameError("reranker loss", self.loss, LOSSES)
        for name in ("epochs", "batch_size", "negatives"):
            if getattr(self, name) < 1:
                raise ConfigError(f"reranker recipe: {name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class TrainReport:
    name: str
    path: Path
    queries: int
    positives: int
    negatives: int
    steps: int
    seconds: float


@dataclass(frozen=True)
class CurvePoint:
    step: int
    ndcg: float  # nDCG@10 of the reranked window on the held-out queries
    spread: float  # standard deviation of the held-out scores: ~0 is a collapsed model


@dataclass(frozen=True)
class LearningCurve:
    index: str
    held_out: int  # queries never trained on, the curve's evaluation set
    trained_on: int
    window: int
    hybrid: float  # nDCG@10 of the untrained hybrid ranking on the held-out queries
    points: tuple[CurvePoint, ...]
    recipe: RerankRecipe
    seconds: float

    def to_dict(self) -> dict:
        return {**asdict(self), "points": [asdict(p) for p in self.points]}


Group = tuple[str, str, str, list[str]]  # (query id, query, relevant passage, hard-negative passages)


def groups(
    gold,
    query_ids: Sequence[str],
    ranked: Mapping[str, Sequence[str]],
    texts: Mapping[str, str],
    recipe: RerankRecipe,
) -> list[Group]:
    rng = random.Random(recipe.seed)
    out = []
    for q in query_ids:
        relevant = gold.relevant(q)
        pool = [d for d in ranked[q][recipe.skip : recipe.depth] if d not in relevant and d in texts]
        if not pool:
            continue
        for pos in sorted(relevant & texts.keys()):
            negs = rng.sample(pool, min(recipe.negatives, len(pool)))
            negs += [
                rng.choice(pool) for _ in range(recipe.negatives - len(negs))
            ]  # same width for every group
            out.append((q, gold.queries[q], texts[pos], [texts[n] for n in negs]))
    return out


def _loss(model, recipe: RerankRecipe):
    import torch
    from sentence_transformers.cross_encoder import losses

    if recipe.loss == "bce":
        return losses.BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(float(recipe.negatives)))
    if recipe.loss == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, num_negatives=recipe.negatives)
    return losses.LambdaLoss(model)


def _batch_loss(loss, recipe: RerankRecipe, batch: list[Group]):
    import torch

    if recipe.loss == "bce":
        queries, docs, labels = [], [], []
        for _, q, pos, negs in batch:
            queries += [q] * (1 + len(negs))
            docs += [pos, *negs]
            labels += [1.0] + [0.0] * len(negs)
        return loss([queries, docs], torch.tensor(labels))
    if recipe.loss == "mnrl":
        columns = [[q for _, q, _, _ in batch], [p for _, _, p, _ in batch]]
        columns += [[negs[j] for *_, negs in batch] for j in range(recipe.negatives)]
        return loss(columns, None)
    return loss(
        [[q for _, q, _, _ in batch], [[p, *negs] for _, _, p, negs in batch]],
        [torch.tensor([1.0] + [0.0] * len(negs)) for *_, negs in batch],
    )


def fine_tune(
    base: str,
    data: list[Group],
    recipe: RerankRecipe,
    device: str | None = None,
    on_step: Callable[[object, int], None] | None = None,
    progress: bool = False,
):
    """A CrossEncoder fine-tuned on ``data`` (AdamW, linear warm-up over 10% then decay, gradients clipped at
    1); ``on_step(model, step)`` runs after every optimiser step. Returns (model, steps)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import CrossEncoder
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    if not data:
        raise ConfigError(
            "no training groups: the split has no judged query with a paper and a hard negative"
        )
    torch.manual_seed(recipe.seed)
    model = CrossEncoder(resolve_model(base), num_labels=1, max_length=recipe.max_length, device=device)
    loss = _loss(model, recipe)
    # fused: one kernel steps every tensor (a CPU step ~9x faster than the per-tensor loop), the same update
    optimiser = torch.optim.AdamW(model.model.parameters(), lr=recipe.lr, weight_decay=0.01, fused=True)
    per_epoch = -(-len(data) // recipe.batch_size)
    total = per_epoch * recipe.epochs
    schedule = get_linear_schedule_with_warmup(optimiser, max(1, total // 10), total)
    rng = random.Random(recipe.seed)
    order = list(data)
    step = 0
    if on_step is not None:
        model.model.eval()
        on_step(model, 0)
    with tqdm(total=total, desc="train reranker", disable=not progress, leave=False) as bar:
        for _ in range(recipe.epochs):
            rng.shuffle(order)
            for start in range(0, len(order), recipe.batch_size):
                model.model.train()
                _batch_loss(loss, recipe, order[start : start + recipe.batch_size]).backward()
                torch.nn.utils.clip_grad_norm_(model.model.parameters(), 1.0)
                optimiser.step()
                schedule.step()
                optimiser.zero_grad()
                step += 1
                bar.update()
                if on_step is not None:
                    model.model.eval()
                    on_step(model, step)
    model.model.eval()
    return model, total


def _gold(searcher, split: str):
    gold = from_index(searcher.store, split)
    if not gold.judged:
        raise ConfigError(f"index {searcher.index!r} has no judged queries in split {split!r}")
    return gold


def _rank(searcher, gold, query_ids: Sequence[str], recipe: RerankRecipe):
    """The untrained hybrid ranking of ``query_ids`` and every paper's passage."""

    results = hybrid_rankings(searcher, {q: gold.queries[q] for q in query_ids}, max(recipe.depth, 100))
    texts = {p.paper_id: passage(p.title, p.abstract) for p in searcher.store.papers()}
    return {q: r.ranking() for q, r in results.items()}, texts


def train_reranker(
    index: str,
    name: str,
    config: Config | None = None,
    split: str = "train",
    recipe: RerankRecipe = RerankRecipe(),
    max_queries: int | None = None,
    base_model: str | None = None,
    progress: bool = True,
    gold: Gold | None = None,
) -> TrainReport:
    """A cross-encoder trained on the judged queries of ``split`` (or of ``gold``, any gold set over the
    index), saved into the workspace as ``name``."""
    cfg = config or load_config()
    t = time.perf_counter()
    searcher = Searcher(index, cfg)
    gold = gold or _gold(searcher, split)
    query_ids = random.Random(recipe.seed).sample(gold.judged, len(gold.judged))[: max_queries or None]
    ranked, texts = _rank(searcher, gold, query_ids, recipe)
    data = groups(gold, query_ids, {q: ranked[q].ids for q in query_ids}, texts, recipe)
    base = base_model or cfg.embedding.model
    model, steps = fine_tune(base, data, recipe, cfg.embedding.device, progress=progress)
    trained = sorted({g[0] for g in data})
    negatives = sum(len(g[3]) for g in data)
    ws = Workspace(cfg.home)
    with ws.new_model(KIND, name) as folder:
        model.save(str(folder))
        write_json_atomic(
            folder / "scix_manifest.json",
            {
                "name": name,
                "kind": "cross-encoder",
                "base_model": base,
                "index": index,
                "corpus_hash": searcher.manifest.get("corpus_hash"),
                "split": split,
                "queries": len(trained),
                "positives": len(data),
                "negatives": negatives,
                "steps": steps,
                "recipe": asdict(recipe),
                "hard_negatives": f"hybrid ranks {recipe.skip + 1}-{recipe.depth} not judged relevant",
                "scix_core": __version__,
                "query_ids": trained,
                "seconds": round(time.perf_counter() - t, 1),
            },
        )
    return TrainReport(
        name, ws.model_dir(KIND, name), len(trained), len(data), negatives, steps, time.perf_counter() - t
    )


def learning_curve(
    index: str,
    config: Config | None = None,
    split: str = "train",
    recipe: RerankRecipe = RerankRecipe(),
    every: int = 15,
    window: int = 20,
    folds: int = 5,
    base_model: str | None = None,
    progress: bool = True,
) -> LearningCurve:
    """Train on all but one of ``folds`` folds of the judged queries; every ``every`` steps (and at step 0 and
    the end) rerank the held-out fold's hybrid top ``window`` and record nDCG@10 and the score spread."""
    import numpy as np

    if folds < 2 or every < 1 or window < 1:
        raise ConfigError(
            f"learning curve needs folds >= 2, every >= 1, window >= 1 (got {folds}, {every}, {window})"
        )
    cfg = config or load_config()
    t = time.perf_counter()
    searcher = Searcher(index, cfg)
    gold = _gold(searcher, split)
    ranked, texts = _rank(searcher, gold, gold.judged, recipe)
    shuffled = random.Random(recipe.seed).sample(gold.judged, len(gold.judged))
    held = sorted(shuffled[::folds])
    train = [q for q in gold.judged if q not in set(held)]
    if not held or not train:
        raise ConfigError(f"{len(gold.judged)} judged queries cannot make {folds} folds")
    held_gold = Gold(
        f"{gold.name} held-out", {q: gold.queries[q] for q in held}, {q: gold.qrels[q] for q in held}
    )
    hybrid = means(per_query(held_gold, {q: ranked[q] for q in held}, (PRIMARY,)))[PRIMARY]
    data = groups(gold, train, {q: ranked[q].ids for q in train}, texts, recipe)
    total = -(-len(data) // recipe.batch_size) * recipe.epochs
    points: list[CurvePoint] = []

    def evaluate(model, step: int) -> None:
        if step % every and step != total and step != 0:
            return
        pairs, spans = [], {}
        for q in held:
            win = [d for d in ranked[q].ids[:window] if d in texts]
            spans[q] = (len(pairs), win)
            pairs += [(gold.queries[q], texts[d]) for d in win]
        scores = model.predict(pairs, batch_size=64, show_progress_bar=False) if pairs else np.zeros(0)
        reranked = {}
        for q, (i, win) in spans.items():
            order = sorted(zip(win, map(float, scores[i : i + len(win)])), key=lambda x: -x[1])
            reranked[q] = Ranking.from_pairs("rerank", order)
        ndcg = means(per_query(held_gold, reranked, (PRIMARY,)))[PRIMARY]
        points.append(
            CurvePoint(step, round(ndcg, 4), round(float(np.std(scores)) if len(scores) else 0.0, 4))
        )

    base = base_model or cfg.embedding.model
    fine_tune(base, data, recipe, cfg.embedding.device, on_step=evaluate, progress=progress)
    return LearningCurve(
        index,
        len(held),
        len(train),
        window,
        round(hybrid, 4),
        tuple(points),
        recipe,
        round(time.perf_counter() - t, 1),
    )
