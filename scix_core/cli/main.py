"""The ``scix`` command: a registry of subcommands, typed errors as clean exits.

Each ``scix_core.cli`` module registers its commands when imported, and importing one brings in its whole
stack (the evaluation, the search pipeline, the model loaders). A command named on the command line imports
only the module that holds it (:data:`OWNERS`), so ``scix interact`` starts without the stacks of
``scix eval`` (0.4 s of a cold start); ``scix --help``, or a name not listed there, imports them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from scix_core import __version__
from scix_core.cli.registry import COMMANDS
from scix_core.errors import ScixError

MODULES = ("evaluate", "ingest", "recommend", "search", "serve")
#: command -> the ``scix_core.cli`` module that registers it (a test holds it to the registry)
OWNERS = {
    "eval": "evaluate",
    "evidence": "evaluate",
    "report": "evaluate",
    "eval-recs": "evaluate",
    "tune": "evaluate",
    "ingest": "ingest",
    "info": "ingest",
    "doctor": "ingest",
    "data": "ingest",
    "users": "recommend",
    "interact": "recommend",
    "recommend": "recommend",
    "feed": "recommend",
    "train-scorer": "recommend",
    "search": "search",
    "train-reranker": "search",
    "train-encoder": "search",
    "community": "search",
    "serve": "serve",
}


def _named(argv: list[str]) -> str | None:
    """The command ``argv`` runs (its first word that names one, not an option's value), or None."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--config":
            skip = True
        elif not word.startswith("-"):
            return word if word in OWNERS else None
    return None


def load(argv: list[str] | None = None) -> None:
    """Register the command ``argv`` runs — every command when it names none (``--help``) or an unknown
    one."""
    name = _named(sys.argv[1:] if argv is None else argv)
    for module in (OWNERS[name],) if name else MODULES:
        importlib.import_module(f"scix_core.cli.{module}")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="scix", description="scix_core research workbench")
    top.add_argument("--version", action="version", version=f"scix_core {__version__}")
    top.add_argument("--config", help="TOML config file (default: scix.toml or $SCIX_CONFIG)")
    subs = top.add_subparsers(dest="command", required=True)
    for name, (help_, arguments, run) in COMMANDS.items():
        sub = subs.add_parser(name, help=help_, description=help_)
        arguments(sub)
        sub.set_defaults(run=run)
    return top


def main(argv: list[str] | None = None) -> int:
    load(argv)
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ScixError as exc:
        print(f"scix: error [{exc.code}]: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scix: interrupted; nothing was changed", file=sys.stderr)
        return 130
