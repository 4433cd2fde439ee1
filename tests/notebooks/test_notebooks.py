"""Every notebook, executed by nbmake with its own (small) default parameters, against real SciFact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from scix_core.reports import NOTEBOOKS, notebooks_dir

pytestmark = [pytest.mark.model, pytest.mark.realdata]


@pytest.mark.parametrize("name", list(NOTEBOOKS.values()))
def test_notebook_runs_under_nbmake(name, notebook_home, data_dir, tmp_path):
    env = {
        **os.environ,
        "SCIX_HOME": str(notebook_home),
        "SCIX_DATA_DIR": str(data_dir),
        "SCIX_REPORTS_DIR": str(tmp_path / "reports"),
        "SCIX_NOTEBOOK_STATIC": "1",
    }
    env.pop("SCIX_CONFIG", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbmake",
            "--nbmake-timeout=300",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            str(notebooks_dir() / name),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


@pytest.mark.parametrize("name", list(NOTEBOOKS.values()))
def test_notebooks_are_committed_clean_with_a_parameters_cell(name):
    nb = nbformat.read(notebooks_dir() / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit notebooks without outputs"
    assert "parameters" in code[0].metadata.get("tags", [])
    params = [line.split("=")[0].strip() for line in code[0].source.splitlines() if "=" in line]
    for cell in code[1:]:  # no logic beyond calls into scix_core: an import, then one call on the parameters
        lines = [ln for ln in cell.source.splitlines() if ln.strip()]
        assert lines[0].startswith("from scix_core."), cell.source
        assert not any(ln.lstrip().startswith(("for ", "if ", "def ", "while ", "class ")) for ln in lines), (
            cell.source
        )
        assert all(p in cell.source for p in params), f"a parameter of {name} is not passed on"
    assert (Path(notebooks_dir()) / name).stat().st_size < 20_000
