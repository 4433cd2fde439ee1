"""Tier selection (docs/design.md#recommend): the first tier that applies *and* answers wins, and says why.

Order and triggers (thresholds from ``recommend.*_min_saves``, counted in
distinct saved papers): Tier 1 (≥ 5 saves, clustering + quota), Tier 2
(≥ 3, EWMA profile), Tier 3 (≥ 1, Qdrant recommend), Tier 0 (trending by the
onboarding categories). A tier that needs vectors is skipped, with the
reason, on an index built without them; a tier that returns nothing hands
over to the next one, also with the reason. Every result says how many more
saves unlock the next tier — the reference design's "known gap" was that
nothing told the user 5 is a threshold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scix_core.config import RecommendConfig
from scix_core.errors import ScixError
from scix_core.recommend.result import TIER_NAMES, RecItem, StageRecord

ORDER = (1, 2, 3, 0)
UNLOCKS = {
    0: (3, "recommendations from your saved papers"),
    3: (2, "profile-based recommendations"),
    2: (1, "clustered recommendations"),
}


@dataclass(frozen=True)
class TierRun:
    items: tuple[RecItem, ...]
    stages: tuple[StageRecord, ...] = ()
    notes: tuple[str, ...] = ()
    scorer: Mapping[str, Any] | None = None
    # derived state the tier leaves its caller to write (Tier 1's matched medoids): at once, or once a
    # server's answer has gone out (Recommender.serve)
    write: Callable[[], None] | None = None


class Tier(Protocol):
    number: int

    def run(self, side, ctx, limit: int) -> TierRun: ...


def threshold(cfg: RecommendConfig, tier: int) -> int:
    return {1: cfg.tier1_min_saves, 2: cfg.tier2_min_saves, 3: cfg.tier3_min_saves, 0: 0}[tier]


def applies(cfg: RecommendConfig, tier: int, saves: int) -> bool:
    return saves >= threshold(cfg, tier)


def next_tier_message(cfg: RecommendConfig, tier: int, saves: int) -> str | None:
    """``"2 more saves unlock clustered recommendations"``, or None at the top tier."""
    if tier not in UNLOCKS:
        return None
    target, what = UNLOCKS[tier]
    more = max(1, threshold(cfg, target) - saves)
    return (
        f"{more} more save{'s' if more != 1 else ''} unlock{'s' if more == 1 else ''} {what} (Tier {target})"
    )


def entitled(cfg: RecommendConfig, saves: int) -> int:
    """The tier a user's save count selects (before any fall-through)."""
    return next(t for t in ORDER if applies(cfg, t, saves))


def reason(cfg: RecommendConfig, tier: int, saves: int) -> str:
    name = TIER_NAMES[tier]
    if tier == 0 and saves >= cfg.tier3_min_saves:
        return f"Tier 0 ({name}): the tiers {saves} saves unlock answered nothing"
    if tier == 0:
        return f"Tier 0 ({name}): {saves} saves, fewer than the {cfg.tier3_min_saves} that Tier 3 needs"
    return f"Tier {tier} ({name}): {saves} saves >= {threshold(cfg, tier)}"


def select(
    tiers: Mapping[int, Tier], cfg: RecommendConfig, side, ctx, limit: int, vectors_missing: str = ""
) -> tuple[int, str, TierRun, list[str], float]:
    """Run tiers in order until one answers: (tier, reason, run, notes about skipped tiers, ms)."""
    saves = len(ctx.saved)
    notes: list[str] = []
    for number in ORDER:
        if not applies(cfg, number, saves):
            continue
        if number != 0 and vectors_missing:
            notes.append(f"Tier {number} skipped: {vectors_missing}")
            continue
        t = time.perf_counter()
        try:
            run = tiers[number].run(side, ctx, limit)
        except ScixError as exc:  # an unreachable vector server, say: the next tier answers, and says why
            notes.append(f"Tier {number} failed: {exc.describe()}")
            continue
        ms = (time.perf_counter() - t) * 1000
        if run.items or number == 0:
            why = reason(cfg, number, saves)
            if notes:
                why += "; " + "; ".join(notes)
            return number, why, run, notes, ms
        notes.append(f"Tier {number} returned nothing" + (f" ({run.notes[-1]})" if run.notes else ""))
    raise AssertionError("Tier 0 always answers")  # pragma: no cover
