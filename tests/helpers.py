"""Request building and a Python reference for the filter semantics."""

from __future__ import annotations

from scix_core.search.filters import SearchFilters
from scix_core.search.knobs import Knobs
from scix_core.search.lanes import LaneRequest
from scix_core.search.query import prepare
from scix_core.types import Paper

BAD_QUERIES = [
    '"',
    '""unbalanced "quotes',
    "*",
    "graph*",
    "NEAR(graph neural)",
    "NEAR(",
    "AND",
    "OR",
    "NOT",
    "graph AND OR NOT",
    "title:graph",
    "^graph",
    "a & b | !c (d) <-> e",
    "it's o'neil's",
    "back\\slash\\",
    "nul\x00byte graph",
    "'; DROP TABLE papers; --",
    "1 OR 1=1",
    "SELECT * FROM papers WHERE 1=1",
    "🔭🌌 galaxies 🚀",
    "🙂",
    "graph " + "x" * 100_000,
    "\u202egraph",
    "-graph",
    "+graph",
    "{graph}",
    "[graph]",
    "graph:",
    "@@ ::tsquery",
]


def make_request(
    text: str, encoder=None, filters=None, pool: int | None = None, rank_flag: int = 32, exact: bool = True
) -> LaneRequest:
    q = prepare(text)
    vector = encoder.encode_query(q.text) if encoder is not None else None
    return LaneRequest(q, SearchFilters.parse(filters), Knobs(pool, rank_flag, exact), vector)


def passes(p: Paper, f: SearchFilters) -> bool:
    """The documented filter semantics, written independently of the SQL."""
    if f.year_min is not None and (p.year is None or p.year < f.year_min):
        return False
    if f.year_max is not None and (p.year is None or p.year > f.year_max):
        return False
    if f.categories and not set(f.categories) & set(p.categories):
        return False
    if f.authors and not any(n.casefold() in a.casefold() for a in p.authors for n in f.authors):
        return False
    if f.paper_ids and p.paper_id not in f.paper_ids:
        return False
    if f.has_body is not None and (p.body is not None) != f.has_body:
        return False
    if set(f.exclude_categories) & set(p.categories):
        return False
    if any(n.casefold() in a.casefold() for a in p.authors for n in f.exclude_authors):
        return False
    return True


def listing_file(path, papers):
    """``papers`` as an arXiv listing day file (JSON lines, the ``arxiv-jsonl`` format) at ``path``."""
    import json

    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": p.paper_id,
                    "title": p.title,
                    "summary": p.abstract,
                    "authors": list(p.authors),
                    "categories": list(p.categories),
                }
            )
            + "\n"
            for p in papers
        )
    )
    return path
