"""Property tests (hypothesis) on the query path: any unicode text is a result or a typed QueryError — never
another exception, never engine syntax reaching FTS5 — on the real SQLite FTS5 lanes and the bm25 lane."""

import re
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scix_core.errors import QueryError
from scix_core.search import Searcher
from scix_core.search.fielded import FieldedQuery, parse_fielded
from scix_core.search.lanes.fts5 import fts5_expression
from scix_core.search.query import prepare

pytestmark = [pytest.mark.model]

# every code point class, surrogates excluded (not encodable), plus the engines' syntax characters made likely
SYNTAX = st.sampled_from(
    list("\"*^:()-+{}[]<>~|&!\\/'`;%_.,")
    + ["NEAR", "AND", "OR", "NOT", "year:", "cat:", 'author:"', "-cat:", "\x00", "\u202e", "\ufeff"]
)
TEXT = st.lists(
    st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), SYNTAX), max_size=30
).map(" ".join)
SAFE_TOKEN = re.compile(r"^\w+$")


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_prepare_yields_plain_word_tokens_or_a_query_error(text):
    try:
        q = prepare(text)
    except QueryError:
        return
    assert q.text.strip() and all(SAFE_TOKEN.match(t) for t in q.tokens), q.tokens  # no tokens: dense only
    assert len(q.counts) == len(q.tokens) and all(c >= 1 for c in q.counts)


@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(title, abstract, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO t VALUES ('Dark matter halos', 'Simulations of galaxy formation')")
    return conn


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXT, st.sampled_from(["and", "or"]))
def test_any_prepared_query_is_a_valid_fts5_expression(fts, text, mode):
    try:
        q = prepare(text)
    except QueryError:
        return
    if not q.tokens:  # the lexical lanes skip a query with no terms
        return
    fts.execute("SELECT rowid FROM t WHERE t MATCH ?", [fts5_expression(q.repeated(), mode)]).fetchall()


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_fielded_parser_lifts_or_raises_a_typed_error(text):
    try:
        parsed = parse_fielded(text)
    except QueryError as exc:
        assert exc.code == "query_syntax_error" and 0 <= exc.position <= len(text)
        return
    assert isinstance(parsed, FieldedQuery)
    assert not re.search(r"(?<!\S)-?(year|cat|author):", parsed.text, re.IGNORECASE) or parsed.fields == ()


@pytest.fixture(scope="module", params=["bm25", "sqlite"])
def searcher(request, built):
    return Searcher(built.index, built.config, backend=request.param)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXT, st.sampled_from(["keyword", "hybrid"]), st.sampled_from(["", "fielded", "alias,fielded"]))
def test_search_answers_or_raises_a_query_error(searcher, text, mode, lanes):
    try:
        result = searcher.search(text, mode, limit=5, lanes=lanes)
    except QueryError:
        return
    assert len(result.hits) <= 5 and not result.metadata["dropped_lanes"], result.metadata["dropped_lanes"]


@pytest.mark.parametrize("size", [10_000, 1_000_000])
def test_huge_queries_are_capped_with_a_note(searcher, size):
    text = ("dark matter halos " * (size // 18 + 1))[:size]
    result = searcher.search(text, "hybrid", limit=5)
    assert result.hits and any("capped" in n or "truncated" in n for n in result.metadata["notes"])
