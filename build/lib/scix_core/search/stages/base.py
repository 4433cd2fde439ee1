"""The stage contract: ``run(ranking, context) -> Ranking``, after fusion.

A stage may decline for this query by raising :class:`StageBypassed` with the
reason (the pipeline records it and passes the ranking on unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scix_core.search.query import PreparedQuery
from scix_core.stores.papers import PaperStore
from scix_core.types import Ranking


class StageBypassed(Exception):
    """Raised by a stage that does not apply to this query; the message says why."""


@dataclass(frozen=True)
class StageContext:
    # .original is the user's text (the title boost reads it), .text what the lanes searched
    query: PreparedQuery
    limit: int
    papers: PaperStore
    max_fused: float  # the largest score fusion could give: one paper ranked first by every lane that ran


@runtime_checkable
class Stage(Protocol):
    name: str

    def run(self, ranking: Ranking, context: StageContext) -> Ranking: ...
