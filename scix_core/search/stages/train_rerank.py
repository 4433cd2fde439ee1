"""Build a cross-encoder locally: none can be downloaded here.

Starts from the bundled MiniLM checkpoint (or any local one) with a fresh
one-logit head and fine-tunes it with binary cross-entropy on a gold set's
split: each judged-relevant paper is a positive; the top-ranked papers the
hybrid search returns that are not judged relevant are hard negatives. The
model is saved into the workspace (``models/rerankers/NAME``) with a
manifest, atomically.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from scix_core import __version__
from scix_core.config import Config, load_config
from scix_core.embeddings.encoder import resolve_model
from scix_core.errors import ConfigError
from scix_core.search.stages.rerank import passage
from scix_core.workspace import Workspace, write_json_atomic


@dataclass(frozen=True)
class TrainReport:
    name: str
    path: Path
    queries: int
    positives: int
    negatives: int
    seconds: float


def training_pairs(searcher, split: str, negatives: int = 3, depth: int = 20, max_queries: int | None = None,
                   seed: int = 13) -> tuple[list[tuple[str, str, float]], list[str]]:
    """(query, passage, label) triples from the split's qrels and the index's own hybrid ranking,
    and the ids of the queries used (recorded so an evaluation can leave them out)."""
    qrels = searcher.store.qrels(split)
    if not qrels:
        raise ConfigError(f"index {searcher.index!r} has no qrels for split {split!r}")
    queries = [q for q in searcher.store.queries() if q.query_id in qrels]
    random.Random(seed).shuffle(queries)
    queries = queries[:max_queries] if max_queries else queries
    triples = []
    for q in queries:
        relevant = {d for d, g in qrels[q.query_id].items() if g > 0}
        found = searcher.search(q.text, "hybrid", limit=min(depth, 1000)).ids
        hard = [d for d in found if d not in relevant][:negatives]
        papers = searcher.store.get([*relevant, *hard])
        triples += [(q.text, passage(papers[d].title, papers[d].abstract), 1.0) for d in sorted(relevant) if d in papers]
        triples += [(q.text, passage(papers[d].title, papers[d].abstract), 0.0) for d in hard if d in papers]
    return triples, [q.query_id for q in queries]


def train_reranker(index: str, name: str, config: Config | None = None, split: str = "train", epochs: int = 1,
                   batch_size: int = 16, negatives: int = 3, max_queries: int | None = None, lr: float = 2e-5,
                   max_length: int = 256, base_model: str | None = None, seed: int = 13,
                   progress: bool = True) -> TrainReport:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import CrossEncoder, InputExample
    from torch.utils.data import DataLoader

    from scix_core.search import Searcher

    cfg = config or load_config()
    t = time.perf_counter()
    searcher = Searcher(index, cfg)
    triples, query_ids = training_pairs(searcher, split, negatives, max_queries=max_queries, seed=seed)
    torch.manual_seed(seed)
    base = base_model or cfg.embedding.model
    model = CrossEncoder(resolve_model(base), num_labels=1, max_length=max_length, device=cfg.embedding.device)
    loader = DataLoader([InputExample(texts=[q, p], label=y) for q, p, y in triples], shuffle=True,
                        batch_size=batch_size, generator=torch.Generator().manual_seed(seed))
    model.old_fit(train_dataloader=loader, epochs=epochs, warmup_steps=max(1, len(loader) // 10),
                  optimizer_params={"lr": lr}, show_progress_bar=progress)
    ws = Workspace(cfg.home)
    positives = sum(1 for *_, y in triples if y > 0)
    with ws.new_model("rerankers", name) as folder:
        model.save(str(folder))
        write_json_atomic(folder / "scix_manifest.json", {
            "name": name, "kind": "cross-encoder", "base_model": base, "index": index,
            "corpus_hash": searcher.manifest.get("corpus_hash"), "split": split, "queries": len({q for q, *_ in triples}),
            "positives": positives, "negatives": len(triples) - positives, "epochs": epochs, "batch_size": batch_size,
            "lr": lr, "max_length": max_length, "seed": seed, "scix_core": __version__, "query_ids": sorted(query_ids),
            "seconds": round(time.perf_counter() - t, 1)})
    return TrainReport(name, ws.model_dir("rerankers", name), len({q for q, *_ in triples}), positives,
                       len(triples) - positives, time.perf_counter() - t)


def training_queries(model_dir: Path, index: str, corpus_hash: str | None = None) -> set[str] | None:
    """Query ids of ``index`` a workspace model (reranker or encoder) was trained on (None: not trained on this
    index). With ``corpus_hash``, a model trained on another index of the same corpus counts too (the same gold
    queries under another name)."""
    import json

    path = Path(model_dir) / "scix_manifest.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("index") != index and (corpus_hash is None or manifest.get("corpus_hash") != corpus_hash):
        return None
    return set(manifest.get("query_ids", ())) or {"*"}  # an older manifest without ids: assume every query
