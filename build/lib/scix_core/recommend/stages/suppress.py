"""Stage 8: category suppression — ≥ 3 dismissals within 14 days in one code suppress that code.

Codes are the corpus's own fine category codes (arXiv ``cs.LG``), never
coarse topics: the reference design first suppressed on ~15 coarse buckets,
and three dismissals in "AI/ML" hid a fifth of the corpus. A dismissal
counts for the paper's primary code (for tag corpora: each tag), and a
candidate is dropped when its primary code (or any tag) is suppressed. The
window is measured back from the user's newest interaction, not the wall
clock; threshold and window are ``recommend.suppress_dismissals`` and
``recommend.suppress_days``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from scix_core.recommend.catalog import Catalog
from scix_core.recommend.stages.base import Tier1State
from scix_core.recommend.state import Event


def suppressed_codes(
    events: Sequence[Event], catalog: Catalog, threshold: int, days: float
) -> dict[str, int]:
    """code -> dismissals in the window, for the codes at or over ``threshold``."""
    if not events:
        return {}
    newest = max(e.at for e in events)
    since = newest - dt.timedelta(days=days)
    counts: Counter[str] = Counter()
    for paper in {
        e.paper_id for e in events if e.kind == "dismiss" and e.at >= since and e.paper_id in catalog.row
    }:
        counts.update(catalog.suppression_codes(catalog.row[paper]))
    return {code: n for code, n in sorted(counts.items()) if n >= threshold}


class Suppress:
    name, writes = "suppress", "suppressed"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        cfg, cat = state.side.config, state.side.catalog
        codes = suppressed_codes(state.ctx.events, cat, cfg.suppress_dismissals, cfg.suppress_days)
        kept = (
            tuple(c for c in state.scored if not codes.keys() & set(cat.suppression_codes(c.row)))
            if codes
            else state.scored
        )
        kept_ids = {c.paper_id for c in kept}
        summary = {
            "suppressed_codes": codes,
            "removed": len(state.scored) - len(kept),
            "removed_ids": [c.paper_id for c in state.scored if c.paper_id not in kept_ids],
            "window_days": cfg.suppress_days,
            "threshold": cfg.suppress_dismissals,
        }
        return replace(state, suppressed=codes, kept=kept), summary
