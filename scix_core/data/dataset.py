"""What a loader returns: a corpus plus whatever gold data came with it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from scix_core.types import CitationLink, Interaction, Paper, Qrels, Query, Rejection


@dataclass(frozen=True)
class Dataset:
    """A loaded collection.

    ``qrels`` maps a split name (``train``, ``test``) to its judgments.
    ``duplicates`` counts records dropped because their id was already taken:
    the rule is *first occurrence wins*, so re-reading the same input always
    keeps the same record — except in dated listings (arXiv), where a later
    record of an id is a newer version: it replaces the earlier one in its
    place and keeps its first listing day (``PaperCollector(newer_wins=True)``),
    which is what ``scix ingest --append`` of the later day does too.
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
    """Accumulates papers in input order, applying the duplicate rule (see :class:`Dataset`)."""

    def __init__(self, newer_wins: bool = False) -> None:
        self._papers: dict[str, Paper] = {}
        self.rejected: list[Rejection] = []
        self.duplicates = 0
        self.newer_wins = newer_wins

    def add(self, paper: Paper) -> None:
        old = self._papers.get(paper.paper_id)
        if old is None:
            self._papers[paper.paper_id] = paper
            return
        self.duplicates += 1
        if self.newer_wins:
            self._papers[paper.paper_id] = newer_version(old, paper)

    def reject(self, path: object, line: int, reason: str) -> None:
        self.rejected.append(Rejection(str(path), line, reason))

    @property
    def papers(self) -> tuple[Paper, ...]:
        return tuple(self._papers.values())


def newer_version(old: Paper, new: Paper) -> Paper:
    """``new`` replacing ``old``: the newer content, the first listing day of the two."""
    listed = min((d for d in (old.listed, new.listed) if d is not None), default=None)
    return new if new.listed == listed else dataclasses.replace(new, listed=listed)
