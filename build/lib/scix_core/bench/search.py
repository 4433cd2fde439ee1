"""Search benchmark: per-stage latency per mode and backend, lexical throughput
beside bm25s and rank_bm25, the lexical lanes' quality beside bm25s on every
gold set, and the 91k arXiv index.

    python -m scix_core.bench.search [--index scifact] [--split train] [--arxiv-index arxiv]

Every figure comes from the same run on the same machine: compare the ratios,
not the absolute times. The PostgreSQL rows need ``SCIX_PG_DSN`` (``make bench``
starts the throwaway server); the index is synced first.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from scix_core.config import load_config
from scix_core.evaluate.gold import for_index
from scix_core.evaluate.metrics import PRIMARY, means, per_query
from scix_core.search import Searcher
from scix_core.search.filters import SearchFilters
from scix_core.search.knobs import Knobs
from scix_core.search.lanes import LaneRequest
from scix_core.search.query import prepare
from scix_core.stores.postgres import sync_index
from scix_core.types import Ranking
from scix_core.workspace import Workspace

console = Console(width=170)
DEPTH = 60


def _pct(values: list[float]) -> str:
    return f"{np.percentile(values, 50):.2f} / {np.percentile(values, 95):.2f}"


def latency(searcher: Searcher, queries: list[str], mode: str) -> dict[str, list[float]]:
    stages: dict[str, list[float]] = {}
    for q in queries:
        for stage, ms in searcher.search(q, mode).timing_ms.items():
            stages.setdefault(stage, []).append(ms)
    return stages


def latency_table(index: str, searchers: dict[str, Searcher], queries: list[str]) -> None:
    table = Table(
        title=f"{index}: p50 / p95 ms per stage, {len(queries)} queries (query-encode cache cleared per mode)"
    )
    order = ["prepare", "encode", "lexical", "dense", "fusion", "hydrate", "total"]
    for col in ("backend", "mode", *order):
        table.add_column(col, no_wrap=True)
    for backend, searcher in searchers.items():
        for mode in ("keyword", "semantic", "hybrid"):
            if mode != "keyword" and backend != "bm25":
                continue  # the dense lane does not depend on the lexical backend
            searcher.encoder and searcher.encoder.encode_query.cache_clear()
            stages = latency(searcher, queries, mode)
            table.add_row(backend, mode, *(_pct(stages[s]) if s in stages else "-" for s in order))
    console.print(table)


def _qps(fn, queries) -> float:
    t = time.perf_counter()
    fn(queries)
    return len(queries) / (time.perf_counter() - t)


def throughput(searchers: dict[str, Searcher], texts: list[str], queries: list[str]) -> None:
    import bm25s
    import Stemmer
    from rank_bm25 import BM25Okapi

    stemmer = Stemmer.Stemmer("english")
    rows = []
    for backend, searcher in searchers.items():
        lane = next(lane for lane in searcher.lexical if lane.name == "lexical")
        for mode in ("auto", "and", "or"):
            lane.mode = mode
            rows.append(
                (
                    f"scix lexical lane, {backend} {mode.upper()}",
                    _qps(
                        lambda qs, lane=lane: [lane.search(LaneRequest(prepare(q)), DEPTH) for q in qs],
                        queries,
                    ),
                )
            )
        lane.mode = searcher.config.search.lexical_mode

    t = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
    )
    bm25s_index_s = time.perf_counter() - t

    def run_bm25s(qs):
        tokens = bm25s.tokenize(qs, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever.retrieve(tokens, k=DEPTH, show_progress=False, n_threads=1)

    rows.append(("bm25s (batch, 1 thread, OR)", _qps(run_bm25s, queries)))
    rows.append(("bm25s (one query per call, OR)", _qps(lambda qs: [run_bm25s([q]) for q in qs], queries)))

    def tok(text):
        return stemmer.stemWords(
            bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]
        )

    rank = BM25Okapi([tok(t) for t in texts])
    rows.append(
        (
            "rank_bm25 BM25Okapi (OR)",
            _qps(lambda qs: [rank.get_top_n(tok(q), texts, n=DEPTH) for q in qs], queries[:200]),
        )
    )

    reference = next(qps for name, qps in rows if name.startswith("bm25s (batch"))
    table = Table(
        title=f"title/abstract lexical lane: queries/s, top {DEPTH}, {len(texts)} papers "
        f"(bm25s index build {bm25s_index_s:.1f} s; rank_bm25 on the first 200 queries)"
    )
    for col in ("method", "queries/s", "x bm25s batch"):
        table.add_column(col)
    for name, qps in rows:
        table.add_row(name, f"{qps:,.0f}", f"{qps / reference:.2f}")
    console.print(table)


BM25S_GRID = [(k1, b) for k1 in (0.9, 1.2, 1.5, 2.0) for b in (0.4, 0.6, 0.75, 0.9)]


def parity(indexes: list[str], cfg) -> None:
    """The title/abstract lexical lane of each backend beside ``bm25s`` (Snowball stemming, English stopwords,
    title + abstract as one field, the best of its k1/b grid): nDCG@10 on every gold set and queries/s, one
    run."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    table = Table(title=f"lexical lane vs bm25s: {PRIMARY} and queries/s (top {DEPTH}, one query per call)")
    for col in ("gold set", "method", PRIMARY, "vs best bm25s", "queries/s"):
        table.add_column(col)
    for index in indexes:
        try:
            gold = for_index(index, cfg)
        except Exception as exc:  # an index not built here: say so and go on
            console.print(f"[yellow]{index}: {exc}[/]")
            continue
        ids = gold.judged
        texts = [gold.queries[q] for q in ids]
        rows = []
        for backend, searcher in _backends(index, cfg).items():
            lane = next(lane for lane in searcher.lexical if lane.name == "lexical")
            for mode in ("auto", "or"):
                lane.mode = mode
                t = time.perf_counter()
                run = {q: lane.search(LaneRequest(prepare(text)), DEPTH) for q, text in zip(ids, texts)}
                qps = len(ids) / (time.perf_counter() - t)
                rows.append(
                    (f"scix {backend} {mode.upper()}", means(per_query(gold, run, (PRIMARY,)))[PRIMARY], qps)
                )
        papers = list(searcher.store.papers())
        corpus = bm25s.tokenize(
            [p.text for p in papers], stopwords="en", stemmer=stemmer, show_progress=False
        )
        best = None
        for k1, b in BM25S_GRID:
            retriever = bm25s.BM25(k1=k1, b=b)
            retriever.index(corpus, show_progress=False)
            t = time.perf_counter()
            found = [
                retriever.retrieve(
                    bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False),
                    k=DEPTH,
                    show_progress=False,
                    n_threads=1,
                )
                for text in texts
            ]
            qps = len(ids) / (time.perf_counter() - t)
            run = {
                q: Ranking.from_pairs(
                    "bm25s", [(papers[d].paper_id, float(s)) for d, s in zip(docs[0], scores[0])]
                )
                for q, (docs, scores) in zip(ids, found)
            }
            score = means(per_query(gold, run, (PRIMARY,)))[PRIMARY]
            if best is None or score > best[1]:
                best = (f"bm25s k1 {k1} b {b}", score, qps)
        for name, score, qps in [*rows, best]:
            table.add_row(
                f"{index} ({len(ids)} q)", name, f"{score:.4f}", f"{score / best[1] - 1:+.1%}", f"{qps:,.0f}"
            )
    console.print(table)


STAGE_ARMS = {  # name -> (search options, the timing key that is the stage's own cost)
    "baseline (hybrid)": ({}, "fusion"),
    "boosts": ({"boosts": True}, "boosts"),
    "rewrite local": ({"rewrite": "local"}, "rewrite"),
    "alias lanes": ({"lanes": "alias"}, "alias_1"),
    "fielded parser": ({"lanes": "fielded"}, "prepare"),
    "sparse lane": ({"lanes": "sparse"}, "sparse"),
}


def stage_costs(searcher: Searcher, queries: list[str], reranker: str | None) -> None:
    arms = {name: (searcher, options, stage) for name, (options, stage) in STAGE_ARMS.items()}
    if reranker:  # the same model on each runtime (search.rerank_backend) and token cap, side by side
        for backend, cap in [("torch", 512), ("onnx", 512), *(("onnx-int8", c) for c in (512, 256, 128))]:
            on = Searcher(
                searcher.index,
                searcher.config.replace(
                    **{"search.rerank_backend": backend, "search.rerank_max_length": cap}
                ),
            )
            arms[f"rerank {reranker} {backend} {cap} tok (window {searcher.config.search.rerank_window})"] = (
                on,
                {"rerank": reranker},
                "rerank",
            )
    table = Table(title=f"stage costs on {searcher.index}, {len(queries)} queries, limit 10: p50 / p95 ms")
    for col in ("arm", "stage", "stage ms", "total ms", "ran for"):
        table.add_column(col, no_wrap=True)
    for name, (arm_searcher, options, stage) in arms.items():
        if "sparse" in str(options.get("lanes", "")) and searcher.sparse is None:
            table.add_row(name, stage, "-", "-", f"skipped: {searcher.sparse_unavailable}")
            continue
        own, total = [], []
        arm_searcher.search(queries[0], limit=10, **options)  # load the arm's model outside the timings
        for q in queries:
            result = arm_searcher.search(q, limit=10, **options)
            total.append(result.timing_ms["total"])
            if stage in result.timing_ms:
                own.append(result.timing_ms[stage])
        table.add_row(
            name, stage, _pct(own) if own else "-", _pct(total), f"{len(own)}/{len(queries)} queries"
        )
    console.print(table)


def arxiv(index: str, n: int) -> None:
    cfg = load_config()
    try:
        searcher = Searcher(index, cfg)
    except Exception as exc:  # noqa: BLE001 — a benchmark reports what it could not run
        console.print(f"[yellow]{index}: skipped ({exc})[/]")
        return
    if not searcher.dense:
        console.print(
            f"[yellow]{index}: no dense lane ({searcher.unavailable.get('dense')}); hybrid figures skipped[/]"
        )
        return
    searcher.warm()
    papers = list(searcher.store.papers())
    rng = random.Random(7)
    queries = [p.title for p in rng.sample(papers, n)]
    latency_table(f"{index} ({len(papers):,} papers)", {cfg.search.lexical_backend: searcher}, queries)

    flt = SearchFilters(year_min=2023, categories=("astro-ph.GA",))
    vecs = [searcher.encoder.encode_query(q) for q in queries]
    table = Table(title=f"{index}: dense lane alone, top {DEPTH}, p50 / p95 ms")
    for col in ("filter", "HNSW", "exact"):
        table.add_column(col)
    for name, f in (
        ("none", SearchFilters()),
        ("year>=2023 & astro-ph.GA", flt),
        ("+ author (post-filter, over-fetch)", SearchFilters(year_min=2023, authors=("a",))),
    ):
        cells = []
        for exact in (False, True):
            ms = []
            for v in vecs:
                req = LaneRequest(prepare("x"), f, Knobs(None, 32, exact), v)
                t = time.perf_counter()
                searcher.dense.search(req, DEPTH)
                ms.append((time.perf_counter() - t) * 1000)
            cells.append(_pct(ms))
        table.add_row(name, *cells)
    console.print(table)


SECTIONS = ("latency", "throughput", "parity", "stages", "arxiv")


def _backends(index: str, cfg) -> dict[str, Searcher]:
    """One searcher per lexical backend (PostgreSQL's two rankings when ``SCIX_PG_DSN`` is set; the index is
    synced first)."""
    searchers = {b: Searcher(index, cfg.replace(**{"search.lexical_backend": b})) for b in ("sqlite", "bm25")}
    if cfg.postgres.dsn:
        sync_index(index, Workspace(cfg.home).index_dir(index), cfg.postgres.dsn)
        for ranking in ("bm25", "ts_rank_cd"):
            searchers[f"postgres {ranking}"] = Searcher(
                index, cfg.replace(**{"postgres.ranking": ranking}), backend="postgres"
            )
    return searchers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--arxiv-index", default="arxiv")
    ap.add_argument("--arxiv-queries", type=int, default=200)
    ap.add_argument(
        "--reranker",
        help="a trained reranker name or path for the stage-cost table (e.g. from `scix train-reranker`)",
    )
    ap.add_argument("--stage-queries", type=int, default=200)
    ap.add_argument(
        "--parity",
        default="scifact,cranfield,cacm",
        help="comma list of indexes with gold data for the lane-vs-bm25s table ('' to skip)",
    )
    ap.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma list of tables (default all: {', '.join(SECTIONS)})",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        ap.error(f"unknown table(s) {sorted(only - set(SECTIONS))}; valid: {', '.join(SECTIONS)}")
    cfg = load_config()
    searchers = _backends(args.index, cfg)
    if not cfg.postgres.dsn:
        console.print("[yellow]SCIX_PG_DSN not set: PostgreSQL rows skipped[/]")
    main_searcher = searchers["bm25"]  # the default lexical backend
    main_searcher.warm()
    qrels = main_searcher.store.qrels(args.split)
    queries = [q.text for q in main_searcher.store.queries() if q.query_id in qrels]
    texts = [p.text for p in main_searcher.store.papers()]
    console.print(f"{args.index}: {len(texts):,} papers, {len(queries)} {args.split} queries")
    if "latency" in only:
        latency_table(args.index, searchers, queries)
    if "throughput" in only:
        throughput(searchers, texts, queries)
    if args.parity and "parity" in only:
        parity(args.parity.split(","), cfg)
    if "stages" in only:
        stage_costs(main_searcher, queries[: args.stage_queries], args.reranker)
    if "arxiv" in only:
        arxiv(args.arxiv_index, args.arxiv_queries)


if __name__ == "__main__":
    main()
