"""The expensive pieces of a tuning run, each built once and kept on disk: lane rankings per query.

* ``lexical-MODE``: every lexical lane of the index's pipeline (title/abstract, body, the optional lanes the
  configuration runs) for every judged query, under one lexical semantics;
* ``dense-shipped``: the index's own encoder, exact cosine over the papers (``whole``) and the best of the
  paper and its passages (``maxp``), for every judged query;
* ``dense-ftE-xF[-G]``: an encoder fine-tuned ``E`` epochs on the queries of every fold but ``F`` (and
  ``G``), scoring the queries of those excluded folds only; ``dense-qE-xF[-G]`` the same with the query
  side alone fine-tuned against the index's vectors (:mod:`scix_core.train.query_side`). The
  folds-but-one models score the plain cross-validation; the folds-but-two models score the inner
  cross-validation that chooses a pipeline for outer fold ``F`` on the other folds, so no query of a fold's
  test part reaches the fine-tuning, the choice or its estimate (:func:`models_needed`). With
  ``--group-folds`` queries sharing a relevant paper share a fold where the gold set allows it
  (:meth:`Folds.deal`).

Each piece is a JSON file in the run's folder under the run's key (the index build, the gold split, the
folds and their seed, the code version): ``--resume`` keeps the pieces of an interrupted run and builds
only the rest.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scix_core import __version__
from scix_core.embeddings.encoder import index_embedding
from scix_core.embeddings.passages import STRIDE, WINDOW, corpus_passages
from scix_core.evaluate.gold import Gold
from scix_core.train.encoder import exact_variants, fine_tune, model_encoder
from scix_core.train.query_side import QueryRecipe, Targets, fine_tune_queries
from scix_core.types import Ranking
from scix_core.workspace import write_json_atomic

DENSE_VARIANTS = ("whole", "maxp")


@dataclass(frozen=True)
class Folds:
    """Judged queries dealt into ``k`` seeded folds."""

    of: Mapping[str, int]  # query id -> fold
    k: int
    grouped: bool = False  # queries sharing a relevant paper were kept in one fold

    @classmethod
    def deal(cls, ids: Sequence[str], k: int, seed: int, gold: Gold | None = None) -> Folds:
        """Shuffled and dealt round the folds; with ``gold``, queries that share a relevant paper stay in one
        fold (:func:`query_groups`, largest first into the smallest fold) — a fine-tuned model then never
        meets a test query whose relevant paper it was trained to rank, as a new query on the same collection
        would not be guaranteed to — when every group fits in a fold; otherwise at random."""
        groups = query_groups(ids, gold) if gold is not None else None
        if groups is None or max(map(len, groups)) > len(ids) / k:
            shuffled = random.Random(seed).sample(list(ids), len(ids))
            return cls({q: i % k for i, q in enumerate(shuffled)}, k)
        order = random.Random(seed).sample(groups, len(groups))
        order.sort(key=len, reverse=True)  # stable: equal sizes keep the seeded order
        sizes, of = [0] * k, {}
        for group in order:
            fold = sizes.index(min(sizes))
            sizes[fold] += len(group)
            of.update((q, fold) for q in group)
        return cls({q: of[q] for q in ids}, k, grouped=True)

    def queries(self, *folds: int) -> list[str]:
        return [q for q, f in self.of.items() if f in folds]

    def training(self, *excluded: int) -> list[str]:
        """The queries of every fold but ``excluded``: what a model for those folds may learn from."""
        return [q for q, f in self.of.items() if f not in excluded]


def query_groups(ids: Sequence[str], gold: Gold) -> list[list[str]]:
    """The queries of ``ids`` joined when they share a relevant paper (connected components), each group in
    ``ids`` order, the groups in the order of their first query."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for q in ids:
        for paper in gold.relevant(q):
            parent[root("q:" + q)] = root("p:" + paper)
    groups: dict[str, list[str]] = {}
    for q in ids:
        groups.setdefault(root("q:" + q), []).append(q)
    return list(groups.values())


def models_needed(folds: Folds) -> tuple[tuple[int, ...], ...]:
    """The excluded-fold sets of the fine-tuned models an honest nested run needs, cheapest to use first:
    each fold alone (the plain cross-validation and each outer fold's estimate), then each pair of folds
    (the inner cross-validation of both: a model without folds F and G scores fold G's queries for outer
    fold F and fold F's queries for outer fold G)."""
    singles = tuple((f,) for f in range(folds.k))
    pairs = tuple((f, g) for f in range(folds.k) for g in range(f + 1, folds.k))
    return singles + pairs


def run_key(manifest: Mapping, gold: Gold, folds: Folds, seed: int, extra: Mapping | None = None) -> str:
    """What every piece of a run depends on."""
    blob = json.dumps(
        {
            "build": manifest.get("build_key"),
            "corpus": manifest.get("corpus_hash"),
            "gold": gold.name,
            "qrels": {q: dict(sorted(gold.qrels[q].items())) for q in sorted(gold.judged)},
            "queries": {q: gold.queries[q] for q in sorted(gold.judged)},
            "folds": folds.k,
            "seed": seed,
            "dealt": sorted(folds.of.items()),
            "extra": dict(extra or {}),
            "scix_core": __version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class PieceStore:
    """The run's folder: a piece is ``NAME.json`` holding the run's key and its rankings."""

    def __init__(self, folder: Path, key: str, resume: bool):
        self.folder, self.key = Path(folder), key
        self.folder.mkdir(parents=True, exist_ok=True)
        if not resume:
            for old in self.folder.glob("*.json"):
                old.unlink()

    def load(self, name: str) -> dict | None:
        try:
            saved = json.loads((self.folder / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("key") != self.key:
            return None
        return {
            q: {
                lane: Ranking.from_pairs(lane, [(p, float(s)) for p, s in pairs])
                for lane, pairs in lanes.items()
            }
            for q, lanes in saved["rankings"].items()
        }

    def save(self, name: str, rankings: Mapping[str, Mapping[str, Ranking]], **info) -> None:
        write_json_atomic(
            self.folder / f"{name}.json",
            {
                "key": self.key,
                **info,
                "rankings": {
                    q: {lane: [[i.paper_id, i.score] for i in r.items] for lane, r in lanes.items()}
                    for q, lanes in rankings.items()
                },
            },
        )


def lexical_lanes(searcher, queries: Mapping[str, str], depth: int, progress: bool = False) -> dict:
    """query id -> lane -> ranking: the pipeline's lexical lanes (no dense lane, no optional stage)."""
    from tqdm.auto import tqdm

    out = {}
    for q, text in tqdm(queries.items(), desc="lexical lanes", disable=not progress, leave=False):
        result = searcher.search(text, "keyword", limit=depth, boosts=False, rerank="off", rewrite="off")
        out[q] = {n: result.rankings[n] for n in result.metadata["lanes_run"] if n in result.rankings}
    return out


def dense_lanes(
    encode_corpus: Callable[[list[str]], np.ndarray],
    encode_queries: Callable[[list[str]], np.ndarray],
    papers: Sequence,
    queries: Mapping[str, str],
    depth: int,
    passages: bool,
    manifest: Mapping,
) -> dict[str, dict[str, Ranking]]:
    """query id -> {"whole": exact cosine top ``depth``, "maxp": the best of a paper's vector and its
    passages' (only with ``passages``)}, the passages cut as the index cuts them."""
    window, stride = manifest.get("passage_window", WINDOW), manifest.get("passage_stride", STRIDE)
    cut = corpus_passages(list(papers), window, stride) if passages else None
    texts, ids = [p.text for p in papers], [p.paper_id for p in papers]
    return exact_variants(encode_corpus, texts, ids, queries, depth, cut, encode_queries)


def fine_tuned_lanes(
    base: str,
    examples: list,
    recipe,
    cfg,
    manifest: Mapping,
    papers: Sequence,
    queries: Mapping[str, str],
    depth: int,
    passages: bool,
    progress: bool = False,
) -> dict[str, dict[str, Ranking]]:
    """Fine-tune ``base`` on ``examples`` and rank ``queries`` with it as the index would encode (its
    backend)."""
    model, _ = fine_tune(base, examples, recipe, cfg.embedding.device, progress)
    emb = index_embedding(cfg.embedding, dict(manifest))
    with tempfile.TemporaryDirectory(prefix="scix-tune-") as folder:
        encode, encode_queries = model_encoder(model, emb, Path(folder), progress)
        return dense_lanes(encode, encode_queries, papers, queries, depth, passages, manifest)


def query_side_lanes(
    examples: list,
    targets: Targets,
    recipe: QueryRecipe,
    cfg,
    manifest: Mapping,
    corpus: Callable[[list[str]], np.ndarray],
    papers: Sequence,
    queries: Mapping[str, str],
    depth: int,
    passages: bool,
    progress: bool = False,
) -> dict[str, dict[str, Ranking]]:
    """Fine-tune the query side of the index's encoder on ``examples`` and rank ``queries`` with it (encoded
    on the index's backend, one by one) against the index's own vectors (``corpus``)."""
    model, _ = fine_tune_queries(manifest["model"], examples, targets, recipe, cfg.embedding.device, progress)
    emb = index_embedding(cfg.embedding, dict(manifest))
    with tempfile.TemporaryDirectory(prefix="scix-tune-") as folder:
        _, encode_queries = model_encoder(model, emb, Path(folder), progress)
        return dense_lanes(corpus, encode_queries, papers, queries, depth, passages, manifest)
