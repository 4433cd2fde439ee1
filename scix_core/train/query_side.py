"""Query-side fine-tuning: a query encoder trained against an index's own vectors, the papers left as built.

The paper tower stays frozen — the index's vectors (and its passage vectors) are the targets — and only the
query encoder learns, from the base model, with a softmax over every paper of the corpus (each scored as the
dense lane scores it: its own vector, or the best of it and its passages, MaxP) and each judged relevant
paper a positive. With the corpus's vectors fixed the whole corpus is the set of negatives at the cost of
one matrix product, and a training step is a forward and backward pass over short queries only: minutes
where fine-tuning both towers (:mod:`scix_core.train.encoder`) costs an hour and a re-encoded corpus.
Nothing is rebuilt: ``embedding.query_model`` names the model, and the index's queries are encoded by it
(:func:`scix_core.embeddings.encoder.query_embedding`) on the index's backend. Its manifest names the model
whose vectors it was trained against (``document_model``) and the training queries, so an index encoded by
another model refuses it and ``scix eval`` never scores a query it learnt from.

This is the asymmetric dual encoder of Sciavolino et al. (2021) and of query-side adaptation in dense
retrieval; SciFact's 5-fold CV on train measured what it is worth against the shipped encoder
(docs/results.md#tuning).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scix_core import __version__
from scix_core.config import Config, load_config
from scix_core.embeddings.cache import EmbeddingCache
from scix_core.embeddings.encoder import Encoder, index_embedding, query_embedding
from scix_core.embeddings.passages import STRIDE, WINDOW, corpus_passages
from scix_core.errors import ConfigError
from scix_core.evaluate.gold import Gold, from_index
from scix_core.train.encoder import EncoderTrainReport, load_base, one_by_one
from scix_core.workspace import Workspace, write_json_atomic

KIND = "encoders"  # the workspace folder it shares with both-tower encoders (``models/encoders/NAME``)


@dataclass(frozen=True)
class QueryRecipe:
    """The query-side recipe; every field is recorded in the model's manifest."""

    epochs: int = 2
    batch_size: int = 32
    lr: float = 5e-5
    scale: float = 20.0  # the softmax's inverse temperature over cosine similarities (MNRL's)
    max_length: int = 64  # tokens per query
    seed: int = 13


def index_encoders(cfg: Config, manifest: Mapping, progress: bool = False) -> tuple[Callable, Callable]:
    """(corpus encode with the index's encoder, through the workspace's embedding cache; query encode as the
    pipeline does — each query alone, by ``embedding.query_model`` when it is set)."""
    encoder = Encoder(index_embedding(cfg.embedding, dict(manifest)), cfg.home)
    cache = EmbeddingCache(
        Workspace(cfg.home).embedding_cache(encoder.slug), encoder.config.model, encoder.max_length
    )
    query = Encoder(query_embedding(cfg.embedding, dict(manifest), cfg.home), cfg.home)

    def corpus(texts):
        from tqdm.auto import tqdm

        with tqdm(total=len(texts), desc="encode", disable=not progress, leave=False) as bar:
            return cache.vectors(texts, encoder.encode, on_chunk=bar.update).astype(np.float32)

    return corpus, one_by_one(query)


@dataclass(frozen=True)
class Targets:
    """What the query encoder learns to score: every vector of the corpus (papers, then their passages) and
    the paper each belongs to."""

    vectors: np.ndarray  # (m, dim) float32, unit length
    owners: np.ndarray  # (m,) the paper's position
    papers: int

    @classmethod
    def of(cls, corpus: Callable, papers: Sequence, manifest: Mapping, passages: bool) -> Targets:
        whole = np.asarray(corpus([p.text for p in papers]), dtype=np.float32)
        owners = np.arange(len(papers))
        if not passages:
            return cls(whole, owners, len(papers))
        window, stride = manifest.get("passage_window", WINDOW), manifest.get("passage_stride", STRIDE)
        own, texts = corpus_passages(list(papers), window, stride)
        cut = (
            np.asarray(corpus(texts), dtype=np.float32)
            if texts
            else np.zeros((0, whole.shape[1]), np.float32)
        )
        return cls(
            np.concatenate([whole, cut]),
            np.concatenate([owners, np.asarray(own, dtype=np.int64)]),
            len(papers),
        )


def positives(gold: Gold, ids: Sequence[str], row: Mapping[str, int]) -> list[tuple[str, list[int]]]:
    """(query text, the positions of its relevant papers) for each query of ``ids`` with one in the corpus."""
    out = []
    for q in ids:
        rows = sorted(row[d] for d in gold.relevant(q) if d in row)
        if rows:
            out.append((gold.queries[q], rows))
    return out


def fine_tune_queries(
    base: str,
    examples: Sequence[tuple[str, list[int]]],
    targets: Targets,
    recipe: QueryRecipe = QueryRecipe(),
    device: str | None = None,
    progress: bool = False,
):
    """A SentenceTransformer (from ``base``) whose query embeddings rank each example's papers first among
    ``targets``: cross-entropy of the positives' share of a softmax over every paper's MaxP score."""
    if not examples:
        raise ConfigError("no training queries: the split has no judged query with a paper in the index")
    model = load_base(base, recipe.seed, recipe.max_length, device)
    import torch
    from tqdm.auto import tqdm

    vectors = torch.from_numpy(targets.vectors)
    owners = torch.from_numpy(targets.owners.astype(np.int64))
    steps = recipe.epochs * -(-len(examples) // recipe.batch_size)
    warmup = max(1, steps // 10)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe.lr, fused=True)  # one kernel for every tensor
    # linear warm-up over a tenth of the steps, then linear decay to 0 (sentence-transformers' WarmupLinear)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    rng = random.Random(recipe.seed)
    model.train()
    with tqdm(total=steps, desc="query-side fine-tuning", disable=not progress, leave=False) as bar:
        for _ in range(recipe.epochs):
            order = rng.sample(list(examples), len(examples))
            for start in range(0, len(order), recipe.batch_size):
                batch = order[start : start + recipe.batch_size]
                features = model.preprocess([text for text, _ in batch])
                features = {k: v.to(model.device) if torch.is_tensor(v) else v for k, v in features.items()}
                query = torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)
                sims = query @ vectors.T
                scores = torch.full((len(batch), targets.papers), -1e4, dtype=sims.dtype).scatter_reduce(
                    1, owners.expand(len(batch), -1), sims, reduce="amax", include_self=False
                )
                logits = recipe.scale * scores
                mask = torch.zeros_like(logits, dtype=torch.bool)
                for i, (_, rows) in enumerate(batch):
                    mask[i, rows] = True
                loss = (
                    torch.logsumexp(logits, 1) - torch.logsumexp(logits.masked_fill(~mask, -1e9), 1)
                ).mean()
                loss.backward()
                optimiser.step()
                schedule.step()
                optimiser.zero_grad()
                bar.update()
    model.eval()
    return model, steps


def train_query_encoder(
    index: str,
    name: str,
    config: Config | None = None,
    split: str = "train",
    recipe: QueryRecipe = QueryRecipe(),
    gold: Gold | None = None,
    passages: bool | None = None,
    progress: bool = True,
):
    """Train a query encoder on every judged query of ``gold`` (default: the index's qrels of ``split``)
    against the index's vectors — MaxP over its passage vectors when ``passages`` (default: when the index
    has them and ``search.passages`` is on) — and save it as ``models/encoders/NAME``."""
    from scix_core.search import Searcher  # lazy: the search pipeline is only needed to read the index

    cfg = config or load_config()
    t = time.perf_counter()
    searcher = Searcher(index, cfg)
    manifest = dict(searcher.manifest)
    gold = gold or from_index(searcher.store, split)
    papers = list(searcher.store.papers())
    searcher.close(keep_vectors=False)
    if passages is None:
        passages = bool(manifest.get("passages")) and cfg.search.passages
    base = manifest["model"]
    corpus, _ = index_encoders(cfg.replace(**{"embedding.query_model": ""}), manifest, progress)
    targets = Targets.of(corpus, papers, manifest, passages)
    examples = positives(gold, gold.judged, {p.paper_id: i for i, p in enumerate(papers)})
    model, steps = fine_tune_queries(base, examples, targets, recipe, cfg.embedding.device, progress)
    ws = Workspace(cfg.home)
    with ws.new_model(KIND, name) as folder:
        model.save(str(folder))
        write_json_atomic(
            folder / "scix_manifest.json",
            {
                "name": name,
                "kind": "query-encoder",
                "base_model": base,
                "document_model": manifest["model"],
                "document_backend": manifest.get("embedding_backend", "torch"),
                "loss": "softmax over the corpus's frozen vectors (MaxP), every judged paper a positive",
                "passages": passages,
                "index": index,
                "corpus_hash": manifest.get("corpus_hash"),
                "split": split,
                "query_ids": sorted(gold.judged),
                "steps": steps,
                **recipe.__dict__,
                "scix_core": __version__,
                "seconds": round(time.perf_counter() - t, 1),
            },
        )
    return EncoderTrainReport(
        name, ws.model_dir(KIND, name), len(examples), len(examples), steps, time.perf_counter() - t
    )
