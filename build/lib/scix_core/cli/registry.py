"""The subcommand registry: each ``scix_core.cli`` module registers its commands with :func:`command`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

#: name -> (help, add_arguments, run)
COMMANDS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    def register(run: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = (help, arguments, run)
        return run

    return register
