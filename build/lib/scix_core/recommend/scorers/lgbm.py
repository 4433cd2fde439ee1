"""The LightGBM scorer: a model file trained on logged interactions (``scix train-scorer``).

A model is accepted only if its feature names are exactly ``FEATURES`` in
order; anything else is a load error, and the heuristic scores instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scix_core.errors import ModelUnavailableError
from scix_core.recommend.scorers.features import FEATURES, FeatureTable


class LightGBMScorer:
    name = "lightgbm"

    def __init__(self, booster, manifest: dict | None = None):
        self.booster, self.manifest = booster, manifest or {}

    @classmethod
    def load(cls, path: Path) -> LightGBMScorer:
        if not Path(path).exists():
            raise ModelUnavailableError(
                f"no LightGBM scorer model at {path}; train one with `scix train-scorer`"
            )
        import lightgbm

        booster = lightgbm.Booster(model_file=str(path))
        names = tuple(booster.feature_name())
        if names != FEATURES:
            raise ModelUnavailableError(f"model {path} was trained on features {names}, not {FEATURES}")
        manifest = Path(path).with_name("manifest.json")
        return cls(booster, json.loads(manifest.read_text()) if manifest.exists() else None)

    @property
    def audit_errors(self) -> list[str]:
        """The training audit's errors (zero-split and constant features), from the manifest beside the
        model."""
        return list(self.manifest.get("audit", {}).get("errors", []))

    def score(self, table: FeatureTable) -> np.ndarray:
        if not len(table.values):
            return np.zeros(0)
        # one user's candidates are a few hundred rows: starting OpenMP threads for them costs more than
        # the trees (2.6 ms against 0.7 ms a call here), and a server already runs a process per core
        return np.asarray(self.booster.predict(table.values, num_threads=1), dtype=np.float64)

    def splits(self) -> dict[str, int]:
        """Split count per feature: a feature with zero splits cannot change any score."""
        counts = self.booster.feature_importance(importance_type="split")
        return dict(zip(self.booster.feature_name(), (int(c) for c in counts)))
