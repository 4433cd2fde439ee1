"""Subcommands for evaluation: eval, evidence, report, eval-recs, tune."""

from __future__ import annotations

import argparse
from pathlib import Path

from scix_core.cli.common import config_from as _config
from scix_core.cli.common import console
from scix_core.cli.registry import command
from scix_core.errors import ConfigError
from scix_core.evaluate import (
    ALL_RUNS,
    DEFAULT_RUNS,
    config_runs,
    evaluate,
    evidence,
    from_dir,
    from_files,
)
from scix_core.evaluate.external import parse_spec
from scix_core.evaluate.gold import for_index
from scix_core.evaluate.metrics import METRICS, parse_metrics
from scix_core.evaluate.paths import tune_path
from scix_core.evaluate.report import TABLE_FORMATS, reuse_key, saved_key


def file_digest(path: Path) -> str:
    """A run file's name and content hash (what a reused report depends on)."""
    import hashlib

    return f"{path.name}:{hashlib.sha256(path.read_bytes()).hexdigest()}" if path.is_file() else str(path)


def _gold_args(p: argparse.ArgumentParser) -> None:
    gold = p.add_argument_group("gold set (default: the qrels stored with the index)")
    gold.add_argument("--queries", type=Path, help="BEIR queries.jsonl")
    gold.add_argument("--qrels", type=Path, help="BEIR TSV or TREC qrels")
    gold.add_argument("--gold", type=Path, help="a dataset folder the loaders read (with --format)")
    gold.add_argument("--format", dest="fmt", help="smart, beir, scifact-csv, ...")
    gold.add_argument("--split", help="qrels split (train, test, ...; default: the only one, else train)")


def _gold(args: argparse.Namespace, cfg):
    """The gold set the gold arguments name."""
    if bool(args.queries) != bool(args.qrels):
        raise ConfigError("--queries and --qrels go together")
    if args.queries:
        return from_files(args.queries, args.qrels)
    if args.gold:
        return from_dir(args.gold, args.fmt, args.split)
    return for_index(args.index, cfg, args.split)


def _eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    _gold_args(p)
    p.add_argument("--runs", help="comma list of run names (default lexical,dense,hybrid)")
    p.add_argument("--sweep", action="store_true", help="every run")
    p.add_argument(
        "--run",
        dest="config_run_specs",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="add a run: the pipeline with dotted config overrides, e.g. tw2:search.title_weight=2 "
        "(repeatable)",
    )
    p.add_argument(
        "--config-run",
        dest="config_run_files",
        action="append",
        default=[],
        metavar="NAME=FILE.toml",
        help="add a run: the pipeline with a TOML file merged over the configuration (repeatable)",
    )
    p.add_argument(
        "--run-file",
        dest="run_files",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="add a TREC run file from any system (Pyserini, PyTerrier, Anserini ...) to the comparison "
        "(repeatable)",
    )
    p.add_argument(
        "--metrics",
        help="comma list: ndcg@10, mrr@10, recall@100, hit@10 or any ir-measures measure (map, p@10, r-prec, "
        "bpref, judged@10, rr ...); the gate's primary is the first (default ndcg@10,mrr@10,recall@50,"
        "recall@100)",
    )
    p.add_argument(
        "--table", choices=TABLE_FORMATS, help="also print the runs x metrics table as a paper shows it"
    )
    p.add_argument("--baseline", help="compare every run with this one and apply the rollout gate")
    p.add_argument("--reranker", help="reranker for the hybrid+rerank run (name or path)")
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument(
        "--sample", type=int, help="score a seeded random sample of N judged queries (quick iterations)"
    )
    p.add_argument("--backend", choices=["sqlite", "bm25", "postgres"], help="lexical backend")
    p.add_argument(
        "--lexical-mode",
        choices=["and", "or", "auto"],
        help="lexical lanes' semantics (default search.lexical_mode)",
    )
    p.add_argument("--json", dest="json_path", type=Path, help="write the report as one JSON object")
    p.add_argument(
        "--runs-dir", type=Path, help="also write every run as a TREC run file DIR/RUN.trec (top 100)"
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="with --json: skip when that file was written by the same index build, gold set, runs, "
        "settings and (clean) code commit",
    )
    p.add_argument("--quiet", action="store_true")


@command(
    "eval", "evaluate runs on a gold set: metrics, provenance, buckets, significance, the gate", _eval_args
)
def eval_cmd(args: argparse.Namespace) -> int:
    overrides = {"search.lexical_backend": args.backend, "search.lexical_mode": args.lexical_mode}
    cfg = _config(args, **{k: v for k, v in overrides.items() if v})
    gold = _gold(args, cfg)
    runs = (
        ALL_RUNS
        if args.sweep
        else tuple(r.strip() for r in args.runs.split(","))
        if args.runs
        else DEFAULT_RUNS
    )
    configured = config_runs(args.config_run_specs, args.config_run_files, config=cfg, named=ALL_RUNS)
    metrics = parse_metrics(args.metrics) if args.metrics else METRICS
    run_files = dict(parse_spec(spec) for spec in args.run_files)
    if args.reuse and not args.json_path:
        raise ConfigError("--reuse needs --json PATH (the report to reuse)")
    key = None
    if args.reuse:
        key = reuse_key(
            cfg,
            args.index,
            gold,
            (*runs, *(r.source for r in configured), *metrics, *(file_digest(f) for f in run_files.values())),
            args.baseline,
            args.reranker,
            args.permutations,
            args.sample,
        )
        if key is not None and saved_key(args.json_path) == key:
            console.print(
                f"unchanged: {args.json_path} (same index build, gold set, runs, settings and code)",
                highlight=False,
            )
            return 0
    report = evaluate(
        args.index,
        gold,
        runs,
        args.baseline,
        cfg,
        args.reranker,
        args.permutations,
        progress=not args.quiet,
        sample=args.sample,
        configured=configured,
        runs_dir=args.runs_dir,
        metrics=metrics,
        run_files=run_files,
    )
    report.print(console)
    if args.table:
        print("\n" + report.table(args.table))
    if args.json_path:
        report.write_json(args.json_path, reuse_key=key)
        console.print(f"wrote {args.json_path}", highlight=False)
    return 0


def _evidence_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", choices=["quantization", "pool", "rrf-k", "reranker", "backends"])
    p.add_argument("--index", required=True)
    p.add_argument("--reranker", help="for the reranker study: a trained name or a CrossEncoder path")
    p.add_argument(
        "--queries", type=int, help="pool: number of sampled titles; quantization: cap on gold queries"
    )
    p.add_argument("--split", help="gold split (use one the reranker was not trained on, e.g. test)")
    p.add_argument(
        "--lexical-mode",
        choices=["and", "or", "auto"],
        help="lexical lanes' semantics (default search.lexical_mode)",
    )
    p.add_argument("--out", type=Path, help="folder for the JSON and markdown (default reports/)")


@command("evidence", "reproduce an evidence study into reports/ (JSON + markdown)", _evidence_args)
def evidence_cmd(args: argparse.Namespace) -> int:
    def reranker_name() -> str:
        if not args.reranker:
            raise ConfigError("the reranker study needs --reranker NAME|PATH (see `scix train-reranker`)")
        return args.reranker

    runners = {
        "quantization": lambda cfg: evidence.quantization(
            args.index, cfg, max_queries=args.queries, split=args.split
        ),
        "pool": lambda cfg: evidence.pool(args.index, cfg, n_queries=args.queries or 200),
        "rrf-k": lambda cfg: evidence.rrf_k(args.index, cfg, split=args.split),
        "reranker": lambda cfg: evidence.reranker(args.index, reranker_name(), cfg, split=args.split),
        "backends": lambda cfg: evidence.backends(
            args.index, cfg, split=args.split, max_queries=args.queries
        ),
    }
    result = runners[args.study](
        _config(args, **({"search.lexical_mode": args.lexical_mode} if args.lexical_mode else {}))
    )
    paths = evidence.write(result, args.out)
    console.print(evidence.markdown(result), highlight=False, markup=False)
    console.print(f"wrote {paths[0]} and {paths[1]}", highlight=False)
    return 0


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name",
        help="query-inspector, lane-attribution, fusion-sweep, evidence, cluster-view, recommendation-eval, "
        "digest, tune, or several joined by commas; all: the standard set; list: the reports and their "
        "parameters. A set (all, or two or more) reads what the main job saved (its sweeps, its eval-recs "
        "JSON) and gives each report only the -p parameters it has",
    )
    p.add_argument("--skip", default="", metavar="NAMES", help="reports of the set to leave out (commas)")
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help='a notebook parameter (JSON values: 30, true, null, ["a"]; anything else is a string)',
    )
    p.add_argument("--out", type=Path, help="reports folder (default reports/ or $SCIX_REPORTS_DIR)")


@command(
    "report",
    "execute a notebook with papermill into reports/NAME/ (notebook, HTML, figures, run.json)",
    _report_args,
)
def report_cmd(args: argparse.Namespace) -> int:
    from scix_core import reports  # lazy: the notebook views (ipywidgets, scipy), only for this command

    if args.name == "list":
        for name in reports.NOTEBOOKS:
            console.print(f"[bold]{name}[/] ({reports.NOTEBOOKS[name]})", highlight=False)
            for key, value in reports.parameters(name).items():
                console.print(f"    {key} = {value!r}", highlight=False, markup=False)
        return 0
    overrides = {key: reports.parse_value(value) for key, value in args.parameter}
    names = reports.STANDARD if args.name == "all" else tuple(filter(None, args.name.split(",")))
    skip = set(filter(None, args.skip.split(",")))
    for name in (*names, *sorted(skip)):  # every name checked before anything runs
        reports.notebook_path(name)
    as_set = args.name == "all" or len(names) > 1
    for name in (n for n in names if n not in skip):
        chosen = overrides
        if as_set:  # a parameter applies to every report that has it
            known = reports.parameters(name)
            chosen = {
                **reports.standard_overrides(name, overrides.get("index", "scifact")),
                **{k: v for k, v in overrides.items() if k in known},
            }
        console.print(f"report {name}: running {reports.NOTEBOOKS.get(name, '?')} ...", highlight=False)
        done = reports.run_report(name, chosen, args.out)
        console.print(
            f"  wrote {done.html} ({len(done.figures)} figures, {done.seconds:.1f} s)", highlight=False
        )
    return 0


def _eval_recs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, help="an index built from user libraries (the citeulike format)")
    p.add_argument("--users", type=int, help="a seeded sample of N eligible users (default: all)")
    p.add_argument(
        "--holdout", type=float, default=0.2, help="share of each user's saves held out (default 0.2)"
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--min-saves", type=int, default=5, help="evaluate users with at least this many saves")
    p.add_argument(
        "--train-size",
        type=int,
        help="N random training saves per user, the rest held out (users with "
        "more than N saves; Dacrema et al.'s P = N) instead of --holdout",
    )
    p.add_argument(
        "--new-items",
        type=float,
        metavar="F",
        help="the cold-item protocol: a seeded share F of the catalogue (e.g. 0.2) is new — nobody's "
        "training save, in no fit — each user's saves of it held out, and every list drawn from the new "
        "papers only; peers that rank only saved items are listed as not applicable",
    )
    p.add_argument(
        "--cutoffs",
        default="10",
        help="comma list of cutoffs for recall, nDCG and hit rate (default 10); "
        "the gate decides on the first",
    )
    p.add_argument(
        "--runs", help="comma list (default: tiers, Tier-1 variants, peers); 'all' adds the MMR λ sweep"
    )
    p.add_argument(
        "--baseline", default="content-knn", help="compare every run with this one and apply the gate"
    )
    p.add_argument(
        "--no-per-tier", action="store_true", help="skip the tables of users truncated to 1, 3, 5 saves"
    )
    p.add_argument(
        "--per-tier-users",
        type=int,
        default=1000,
        help="the per-tier tables truncate a seeded sample of this many evaluated users; the others stay "
        "the community those users join (default 1000; 0: every evaluated user; more than 1000 are "
        "truncated in parts of up to 1000 in turn, everyone else kept each time)",
    )
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument(
        "--workers",
        type=int,
        help="processes: 2 runs the peers, Tiers 3 and 2 and the per-tier lists beside the Tier-1 runs "
        "(default: 2 where this process may use two or more cores, OMP_NUM_THREADS counting; 1: one process)",
    )
    p.add_argument("--json", dest="json_path", type=Path, help="write the report (per-user values included)")
    p.add_argument("--quiet", action="store_true")


@command(
    "eval-recs",
    "offline recommendation evaluation on held-out saves: tiers, variants, peers, significance",
    _eval_recs_args,
)
def eval_recs_cmd(args: argparse.Namespace) -> int:
    from scix_core.evaluate import rec_runs  # lazy: scipy, off the cold CLI path
    from scix_core.evaluate.recs import evaluate_recs  # lazy: scipy, off the cold CLI path
    from scix_core.train.scorer import in_run_scorer  # lazy: lightgbm and scipy, only for this command

    if args.runs == "all":
        runs = rec_runs.ALL_RUNS
    else:
        runs = tuple(r.strip() for r in args.runs.split(",")) if args.runs else rec_runs.DEFAULT_RUNS
    try:
        cutoffs = tuple(int(k) for k in args.cutoffs.split(","))
    except ValueError:
        raise ConfigError(f"--cutoffs must be a comma list of integers, not {args.cutoffs!r}") from None
    report = evaluate_recs(
        args.index,
        _config(args),
        users=args.users,
        holdout=args.holdout,
        seed=args.seed,
        runs=runs,
        baseline=args.baseline or None,
        min_saves=args.min_saves,
        per_tier=not args.no_per_tier,
        per_tier_users=None if args.per_tier_users == 0 else args.per_tier_users,
        permutations=args.permutations,
        progress=not args.quiet,
        train_size=args.train_size,
        cutoffs=cutoffs,
        scorer_trainer=in_run_scorer,
        workers=args.workers,
        new_share=args.new_items,
    )
    report.print(console)
    if args.json_path:
        report.write_json(args.json_path)
        console.print(f"wrote {args.json_path}", highlight=False)
    return 0


def _tune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    _gold_args(p)
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds over the judged queries")
    p.add_argument("--seed", type=int, default=13, help="the folds' shuffle and the fine-tuning's seed")
    p.add_argument(
        "--budget", help="stop building pieces when the next would end after this (2h, 90m, 1h30m, 600)"
    )
    p.add_argument(
        "--space",
        help="a TOML file whose [space] table narrows or widens the search (e.g. query_epochs = []: no "
        "fine-tuning), or a shipped one: fusion (fusion and lexical choices only), no-fine-tuning, "
        "full-fine-tuning (both towers of the encoder too: hours)",
    )
    p.add_argument(
        "--reranker",
        action="append",
        default=[],
        metavar="NAME",
        help="try a cross-encoder over the chosen pipeline's fused top window (repeatable): a workspace "
        "reranker's name or a path (the queries it was trained on are left out), or fine-tuned (one "
        "trained per fold: hours); added to the space's rerankers",
    )
    p.add_argument(
        "--group-folds",
        action="store_true",
        help="keep queries that share a relevant paper in one fold (where no group outgrows a fold): the "
        "estimate for queries about papers no training query was judged on",
    )
    p.add_argument(
        "--resume", action="store_true", help="keep the pieces an interrupted run of the same key built"
    )
    p.add_argument(
        "--metrics", help="comma list; the first is the primary (default ndcg@10,mrr@10,recall@50,recall@100)"
    )
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument(
        "--json", dest="json_path", type=Path, help="write the whole report (every candidate) as JSON"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="tune and report, but write no preset and build nothing"
    )
    p.add_argument("--quiet", action="store_true")


@command(
    "tune",
    "choose the best search pipeline for an index by nested cross-validation on a gold set; write it as the "
    "index's `tuned` preset when it clears the gate",
    _tune_args,
)
def tune_cmd(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from scix_core.tune import load_space, parse_budget, tune  # lazy: the training stack, only here

    cfg = _config(args)
    space = load_space(args.space)
    if args.reranker:
        space = replace(space, rerankers=tuple(dict.fromkeys([*space.rerankers, *args.reranker])))
    report = tune(
        args.index,
        _gold(args, cfg) if (args.queries or args.gold) else None,
        args.split,
        cfg,
        space,
        args.folds,
        args.seed,
        parse_budget(args.budget),
        args.resume,
        args.permutations,
        parse_metrics(args.metrics) if args.metrics else METRICS,
        progress=not args.quiet,
        write=not args.dry_run,
        group_folds=args.group_folds,
    )
    report.print(console)
    path = args.json_path or tune_path(args.index)
    report.write_json(path)
    console.print(f"wrote {path}", highlight=False)
    return 0
