"""The per-call knobs, re-read from the environment on every query (docs/design.md#search-lanes).

As in the reference design, these three can be changed on a running
process (a notebook, a server) without a restart:

``SCIX_LEXICAL_POOL``       candidate-pool cap of the lexical lanes: matched rows
                            taken (in index order) before ranking; default 30000,
                            ``inf``/``all``/``none`` = uncapped (for evaluation).
``SCIX_LEXICAL_RANK_FLAG``  PostgreSQL ``ts_rank_cd`` normalisation bits, 0..63;
                            default 32 = rank/(rank+1), no length normalisation.
``SCIX_QDRANT_EXACT``       ``1`` = exact (non-indexed) kNN in the dense lane.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scix_core.errors import ConfigError

POOL_DEFAULT = 30_000  # the reference design's knee: 5,000 kept only ~15% of the uncapped top 20
RANK_FLAG_DEFAULT = 32
_UNCAPPED = {"inf", "infinity", "all", "none", "unlimited"}


@dataclass(frozen=True)
class Knobs:
    pool: int | None  # None = uncapped
    rank_flag: int
    exact: bool

    def to_dict(self) -> dict:
        return {
            "lexical_pool": "inf" if self.pool is None else self.pool,
            "rank_flag": self.rank_flag,
            "qdrant_exact": self.exact,
        }


def lexical_pool() -> int | None:
    raw = os.environ.get("SCIX_LEXICAL_POOL", "").strip().lower()
    if not raw:
        return POOL_DEFAULT
    if raw in _UNCAPPED:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"SCIX_LEXICAL_POOL={raw!r}: expected a positive integer or inf/all/none") from None
    if value < 1:
        raise ConfigError(f"SCIX_LEXICAL_POOL={value}: must be >= 1 (or inf for uncapped)")
    return value


def rank_flag() -> int:
    raw = os.environ.get("SCIX_LEXICAL_RANK_FLAG", "").strip()
    if not raw:
        return RANK_FLAG_DEFAULT
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"SCIX_LEXICAL_RANK_FLAG={raw!r}: expected an integer 0..63") from None
    if not 0 <= value <= 63:
        raise ConfigError(f"SCIX_LEXICAL_RANK_FLAG={value}: only bits 0..63 are accepted")
    return value


def qdrant_exact() -> bool:
    return os.environ.get("SCIX_QDRANT_EXACT", "").strip().lower() in ("1", "true", "yes", "on")


def read() -> Knobs:
    """All three, validated; a bad value raises :class:`ConfigError` before any lane runs."""
    return Knobs(lexical_pool(), rank_flag(), qdrant_exact())
