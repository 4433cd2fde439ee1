"""Stage 7: scoring every candidate with the configured scorer (heuristic by default)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.scorers import features
from scix_core.recommend.stages.base import Candidate, Features, Tier1State


class Score:
    name, writes = "score", "scored"

    def __init__(self, scorer, health: dict, table=None):
        # ``table``: the candidates' features when already read (the evaluation scores one pool several ways)
        self.scorer, self.health, self.table = scorer, health, table

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        table = self.table if self.table is not None else features(state, state.candidates)
        scores = self.scorer.score(table)
        names = (*table.names, self.scorer.name)
        # over a pool, the scorer's ranking past the page where it has one (docs/recommendations.md)
        later = getattr(self.scorer, "later", None) if state.side.pool is not None else None
        later = later(table) if later is not None else None
        laters = np.asarray(later, dtype=np.float64).tolist() if later is not None else [None] * len(scores)
        # the constructor, not dataclasses.replace: a few hundred candidates a user, every request
        scored = tuple(
            Candidate(
                c.paper_id, c.row, c.source, c.cluster_id, c.cosine, Features(names, (*row, s)), s, c.reach, t
            )
            for c, s, row, t in zip(
                state.candidates, np.asarray(scores, dtype=np.float64).tolist(), table.values.tolist(), laters
            )
        )
        scored = tuple(sorted(scored, key=lambda c: (-c.score, c.row)))
        health = {**self.health, "scoring_with": self.scorer.name, "has_ewma": table.has_ewma}
        summary = {
            "scorer": self.scorer.name,
            "has_ewma": table.has_ewma,
            "candidates": len(scored),
            "constant_features": table.constant(),
        }
        return replace(state, scored=scored, scorer=health), summary
