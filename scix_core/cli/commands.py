"""Subcommands: ingest, search, info, doctor, data, train-reranker, community, eval, evidence, report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from scix_core.cli.main import command
from scix_core.config import load_config

console = Console(emoji=False)
if not console.is_terminal:  # piped or captured: do not squeeze the explain tables into 80 columns
    console = Console(width=160, emoji=False)


def _config(args: argparse.Namespace, **overrides):
    return load_config(getattr(args, "config", None), **overrides)


def _ingest_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--path", type=Path, help="dataset file or folder")
    src.add_argument("--dataset", help="a dataset folder name under the data directory (e.g. scifact)")
    p.add_argument("--format", dest="fmt", help="beir, scifact-csv, smart, arxiv-jsonl, arxiv-kaggle, citeulike")
    p.add_argument("--index", required=True, help="name of the index to build")
    p.add_argument("--limit", type=int, help="take only the first N papers (quick runs)")
    p.add_argument("--no-embed", action="store_true", help="build the paper store and FTS only")
    p.add_argument("--force", action="store_true", help="rebuild even if the input is unchanged")
    p.add_argument("--sparse", action="store_true", help="also build BM25 sparse vectors (the optional sparse lane)")
    p.add_argument("--vector-backend", choices=["edge", "qdrant"], help="override vectors.backend")
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                   help="postgres: also mirror the index into PostgreSQL (SCIX_PG_DSN), idempotently")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


@command("ingest", "load a dataset and build its paper store, FTS5 indexes and vectors", _ingest_args)
def ingest_cmd(args: argparse.Namespace) -> int:
    from scix_core.data import resolve_dataset
    from scix_core.ingest import ingest

    overrides = {"vectors.backend": args.vector_backend} if args.vector_backend else {}
    cfg = _config(args, **overrides)
    path = args.path if args.path else resolve_dataset(args.dataset)
    report = ingest(path, args.index, args.fmt, config=cfg, limit=args.limit, embed=not args.no_embed,
                    force=args.force, progress=not args.quiet, sparse=args.sparse)
    print_ingest(report)
    if args.backend == "postgres":
        from scix_core.stores.postgres import sync_index

        sync = sync_index(args.index, report.path, cfg.postgres.dsn, force=args.force)
        console.print(f"postgres: {sync.status} {sync.papers} papers into schema {sync.schema} in {sync.seconds:.1f} s",
                      highlight=False)
    return 0


def print_ingest(report) -> None:
    console.print(f"[bold]{report.index}[/]: {report.status} at {report.path}")
    console.print(f"taken {report.taken} papers, rejected {len(report.rejected)}, duplicate ids dropped {report.duplicates}"
                  " (rule: first occurrence wins)")
    for rej in report.rejected[:20]:
        console.print(f"  rejected {rej}", markup=False, highlight=False)
    if len(report.rejected) > 20:
        console.print(f"  ... and {len(report.rejected) - 20} more")
    if report.stages:
        table = Table("stage", "seconds", "records", "records/s")
        for s in report.stages:
            table.add_row(s.stage, f"{s.seconds:.2f}", str(s.records), f"{s.per_second:,.0f}")
        console.print(table)
    if report.status == "built":
        console.print(f"embeddings: {report.encoded} encoded, {report.reused} reused from cache")
    console.print(f"peak RSS {report.peak_rss_mb:,.0f} MB")


def _info_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", help="index name (omit to list indexes)")
    p.add_argument("--json", action="store_true")


def _size(path: Path) -> int:
    """Bytes on disk (allocated blocks: the vector shard's files are sparse)."""
    files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
    return sum(f.stat().st_blocks * 512 for f in files)


@command("info", "counts, model, sizes and paths of an index", _info_args)
def info_cmd(args: argparse.Namespace) -> int:
    from scix_core.stores import PaperStore
    from scix_core.workspace import Workspace, read_json

    cfg = _config(args)
    ws = Workspace(cfg.home)
    if not args.index:
        for name in ws.indexes():
            console.print(name)
        return 0
    folder = ws.index_dir(args.index)
    manifest = read_json(folder / "manifest.json")
    store = PaperStore(folder / "papers.sqlite")
    info = {
        "index": args.index, "path": str(folder), "counts": store.counts(),
        "model": manifest.get("model"), "dim": manifest.get("dim"), "vector_backend": manifest.get("vector_backend"),
        "vectors": manifest.get("vectors", 0), "dataset": manifest.get("dataset"), "format": manifest.get("format"),
        "sources": manifest.get("sources"), "rejected": manifest.get("rejected"), "duplicates": manifest.get("duplicates"),
        "sizes_bytes": {p.name: _size(p) for p in sorted(folder.iterdir())},
    }
    store.close()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    table = Table("field", "value", title=f"index {args.index}")
    for key, value in info.items():
        table.add_row(key, json.dumps(value) if isinstance(value, (dict, list)) else str(value))
    console.print(table)
    return 0


@command("doctor", "check SQLite/FTS5, PostgreSQL, the vector backend and the model", lambda p: None)
def doctor_cmd(args: argparse.Namespace) -> int:
    from scix_core.doctor import run_checks

    checks = run_checks(_config(args))
    colour = {"ok": "green", "fail": "red", "skip": "yellow"}
    for c in checks:
        console.print(f"[{colour[c.status]}]{c.status.upper():4}[/] {c.name:12} {c.detail}", highlight=False)
    return 1 if any(c.status == "fail" for c in checks) else 0


def _data_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    f = sub.add_parser("fetch", help="download a public copy into the data directory, verified by checksum")
    f.add_argument("name")
    f.add_argument("--url", help="download from this URL instead (a mirror)")
    f.add_argument("--sha256", help="expected sha256 of the download (required with an unknown --url)")
    f.add_argument("--dest", type=Path, help="target data directory (default: the data directory)")
    sub.add_parser("list", help="list fetchable datasets")


@command("data", "manage the data directory (fetch public copies)", _data_args)
def data_cmd(args: argparse.Namespace) -> int:
    from scix_core.data.fetch import fetch_named, sources

    if args.action == "list":
        for name, src in sources().items():
            console.print(f"{name}: {src.url}", highlight=False)
        return 0
    dest = fetch_named(args.name, args.dest or _config(args).data_dir, args.url, args.sha256)
    console.print(f"fetched {args.name} into {dest}", highlight=False)
    return 0


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="the query text (quote it)")
    p.add_argument("--index", required=True)
    p.add_argument("--mode", choices=["hybrid", "keyword", "semantic"], default="hybrid")
    p.add_argument("--limit", type=int, help="number of hits (default search.limit = 10)")
    p.add_argument("--year", help="year range: 2019-2021, 2019-, -2021 or 2020")
    p.add_argument("--category", action="append", default=[], help="category code (repeatable; any of)")
    p.add_argument("--author", action="append", default=[], help="author name substring (repeatable; any of)")
    p.add_argument("--backend", choices=["sqlite", "postgres"], help="lexical backend (default search.lexical_backend)")
    p.add_argument("--lexical-mode", choices=["and", "or"], help="AND (default) or OR semantics for the lexical lanes")
    p.add_argument("--rerank", metavar="PATH|NAME|off", help="cross-encoder path or trained name (default search.rerank)")
    p.add_argument("--boosts", action=argparse.BooleanOptionalAction, default=None,
                   help="title/citation boosts (default search.boosts)")
    p.add_argument("--rewrite", metavar="off|local|URL", help="query rewrite (default search.rewrite)")
    p.add_argument("--lanes", metavar="alias,fielded,sparse", help="optional lanes to switch on (default search.lanes)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the whole SearchResult as one JSON object")
    out.add_argument("--explain", action="store_true", help="a table of lane ranks per hit, and stage timings")


@command("search", "search an index (hybrid, keyword or semantic)", _search_args)
def search_cmd(args: argparse.Namespace) -> int:
    from scix_core.search import Searcher

    overrides = {"search.lexical_mode": args.lexical_mode} if args.lexical_mode else {}
    searcher = Searcher(args.index, _config(args, **overrides), backend=args.backend)
    if args.mode != "keyword":
        searcher.warm()  # load the model first, so the timings are the query's own
    filters = {"year": args.year, "categories": args.category or None, "authors": args.author or None}
    result = searcher.search(args.query, args.mode, filters, args.limit, rerank=args.rerank, boosts=args.boosts,
                             rewrite=args.rewrite, lanes=args.lanes)
    if args.json:
        print(result.to_json())
    elif args.explain:
        print_explain(result)
    else:
        for rank, hit in enumerate(result.hits, start=1):
            console.print(f"{rank:>3}. [bold]{hit.paper_id}[/]  {hit.title}  [dim]{hit.score:.4f}[/]", highlight=False)
        print_degradation(result)
    return 0


def print_degradation(result) -> None:
    for lane, why in result.metadata["dropped_lanes"].items():
        console.print(f"[yellow]lane {lane} dropped:[/] {why}", highlight=False)
    for note in result.metadata["notes"]:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def print_explain(result) -> None:
    """One row per hit: every lane's rank, then its rank after each stage (fused -> rerank -> boosts)."""
    lanes = list(result.metadata["lanes_run"])
    stages = [n for n in ("fused", "rerank", "boosts") if n in result.rankings]
    ranks = {n: result.rankings[n].ranks() for n in stages}
    table = Table(title=f"{result.metadata['mode']} search, rrf k={result.metadata['rrf_k']}, {result.total} candidates;"
                        f" columns after the lanes: rank in each stage's output")
    for name, width in (("#", 3), ("paper", 10), *((n, len(n)) for n in lanes), *((f"{n}#", 6) for n in stages),
                        ("score", 6), ("boosts", 6)):
        table.add_column(name, no_wrap=True, min_width=width)
    table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=max(20, console.width - 80))
    for rank, hit in enumerate(result.hits, start=1):
        cells = [str(hit.lanes[n].rank) if n in hit.lanes else "-" for n in lanes]
        moves = [str(ranks[n].get(hit.paper_id, "-")) for n in stages]
        boosts = " ".join(f"{k}+{v:.2f}" for k, v in hit.boosts.items() if v) or "-"
        table.add_row(str(rank), hit.paper_id, *cells, *moves, f"{hit.score:.4f}", boosts, hit.title)
    console.print(table)
    overlapped = result.metadata["overlapped_stages"]
    timing = Table("stage", "ms", "", title="stage timings")
    for stage, ms in result.timing_ms.items():
        timing.add_row(stage, f"{ms:.2f}", "concurrent" if stage in overlapped else "")
    console.print(timing)
    meta = result.metadata
    console.print(f"lexical terms: {' '.join(meta['lexical_terms']) or '(none)'}; knobs: {meta['knobs']}", highlight=False)
    console.print(f"stages: {meta['stages']}; rewrite: {meta['rewrite']['status']}"
                  + (f" -> {meta['rewrite']['text']!r}" if meta["rewrite"]["text"] else ""), highlight=False)
    if meta["aliases"] or meta["fielded"]:
        console.print(f"aliases: {meta['aliases']}; fielded: {meta['fielded']}", highlight=False)
    print_degradation(result)


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, help="an index with a gold set (queries + qrels)")
    p.add_argument("--name", required=True, help="save as models/rerankers/NAME in the workspace")
    p.add_argument("--split", default="train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--negatives", type=int, default=3, help="hard negatives per query, from hybrid search")
    p.add_argument("--max-queries", type=int, help="train on a sample of the split's queries")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--base-model", help="checkpoint to start from (default embedding.model, the bundled MiniLM)")
    p.add_argument("--quiet", action="store_true")


@command("train-reranker", "fine-tune a cross-encoder locally from a gold set (no download)", _train_args)
def train_reranker_cmd(args: argparse.Namespace) -> int:
    from scix_core.search.stages.train_rerank import train_reranker

    report = train_reranker(args.index, args.name, _config(args), args.split, args.epochs, args.batch_size,
                            args.negatives, args.max_queries, args.lr, base_model=args.base_model,
                            progress=not args.quiet)
    console.print(f"trained {report.name} on {report.queries} queries ({report.positives} positives, "
                  f"{report.negatives} hard negatives) in {report.seconds:.0f} s -> {report.path}", highlight=False)
    console.print(f"use it: scix search TEXT --index {args.index} --rerank {report.name}", highlight=False)
    return 0


def _community_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("seeds", nargs="+", help="seed paper ids")
    p.add_argument("--index", required=True)
    p.add_argument("--limit", type=int)
    p.add_argument("--json", action="store_true")


@command("community", "the citation community of seed papers (Louvain + personalised PageRank)", _community_args)
def community_cmd(args: argparse.Namespace) -> int:
    from scix_core.search import Searcher

    result = Searcher(args.index, _config(args)).community(args.seeds, args.limit)
    if args.json:
        print(result.to_json())
        return 0
    info = result.metadata["community"]
    console.print(f"community of {', '.join(info['seeds'])}: {info['community_size']} papers", highlight=False)
    for rank, hit in enumerate(result.hits, start=1):
        console.print(f"{rank:>3}. [bold]{hit.paper_id}[/]  {hit.title}  [dim]{hit.score:.4f}[/]", highlight=False)
    return 0


def _eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    gold = p.add_argument_group("gold set (default: the qrels stored with the index)")
    gold.add_argument("--queries", type=Path, help="BEIR queries.jsonl")
    gold.add_argument("--qrels", type=Path, help="BEIR TSV or TREC qrels")
    gold.add_argument("--gold", type=Path, help="a dataset folder the loaders read (with --format)")
    gold.add_argument("--format", dest="fmt", help="smart, beir, scifact-csv, ...")
    gold.add_argument("--split", help="qrels split (train, test, ...)")
    p.add_argument("--runs", help="comma list of run names (default lexical,dense,hybrid)")
    p.add_argument("--sweep", action="store_true", help="every run")
    p.add_argument("--baseline", help="compare every run with this one and apply the rollout gate")
    p.add_argument("--reranker", help="reranker for the hybrid+rerank run (name or path)")
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument("--sample", type=int, help="score a seeded random sample of N judged queries (quick iterations)")
    p.add_argument("--backend", choices=["sqlite", "postgres"], help="lexical backend")
    p.add_argument("--lexical-mode", choices=["and", "or"], help="lexical lanes' semantics (default search.lexical_mode)")
    p.add_argument("--json", dest="json_path", type=Path, help="write the report as one JSON object")
    p.add_argument("--reuse", action="store_true",
                   help="with --json: skip when that file was written by the same index build, gold set, runs, "
                        "settings and (clean) code commit")
    p.add_argument("--quiet", action="store_true")


@command("eval", "evaluate runs on a gold set: metrics, provenance, buckets, significance, the gate", _eval_args)
def eval_cmd(args: argparse.Namespace) -> int:
    from scix_core.errors import ConfigError
    from scix_core.evaluate import ALL_RUNS, DEFAULT_RUNS, evaluate, from_dir, from_files
    from scix_core.evaluate.gold import for_index

    overrides = {"search.lexical_backend": args.backend, "search.lexical_mode": args.lexical_mode}
    cfg = _config(args, **{k: v for k, v in overrides.items() if v})
    if bool(args.queries) != bool(args.qrels):
        raise ConfigError("--queries and --qrels go together")
    if args.queries:
        gold = from_files(args.queries, args.qrels)
    elif args.gold:
        gold = from_dir(args.gold, args.fmt, args.split)
    else:
        gold = for_index(args.index, cfg, args.split)
    runs = ALL_RUNS if args.sweep else tuple(r.strip() for r in args.runs.split(",")) if args.runs else DEFAULT_RUNS
    if args.reuse and not args.json_path:
        raise ConfigError("--reuse needs --json PATH (the report to reuse)")
    key = None
    if args.reuse:
        from scix_core.evaluate.report import reuse_key, saved_key

        key = reuse_key(cfg, args.index, gold, runs, args.baseline, args.reranker, args.permutations, args.sample)
        if key is not None and saved_key(args.json_path) == key:
            console.print(f"unchanged: {args.json_path} (same index build, gold set, runs, settings and code)",
                          highlight=False)
            return 0
    report = evaluate(args.index, gold, runs, args.baseline, cfg, args.reranker, args.permutations,
                      progress=not args.quiet, sample=args.sample)
    report.print(console)
    if args.json_path:
        report.write_json(args.json_path, reuse_key=key)
        console.print(f"wrote {args.json_path}", highlight=False)
    return 0


def _evidence_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", choices=["quantization", "pool", "rrf-k", "reranker"])
    p.add_argument("--index", required=True)
    p.add_argument("--reranker", help="for the reranker study: a trained name or a CrossEncoder path")
    p.add_argument("--queries", type=int, help="pool: number of sampled titles; quantization: cap on gold queries")
    p.add_argument("--split", help="gold split (use one the reranker was not trained on, e.g. test)")
    p.add_argument("--lexical-mode", choices=["and", "or"], help="lexical lanes' semantics (default search.lexical_mode)")
    p.add_argument("--out", type=Path, help="folder for the JSON and markdown (default reports/)")


@command("evidence", "reproduce an evidence study into reports/ (JSON + markdown)", _evidence_args)
def evidence_cmd(args: argparse.Namespace) -> int:
    from scix_core.errors import ConfigError
    from scix_core.evaluate import evidence

    def reranker_name() -> str:
        if not args.reranker:
            raise ConfigError("the reranker study needs --reranker NAME|PATH (see `scix train-reranker`)")
        return args.reranker

    runners = {
        "quantization": lambda cfg: evidence.quantization(args.index, cfg, max_queries=args.queries, split=args.split),
        "pool": lambda cfg: evidence.pool(args.index, cfg, n_queries=args.queries or 200),
        "rrf-k": lambda cfg: evidence.rrf_k(args.index, cfg, split=args.split),
        "reranker": lambda cfg: evidence.reranker(args.index, reranker_name(), cfg, split=args.split),
    }
    result = runners[args.study](_config(args, **({"search.lexical_mode": args.lexical_mode} if args.lexical_mode else {})))
    paths = evidence.write(result, args.out or evidence.REPORTS)
    console.print(evidence.markdown(result), highlight=False, markup=False)
    console.print(f"wrote {paths[0]} and {paths[1]}", highlight=False)
    return 0


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="query-inspector, lane-attribution, fusion-sweep, evidence; all: the standard set; "
                                "list: the reports and their parameters")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a notebook parameter (JSON values: 30, true, null, [\"a\"]; anything else is a string)")
    p.add_argument("--out", type=Path, help="reports folder (default reports/ or $SCIX_REPORTS_DIR)")


@command("report", "execute a notebook with papermill into reports/NAME/ (notebook, HTML, figures, run.json)",
         _report_args)
def report_cmd(args: argparse.Namespace) -> int:
    from scix_core import reports

    if args.name == "list":
        for name in reports.NOTEBOOKS:
            console.print(f"[bold]{name}[/] ({reports.NOTEBOOKS[name]})", highlight=False)
            for key, value in reports.parameters(name).items():
                console.print(f"    {key} = {value!r}", highlight=False, markup=False)
        return 0
    overrides = {key: reports.parse_value(value) for key, value in args.parameter}
    names = reports.STANDARD if args.name == "all" else (args.name,)
    for name in names:
        chosen = overrides
        if args.name == "all":  # a parameter applies to every report that has it
            known = reports.parameters(name)
            chosen = {**reports.standard_overrides(name, overrides.get("index", "scifact")),
                      **{k: v for k, v in overrides.items() if k in known}}
        console.print(f"report {name}: running {reports.NOTEBOOKS.get(name, '?')} ...", highlight=False)
        done = reports.run_report(name, chosen, args.out)
        console.print(f"  wrote {done.html} ({len(done.figures)} figures, {done.seconds:.1f} s)", highlight=False)
    return 0
