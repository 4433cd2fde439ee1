"""The ``scix`` command: a registry of subcommands, typed errors as clean exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from scix_core.errors import ScixError

#: name -> (help, add_arguments, run)
COMMANDS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    def register(run: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = (help, arguments, run)
        return run

    return register


def parser() -> argparse.ArgumentParser:
    from scix_core import __version__
    from scix_core.cli import evaluate, ingest, recommend, search  # noqa: F401  (register the subcommands)

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
