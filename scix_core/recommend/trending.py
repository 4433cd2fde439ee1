"""Tier 0: trending by category — citations within a recency window.

The window is measured back from the newest paper of the index, never from
the wall clock (a static corpus would otherwise trend nothing), in months of
the paper's date — the day it was listed where the source has one, else its
first publication (decoded from arXiv ids, so revised classics and
cross-lists of old papers do not look new; :func:`~scix_core.recommend.catalog.paper_day`),
newer first by day within equal citations: 24 months, widened to 48 then 96
(``recommend.trending_months``) when the user's categories hold fewer papers
than asked for in the window.
Where the corpus lacks a signal Tier 0 still answers and says so: no
citations → newest first; no dates → most cited of all time; neither →
corpus order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from scix_core.recommend.catalog import Catalog
from scix_core.recommend.context import IndexSide, UserContext
from scix_core.recommend.result import RecItem, StageRecord
from scix_core.recommend.tiers import TierRun


@dataclass(frozen=True)
class Trending:
    rows: np.ndarray  # best first
    window_months: int | None  # None: no dates
    in_window: int
    signals: tuple[str, ...]  # what ranked: ("citations", "recency") or a subset
    notes: tuple[str, ...]


def trending(
    catalog: Catalog,
    categories: tuple[str, ...],
    exclude: np.ndarray,
    wanted: int,
    windows: tuple[int, ...],
    pool: np.ndarray | None = None,
) -> Trending:
    """The ranking of Tier 0 for ``categories`` (all papers when empty), ``exclude`` rows left out; only
    ``pool`` rows (a bool mask) when given."""
    mask = catalog.rows_with_codes(frozenset(categories)) if categories else np.ones(len(catalog), dtype=bool)
    mask[exclude] = False
    if pool is not None:
        mask &= pool
    notes: list[str] = []
    label = ",".join(categories) if categories else "all categories"
    window = None
    if catalog.has_dates:
        newest = catalog.newest_month
        for months in windows:
            inside = mask & (catalog.month > newest - months)
            window = months
            if inside.sum() >= wanted:
                break
            if months != windows[-1] and pool is None:  # a pool (a feed's window) is all recent anyway
                notes.append(
                    f"only {int(inside.sum())} papers of {label} within {months} months of the newest paper: "
                    f"window widened"
                )
        mask = inside
    else:
        notes.append(
            "no publication dates in this index: ranked by citations alone, without a recency window"
        )
    signals = tuple(
        s for s, ok in (("citations", catalog.has_citations), ("recency", catalog.has_dates)) if ok
    )
    if not catalog.has_citations:
        notes.append(
            "no citation data in this index: ranked by recency alone"
            if catalog.has_dates
            else "no citation data and no dates in this index: corpus order"
        )
    order = catalog.trending_order  # citations desc, then newer first, then corpus order
    return Trending(order[mask[order]], window, int(mask.sum()), signals, tuple(notes))


class TrendingTier:
    number = 0

    def run(self, side: IndexSide, ctx: UserContext, limit: int) -> TierRun:
        t = time.perf_counter()
        cats = ctx.user.categories
        ranked = trending(
            side.catalog,
            cats,
            side.rows(ctx.seen),
            max(limit, side.config.trending_min_papers),
            side.config.trending_months,
            side.pool,
        )
        cat = side.catalog
        items = tuple(
            RecItem(
                cat.ids[r],
                "",
                rank,
                float(cat.citations[r]),
                0,
                "trending",
                scores=(("citations", float(cat.citations[r])), ("month", float(cat.month[r]))),
                codes=cat.codes[r],
            )
            for rank, r in enumerate(ranked.rows[:limit].tolist(), start=1)
        )
        notes = (
            ranked.notes
            if cats
            else ("no onboarding categories: trending across the whole index", *ranked.notes)
        )
        summary = {
            "categories": list(cats),
            "window_months": ranked.window_months,
            "in_window": ranked.in_window,
            "signals": list(ranked.signals),
        }
        return TierRun(
            items, (StageRecord("trending", (time.perf_counter() - t) * 1000, summary, ranked),), notes
        )
