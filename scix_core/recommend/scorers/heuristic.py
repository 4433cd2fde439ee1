"""The default Tier-1 scorer (reference design ``heuristic_score``).

With EWMA profiles: relevance = 0.40 · long-term sim + 0.25 · short-term sim;
without: 0.65 · cosine (the similarity to the query that found the
candidate). Weights are ``recommend.weight_*``.
"""

from __future__ import annotations

import numpy as np

from scix_core.config import RecommendConfig
from scix_core.recommend.scorers.features import FeatureTable


class HeuristicScorer:
    name = "heuristic"

    def __init__(self, cfg: RecommendConfig):
        self.cfg = cfg

    def score(self, table: FeatureTable) -> np.ndarray:
        if table.has_ewma:
            return (self.cfg.weight_longterm * table.column("longterm_sim")
                    + self.cfg.weight_shortterm * table.column("shortterm_sim"))
        return self.cfg.weight_cosine * table.column("cosine")
