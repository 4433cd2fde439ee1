"""Subcommands for indexes and data: ingest, info, doctor, data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from scix_core.cli.common import config_from as _config
from scix_core.cli.common import console
from scix_core.cli.registry import command
from scix_core.config import path_origins
from scix_core.data import resolve_dataset
from scix_core.data.fetch import fetch_named, sources
from scix_core.errors import ConfigError
from scix_core.ingest import ingest
from scix_core.stores import PaperStore
from scix_core.stores.postgres import sync_append, sync_index
from scix_core.train.encoder import encoder_model
from scix_core.workspace import Workspace, read_json


def _ingest_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--path", type=Path, help="dataset file or folder")
    src.add_argument("--dataset", help="a dataset folder name under the data directory (e.g. scifact)")
    p.add_argument(
        "--format", dest="fmt", help="beir, scifact-csv, smart, arxiv-jsonl, arxiv-kaggle, citeulike"
    )
    p.add_argument("--index", required=True, help="name of the index to build")
    p.add_argument("--limit", type=int, help="take only the first N papers (quick runs)")
    p.add_argument("--no-embed", action="store_true", help="build the paper store and FTS only")
    p.add_argument("--force", action="store_true", help="rebuild even if the input is unchanged")
    p.add_argument(
        "--sparse", action="store_true", help="also build BM25 sparse vectors (the optional sparse lane)"
    )
    p.add_argument(
        "--passages",
        action="store_true",
        help="also encode each paper's abstract as overlapping 3-sentence passages: the dense lane scores "
        "a paper by its best passage too (MaxP; ~4x the vectors, ~2.7x the encoding)",
    )
    p.add_argument("--vector-backend", choices=["edge", "qdrant"], help="override vectors.backend")
    p.add_argument(
        "--model",
        help="embedding model: a name from `scix train-encoder`, a local path or a "
        "sentence-transformers name (default embedding.model)",
    )
    p.add_argument(
        "--backend",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="postgres: also mirror the index into PostgreSQL (SCIX_PG_DSN), idempotently",
    )
    p.add_argument(
        "--append",
        action="store_true",
        help="fold the records into the existing index: new ids added, changed ones replaced, identical "
        "ones skipped (no rebuild; docs/living-corpus.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="the report as JSON")


@command("ingest", "load a dataset and build its paper store, FTS5 indexes and vectors", _ingest_args)
def ingest_cmd(args: argparse.Namespace) -> int:
    overrides = {"vectors.backend": args.vector_backend} if args.vector_backend else {}
    cfg = _config(args, **overrides)
    if args.model:
        cfg = cfg.replace(**{"embedding.model": encoder_model(cfg, args.model)})
    path = args.path if args.path else resolve_dataset(args.dataset)
    quiet = args.quiet or args.json
    if args.append:
        building = [
            f
            for f in ("limit", "no_embed", "force", "sparse", "passages", "vector_backend")
            if getattr(args, f)
        ]
        if building:
            raise ConfigError(
                f"--append keeps the index's own build settings; drop --{building[0].replace('_', '-')}"
            )
        from scix_core.append import append  # lazy: only for this mode

        report = append(path, args.index, args.fmt, config=cfg, progress=not quiet)
    else:
        report = ingest(
            path,
            args.index,
            args.fmt,
            config=cfg,
            limit=args.limit,
            embed=not args.no_embed,
            force=args.force,
            progress=not quiet,
            sparse=args.sparse,
            passages=args.passages,
        )
    sync = None
    if args.backend == "postgres":
        if report.status == "appended":  # the mirror follows in place
            sync = sync_append(args.index, report.path, cfg.postgres.dsn)
        else:
            sync = sync_index(args.index, report.path, cfg.postgres.dsn, force=args.force)
    if args.json:
        print(json.dumps(ingest_json(report, sync), indent=2))
        return 0
    print_ingest(report)
    if sync is not None:
        console.print(
            f"postgres: {sync.status} {sync.papers} papers into schema {sync.schema} in {sync.seconds:.1f} s",
            highlight=False,
        )
    return 0


def ingest_json(report, sync=None) -> dict:
    """What ``scix ingest --json`` prints."""
    out = {
        "index": report.index,
        "status": report.status,
        "path": str(report.path),
        "taken": report.taken,
        "added": report.added,
        "replaced": report.replaced,
        "unchanged": report.unchanged,
        "rejected": [str(r) for r in report.rejected],
        "duplicates": report.duplicates,
        "encoded": report.encoded,
        "reused": report.reused,
        "stages": {s.stage: round(s.seconds, 3) for s in report.stages},
        "seconds": round(sum(s.seconds for s in report.stages), 3),
        "peak_rss_mb": round(report.peak_rss_mb, 1),
        "papers": report.manifest.get("papers"),
    }
    if sync is not None:
        out["postgres"] = {"status": sync.status, "papers": sync.papers, "seconds": round(sync.seconds, 3)}
    return out


def print_ingest(report) -> None:
    console.print(f"[bold]{report.index}[/]: {report.status} at {report.path}")
    newer = report.manifest.get("format") == "arxiv-jsonl"  # a listing's later record is a newer version
    console.print(
        f"taken {report.taken} papers, rejected {len(report.rejected)}, duplicate ids "
        + (
            f"replaced {report.duplicates} (rule: a later record of an id replaces it)"
            if newer
            else f"dropped {report.duplicates} (rule: first occurrence wins)"
        )
    )
    if report.added or report.replaced or report.unchanged:
        console.print(
            f"appended: {report.added} added, {report.replaced} replaced by a new version, "
            f"{report.unchanged} unchanged (skipped); {report.manifest.get('papers')} papers now",
            highlight=False,
        )
    for rej in report.rejected[:20]:
        console.print(f"  rejected {rej}", markup=False, highlight=False)
    if len(report.rejected) > 20:
        console.print(f"  ... and {len(report.rejected) - 20} more")
    if report.textless:
        console.print(
            f"[yellow]{report.textless} papers have neither title nor abstract[/]: kept (their saves and "
            "citations count), but no lane can find them by content and their vectors are all alike"
        )
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
    cfg = _config(args)
    ws = Workspace(cfg.home)
    if not args.index:  # where everything is and why there, then the indexes
        found = path_origins(getattr(args, "config", None))
        if args.json:
            where = {k: {"path": str(f.path) if f.path else None, "from": f.origin} for k, f in found.items()}
            print(json.dumps({"paths": where, "indexes": ws.indexes()}, indent=2))
            return 0
        table = Table("path", "where", "from", title="paths")
        for key, f in found.items():
            table.add_row(key, str(f.path or "-"), f.origin)
        console.print(table)
        console.print("indexes: " + (", ".join(ws.indexes()) or "none yet (scix ingest)"), highlight=False)
        return 0
    folder = ws.index_dir(args.index)
    manifest = read_json(folder / "manifest.json")
    store = PaperStore(folder / "papers.sqlite")
    info = {
        "index": args.index,
        "path": str(folder),
        "counts": store.counts(),
        "model": manifest.get("model"),
        "dim": manifest.get("dim"),
        "vector_backend": manifest.get("vector_backend"),
        "vectors": manifest.get("vectors", 0),
        "passages": manifest.get("passages", 0),
        "embedding_backend": manifest.get("embedding_backend"),
        "dataset": manifest.get("dataset"),
        "format": manifest.get("format"),
        "sources": manifest.get("sources"),
        "rejected": manifest.get("rejected"),
        "duplicates": manifest.get("duplicates"),
        "listed": store.listed_range(),
        "appends": manifest.get("appended", 0),  # `scix ingest --append` runs since the last full build
        "last_append": (manifest.get("appends") or [None])[-1],
        "sizes_bytes": {p.name: _size(p) for p in sorted(folder.iterdir())},
    }
    store.close()
    tuned = ws.tuned_preset(args.index)
    if tuned.exists():  # what `scix tune` chose (its header line), read with --config tuned
        info["tuned_preset"] = {"path": str(tuned), "chose": tuned.read_text().splitlines()[0].lstrip("# ")}
    from scix_core.recommend.refit import fit_status  # lazy: scipy, only for this command

    fit = fit_status(cfg, args.index)
    if fit is not None:  # the co-save model's last fit: its age and the saves since
        info["community_fit"] = fit
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
    from scix_core.doctor import run_checks  # lazy: it loads every backend (scipy), only for this command

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
    f.add_argument(
        "--url-base",
        help="fetch every file of a known source from this mirror (URL_BASE/<file name>), same checksums",
    )
    f.add_argument("--dest", type=Path, help="target data directory (default: the data directory)")
    sub.add_parser("list", help="list fetchable datasets: each file, its checksum, and what is already here")
    h = sub.add_parser("harvest", help="new arXiv listings by OAI-PMH, as day files YYYY-MM-DD.jsonl")
    h.add_argument("source", choices=["arxiv"])
    h.add_argument("--set", required=True, help="an OAI set: cs, math, physics:astro-ph, ...")
    h.add_argument("--from", dest="start", required=True, help="first datestamp, YYYY-MM-DD")
    h.add_argument("--until", help="last datestamp, YYYY-MM-DD (default: the newest)")
    h.add_argument("--category", help="keep only records listed in this category, e.g. cs.AI")
    h.add_argument("--dest", type=Path, required=True, help="the folder of day files (ingest it with --path)")
    h.add_argument("--url", default=None, help="the OAI-PMH endpoint (default: arXiv's)")
    h.add_argument("--delay", type=float, default=3.0, help="seconds between requests (arXiv asks for 3)")


@command("data", "manage the data directory (fetch public copies)", _data_args)
def data_cmd(args: argparse.Namespace) -> int:
    root = _config(args).data_dir
    if args.action == "harvest":
        return _harvest(args)
    if args.action == "list":
        table = Table("dataset", "format", "here", "file", "url", "checksum", title=f"fetchable into {root}")
        for name, src in sources().items():
            here = "yes" if (root / name).is_dir() else "no"
            files = [(f.name, f.url, f"sha256 {f.sha256[:12]}…") for f in src.files] or [
                ("(archive)", src.url, f"sha256 {src.sha256[:12]}…" if src.sha256 else f"md5 {src.md5}")
            ]
            for i, (file, url, check) in enumerate(files):
                table.add_row(*((name, src.format or "", here) if i == 0 else ("", "", "")), file, url, check)
            table.add_row("", "", "", f"[dim]{src.about}[/]", "", "", end_section=True)
        console.print(table)
        return 0
    dest = fetch_named(args.name, args.dest or root, args.url, args.sha256, args.url_base)
    console.print(f"fetched {args.name} into {dest}", highlight=False)
    return 0


def _harvest(args: argparse.Namespace) -> int:
    from scix_core.data.harvest import ARXIV_OAI, Harvester, Request, parse_day  # lazy: only this action

    start, until = parse_day(args.start, "--from"), parse_day(args.until, "--until") if args.until else None
    request = Request(args.set, start, until, args.category, args.url or ARXIV_OAI)
    say = lambda message: console.print(f"[dim]harvest: {message}[/]", highlight=False)
    report = Harvester(request, args.dest, delay_s=args.delay, progress=say).run()
    days = ", ".join(f"{name} {n}" for name, n in report.days.items()) or "none"
    console.print(
        f"harvested {report.records} records in {report.pages} pages into {args.dest} (days: {days}); "
        f"{report.deleted} deleted, {report.outside_category} outside {args.category or 'the set'}, "
        f"{report.retries} retries, {report.restarts} restarts"
        + (f", resumed after page {report.resumed_from_page}" if report.resumed_from_page else ""),
        highlight=False,
    )
    return 0
