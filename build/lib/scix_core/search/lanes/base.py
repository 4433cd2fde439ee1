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


LEXICAL_MODES = ("and", "or", "auto")  # the lexical lanes' semantics (``search.lexical_mode``)


def and_then_or(all_terms: list[tuple], any_term: list[tuple], k: int) -> list[tuple]:
    """The ``auto`` lexical mode's merge: every paper matching all terms first (in its own order), then the
    papers matching only some (in theirs), ``k`` in all. A paper of the second part scores no higher than the
    last of the first, so the ranking stays best-first and top-k is a prefix of top-(k+n)."""
    if len(all_terms) >= k:
        return all_terms[:k]
    have = {r[0] for r in all_terms}
    floor = all_terms[-1][1] if all_terms else None
    rest = [
        (pid, score if floor is None else min(score, floor)) for pid, score in any_term if pid not in have
    ]
    return [*all_terms, *rest][:k]
