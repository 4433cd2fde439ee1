"""The code that produced a figure: the package version and, in a git checkout, the commit and whether the
work tree had uncommitted changes. Stamped on every report and evaluation file."""

from __future__ import annotations

import subprocess
from typing import Any

from scix_core import __version__
from scix_core.paths import PACKAGE_ROOT as ROOT
from scix_core.paths import checkout


def code_version() -> dict[str, Any]:
    out: dict[str, Any] = {"scix_core": __version__, "git_commit": None, "git_dirty": None}
    if not checkout():  # an installed package: the git repository around site-packages is not its code
        return out

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10, check=False
        )

    try:
        head = run("rev-parse", "HEAD")
        if head.returncode == 0:
            out["git_commit"] = head.stdout.strip()
            out["git_dirty"] = bool(run("status", "--porcelain", "--untracked-files=no").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return out
