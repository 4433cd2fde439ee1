"""Where reports and saved sweeps live: one module that both ``reports`` and the notebook views import."""

from __future__ import annotations

from pathlib import Path

from scix_core import paths
from scix_core.config import load_config


def reports_dir() -> Path:
    """``$SCIX_REPORTS_DIR``; else the checkout's ``reports/``, or ``reports/`` in the configured workspace
    (:mod:`scix_core.paths`)."""
    return paths.reports_dir(None if paths.checkout() else load_config().home)


def eval_path(index: str, split: str, lexical_mode: str, folder: Path | str | None = None) -> Path:
    """Where the main job writes its sweep (``reports/eval-INDEX-SPLIT-MODE.json``)."""
    return Path(folder or reports_dir()) / f"eval-{index}-{split}-{lexical_mode}.json"


def tune_path(index: str, folder: Path | str | None = None) -> Path:
    """Where `scix tune` writes its report for ``index`` (``reports/tune-INDEX.json``: what `scix report tune`
    reads)."""
    return Path(folder or reports_dir()) / f"tune-{index}.json"
