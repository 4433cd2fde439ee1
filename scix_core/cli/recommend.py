"""Subcommands for recommendations: users, interact, recommend, feed."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from scix_core.cli.common import config_from, console
from scix_core.cli.registry import command
from scix_core.errors import ConfigError


def _recommender(args: argparse.Namespace):
    from scix_core.recommend import Recommender  # lazy: scipy, off the cold CLI path

    # the process ends with the command: a due refit of the co-save model runs detached (recommend/refit.py)
    return Recommender(args.index, config_from(args), detach_refits=True)


def _users_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("create", help="create a user (or replace its onboarding categories)")
    c.add_argument("--index", required=True)
    c.add_argument("--user", required=True)
    c.add_argument(
        "--categories", default="", help="comma list of category codes (arXiv codes, or the corpus's tags)"
    )
    lst = sub.add_parser("list", help="every user of an index with interaction counts")
    lst.add_argument("--index", required=True)
    lst.add_argument("--json", action="store_true")
    s = sub.add_parser("show", help="one user: categories, interactions, profiles, clusters, tier")
    s.add_argument("user")
    s.add_argument("--index", required=True)
    s.add_argument("--json", action="store_true")
    i = sub.add_parser(
        "import", help="import the user libraries the index's loader found (CiteULike users.dat)"
    )
    i.add_argument("--index", required=True)
    i.add_argument("--users", help="comma list: import only these users")
    i.add_argument("--quiet", action="store_true")
    r = sub.add_parser(
        "refit",
        help="refit the index's co-save model on its saves of now (what its refit clock starts on its own)",
    )
    r.add_argument("--index", required=True)
    r.add_argument("--json", action="store_true")
    m = sub.add_parser(
        "migrate", help="copy the workspace's SQLite user state (every index) into an empty PostgreSQL one"
    )
    m.add_argument("--to", choices=["postgres"], required=True)
    m.add_argument("--dsn", help="target database (default postgres.state_dsn, SCIX_STATE_DSN)")


@command("users", "create, list, show, import, refit and migrate users", _users_args)
def users_cmd(args: argparse.Namespace) -> int:
    if args.action == "migrate":
        return _migrate(args)
    if args.action == "refit":
        return _refit(args)
    rec = _recommender(args)
    if args.action == "create":
        status = rec.create_user(args.user, [c for c in args.categories.split(",") if c.strip()])
        console.print(f"{status} user {args.user!r} of index {args.index!r}", highlight=False)
        return 0
    if args.action == "import":
        only = [u.strip() for u in args.users.split(",")] if args.users else None
        from scix_core.recommend.library import import_libraries  # lazy: scipy, off the cold CLI path

        report = import_libraries(rec, only, progress=not args.quiet)
        console.print(
            f"imported {report.users} users with {report.saves} saves in {report.seconds:.1f} s; "
            f"{report.skipped_users} already present (skipped); {report.unknown_papers} saves of papers not "
            "in "
            "the index dropped",
            highlight=False,
        )
        console.print(
            "timestamps are synthesised in file order (one second apart from 2000-01-01; the format has "
            "none) and flagged synthetic",
            highlight=False,
        )
        return 0
    if args.action == "list":
        users = rec.state.users(args.index)
        if args.json:
            print(json.dumps(users, indent=2))
            return 0
        table = Table(
            "user", "saves", "dismissals", "views", "categories", "created", title=f"{len(users)} users"
        )
        for u in users:
            table.add_row(
                u["user"],
                str(u["saves"]),
                str(u["dismissals"]),
                str(u["views"]),
                ",".join(u["categories"]),
                u["created"],
            )
        console.print(table)
        return 0
    return _show(rec, args)


def _refit(args: argparse.Namespace) -> int:
    from scix_core.recommend.refit import refit_index  # lazy: scipy, off the cold CLI path

    report = refit_index(config_from(args), args.index)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    if not report.ran:
        console.print(report.reason, highlight=False)
        return 0
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.parts)
    console.print(
        f"refitted {report.model} of index {report.index!r} on {report.saves:,} saves in "
        f"{report.seconds:.1f} s ({parts}); {report.reason}",
        highlight=False,
    )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from scix_core.recommend.state import UserState  # lazy: scipy, off the cold CLI path
    from scix_core.recommend.state_postgres import PostgresUserState, migrate  # lazy: scipy, as above

    cfg = config_from(args)
    dsn = args.dsn or cfg.postgres.state_dsn
    if not dsn:
        raise ConfigError("no target: pass --dsn or set SCIX_STATE_DSN (postgres.state_dsn)")
    source, target = (
        UserState.for_home(cfg.home),
        PostgresUserState(dsn, connect_timeout=cfg.postgres.connect_timeout_s),
    )
    counts = migrate(source, target)
    console.print(
        f"copied {source.location} into {target.location}: "
        + ", ".join(f"{table} {n}" for table, n in counts.items())
        + " (counts checked); set SCIX_STATE_DSN to serve from it",
        highlight=False,
    )
    return 0


def _show(rec, args: argparse.Namespace) -> int:
    from scix_core.recommend.tiers import (  # lazy: scipy, off the cold CLI path
        entitled,
        next_tier_message,
    )

    ctx = rec.stored(args.user)
    clusters, next_id = rec.state.clusters(rec.index, args.user)
    saves = len(ctx.saved)
    tier = entitled(rec.config.recommend, saves)
    info = {
        "user": args.user,
        "index": rec.index,
        "categories": list(ctx.user.categories),
        "created": ctx.user.created,
        "saves": saves,
        "dismissals": len(ctx.dismissed),
        "views": sum(1 for e in ctx.events if e.kind == "view"),
        "synthetic_times": any(e.synthetic for e in ctx.events),
        "tier": tier,
        "next_tier": next_tier_message(rec.config.recommend, tier, saves),
        "profiles": {
            k: {"saves": p.saves, "model": p.model, "last_at": p.last_at} for k, p in ctx.profiles.items()
        },
        "clusters": [{"id": c.cluster_id, "medoid": c.medoid_paper, "size": c.size} for c in clusters],
        "next_cluster_id": next_id,
        "recent": [
            {"paper_id": e.paper_id, "kind": e.kind, "at": e.at.isoformat()} for e in ctx.events[-10:]
        ],
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        console.print(
            f"[bold]{key}[/]: {json.dumps(value) if isinstance(value, (dict, list)) else value}",
            highlight=False,
        )
    return 0


def _interact_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--user", required=True)
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--save", metavar="ID")
    kind.add_argument("--dismiss", metavar="ID")
    kind.add_argument("--view", metavar="ID")
    p.add_argument("--at", help="ISO 8601 time of the interaction (default: now)")


@command("interact", "record one interaction (save, dismiss or view) of a user with a paper", _interact_args)
def interact_cmd(args: argparse.Namespace) -> int:
    rec = _recommender(args)
    kind, paper = next((k, getattr(args, k)) for k in ("save", "dismiss", "view") if getattr(args, k))
    event = rec.interact(args.user, paper, kind, args.at)
    saves = len(rec.stored(args.user).saved)  # the write fits nothing
    console.print(
        f"recorded {kind} of {paper} by {args.user} at {event.at.isoformat()} ({saves} saves)",
        highlight=False,
    )
    return 0


def _recommend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--user", required=True)
    p.add_argument(
        "--limit", type=int, help="number of items before exploration (default recommend.limit = 10)"
    )
    p.add_argument("--no-log", action="store_true", help="do not write this call to the recommendation log")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the whole result as one JSON object")
    out.add_argument(
        "--explain", action="store_true", help="clusters, quotas, suppressed codes, scores and MMR moves"
    )


@command(
    "recommend",
    "recommend papers for a user (tiered: trending, recommend, profile, clustered)",
    _recommend_args,
)
def recommend_cmd(args: argparse.Namespace) -> int:
    rec = _recommender(args)
    result = rec.recommend(args.user, args.limit, log=False if args.no_log else None)
    if args.json:
        print(result.to_json())
        return 0
    console.print(f"[bold]{result.reason}[/]", highlight=False)
    if result.next_tier:
        console.print(f"[cyan]{result.next_tier}[/]", highlight=False)
    _items_table(result)
    if args.explain:
        print_explain(result)
        print_community(rec.community.status())
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    return 0


def _feed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--user", required=True)
    p.add_argument(
        "--since",
        help="YYYY-MM-DD: papers listed on or after that day; last-visit: papers that arrived since your "
        "last feed (default: the index's newest listing day)",
    )
    p.add_argument("--limit", type=int, help="number of items (default recommend.limit = 10)")
    p.add_argument(
        "--no-visit", action="store_true", help="do not count this read as a visit (--since last-visit)"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the whole feed as one JSON object")
    out.add_argument("--explain", action="store_true", help="every stage, the clusters and the scores")


@command(
    "feed",
    "a user's new papers: the papers listed in a window, ranked by the user's tier's pipeline",
    _feed_args,
)
def feed_cmd(args: argparse.Namespace) -> int:
    rec = _recommender(args)
    feed = rec.feed(args.user, args.since, args.limit, visit=not args.no_visit)
    if args.json:
        print(feed.to_json())
        return 0
    result = feed.recommendations
    console.print(f"[bold]{feed.window.described}[/]", highlight=False)
    console.print(result.reason, highlight=False)
    if feed.empty:
        console.print(f"[yellow]empty feed:[/] {feed.empty}", highlight=False)
    _items_table(result)
    if args.explain:
        print_explain(result)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    return 0


def _items_table(result) -> None:
    table = Table("#", "paper", "source", "cluster", "mmr#", "score", "title")
    for item in result.items:
        table.add_row(
            str(item.rank),
            item.paper_id,
            item.source + (" *" if item.exploration else ""),
            "-" if item.cluster_id is None else str(item.cluster_id),
            "-" if item.mmr_position is None else str(item.mmr_position),
            f"{item.score:.4f}",
            item.title,
        )
    console.print(table)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def print_community(status: dict) -> None:
    """The co-save model a list was scored with: each part's fit, its age and the saves since it."""
    table = Table(
        "part",
        "fitted on saves",
        "saves since",
        "age",
        "fit s",
        "refit",
        title=f"co-save model {status['model']} ({status['saves']:,} saves now)",
    )
    for p in status["parts"]:
        table.add_row(
            p["part"],
            f"{p['fitted_on']:,}",
            f"{p['saves_since']:,}",
            _age(p["age_s"]),
            f"{p['fit_s']:.2f}",
            p["refit"],
        )
    console.print(table)
    due = ", ".join(status["due"]) or "none"
    running = "yes" if status["refitting"] else "no"
    console.print(
        f"refit clock: a slow part is refitted once {_age(status['refit_age_s'])} old with "
        f"{status['refit_growth']:.0%} more saves; due: {due}; running: {running}",
        highlight=False,
    )


def print_explain(result) -> None:
    stages = Table("stage", "ms", "what it did", title="stages")
    for s in result.stages:
        stages.add_row(s.name, f"{s.ms:.2f}", json.dumps(dict(s.summary), default=str))
    console.print(stages)
    names = {s.name for s in result.stages}
    if "quota" in names:
        clusters = Table(
            "cluster",
            "size",
            "medoid",
            "importance",
            "quota",
            "kept id from",
            "match sim",
            title="clusters (Hungarian-stable ids)",
        )
        for c in result.stage("quota").output:
            clusters.add_row(
                str(c.cluster_id),
                str(len(c.members)),
                c.medoid,
                f"{c.importance:.3f}",
                str(c.quota),
                "new" if c.matched_from is None else str(c.matched_from),
                "-" if c.match_similarity is None else f"{c.match_similarity:.3f}",
            )
        console.print(clusters)
        console.print(f"suppressed codes: {dict(result.stage('suppress').output) or 'none'}", highlight=False)
        moves = Table("paper", "relevance rank", "MMR position", title="MMR moves (relevance rank -> pick)")
        for paper, rel, pos in result.stage("mmr").summary["moves"]:
            moves.add_row(paper, str(rel), str(pos))
        console.print(moves)
        scores = Table(
            "paper", *(n for n, _ in result.items[0].scores) if result.items else (), title="scores"
        )
        for item in result.items:
            if not item.exploration:
                scores.add_row(item.paper_id, *(f"{v:.4f}" for _, v in item.scores))
        console.print(scores)
    console.print(f"scorer: {dict(result.scorer)}", highlight=False)


def _train_scorer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, help="an index with user libraries (or a recommendation log)")
    p.add_argument(
        "--users",
        type=int,
        default=1000,
        help="examples from a seeded sample of N users (default 1000; every library is the community)",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--out", help="write model.txt + manifest.json here (default models/scorers/INDEX)")


@command(
    "train-scorer",
    "train the LightGBM Tier-1 scorer from libraries and the recommendation log, with a feature audit",
    _train_scorer_args,
)
def train_scorer_cmd(args: argparse.Namespace) -> int:
    from scix_core.recommend.library import library_saves  # lazy: scipy, off the cold CLI path
    from scix_core.train.scorer import train_scorer  # lazy: lightgbm and scipy, only for this command

    rec = _recommender(args)
    manifest = train_scorer(
        rec,
        library_saves(rec.build_dir),
        out=args.out,
        seed=args.seed,
        rounds=args.rounds,
        max_users=args.users,
    )
    table = Table(
        "feature",
        "splits",
        "gain",
        "constant",
        title=f"feature audit ({manifest['examples']} examples, "
        f"{manifest['positives']} positive, {manifest['users']} users, {manifest['from_log']} from the log)",
    )
    for name, a in manifest["audit"]["features"].items():
        table.add_row(name, str(a["splits"]), f"{a['gain']:.1f}", "yes" if a["constant"] else "")
    console.print(table)
    for error in manifest["audit"]["errors"]:
        console.print(f"[red]audit error:[/] {error}", highlight=False)
    console.print(f'wrote {manifest["path"]}; use it: recommend.scorer = "lightgbm"', highlight=False)
    return 0
