"""The ``scix`` command: a registry of subcommands, typed errors as clean exits."""

from __future__ import annotations

import argparse
import sys

from scix_core import __version__
from scix_core.cli import evaluate, ingest, recommend, search, serve  # noqa: F401  (register the subcommands)
from scix_core.cli.registry import COMMANDS
from scix_core.errors import ScixError


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
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ScixError as exc:
        print(f"scix: error [{exc.code}]: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scix: interrupted; nothing was changed", file=sys.stderr)
        return 130
