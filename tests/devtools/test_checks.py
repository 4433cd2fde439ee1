"""The import-graph and doc-link checks on small hand-made trees, and on the project itself."""

from __future__ import annotations

from pathlib import Path

from scix_core.devtools import imports, links, settings


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "scix_core"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from scix_core.b import g\n",
            "b.py": "def g():\n    from scix_core.a import x  # lazy: a reason\n",
        },
    )
    found = imports.problems(pkg)
    assert any(p.startswith("import cycle:") and "scix_core.a" in p and "scix_core.b" in p for p in found)


def test_importing_a_submodule_runs_its_package_init(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/words.py": "from scix_core.high.tool import t\n",
            "high/__init__.py": "from scix_core.high.pipe import p\n",
            "high/pipe.py": "from scix_core.low.words import w\n",
            "high/tool.py": "t = 1\n",
        },
    )
    assert any("import cycle" in p for p in imports.problems(pkg))  # low.words -> high (its __init__) -> ...


def test_local_imports_need_a_reason_and_private_names_stay_home(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "def f():\n    from scix_core.b import g\n",
            "b.py": "from scix_core.c import _hidden\ng = 1\n",
            "c.py": "_hidden = 1\n",
        },
    )
    found = imports.problems(pkg)
    assert any("a.py:2: local import of scix_core.b without" in p for p in found)
    assert any("private name _hidden imported from scix_core.c" in p for p in found)
    assert not any("cycle" in p for p in found)


def test_the_project_passes_both_checks():
    root = Path(imports.__file__).resolve().parents[2]
    assert imports.problems(root / "scix_core") == []
    assert links.broken(root) == []


def test_a_broken_link_and_a_missing_anchor_are_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "scix_core").mkdir()
    (tmp_path / "scix_core" / "m.py").write_text('"""see docs/design.md#gone"""\n')
    (tmp_path / "docs" / "design.md").write_text('# Design\n<a id="here"></a>\n## A part\n')
    (tmp_path / "README.md").write_text(
        "[ok](docs/design.md#here) [slug](docs/design.md#a-part) "
        "[no](docs/none.md) [bad](docs/design.md#nope)"
    )
    found = links.broken(tmp_path)
    assert found == [
        "README.md: docs/none.md: no such file",
        "README.md: docs/design.md#nope: no such anchor",
        "scix_core/m.py: docs/design.md#gone: no such anchor",
    ]


def test_a_field_documents_itself_by_its_comment_and_one_without_is_missing():
    source = (
        "class C:\n"
        "    # two lines\n"
        "    # above\n"
        "    a: int = 1\n"
        "    b: int = 2  # on its line\n"
        "\n"
        "    c: int = 3\n"
    )
    assert settings.field_comments(source) == {
        ("C", "a"): "two lines above",
        ("C", "b"): "on its line",
        ("C", "c"): "",
    }


def test_the_settings_page_matches_the_code(monkeypatch):
    """Every config field has a comment and a row, every SCIX_* variable the code reads a line, and the page
    is what the generator makes; a field added without a comment or a variable read without a line fails."""
    assert settings.main(["--check"]) == 0
    missing: list[str] = []
    monkeypatch.setattr(settings, "field_comments", lambda source: {})
    settings.settings_tables(missing)
    assert "recommend.explore_pool: no comment in scix_core/config.py" in missing
    monkeypatch.setattr(settings, "read_in_code", lambda: set(settings.ENVIRONMENT) | {"SCIX_NEW_KNOB"})
    missing.clear()
    settings.environment_table(missing)
    assert missing == ["SCIX_NEW_KNOB: read by the code, in neither config.FIELD_ENV nor config.ENVIRONMENT"]
