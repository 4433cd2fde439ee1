"""docs/configuration.md's settings tables and environment list, made from the code so they cannot drift.

Every field of the config dataclasses is documented by its comment in
``scix_core/config.py`` (the one on its line, else the block just above it);
every environment variable by :data:`scix_core.config.FIELD_ENV` (a variable that
sets a field) or :data:`scix_core.config.ENVIRONMENT`. ``--check`` (in
``make lint`` and the suite) fails when a field has no comment, when the code
reads a ``SCIX_*`` variable that neither names, when one of those is read
nowhere, or when the page differs from what ``--write`` would make.

    python -m scix_core.devtools.settings --write
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import re
import sys
import tokenize
from pathlib import Path

from scix_core import config as config_module
from scix_core.config import ENVIRONMENT, FIELD_ENV, Config

PACKAGE = Path(config_module.__file__).resolve().parent
DOC = PACKAGE.parent / "docs" / "configuration.md"
BEGIN, END = "<!-- generated: settings -->", "<!-- end: settings -->"
ENV_NAME = re.compile(r"SCIX_[A-Z0-9_]+")


def field_comments(source: str) -> dict[tuple[str, str], str]:
    """(class name, field name) -> the field's comment: the one on its line, else the block just above."""
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    found: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            text = comments.get(item.lineno, "")
            if not text:
                above, row = [], item.lineno - 1
                while row >= 1 and lines[row - 1].strip().startswith("#"):
                    above.insert(0, comments[row])
                    row -= 1
                text = " ".join(above)
            found[(node.name, item.target.id)] = text
    return found


def _toml(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    if isinstance(value, Path):
        return "[see Paths](#paths)"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_tables(missing: list[str]) -> str:
    """One table per section, in the dataclasses' order; fields without a comment are added to ``missing``."""
    comments = field_comments((PACKAGE / "config.py").read_text())
    env_of = {dotted: var for var, dotted in FIELD_ENV.items()}
    cfg = Config()
    top = [f for f in dataclasses.fields(cfg) if not dataclasses.is_dataclass(getattr(cfg, f.name))]
    sections = [("", "Config", cfg, top)]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            sections.append((f.name, type(value).__name__, value, dataclasses.fields(value)))
    out = []
    for section, cls, obj, fields in sections:
        out += ["", f"### `[{section}]`" if section else "### top level", ""]
        out += ["| setting | default | environment | what |", "|---|---|---|---|"]
        for f in fields:
            dotted = f"{section}.{f.name}" if section else f.name
            text = comments.get((cls, f.name), "")
            if not text:
                missing.append(f"{dotted}: no comment in scix_core/config.py")
            var = f"`{env_of[dotted]}`" if dotted in env_of else ""
            out.append(f"| `{f.name}` | {_toml(getattr(obj, f.name))} | {var} | {_cell(text)} |")
    return "\n".join(out)


def read_in_code() -> set[str]:
    """Every ``SCIX_*`` name the package's code holds as a string constant (an environment variable read)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and ENV_NAME.fullmatch(node.value)
            ):
                names.add(node.value)
    return names


def environment_table(missing: list[str]) -> str:
    read = read_in_code()
    documented = set(FIELD_ENV) | set(ENVIRONMENT)
    missing += [
        f"{var}: read by the code, in neither config.FIELD_ENV nor config.ENVIRONMENT"
        for var in read - documented
    ]
    missing += [f"{var}: documented in config.ENVIRONMENT, read nowhere" for var in set(ENVIRONMENT) - read]
    rows = [(var, f"sets `{dotted}`") for var, dotted in FIELD_ENV.items()] + sorted(ENVIRONMENT.items())
    out = ["", "| variable | what |", "|---|---|"]
    out += [f"| `{var}` | {_cell(text)} |" for var, text in rows]
    return "\n".join(out)


def render(missing: list[str]) -> str:
    return "\n".join(
        [
            BEGIN,
            "<!-- made by python -m scix_core.devtools.settings --write from scix_core/config.py -->",
            "",
            "## Settings",
            settings_tables(missing),
            "",
            "## Environment variables",
            environment_table(missing),
            "",
            END,
        ]
    )


def updated(page: str, missing: list[str]) -> str:
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{DOC}: the markers {BEGIN} and {END} are missing")
    head, rest = page.split(BEGIN, 1)
    return head + render(missing) + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated part of the page")
    parser.add_argument(
        "--check", action="store_true", help="fail when the page or the code's comments drift"
    )
    args = parser.parse_args(argv)
    missing: list[str] = []
    page = DOC.read_text()
    new = updated(page, missing)
    for line in missing:
        print(f"settings: {line}", file=sys.stderr)
    if args.write and new != page:
        DOC.write_text(new)
        print(f"settings: wrote {DOC}")
    elif not args.write and new != page:
        print(
            f"settings: {DOC} is out of date: run python -m scix_core.devtools.settings --write",
            file=sys.stderr,
        )
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
