"""What every subcommand module shares: the console and config loading."""

from __future__ import annotations

import argparse

from rich.console import Console

from scix_core.config import load_config

console = Console(emoji=False)
if not console.is_terminal:  # piped or captured: do not squeeze the explain tables into 80 columns
    console = Console(width=160, emoji=False)


def config_from(args: argparse.Namespace, **overrides):
    """The configuration ``--config`` names (``tuned``: the preset of the command's ``--index``)."""
    return load_config(getattr(args, "config", None), getattr(args, "index", None), **overrides)
