"""The small frozen types every stage passes around."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Paper:
    """One paper of a corpus.

    ``categories`` are codes with the primary first (``astro-ph.GA``);
    ``published`` is the first-publication date, decoded from an arXiv id
    when the source gives none (see :mod:`scix_core.data.arxiv_ids`);
    ``listed`` the day the paper was announced in a listing (a daily
    file's date), where the source has one — what "new since" asks about.
    """

    paper_id: str
    title: str
    abstract: str = ""
    body: str | None = None
    authors: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    published: dt.date | None = None
    citation_count: int = 0
    references: tuple[str, ...] = ()
    listed: dt.date | None = None

    @property
    def year(self) -> int | None:
        return self.published.year if self.published else None

    @property
    def text(self) -> str:
        """Title and abstract as one passage, the text that gets embedded."""
        return ". ".join(t for t in (self.title, self.abstract) if t)


@dataclass(frozen=True, slots=True)
class Query:
    """A gold-set query; ``fields`` keeps extra columns (e.g. a bucket)."""

    query_id: str
    text: str
    fields: Mapping[str, str] = field(default_factory=dict)


#: qrels: query id -> paper id -> graded relevance (negative = judged non-relevant)
Qrels = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class Interaction:
    """A user's action on a paper (``save``, ``dismiss``, ...).

    ``position`` orders a user's interactions when the source has no
    timestamps (CiteULike libraries are unordered lists).
    """

    user_id: str
    paper_id: str
    action: str = "save"
    position: int = 0
    at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class CitationLink:
    """A link between two papers; ``kind`` is ``direct``, ``coupling`` or ``cocitation``."""

    source: str
    target: str
    kind: str = "direct"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A record that was not taken, with where it was and why."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ScoredPaper:
    """``detail`` carries a stage's breakdown of ``score`` (e.g. base and boosts) as (name, value) pairs."""

    paper_id: str
    score: float
    detail: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Ranking:
    """An ordered list of scored papers from one lane or stage, best first.

    Ranks are 1-based everywhere (``rank_of``), matching the RRF definition.
    """

    name: str
    items: tuple[ScoredPaper, ...] = ()

    @classmethod
    def from_pairs(cls, name: str, pairs) -> Ranking:
        return cls(name, tuple(ScoredPaper(str(p), float(s)) for p, s in pairs))

    def __len__(self) -> int:
        return len(self.items)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(i.paper_id for i in self.items)

    def ranks(self) -> dict[str, int]:
        """paper id -> 1-based rank (first occurrence if an id repeats)."""
        out: dict[str, int] = {}
        for rank, item in enumerate(self.items, start=1):
            out.setdefault(item.paper_id, rank)
        return out

    def scores(self) -> dict[str, float]:
        """paper id -> score (first occurrence if an id repeats, like :meth:`ranks`)."""
        out: dict[str, float] = {}
        for item in self.items:
            out.setdefault(item.paper_id, item.score)
        return out

    def top(self, k: int) -> Ranking:
        return Ranking(self.name, self.items[:k])
