"""Subcommands for search: search, train-reranker, train-encoder, community."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from scix_core.cli.common import config_from as _config
from scix_core.cli.common import console
from scix_core.cli.registry import command
from scix_core.errors import ConfigError
from scix_core.search import Searcher
from scix_core.search.fusion import from_metadata
from scix_core.train.encoder import Recipe, cross_validate, train_encoder
from scix_core.train.query_side import QueryRecipe, train_query_encoder
from scix_core.train.reranker import RerankRecipe, learning_curve, train_reranker
from scix_core.workspace import write_json_atomic


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="the query text (quote it)")
    p.add_argument("--index", required=True)
    p.add_argument("--mode", choices=["hybrid", "keyword", "semantic"], default="hybrid")
    p.add_argument("--limit", type=int, help="number of hits (default search.limit = 10)")
    p.add_argument("--year", help="year range: 2019-2021, 2019-, -2021 or 2020")
    p.add_argument("--category", action="append", default=[], help="category code (repeatable; any of)")
    p.add_argument("--author", action="append", default=[], help="author name substring (repeatable; any of)")
    p.add_argument("--since", help="only papers listed on or after this day (YYYY-MM-DD)")
    p.add_argument(
        "--backend",
        choices=["sqlite", "bm25", "postgres"],
        help="lexical backend (default search.lexical_backend)",
    )
    p.add_argument(
        "--lexical-mode",
        choices=["auto", "and", "or"],
        help="lexical semantics: auto (default: AND matches first, then OR), and, or",
    )
    p.add_argument(
        "--fusion", choices=["rrf", "convex"], help="how the lanes are fused (default search.fusion)"
    )
    p.add_argument(
        "--alpha",
        type=float,
        help="with --fusion convex: the dense lane's weight (default "
        "search.convex_alpha = 0.5; every other lane weighs 1 - alpha)",
    )
    p.add_argument(
        "--rerank", metavar="PATH|NAME|off", help="cross-encoder path or trained name (default search.rerank)"
    )
    p.add_argument(
        "--boosts",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="title/citation boosts (default search.boosts)",
    )
    p.add_argument("--rewrite", metavar="off|local|URL", help="query rewrite (default search.rewrite)")
    p.add_argument(
        "--lanes", metavar="alias,fielded,sparse", help="optional lanes to switch on (default search.lanes)"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the whole SearchResult as one JSON object")
    out.add_argument(
        "--explain", action="store_true", help="a table of lane ranks per hit, and stage timings"
    )


@command("search", "search an index (hybrid, keyword or semantic)", _search_args)
def search_cmd(args: argparse.Namespace) -> int:
    overrides = {
        k: v
        for k, v in (
            ("search.lexical_mode", args.lexical_mode),
            ("search.fusion", args.fusion),
            ("search.convex_alpha", args.alpha),
        )
        if v is not None
    }
    searcher = Searcher(args.index, _config(args, **overrides), backend=args.backend)
    if args.mode != "keyword":
        searcher.warm()  # load the model first, so the timings are the query's own
    filters = {
        "year": args.year,
        "categories": args.category or None,
        "authors": args.author or None,
        "since": args.since,
    }
    result = searcher.search(
        args.query,
        args.mode,
        filters,
        args.limit,
        rerank=args.rerank,
        boosts=args.boosts,
        rewrite=args.rewrite,
        lanes=args.lanes,
    )
    if args.json:
        print(result.to_json())
    elif args.explain:
        print_explain(result)
    else:
        for rank, hit in enumerate(result.hits, start=1):
            console.print(
                f"{rank:>3}. [bold]{hit.paper_id}[/]  {hit.title}  [dim]{hit.score:.4f}[/]", highlight=False
            )
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
    table = Table(
        title=f"{result.metadata['mode']} search, {from_metadata(result.metadata).describe()}, "
        f"{result.total} candidates;"
        f" columns after the lanes: rank in each stage's output"
    )
    for name, width in (
        ("#", 3),
        ("paper", 10),
        *((n, len(n)) for n in lanes),
        *((f"{n}#", 6) for n in stages),
        ("score", 6),
        ("boosts", 6),
    ):
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
    console.print(
        f"lexical terms: {' '.join(meta['lexical_terms']) or '(none)'}; knobs: {meta['knobs']}",
        highlight=False,
    )
    console.print(
        f"stages: {meta['stages']}; rewrite: {meta['rewrite']['status']}"
        + (f" -> {meta['rewrite']['text']!r}" if meta["rewrite"]["text"] else ""),
        highlight=False,
    )
    if meta["aliases"] or meta["fielded"]:
        console.print(f"aliases: {meta['aliases']}; fielded: {meta['fielded']}", highlight=False)
    print_degradation(result)


def _train_args(p: argparse.ArgumentParser) -> None:
    # defaults None: the recipe's own (RerankRecipe); importing it here would slow every command's start
    p.add_argument("--index", required=True, help="an index with a gold set (queries + qrels)")
    p.add_argument("--name", help="save as models/rerankers/NAME in the workspace")
    p.add_argument("--split", default="train")
    p.add_argument("--epochs", type=int, help="default 2")
    p.add_argument("--batch-size", type=int, help="groups (query, positive, negatives) a step; default 16")
    p.add_argument("--negatives", type=int, help="hard negatives per relevant paper; default 3")
    p.add_argument("--lr", type=float, help="default 5e-5")
    p.add_argument("--loss", help="bce: balanced binary cross-entropy (default); mnrl; lambda (listwise)")
    p.add_argument("--max-queries", type=int, help="train on a sample of the split's queries")
    p.add_argument(
        "--base-model", help="checkpoint to start from (default embedding.model, the bundled MiniLM)"
    )
    p.add_argument(
        "--curve",
        type=int,
        metavar="EVERY",
        help="learning curve instead of a model: hold out 1/--folds of the queries, train on the rest, "
        "rerank the held-out hybrid top --window every EVERY steps",
    )
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--json", dest="json_path", type=Path, help="with --curve: write the curve as JSON")
    p.add_argument("--quiet", action="store_true")


@command(
    "train-reranker",
    "fine-tune a cross-encoder locally from a gold set (no download); --curve: learning curve",
    _train_args,
)
def train_reranker_cmd(args: argparse.Namespace) -> int:
    given = {k: getattr(args, k) for k in ("epochs", "batch_size", "lr", "negatives", "loss")}
    recipe = RerankRecipe(**{k: v for k, v in given.items() if v is not None})
    if args.curve:
        curve = learning_curve(
            args.index,
            _config(args),
            args.split,
            recipe,
            args.curve,
            args.window,
            args.folds,
            args.base_model,
            progress=not args.quiet,
        )
        _print_curve(curve)
        if args.json_path:
            write_json_atomic(args.json_path, curve.to_dict())
            console.print(f"wrote {args.json_path}", highlight=False)
        return 0
    if not args.name:
        raise ConfigError("give --name to save the model, or --curve EVERY for a learning curve")
    report = train_reranker(
        args.index,
        args.name,
        _config(args),
        args.split,
        recipe,
        args.max_queries,
        base_model=args.base_model,
        progress=not args.quiet,
    )
    console.print(
        f"trained {report.name} on {report.queries} queries ({report.positives} positives, "
        f"{report.negatives} hard negatives, {report.steps} steps) in {report.seconds:.0f} s -> "
        f"{report.path}",
        highlight=False,
    )
    console.print(f"use it: scix search TEXT --index {args.index} --rerank {report.name}", highlight=False)
    return 0


def _print_curve(curve) -> None:
    r = curve.recipe
    table = Table(
        title=f"reranker learning curve on {curve.index}: {curve.held_out} held-out queries "
        f"(trained on {curve.trained_on}); loss {r.loss}, lr {r.lr:g}, {r.negatives} negatives, "
        f"window {curve.window}; hybrid nDCG@10 {curve.hybrid:.4f}"
    )
    for col in ("step", "rerank nDCG@10", "vs hybrid", "score spread"):
        table.add_column(col, justify="right")
    for pt in curve.points:
        table.add_row(str(pt.step), f"{pt.ndcg:.4f}", f"{pt.ndcg - curve.hybrid:+.4f}", f"{pt.spread:.4f}")
    console.print(table)
    console.print(
        f"{curve.seconds:.0f} s; a spread near 0 is a model collapsed to one score", highlight=False
    )


def _train_encoder_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, help="an index with a gold set (queries + qrels)")
    p.add_argument(
        "--name", help="save as models/encoders/NAME in the workspace (then `scix ingest ... --model NAME`)"
    )
    p.add_argument("--split", default="train")
    p.add_argument("--folds", type=int, help="K-fold cross-validated evaluation instead of saving a model")
    p.add_argument(
        "--query-side",
        action="store_true",
        help="fine-tune the query encoder alone against the index's own vectors (the papers stay as built: "
        "nothing is re-encoded); use it with embedding.query_model = NAME",
    )
    p.add_argument("--epochs", type=int, help="default 1 (2 with --query-side)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, help="default 2e-5 (5e-5 with --query-side)")
    p.add_argument(
        "--negatives", type=int, default=1, help="hard negatives per relevant paper, from hybrid search"
    )
    p.add_argument(
        "--base-model", help="checkpoint to start from (default embedding.model, the bundled MiniLM)"
    )
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument("--json", dest="json_path", help="with --folds: write the evaluation as JSON")
    p.add_argument(
        "--runs-dir",
        type=Path,
        help="with --folds: also write every run as a TREC run file DIR/RUN.trec, and keep each "
        "finished fold there: run again with the same DIR to resume a CV stopped part way",
    )
    p.add_argument("--quiet", action="store_true")


@command(
    "train-encoder",
    "fine-tune the bi-encoder on a gold set (MNRL, hard negatives; --folds: cross-validated)",
    _train_encoder_args,
)
def train_encoder_cmd(args: argparse.Namespace) -> int:
    if args.query_side:
        return _train_query_side(args)
    recipe = Recipe(
        epochs=args.epochs or 1, batch_size=args.batch_size, lr=args.lr or 2e-5, negatives=args.negatives
    )
    if args.folds:
        report = cross_validate(
            args.index,
            _config(args),
            args.split,
            args.folds,
            recipe,
            args.base_model,
            args.permutations,
            progress=not args.quiet,
            runs_dir=args.runs_dir,
        )
        report.print(console)
        if args.json_path:
            report.write_json(args.json_path)
            console.print(f"wrote {args.json_path}", highlight=False)
        return 0
    if not args.name:
        raise ConfigError("give --name to save the model, or --folds K to cross-validate")
    report = train_encoder(
        args.index, args.name, _config(args), args.split, recipe, args.base_model, progress=not args.quiet
    )
    console.print(
        f"trained {report.name} on {report.queries} queries ({report.triples} triples, {report.steps} "
        f"steps) in {report.seconds:.0f} s -> {report.path}",
        highlight=False,
    )
    console.print(f"use it: scix ingest --dataset ... --index NEW --model {report.name}", highlight=False)
    return 0


def _train_query_side(args: argparse.Namespace) -> int:
    if args.folds:
        raise ConfigError(
            "--query-side --folds: cross-validate it with `scix tune` (query_epochs in its space)"
        )
    if not args.name:
        raise ConfigError("give --name to save the query encoder")
    defaults = QueryRecipe()
    recipe = QueryRecipe(
        epochs=args.epochs or defaults.epochs, batch_size=args.batch_size, lr=args.lr or defaults.lr
    )
    report = train_query_encoder(
        args.index, args.name, _config(args), args.split, recipe, progress=not args.quiet
    )
    console.print(
        f"trained the query side {report.name} on {report.queries} queries ({report.steps} steps) in "
        f"{report.seconds:.0f} s -> {report.path}",
        highlight=False,
    )
    console.print(
        f"use it: [embedding] query_model = {json.dumps(report.name)} in the config of --index {args.index}",
        highlight=False,
    )
    return 0


def _community_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("seeds", nargs="+", help="seed paper ids")
    p.add_argument("--index", required=True)
    p.add_argument("--limit", type=int)
    p.add_argument("--json", action="store_true")


@command(
    "community", "the citation community of seed papers (Louvain + personalised PageRank)", _community_args
)
def community_cmd(args: argparse.Namespace) -> int:
    result = Searcher(args.index, _config(args)).community(args.seeds, args.limit)
    if args.json:
        print(result.to_json())
        return 0
    info = result.metadata["community"]
    console.print(
        f"community of {', '.join(info['seeds'])}: {info['community_size']} papers", highlight=False
    )
    for rank, hit in enumerate(result.hits, start=1):
        console.print(
            f"{rank:>3}. [bold]{hit.paper_id}[/]  {hit.title}  [dim]{hit.score:.4f}[/]", highlight=False
        )
    return 0
