"""The result contract (docs/design.md#result): frozen, JSON-ready, every step visible."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from scix_core.types import Ranking


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class LaneScore:
    """Where one lane put a paper: 1-based rank and the lane's own score."""

    rank: int
    score: float


@dataclass(frozen=True)
class Hit:
    paper_id: str
    title: str
    score: float  # final score (what the hits are ordered by)
    fused_score: float
    lanes: Mapping[str, LaneScore] = field(default_factory=dict)  # absent key = the lane missed it
    boosts: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lanes", _frozen(self.lanes))
        object.__setattr__(self, "boosts", _frozen(self.boosts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "paper_id": self.paper_id,
            "title": self.title,
            "score": self.score,
            "fused_score": self.fused_score,
            "lanes": {n: {"rank": s.rank, "score": s.score} for n, s in self.lanes.items()},
            "boosts": dict(self.boosts),
        }


@dataclass(frozen=True)
class SearchResult:
    """``hits`` best first; ``total`` = distinct candidates fused; ``rankings`` = each
    lane's and stage's output (``fused`` included) for the query inspector."""

    query: str
    hits: tuple[Hit, ...]
    total: int
    timing_ms: Mapping[str, float]
    metadata: Mapping[str, Any]
    rankings: Mapping[str, Ranking] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("timing_ms", "metadata", "rankings"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(h.paper_id for h in self.hits)

    def ranking(self) -> Ranking:
        """The final hits as a :class:`Ranking` (what evaluation consumes)."""
        return Ranking.from_pairs("final", ((h.paper_id, h.score) for h in self.hits))

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "hits": [h.to_dict() for h in self.hits],
            "total": self.total,
            "timing_ms": dict(self.timing_ms),
            "metadata": _plain(self.metadata),
        }

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def to_frame(self):
        """One row per hit, one ``<lane>_rank`` column per lane (for notebooks)."""
        import pandas as pd

        lanes = list(self.metadata.get("lanes_run", ()))
        rows = [
            {
                "rank": i,
                "paper_id": h.paper_id,
                "title": h.title,
                "score": h.score,
                "fused": h.fused_score,
                **{f"{n}_rank": (h.lanes[n].rank if n in h.lanes else None) for n in lanes},
            }
            for i, h in enumerate(self.hits, start=1)
        ]
        return pd.DataFrame(rows)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
