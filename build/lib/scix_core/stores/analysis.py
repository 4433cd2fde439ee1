"""What the lexical engines index: the words of a text and the longest body every engine can hold.

Below both the stores (the term matrix stems these words; the PostgreSQL mirror's partial body index
uses the length cap) and search (query preparation, the title boost), so neither imports the other.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

BODY_MAX_CHARS = 1_048_575  # PostgreSQL's tsvector limit; the body index's partial predicate
TOKEN = re.compile(r"[^\W_]+")  # letters/digits; '_' splits words, as in both engines' parsers


@cache
def stopwords() -> frozenset[str]:
    """PostgreSQL's ``english.stop`` (the Snowball list), so FTS5 drops the words PostgreSQL drops."""
    text = files("scix_core.stores").joinpath("english.stop").read_text()
    return frozenset(w.strip() for w in text.split() if w.strip())


def lexical_words(text: str) -> list[str]:
    """Case-folded runs of letters and digits minus the stopwords, in order, repeats kept: the words of a
    query and (stemmed) of a paper in the term matrix."""
    stop = stopwords()
    return [t for t in TOKEN.findall(text.casefold()) if t not in stop]
