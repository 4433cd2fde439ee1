"""Where reports and saved sweeps live: one module that both ``reports`` and the notebook views import."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def reports_dir() -> Path:
    """``$SCIX_REPORTS_DIR``, else the repository's ``reports/``."""
    return Path(os.environ.get("SCIX_REPORTS_DIR") or ROOT / "reports")


def eval_path(index: str, split: str, lexical_mode: str, folder: Path | str | None = None) -> Path:
    """Where the main job writes its sweep (``reports/eval-INDEX-SPLIT-MODE.json``)."""
    return Path(folder or reports_dir()) / f"eval-{index}-{split}-{lexical_mode}.json"
