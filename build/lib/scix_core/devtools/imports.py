"""The package's import graph, checked: no cycle, few and explained local imports, no private names across
modules.

``python -m scix_core.devtools.imports`` (run by ``make check``) reads every module's source (nothing is
imported) and fails, listing each offence, when

* the modules form an import cycle, counting imports inside functions and the package ``__init__`` that
  importing ``scix_core.a.b`` runs (``scix_core.a``, unless it encloses the importer);
* a ``scix_core`` import inside a function has no reason on its line (``# lazy: <why>``) or there are more
  than :data:`MAX_LOCAL` of them — a local import is for keeping a heavy third-party import (torch,
  numba, jupyter, …) off the cold command-line path, nothing else;
* a module imports a name beginning with ``_`` from another module.

``--graph`` prints the module-level dependency edges instead.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = "scix_core"
MAX_LOCAL = 20
REASON = "# lazy:"


@dataclass(frozen=True)
class Import:
    module: str  # the importer
    target: str  # the imported module
    names: tuple[str, ...]
    line: int
    local: bool  # inside a function body
    reason: bool  # carries a ``# lazy:`` reason


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """Every ``scix_core`` import of one module, where it sits and what it names."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]
    inside = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            pairs = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                pairs.append((sub, ()) if sub in known else (base, (alias.name,)))
        else:
            continue
        text = " ".join(lines[node.lineno - 1 : node.end_lineno])
        for target, names in pairs:
            if target == ROOT or target.startswith(ROOT + "."):
                yield Import(name, target, names, node.lineno, id(node) in inside, REASON in text)


def graph(found: list[Import], known: dict[str, Path]) -> nx.DiGraph:
    """Module -> module edges; importing ``a.b.c`` also runs ``a.b`` and ``a`` unless they enclose the
    importer."""
    g = nx.DiGraph()
    g.add_nodes_from(known)
    for imp in found:
        parts = imp.target.split(".")
        for i in range(2, len(parts) + 1):
            target = ".".join(parts[:i])
            encloses = imp.module == target or imp.module.startswith(target + ".")
            if target in known and not encloses and target != imp.module:
                g.add_edge(imp.module, target, line=imp.line)
    return g


def problems(package: Path) -> list[str]:
    known = modules(package)
    found = [imp for name, path in known.items() for imp in imports(name, path, known)]
    out = []
    g = graph(found, known)
    for component in nx.strongly_connected_components(g):
        if len(component) > 1:
            cycle = nx.find_cycle(g.subgraph(component))
            out.append("import cycle: " + " -> ".join([a for a, _ in cycle] + [cycle[0][0]]))
    local = [imp for imp in found if imp.local]
    for imp in local:
        if not imp.reason:
            where = f"{known[imp.module]}:{imp.line}"
            out.append(f"{where}: local import of {imp.target} without '{REASON} <why>'")
    lines = {(imp.module, imp.line) for imp in local}
    if len(lines) > MAX_LOCAL:
        out.append(f"{len(lines)} local scix_core imports; at most {MAX_LOCAL}")
    for imp in found:
        for n in imp.names:
            if n.startswith("_") and not n.startswith("__"):
                out.append(f"{known[imp.module]}:{imp.line}: private name {n} imported from {imp.target}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--graph", action="store_true", help="print the module dependency edges")
    args = parser.parse_args(argv)
    if args.graph:
        known = modules(args.package)
        found = [imp for name, path in known.items() for imp in imports(name, path, known)]
        for a, b in sorted(graph(found, known).edges):
            print(a, "->", b)
        return 0
    found = problems(args.package)
    for line in found:
        print(line)
    print(f"imports: {len(found)} problem(s)" if found else "imports: no cycle, local imports explained")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
