"""The recommendation result contract: frozen, JSON-ready, every stage visible."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

TIER_NAMES = {0: "trending", 1: "clustered", 2: "profile", 3: "recommend"}


def plain(value: Any) -> Any:
    """JSON-ready copy of stage outputs (dataclasses, numpy arrays and scalars, mappings, tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    # sequences, sets, and a scored candidate's features (stages.base.Features: its (name, value) pairs)
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class RecItem:
    """One recommended paper and everything that put it there.

    ``source``: ``cluster-knn``, ``supplement``, ``co-saved``, ``exploration``, ``trending``,
    ``recommend`` or ``profile-knn``; ``scores``: every score that ranked it,
    as (name, value) pairs in the order they were computed; ``mmr_position``:
    the 1-based pick at which MMR took it (Tier 1 only).
    """

    paper_id: str
    title: str
    rank: int
    score: float
    tier: int
    source: str
    cluster_id: int | None = None
    scores: tuple[tuple[str, float], ...] = ()
    mmr_position: int | None = None
    exploration: bool = False
    codes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        # field by field, not through plain(): walking a CiteULike paper's dozens of tag codes one by one
        # cost a served list of ten 1.2 ms
        return {
            "paper_id": self.paper_id,
            "title": self.title,
            "rank": _scalar(self.rank),
            "score": _scalar(self.score),
            "tier": _scalar(self.tier),
            "source": self.source,
            "cluster_id": _scalar(self.cluster_id),
            "scores": dict(self.scores),
            "mmr_position": _scalar(self.mmr_position),
            "exploration": _scalar(self.exploration),
            "codes": list(self.codes),
        }


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class StageRecord:
    """What one stage did: its timing, a few headline facts and its whole output (for the notebook)."""

    name: str
    ms: float
    summary: Mapping[str, Any] = field(default_factory=dict)
    output: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", MappingProxyType(dict(self.summary)))


@dataclass(frozen=True)
class Recommendations:
    index: str
    user: str
    tier: int
    reason: str
    next_tier: str | None
    items: tuple[RecItem, ...]
    stages: tuple[StageRecord, ...] = ()
    scorer: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    timing_ms: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("scorer", "timing_ms"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def tier_name(self) -> str:
        return TIER_NAMES[self.tier]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(i.paper_id for i in self.items)

    def stage(self, name: str) -> StageRecord:
        for record in self.stages:
            if record.name == name:
                return record
        raise KeyError(f"no stage {name!r}; stages: {', '.join(s.name for s in self.stages)}")

    def to_dict(self, outputs: bool = False) -> dict[str, Any]:
        """Everything but the stage outputs (``outputs=True`` adds them: vectors included, large)."""
        return {
            "index": self.index,
            "user": self.user,
            "tier": self.tier,
            "tier_name": self.tier_name,
            "reason": self.reason,
            "next_tier": self.next_tier,
            "items": [i.to_dict() for i in self.items],
            "stages": [
                {
                    "name": s.name,
                    "ms": s.ms,
                    "summary": plain(s.summary),
                    **({"output": plain(s.output)} if outputs else {}),
                }
                for s in self.stages
            ],
            "scorer": plain(self.scorer),
            "notes": list(self.notes),
            "timing_ms": dict(self.timing_ms),
        }

    def to_json(self, outputs: bool = False) -> str:
        return json.dumps(self.to_dict(outputs), indent=2, default=str)

    def to_frame(self):
        """One row per item: rank, id, title, tier, source, cluster, MMR pick, exploration, then one column
        per score."""
        import pandas as pd

        rows = []
        for item in self.items:
            row = {k: v for k, v in item.to_dict().items() if k != "scores"}
            row["codes"] = ", ".join(item.codes)
            row.update(dict(item.scores))
            rows.append(row)
        return pd.DataFrame(rows)
