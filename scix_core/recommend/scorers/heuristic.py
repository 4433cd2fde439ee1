"""The default Tier-1 scorer (reference design ``heuristic_score``).

With EWMA profiles: relevance = 0.40 · long-term sim + 0.25 · short-term sim;
without: 0.65 · cosine (the similarity to the query that found the
candidate: its cluster's centroid, or the short-term profile). Weights are
``recommend.weight_*``; ``use_profiles=False`` scores by the cosine alone
(the ``tier1-cosine`` run of ``scix eval-recs``).
"""

from __future__ import annotations

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.scorers.features import FeatureTable


class HeuristicScorer:
    name = "heuristic"

    def __init__(self, cfg: RecommendConfig, use_profiles: bool = True):
        self.cfg, self.use_profiles = cfg, use_profiles

    def score(self, table: FeatureTable) -> np.ndarray:
        if table.has_ewma and self.use_profiles:
            return (self.cfg.weight_longterm * table.column("longterm_sim")
                    + self.cfg.weight_shortterm * table.column("shortterm_sim"))
        return self.cfg.weight_cosine * table.column("cosine")
