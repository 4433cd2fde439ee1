"""Query preparation and filter parsing, by hand."""

import pytest

from scix_core.errors import FilterError, QueryError
from scix_core.search.filters import SearchFilters, parse_year_range
from scix_core.search.lanes.fts5 import fts5_expression
from scix_core.search.query import prepare
from scix_core.stores.analysis import stopwords


def test_tokens_are_folded_deduplicated_and_stopword_free():
    q = prepare("The Effect of  GRAPH graph networks on the_web")
    assert q.tokens == ("effect", "graph", "networks", "web")
    assert q.text == "The Effect of GRAPH graph networks on the_web"


def test_syntax_never_survives_into_tokens():
    q = prepare("\"NEAR(a b)\" AND title:x* ^y 'z' \\ & | ! ( ) <-> \x00 🙂 DROP--")
    assert q.tokens == ("near", "b", "title", "x", "y", "z", "drop")
    assert fts5_expression(q.tokens) == '"near" AND "b" AND "title" AND "x" AND "y" AND "z" AND "drop"'
    assert fts5_expression(("a", "b"), "or") == '"a" OR "b"'


def test_caps_are_noted():
    q = prepare("word " * 1000, max_chars=100, max_tokens=64)
    assert len(q.text) <= 100 and q.notes == ("query truncated from 4,999 to 100 characters",)
    q = prepare(" ".join(f"w{i}" for i in range(100)), max_tokens=10)
    assert len(q.tokens) == 10 and q.notes == ("lexical terms capped at 10 of 100",)


def test_empty_is_an_error_and_stopwords_only_is_not():
    with pytest.raises(QueryError, match="empty query"):
        prepare(" \x00\t ")
    assert prepare("the of and").tokens == ()
    assert {"the", "of", "and"} <= stopwords() and len(stopwords()) == 127


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2019-2021", (2019, 2021)),
        ("2019-", (2019, None)),
        ("-2021", (None, 2021)),
        ("2020", (2020, 2020)),
        (2020, (2020, 2020)),
        ((2019, 2021), (2019, 2021)),
        ("2019..2021", (2019, 2021)),
        (" 2019 - 2021 ", (2019, 2021)),
    ],
)
def test_year_ranges(value, expected):
    assert parse_year_range(value) == expected


@pytest.mark.parametrize("value", ["", "-", "19-21", "2019-2021-2023", "abc", (2019,), True, 20.5])
def test_bad_year_ranges(value):
    with pytest.raises(FilterError):
        parse_year_range(value)


def test_filters_parse_and_roundtrip():
    f = SearchFilters.parse(
        {"year": "2019-2021", "categories": "astro-ph.GA", "authors": ["Rubin", "rubin "]}
    )
    assert f == SearchFilters(2019, 2021, ("astro-ph.GA",), ("Rubin", "rubin"))
    assert f.author_needles == ("rubin", "rubin")
    assert SearchFilters.parse(f.to_dict()) == f
    assert not SearchFilters() and bool(f)
    assert f.needs_post_filter and not SearchFilters(categories=("x",)).needs_post_filter
    with pytest.raises(FilterError, match="must be a mapping"):
        SearchFilters.parse("year:2019")


def test_auto_mode_puts_every_term_matches_first_and_keeps_the_prefix_property():
    from scix_core.search.lanes.base import and_then_or

    both = [("a", 5.0), ("b", 3.0)]
    some = [("c", 9.0), ("a", 8.0), ("d", 2.0), ("b", 1.0), ("e", 0.5)]
    assert and_then_or(both, some, 4) == [
        ("a", 5.0),
        ("b", 3.0),
        ("c", 3.0),
        ("d", 2.0),
    ]  # c capped at b's score
    assert and_then_or(both, some, 1) == [("a", 5.0)]  # AND fills k: OR never consulted
    assert and_then_or([], some, 2) == some[:2]
    for k in range(1, 7):
        assert and_then_or(both, some, k) == and_then_or(both, some, 6)[:k]
