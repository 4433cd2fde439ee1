"""Notebooks 01-05, executed by nbmake with their own (small) default parameters, against real SciFact
(06, on CiteULike-a, is in test_recommendation_notebook.py: a file of its own runs beside these on the other
worker)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

from scix_core.reports import NOTEBOOKS, notebooks_dir
from tests.notebooks.nbmake import run_notebooks

pytestmark = [pytest.mark.model, pytest.mark.realdata]


SEARCH = [name for key, name in NOTEBOOKS.items() if key != "recommendation-eval"]


@pytest.fixture(scope="module")
def search_notebooks(scifact_notebook_home, data_dir, tmp_path_factory) -> dict[str, str]:
    """Notebooks 01-05 run by one nbmake process (a pytest start each cost 2.4 s); each one's failure text."""
    return run_notebooks(SEARCH, scifact_notebook_home, data_dir, tmp_path_factory.mktemp("nbmake"))


@pytest.mark.parametrize("name", SEARCH)
def test_notebook_runs_under_nbmake(name, search_notebooks):
    assert not search_notebooks[name], search_notebooks[name][-4000:]


@pytest.mark.parametrize("name", list(NOTEBOOKS.values()))
def test_notebooks_are_committed_clean_with_a_parameters_cell(name):
    nb = nbformat.read(notebooks_dir() / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit notebooks without outputs"
    assert "parameters" in code[0].metadata.get("tags", [])
    params = [line.split("=")[0].strip() for line in code[0].source.splitlines() if "=" in line]
    # papermill reads each one (an "=" in a comment made it skip the line, warning at every report)
    assert sorted(papermill.inspect_notebook(str(notebooks_dir() / name))) == sorted(params)
    for cell in code[1:]:  # no logic beyond calls into scix_core: an import, then one call on the parameters
        lines = [ln for ln in cell.source.splitlines() if ln.strip()]
        assert lines[0].startswith("from scix_core."), cell.source
        assert not any(ln.lstrip().startswith(("for ", "if ", "def ", "while ", "class ")) for ln in lines), (
            cell.source
        )
        assert all(p in cell.source for p in params), f"a parameter of {name} is not passed on"
    assert (Path(notebooks_dir()) / name).stat().st_size < 20_000
