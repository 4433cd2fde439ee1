"""Evaluation: named runs on a gold set, metrics, lane provenance, buckets, paired significance, the gate.

report = evaluate("scifact", runs=ALL_RUNS, baseline="hybrid")
report.print(console); report.write_json("reports/eval.json")
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from scix_core.config import Config, load_config
from scix_core.embeddings.encoder import query_model_dir
from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate.config_runs import ConfigRun, config_runs
from scix_core.evaluate.external import read_trec_run
from scix_core.evaluate.gold import Gold, from_dir, from_files, from_index, training_queries
from scix_core.evaluate.metrics import METRICS, means, per_query
from scix_core.evaluate.provenance import buckets, provenance
from scix_core.evaluate.report import EvalReport, write_trec_runs
from scix_core.evaluate.runs import ALL_RUNS, DEFAULT_RUNS, DEPTH, collect
from scix_core.evaluate.score_fusion import SCORE_RUNS, cross_validated
from scix_core.evaluate.significance import compare, gate, holm
from scix_core.search import Searcher


def evaluate(
    index: str,
    gold: Gold | None = None,
    runs: tuple[str, ...] = DEFAULT_RUNS,
    baseline: str | None = None,
    config: Config | None = None,
    reranker: str | None = None,
    permutations: int = 10_000,
    progress: bool = False,
    sample: int | None = None,
    seed: int = 13,
    configured: tuple[ConfigRun, ...] = (),
    runs_dir: Path | None = None,
    metrics: tuple[str, ...] = METRICS,
    run_files: Mapping[str, Path] | None = None,
) -> EvalReport:
    """Run ``runs`` and the ``configured`` runs on ``gold`` (default: the index's own qrels), add the TREC
    ``run_files`` of other systems (name -> path), and compare them all with ``baseline`` (any of those) on
    ``metrics`` (trec_eval's, through ir-measures; the gate's primary metric is the first).

    The lexical pool is uncapped for evaluation (``SCIX_LEXICAL_POOL=inf``), as in the reference design.
    ``runs_dir``: also write every run as a TREC run file there.
    """

    for name in runs:
        if name not in ALL_RUNS:
            raise UnknownNameError("eval run", name, ALL_RUNS)
    own = {r.name: r for r in configured}
    run_files = dict(run_files or {})
    for name in run_files:
        if name in ALL_RUNS or name in own:
            raise ConfigError(f"--run-file {name}: the name is taken by a run of the project; choose another")
    if baseline is not None and baseline not in runs and baseline not in own and baseline not in run_files:
        runs = (baseline, *runs)
    cfg = (config or load_config()).replace(**{"search.depth": DEPTH})
    with uncapped_pool():
        searcher = Searcher(index, cfg)
        gold = gold or from_index(searcher.store)
        reranker = reranker or (cfg.search.rerank if cfg.search.rerank != "off" else None)
        excluded = _training_queries(searcher, reranker, gold) if "hybrid+rerank" in runs else set()
        excluded |= encoder_training_queries(searcher, gold)
        full = gold.name
        gold = sample_queries(gold, sample, seed, excluded)
        queries = dict(gold.queries)
        if not queries:
            raise ConfigError(
                f"every query of {full} was used to train the index's encoder, the query encoder or reranker"
                f"{f' {reranker}' if reranker else ''}: evaluate on another split or gold set (or train on "
                "fewer queries)"
            )
        runset = collect(
            searcher,
            queries,
            tuple(runs),
            reranker,
            rewrite=cfg.search.rewrite if cfg.search.rewrite != "off" else "local",
            body_searcher=lambda: Searcher(index, cfg.replace(**{"search.body": False})),
            progress=progress,
            configured={r.name: (lambda r=r: Searcher(index, r.apply(cfg))) for r in configured},
        )
        external = {
            name: read_trec_run(name, path, lambda ids: searcher.store.titles(ids))
            for name, path in run_files.items()
        }
    alphas = {}
    for name in (n for n in runs if n in SCORE_RUNS):
        runset.rankings[name], alphas[name] = cross_validated(runset.lanes, gold, SCORE_RUNS[name], DEPTH)
    if runs_dir is not None:
        write_trec_runs(runset.rankings, runs_dir)
    for name, run in external.items():
        runset.rankings[name] = run.rankings
    values = {run: per_query(gold, ranked, metrics) for run, ranked in runset.rankings.items()}
    ordered = [r for r in (*runs, *own, *external) if r in values]
    base = baseline or ("hybrid" if "hybrid" in values else None)
    comparisons = []
    if base in values:
        for run in ordered:
            if run != base:
                comparisons += compare(base, run, values, metrics, permutations)
    comparisons = holm(comparisons)
    gates = {}
    if baseline in values:
        for run in ordered:
            if run != baseline:
                gates[run] = gate([c for c in comparisons if c.candidate == run], metrics[0])
    return EvalReport(
        n_queries=len(queries),
        runs={r: means(values[r]) for r in ordered},
        per_query=values,
        comparisons=tuple(comparisons),
        provenance={r: provenance(gold, runset.rankings[r], runset.lanes) for r in ordered},
        dropped_lanes=runset.dropped,
        buckets={r: buckets(gold, values[r]) for r in ordered},
        seconds={r: round(runset.seconds.get(r, 0.0), 2) for r in ordered},
        skipped=runset.skipped,
        gates=gates,
        setup={
            "index": index,
            "gold": gold.name,
            "baseline": base,
            "depth": DEPTH,
            "lexical_pool": "inf",
            "permutations": permutations,
            "metrics": list(metrics),
            "primary": metrics[0],
            "external_runs": {name: run.summary(gold.judged) for name, run in external.items()},
            "model": searcher.manifest.get("model"),
            "lexical_backend": cfg.search.lexical_backend,
            "lexical_mode": cfg.search.lexical_mode,
            "reranker": reranker,
            "corpus_hash": searcher.manifest.get("corpus_hash"),
            "excluded_training_queries": len(excluded),
            "sample": sample,
            "sample_seed": seed if sample else None,
            "configured_runs": {r.name: r.source for r in configured},
            "score_fusion_alpha": alphas,
        },
    )


@contextmanager
def uncapped_pool() -> Iterator[None]:
    """``SCIX_LEXICAL_POOL=inf`` for the duration (evaluation scores the uncapped lexical lane)."""
    previous = os.environ.get("SCIX_LEXICAL_POOL")
    os.environ["SCIX_LEXICAL_POOL"] = "inf"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SCIX_LEXICAL_POOL", None)
        else:
            os.environ["SCIX_LEXICAL_POOL"] = previous


def sample_queries(
    gold: Gold, sample: int | None = None, seed: int = 13, excluded: set[str] = frozenset()
) -> Gold:
    """``gold`` cut to its judged queries not in ``excluded``; a seeded random ``sample`` of them if given
    (kept in query order)."""
    kept = [q for q in gold.judged if q not in excluded]
    if sample and sample < len(kept):
        chosen = set(random.Random(seed).sample(kept, sample))
        kept = [q for q in kept if q in chosen]
    return Gold(gold.name, {q: gold.queries[q] for q in kept}, {q: gold.qrels[q] for q in kept}, gold.fields)


def encoder_training_queries(searcher, gold: Gold) -> set[str]:
    """Queries the index's encoder (one from `scix train-encoder`) or the configured query encoder
    (``embedding.query_model``) was trained on: every run uses their vectors. Matched by corpus too: an index
    rebuilt with the encoder under another name holds the same gold queries."""
    corpus = searcher.manifest.get("corpus_hash")
    models = [Path(searcher.manifest["model"])] if searcher.manifest.get("model") else []
    if searcher.config.embedding.query_model:
        models.append(query_model_dir(searcher.config.embedding.query_model, searcher.config.home))
    seen: set[str] = set()
    for model in models:
        ids = training_queries(model, searcher.index, corpus)
        if ids is not None:
            seen |= set(gold.judged) if "*" in ids else ids & set(gold.judged)
    return seen


def _training_queries(searcher, reranker: str | None, gold: Gold) -> set[str]:
    """Queries the reranker saw in training: never scored, so the rerank comparison is not leaked."""
    if not reranker:
        return set()
    model = searcher._reranker(reranker)
    seen = training_queries(model.model_path, searcher.index)
    if seen is None:
        return set()
    return set(gold.judged) if "*" in seen else seen & set(gold.judged)


__all__ = [
    "ALL_RUNS",
    "DEFAULT_RUNS",
    "ConfigRun",
    "EvalReport",
    "Gold",
    "METRICS",
    "compare",
    "config_runs",
    "encoder_training_queries",
    "evaluate",
    "from_dir",
    "from_files",
    "from_index",
    "gate",
    "holm",
    "per_query",
    "sample_queries",
    "uncapped_pool",
]
