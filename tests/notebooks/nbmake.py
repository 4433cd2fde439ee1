"""Run notebooks under nbmake in a pytest process of their own, against a workspace of real data."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from scix_core.reports import notebooks_dir

# plugins a notebook's run never uses: their imports were a second of each nbmake process's 2.4-s start
UNUSED_PLUGINS = ("cacheprovider", "xdist", "postgresql", "hypothesispytest", "anyio")


def run_notebooks(names: list[str], home: Path, data_dir: Path, folder: Path) -> dict[str, str]:
    """Run ``names`` in one nbmake process (one pytest start for all of them); each notebook's failure text,
    ``""`` where it passed."""
    env = {
        **os.environ,
        "SCIX_HOME": str(home),
        "SCIX_DATA_DIR": str(data_dir),
        "SCIX_REPORTS_DIR": str(folder / "reports"),
        "SCIX_NOTEBOOK_STATIC": "1",
    }
    env.pop("SCIX_CONFIG", None)
    junit = folder / "nbmake.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbmake",
            "--nbmake-timeout=300",
            *(arg for plugin in UNUSED_PLUGINS for arg in ("-p", f"no:{plugin}")),
            "-q",
            "--rootdir",
            str(folder),
            "--junitxml",
            str(junit),
            *(str(notebooks_dir() / name) for name in names),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300 * len(names) + 300,
    )
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert junit.exists(), output  # pytest itself failed before running any notebook
    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    assert set(cases) == set(names), output
    return {
        name: "".join(
            (part.get("message", "") + "\n" + (part.text or ""))
            for part in case
            if part.tag in ("failure", "error", "skipped")
        )
        for name, case in cases.items()
    }


def run_notebook(name: str, home: Path, data_dir: Path, folder: Path) -> None:
    """Run one notebook (:func:`run_notebooks`); fail with its error."""
    failure = run_notebooks([name], home, data_dir, folder)[name]
    assert not failure, failure[-4000:]
