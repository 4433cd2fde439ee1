"""Runs built from configuration: ``scix eval --run NAME:KEY=VALUE[,KEY=VALUE…]`` and ``--config-run
NAME=FILE``.

A researcher tunes more than the named runs. A configured run is the search
pipeline (``hybrid``) of a Searcher whose configuration is the evaluation's
with dotted overrides applied (``tw2:search.title_weight=2``) or a TOML file
merged over it (``--config-run strict=strict.toml``, same sections as
``scix.toml``). It is compared, gated and plotted like any named run; its
boosts, rerank and rewrite are whatever that configuration says (the named
``hybrid`` run has them off). Keys are checked against the configuration
and values coerced to the field's type before anything runs; a bad key, a
bad value or a name that clashes is a ``ConfigError``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scix_core.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


@dataclass(frozen=True)
class ConfigRun:
    name: str
    overrides: Mapping[str, Any]  # dotted key -> value, or section -> table (from a file)
    source: str  # the spec as given, for reports and the reuse key

    def apply(self, config):
        return config.replace(**dict(self.overrides))


def _check_name(name: str, taken) -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(f"run name {name!r}: letters, digits and _ . + - only, at most 64 characters")
    if name in taken:
        raise ConfigError(f"run name {name!r} is already a run; pick another")
    return name


def parse_run(spec: str, taken=()) -> ConfigRun:
    """``NAME:KEY=VALUE[,KEY=VALUE…]`` (values as text; the configuration coerces them)."""
    name, sep, body = spec.partition(":")
    if not sep or not body.strip():
        raise ConfigError(
            f"--run {spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE...], e.g. tw2:search.title_weight=2"
        )
    overrides = {}
    for part in body.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or "." not in key:
            raise ConfigError(f"--run {spec!r}: {part!r} is not a dotted KEY=VALUE (e.g. search.rrf_k=10)")
        overrides[key.strip()] = value.strip()
    return ConfigRun(_check_name(name.strip(), taken), overrides, spec)


def parse_config_run(spec: str, taken=()) -> ConfigRun:
    """``NAME=FILE.toml``."""
    name, sep, file = spec.partition("=")
    if not sep or not file.strip():
        raise ConfigError(f"--config-run {spec!r}: expected NAME=FILE.toml")
    path = Path(file.strip()).expanduser()
    try:
        overrides = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--config-run {spec!r}: no file {path}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--config-run {spec!r}: {path} is not readable TOML: {exc}") from None
    if not overrides:
        raise ConfigError(f"--config-run {spec!r}: {path} sets nothing")
    return ConfigRun(_check_name(name.strip(), taken), overrides, f"{name.strip()}={path}")


def config_runs(
    runs: list[str] | tuple[str, ...] = (), files: list[str] | tuple[str, ...] = (), *, config, named=()
) -> tuple[ConfigRun, ...]:
    """Parse ``--run`` and ``--config-run`` specs; every one is applied to ``config`` once to check it."""
    out: list[ConfigRun] = []
    for spec in runs:
        out.append(parse_run(spec, {*named, *(r.name for r in out)}))
    for spec in files:
        out.append(parse_config_run(spec, {*named, *(r.name for r in out)}))
    for run in out:
        try:
            run.apply(config)
        except ConfigError as exc:
            raise ConfigError(f"run {run.name!r} ({run.source}): {exc}") from None
    return tuple(out)
