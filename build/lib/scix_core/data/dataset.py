"""What a loader returns: a corpus plus whatever gold data came with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scix_core.types import CitationLink, Interaction, Paper, Qrels, Query, Rejection


@dataclass(frozen=True)
class Dataset:
    """A loaded collection.

    ``qrels`` maps a split name (``train``, ``test``) to its judgments.
    ``duplicates`` counts records dropped because their id was already taken:
    the rule everywhere is *first occurrence wins*, so re-reading the same
    input always keeps the same record.
    """

    name: str
    format: str
    papers: tuple[Paper, ...]
    queries: tuple[Query, ...] = ()
    qrels: Mapping[str, Qrels] = field(default_factory=dict)
    interactions: tuple[Interaction, ...] = ()
    citations: tuple[CitationLink, ...] = ()
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rejected: tuple[Rejection, ...] = ()
    duplicates: int = 0
    sources: tuple[str, ...] = ()

    @property
    def users(self) -> frozenset[str]:
        return frozenset(i.user_id for i in self.interactions)


class PaperCollector:
    """Accumulates papers in input order, applying the first-wins duplicate rule."""

    def __init__(self) -> None:
        self._papers: dict[str, Paper] = {}
        self.rejected: list[Rejection] = []
        self.duplicates = 0

    def add(self, paper: Paper) -> None:
        if paper.paper_id in self._papers:
            self.duplicates += 1
        else:
            self._papers[paper.paper_id] = paper

    def reject(self, path: object, line: int, reason: str) -> None:
        self.rejected.append(Rejection(str(path), line, reason))

    @property
    def papers(self) -> tuple[Paper, ...]:
        return tuple(self._papers.values())
