"""The candidate features every Tier-1 scorer reads, by name.

The heuristic reads the similarities (as the reference design's did) and
the co-save score; the LightGBM scorer reads all of them. ``cosave`` and
``savers`` are collaborative: the item-kNN co-save score of the candidate
for this user and the number of the index's users who saved it
(``scix_core.recommend.community``; 0 where the index has no other users). They are computed from real data at
serving time — the reference design's model put 65% of its importance on a
citation count that was hard-coded to 0 when serving; here a feature that is
constant over a candidate set is listed in the score stage's summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FEATURES = (
    "longterm_sim",
    "shortterm_sim",
    "cosine",
    "cluster_size",
    "cluster_quota",
    "citation_count",
    "age_months",
    "category_match",
    "cosave",
    "savers",
)


@dataclass(frozen=True, eq=False)
class FeatureTable:
    names: tuple[str, ...]
    values: np.ndarray  # (candidates, features) float64
    has_ewma: bool

    def column(self, name: str) -> np.ndarray:
        return self.values[:, self.names.index(name)]

    def constant(self) -> list[str]:
        if len(self.values) < 2:
            return []
        return [n for i, n in enumerate(self.names) if np.ptp(self.values[:, i]) == 0]


def features(state, candidates) -> FeatureTable:
    """One row per candidate (see ``FEATURES``); vectors read locally in one batch."""
    side, ctx = state.side, state.ctx
    cat = side.catalog
    rows = np.array([c.row for c in candidates], dtype=np.int64)
    vecs = side.vectors.get(rows)
    long, short = ctx.profiles.get("long"), ctx.profiles.get("short")
    has_ewma = long is not None and short is not None

    def sims(profile) -> np.ndarray:
        if profile is None:
            return np.zeros(len(rows))
        v = profile.vector / (np.linalg.norm(profile.vector) or 1.0)
        return vecs @ v

    by_id = {c.cluster_id: c for c in state.clusters}
    saved_codes = {code for p in ctx.saved if p in cat.row for code in cat.codes[cat.row[p]]} | set(
        ctx.user.categories
    )
    newest = cat.newest_month if cat.has_dates else None
    table = (
        np.column_stack(
            [
                sims(long),
                sims(short),
                [c.cosine for c in candidates],
                [len(by_id[c.cluster_id].members) if c.cluster_id in by_id else 0 for c in candidates],
                [by_id[c.cluster_id].quota if c.cluster_id in by_id else 0 for c in candidates],
                cat.citations[rows] if len(rows) else [],
                (newest - cat.month[rows]) if newest is not None and len(rows) else np.zeros(len(rows)),
                [float(bool(saved_codes.intersection(cat.codes[r]))) for r in rows],
                ctx.cosaves.scores[rows] if ctx.cosaves is not None else np.zeros(len(rows)),
                ctx.cosaves.savers[rows] if ctx.cosaves is not None else np.zeros(len(rows)),
            ]
        )
        if len(rows)
        else np.zeros((0, len(FEATURES)))
    )
    return FeatureTable(FEATURES, np.asarray(table, dtype=np.float64), has_ewma)
