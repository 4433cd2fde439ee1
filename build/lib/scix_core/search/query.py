"""Query preparation: one user string -> the text every lane sees.

Nothing the user types reaches a search engine's syntax: control characters
(NUL included) become spaces, the text is capped at ``max_chars`` and the
lexical tokens at ``max_tokens`` (each cap noted in the result metadata).
FTS5 gets its tokens quoted one by one (:mod:`scix_core.search.lanes.fts5`);
PostgreSQL gets the text as a bound parameter to ``plainto_tsquery``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from scix_core.errors import QueryError
from scix_core.stores.analysis import lexical_words

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class PreparedQuery:
    original: str  # as the user typed it (the title boost uses this)
    text: str  # cleaned and capped: what the lanes search
    tokens: tuple[str, ...]  # lexical terms: case-folded, stopwords removed, each once, capped
    notes: tuple[str, ...] = ()
    counts: tuple[
        int, ...
    ] = ()  # how often each token occurs in the query (BM25's query term frequency); () = once

    def frequency(self, i: int) -> int:
        """How many times the ``i``-th token occurs in the query, at most ``MAX_REPEAT``."""
        return min(MAX_REPEAT, self.counts[i]) if self.counts else 1

    def repeated(self) -> tuple[str, ...]:
        """The tokens, each as often as it occurs in the query (at most ``MAX_REPEAT``): a term a long query
        states three times weighs three times in bm25, as in every BM25 engine that scores query term
        frequency."""
        return tuple(t for i, t in enumerate(self.tokens) for _ in range(self.frequency(i)))


# a query term counts at most this often (a pasted text repeating one word is not 1,000 times as sure)
MAX_REPEAT = 8


def prepare(query: str, max_chars: int = 2000, max_tokens: int = 64) -> PreparedQuery:
    """Clean ``query``; raise :class:`QueryError` when nothing searchable is left."""
    if not isinstance(query, str):
        raise QueryError(f"query must be a string, got {type(query).__name__}")
    text = " ".join(_CONTROL.sub(" ", query).split())
    if not text:
        raise QueryError("empty query: type some words to search for")
    notes = []
    if len(text) > max_chars:
        notes.append(f"query truncated from {len(text):,} to {max_chars:,} characters")
        text = text[:max_chars].rsplit(" ", 1)[0] or text[:max_chars]
    counts = Counter(lexical_words(text))  # in order of first occurrence
    tokens = tuple(counts)
    if len(tokens) > max_tokens:
        notes.append(f"lexical terms capped at {max_tokens} of {len(tokens)}")
        tokens = tokens[:max_tokens]
    return PreparedQuery(query, text, tokens, tuple(notes), tuple(counts[t] for t in tokens))
