"""Run one notebook under nbmake in its own pytest process, against a workspace of real data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scix_core.reports import notebooks_dir


def run_notebook(name: str, home: Path, data_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SCIX_HOME": str(home),
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
