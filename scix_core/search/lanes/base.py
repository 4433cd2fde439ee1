"""The lane contract: one object, one method, ``search(request, k) -> Ranking``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from scix_core.errors import ScixError
from scix_core.search.filters import SearchFilters
from scix_core.search.knobs import Knobs, read
from scix_core.search.query import PreparedQuery
from scix_core.types import Ranking

BODY_MAX_CHARS = 1_048_575  # PostgreSQL's tsvector limit; the body index's partial predicate


class LaneTimeout(ScixError):
    """A lane ran past its time budget and was cancelled."""

    code = "lane_timeout"


@dataclass(frozen=True)
class LaneRequest:
    """What every lane gets: the prepared query, the filters, the per-call knobs,
    and (for the dense lane) the query embedding."""

    query: PreparedQuery
    filters: SearchFilters = SearchFilters()
    knobs: Knobs | None = None
    vector: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.knobs is None:
            object.__setattr__(self, "knobs", read())


@runtime_checkable
class Lane(Protocol):
    """Returns up to ``k`` papers, best first; knows nothing of other lanes."""

    name: str

    def search(self, request: LaneRequest, k: int) -> Ranking: ...
