"""Tier-1 scorers: a registry of ``heuristic`` (default) and ``lightgbm``, with a health report.

The health report separates what is *configured* from what *actually
scored* (reference design: ``/healthz/reranker`` reports ``model_loaded``
and ``scoring_with`` separately): a LightGBM model that fails to load, or
whose features do not match, never silently scores — the heuristic does,
and the report and the result's notes say so.
"""

from __future__ import annotations

from pathlib import Path

from scix_core.config import RecommendConfig
from scix_core.errors import UnknownNameError
from scix_core.recommend.scorers.features import FEATURES, FeatureTable, features
from scix_core.recommend.scorers.heuristic import HeuristicScorer
from scix_core.recommend.scorers.lgbm import LightGBMScorer
from scix_core.workspace import Workspace

SCORERS = ("heuristic", "lightgbm")
HEURISTICS = ("profile", "cosine")


def model_path(cfg: RecommendConfig, home: Path, index: str) -> Path:
    """``recommend.scorer_model``: a LightGBM model file path, or a name under ``models/scorers/`` (default:
    the index's)."""
    given = Path(cfg.scorer_model).expanduser()
    if given.exists() or "/" in cfg.scorer_model or given.suffix:
        return given

    name = index if cfg.scorer_model in ("", "default") else cfg.scorer_model
    return Workspace(home).model_dir("scorers", name) / "model.txt"


def load_scorer(cfg: RecommendConfig, home: Path, index: str):
    """(scorer that will score, health dict)."""
    if cfg.scorer not in SCORERS:
        raise UnknownNameError("scorer", cfg.scorer, SCORERS)
    if cfg.heuristic not in HEURISTICS:
        raise UnknownNameError("heuristic", cfg.heuristic, HEURISTICS)
    health = {
        "configured": cfg.scorer,
        "model_loaded": False,
        "model": None,
        "error": None,
        "scoring_with": "heuristic",
        "audit_errors": [],
    }
    if cfg.scorer == "heuristic":
        return HeuristicScorer(cfg, cfg.heuristic == "profile"), health

    try:
        path = model_path(cfg, home, index)
        health["model"] = str(path)
        scorer = LightGBMScorer.load(path)
    except Exception as exc:  # a missing or foreign model must degrade, loudly, to the heuristic
        health["error"] = f"{type(exc).__name__}: {exc}"
        return HeuristicScorer(cfg, cfg.heuristic == "profile"), health
    health.update(model_loaded=True, scoring_with="lightgbm", audit_errors=scorer.audit_errors)
    return scorer, health


__all__ = ["FEATURES", "FeatureTable", "SCORERS", "features", "load_scorer", "model_path"]
