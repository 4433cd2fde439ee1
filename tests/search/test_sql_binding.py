"""Every SQL statement binds its values: no f-string SQL interpolates anything but a reviewed fragment.

The scan finds each f-string in the package whose text is SQL and lists what it interpolates; each entry must
be in REVIEWED — a fragment made only of placeholders, a whitelisted identifier or a module constant. A new
interpolation fails here until someone checks it binds its values (and adds it with the reason).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import scix_core

SQL = re.compile(
    r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE (TABLE|INDEX|VIRTUAL)|WHERE|ORDER BY|GROUP BY|HAVING)\b"
)
ROOT = Path(scix_core.__file__).parent

REVIEWED = {
    ("search/community.py", "marks"): "'?, ?, …' placeholders, one per bound kind",
    ("stores/papers.py", "marks"): "'?, ?, …' placeholders, one per bound id",
    ("stores/papers.py", "t"): "table names from a fixed tuple in the same function",
    ("search/lanes/bm25.py", "where"): "sqlite_where(): clauses with ? placeholders",
    ("search/lanes/fts5.py", "where"): "sqlite_where(): clauses with ? placeholders",
    ("search/lanes/fts5.py", "restrict"): "built from sqlite_where()'s clause",
    ("search/lanes/fts5.py", "self.table"): "checked against ('papers_fts', 'body_fts') in __init__",
    ("search/lanes/fts5.py", "weights"): "'?, ?' placeholders; the weights are bound",
    ("search/where.py", "where"): "sqlite_where(): clauses with ? placeholders",
    ("search/lanes/postgres.py", "where"): "postgres_where(): clauses with %s placeholders",
    (
        "search/lanes/postgres.py",
        "match",
    ): "a tsquery expression over %s placeholders, field from a whitelist",
    ("search/lanes/postgres.py", "tsq"): "plainto_tsquery(%s::regconfig, %s), config whitelisted and bound",
    ("search/lanes/postgres.py", "first"): "'every DESC, ' or '' by mode (a whitelist)",
    ("stores/postgres.py", "BODY_PREDICATE"): "module constant",
    ("stores/postgres.py", "BODY_VECTOR"): "module constant",
    ("stores/postgres.py", "INDEX_TS_CONFIG"): "module constant",
    ("recommend/state.py", "t"): "table names from the module constant TABLES",
    ("recommend/state_postgres.py", "t"): "table names from the module constant TABLES",
    ("recommend/state_postgres.py", "table"): "table names from the module constant COLUMNS",
    ("recommend/state_postgres.py", "columns"): "column lists from the module constant COLUMNS",
    ("recommend/state_postgres.py", "marks"): "'?,?,…' placeholders, one per column",
    ("recommend/state_postgres.py", "order"): "'rowid' or '1', chosen in the same function",
    ("embeddings/cache.py", "marks"): "'?,?,…' placeholders, one per bound key",
    ("recommend/catalog.py", "listed_column"): "'listed' or 'NULL AS listed', chosen in the same function",
}


def interpolations(root: Path = ROOT) -> set[tuple[str, str]]:
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.JoinedStr):
                continue
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if SQL.search(text):
                found |= {
                    (path.relative_to(root).as_posix(), ast.unparse(v.value))
                    for v in node.values
                    if isinstance(v, ast.FormattedValue)
                }
    return found


def test_sql_f_strings_interpolate_only_reviewed_fragments():
    found = interpolations()
    assert found, "the scan found no SQL f-strings at all: it is broken"
    assert found <= set(REVIEWED), f"unreviewed SQL interpolation(s): {sorted(found - set(REVIEWED))}"
    assert not set(REVIEWED) - found, f"stale entries: {sorted(set(REVIEWED) - found)}"


def test_the_scan_catches_an_interpolated_value(tmp_path):
    """Negative control: a value formatted into SQL is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(conn, name):\n    conn.execute(f\"SELECT * FROM papers WHERE paper_id = '{name}'\")\n"
    )
    assert interpolations(tmp_path) == {("bad.py", "name")}
