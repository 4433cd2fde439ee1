"""The default Tier-1 scorer (reference design ``heuristic_score``).

Content part — ``recommend.heuristic = "profile"`` with EWMA profiles:
0.40 · long-term sim + 0.25 · short-term sim (the reference design);
``"cosine"`` (or no profiles yet): 0.65 · cosine, the similarity to the
query that found the candidate (its cluster's centroid, the short-term
profile, or for a co-saved paper its nearest centroid). Collaborative part:
+ ``weight_cosave`` · co-save score (0 on an index with no other users).
Weights are ``recommend.weight_*``.
"""

from __future__ import annotations

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.scorers.features import FeatureTable


class HeuristicScorer:
    name = "heuristic"

    def __init__(self, cfg: RecommendConfig, use_profiles: bool | None = None):
        self.cfg = cfg
        self.use_profiles = cfg.heuristic == "profile" if use_profiles is None else use_profiles

    def _content(self, table: FeatureTable) -> np.ndarray:
        if table.has_ewma and self.use_profiles:
            return self.cfg.weight_longterm * table.column(
                "longterm_sim"
            ) + self.cfg.weight_shortterm * table.column("shortterm_sim")
        return self.cfg.weight_cosine * table.column("cosine")

    def score(self, table: FeatureTable) -> np.ndarray:
        return self._content(table) + self.cfg.weight_cosave * table.column("cosave")

    def later(self, table: FeatureTable) -> np.ndarray | None:
        """Over a candidate pool, the score past the page: the co-save part weighted ``pool_later_cosave``
        (None where that is the page's own weight, or where the scorer has no co-save part)."""
        w = self.cfg.pool_later_cosave
        if self.cfg.weight_cosave <= 0 or w == self.cfg.weight_cosave:
            return None
        return self._content(table) + w * table.column("cosave")
