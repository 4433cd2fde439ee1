"""Title and citation boosts on the top of the ranking (docs/design.md#boosts).

final = base + title + citation, for the top ``window`` (50) papers; the rest
keep their base score (which is no larger than any boosted paper's base, so
the order stays consistent).

* base — on [0, 1]: a reranker's sigmoid score as is; a fused RRF score
  divided by the largest possible fused score (ranked first by every lane).
* title — on the ORIGINAL query (never a rewrite), case and punctuation
  normalised: exact title 2.0; the query a substring of the title 1.0;
  otherwise coverage of the query's terms (stopwords aside) by the title's
  ≥ 0.8 → 1.0, ≥ 0.5 → 0.5; else 0.
* citation — ``0.2 · log1p(c) / log1p(c_max)`` with ``c_max`` the index's
  largest citation count; 0 when the index has no citations.
"""

from __future__ import annotations

import math
import re
from functools import cached_property

from scix_core.search.stages.base import StageContext
from scix_core.stores.analysis import stopwords
from scix_core.stores.papers import PaperStore
from scix_core.types import Ranking, ScoredPaper

WINDOW = 50
CITATION_CAP = 0.2
_WORD = re.compile(r"[^\W_]+")


def _norm(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def title_boost(query: str, title: str) -> float:
    q, t = _norm(query), _norm(title)
    if not q or not t:
        return 0.0
    if q == t:
        return 2.0
    if f" {' '.join(q)} " in f" {' '.join(t)} ":
        return 1.0
    terms = [w for w in dict.fromkeys(q) if w not in stopwords()] or list(dict.fromkeys(q))
    coverage = sum(w in set(t) for w in terms) / len(terms)
    return 1.0 if coverage >= 0.8 else 0.5 if coverage >= 0.5 else 0.0


def citation_boost(count: int, max_count: int, cap: float = CITATION_CAP) -> float:
    if max_count <= 0 or count <= 0:
        return 0.0
    return cap * math.log1p(count) / math.log1p(max_count)


class BoostStage:
    name = "boosts"

    def __init__(self, store: PaperStore, window: int = WINDOW, citation_cap: float = CITATION_CAP):
        self.store, self.window, self.citation_cap = store, window, citation_cap

    @cached_property
    def max_citations(self) -> int:
        return int(
            self.store.conn.execute("SELECT coalesce(max(citation_count), 0) FROM papers").fetchone()[0]
        )

    def run(self, ranking: Ranking, context: StageContext) -> Ranking:
        reranked = ranking.name == "rerank"
        scale = 1.0 if reranked or context.max_fused <= 0 else 1.0 / context.max_fused
        head = ranking.items[: self.window]
        papers = self.store.titles(i.paper_id for i in head)
        items = []
        for item in ranking.items:
            base = min(1.0, item.score * scale)
            paper = papers.get(item.paper_id) if len(items) < len(head) else None
            if paper is None:
                items.append(ScoredPaper(item.paper_id, base, (("base", base),)))
                continue
            title = title_boost(context.query.original, paper[0])
            cites = citation_boost(paper[1], self.max_citations, self.citation_cap)
            items.append(
                ScoredPaper(
                    item.paper_id,
                    base + title + cites,
                    (("base", base), ("title", title), ("citation", cites)),
                )
            )
        order = sorted(range(len(items)), key=lambda i: (-items[i].score, i))  # stable: ties keep fused order
        return Ranking(self.name, tuple(items[i] for i in order))
