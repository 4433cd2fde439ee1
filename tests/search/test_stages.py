"""Post-fusion stages by hand: boosts (tiers, cap, normalisation), rerank rules, rewrite, fielded, guard."""

from __future__ import annotations

import math

import pytest

from scix_core.errors import ConfigError, FilterError, UnknownNameError
from scix_core.search import Searcher, SearchFilters
from scix_core.search.fielded import QuerySyntaxError, merge_filters, parse_fielded
from scix_core.search.guard import BroadQueryError
from scix_core.search.rewrite import AliasRewriter, AliasTable, skip_reason
from scix_core.search.stages.boosts import citation_boost, title_boost


@pytest.mark.parametrize(
    "query, title, expected",
    [
        ("Graph theory of social networks", "Graph theory of social networks", 2.0),  # exact
        (
            "graph theory of SOCIAL networks!",
            "Graph theory of social networks",
            2.0,
        ),  # case/punctuation normalised
        ("social networks", "Graph theory of social networks", 1.0),  # substring
        ("theory graph networks social", "Graph theory of social networks", 1.0),  # coverage 4/4
        (
            "graph theory social networks physics",
            "Graph theory of social networks",
            1.0,
        ),  # coverage 4/5 = 0.8
        ("graph social chemistry biology", "Graph theory of social networks", 0.5),  # coverage 2/4 = 0.5
        ("graph chemistry biology", "Graph theory of social networks", 0.0),  # coverage 1/3
        ("work", "Network models", 0.0),  # no partial-word match
        ("", "Anything", 0.0),
    ],
)
def test_title_boost_tiers(query, title, expected):
    assert title_boost(query, title) == expected


def test_citation_boost_formula_and_cap():
    assert citation_boost(0, 100) == 0.0 and citation_boost(5, 0) == 0.0
    assert citation_boost(100, 100) == pytest.approx(0.2)
    assert citation_boost(9, 99) == pytest.approx(0.2 * math.log(10) / math.log(100))
    assert citation_boost(10**6, 100) == pytest.approx(
        0.2 * math.log1p(10**6) / math.log1p(100)
    )  # c <= c_max in an index


@pytest.fixture(scope="module")
def searcher(built):
    return Searcher(built.index, built.config)


@pytest.fixture(scope="module")
def and_searcher(built):
    """AND semantics: the rewrite and alias tests check exactly which papers match every term."""
    return Searcher(built.index, built.config.replace(**{"search.lexical_mode": "and"}))


@pytest.mark.model
def test_exact_title_query_puts_that_paper_first(searcher):
    query = "Graph theory of social networks"
    assert searcher.search(query, limit=5).metadata["stages"]["boosts"] == "off"  # off by default
    boosted = searcher.search(query, limit=5, boosts=True)
    assert boosted.ids[0] == "p08"
    top = boosted.hits[0]
    assert top.boosts["title"] == 2.0 and top.boosts["citation"] == 0.0  # the fixture has no citations
    lanes = len(boosted.metadata["lanes_run"])  # base = fused / the best possible fused score, lanes/(60 + 1)
    assert lanes == 3 and top.score == pytest.approx(top.fused_score / (lanes / 61) + 2.0)


@pytest.mark.model
def test_boosts_put_base_scores_on_unit_interval(searcher):
    result = searcher.search("neural networks for galaxies", limit=10, boosts=True)
    ranking = result.rankings["boosts"]
    for item in ranking.items:
        detail = dict(item.detail)
        assert 0.0 <= detail["base"] <= 1.0
        assert item.score == pytest.approx(sum(detail.values()))
    scores = [i.score for i in ranking.items]
    assert scores == sorted(scores, reverse=True)
    off = searcher.search("neural networks for galaxies", limit=10, boosts=False)
    assert off.metadata["stages"]["boosts"] == "off" and "boosts" not in off.timing_ms
    assert all(h.boosts == {} and h.score == h.fused_score for h in off.hits)


def test_rewrite_skip_rules():
    assert skip_reason("GNN") == "skipped: 2 words or fewer"
    assert skip_reason("GNN molecules") == "skipped: 2 words or fewer"
    assert skip_reason('"dark matter" halo profiles') == "skipped: already looks academic"
    assert skip_reason("halo profiles in 2103.01234") == "skipped: already looks academic"
    assert skip_reason("dark AND matter halos") == "skipped: already looks academic"
    assert skip_reason(" ".join(["word"] * 12)) == "skipped: already looks academic"
    assert skip_reason("GNN for drug discovery") is None


def test_alias_lane_queries():
    table = AliasTable({"GNN": "graph neural network", "CNN": "convolutional neural network"})
    found = table.find("CNN and GNN for images")
    assert [table.variant("CNN and GNN for images", a, found) for a in found] == [
        "convolutional neural network and for images",
        "and graph neural network for images",
    ]


def test_alias_rewriter_replaces_whole_words_only():
    table = AliasTable({"GNN": "graph neural network", "SN Ia": "type Ia supernova", "SN": "supernova"})
    rw = AliasRewriter(table)
    assert rw.rewrite("GNN for SN Ia rates") == "graph neural network for type Ia supernova rates"
    assert rw.rewrite("GNNs and gnn stay") == "GNNs and gnn stay"
    assert rw.rewrite("graph neural network GNN") == "graph neural network GNN"  # canonical already present


@pytest.mark.model
def test_local_rewrite_feeds_the_lexical_lanes_only(and_searcher):
    searcher = and_searcher
    result = searcher.search("CNN for galaxy morphology", limit=5, rewrite="local")
    rw = result.metadata["rewrite"]
    assert rw == {
        "mode": "local",
        "status": "rewritten",
        "text": "convolutional neural network for galaxy morphology",
    }
    assert result.metadata["lexical_terms"] == ["convolutional", "neural", "network", "galaxy", "morphology"]
    assert result.ids[0] == "p09" and "rewrite" in result.timing_ms
    assert {"rewrite", "encode"} <= set(result.metadata["overlapped_stages"])
    short = searcher.search("CNN", limit=3, rewrite="local")
    assert short.metadata["rewrite"]["status"] == "skipped: 2 words or fewer"
    with pytest.raises(ConfigError, match="rewrite must be off, local or an http"):
        searcher.search("CNN for galaxy morphology", rewrite="groq")


@pytest.mark.parametrize(
    "query, text, lifted",
    [
        (
            "dark matter year:2019-2021 cat:astro-ph.GA",
            "dark matter",
            {"year_min": 2019, "year_max": 2021, "categories": ("astro-ph.GA",)},
        ),
        (
            'halos author:"Vera Rubin" -cat:astro-ph.CO',
            "halos",
            {"authors": ("Vera Rubin",), "exclude_categories": ("astro-ph.CO",)},
        ),
        (
            "galaxies year:>2015 -author:Ford",
            "galaxies",
            {"year_min": 2016, "year_max": None, "exclude_authors": ("Ford",)},
        ),
        ("year:<=2018 graphs", "graphs", {"year_min": None, "year_max": 2018}),
        ("title:graph and -minus words", "title:graph and -minus words", {}),
    ],
)
def test_fielded_parser(query, text, lifted):
    parsed = parse_fielded(query)
    assert parsed.text == text and parsed.filters == lifted


@pytest.mark.parametrize(
    "query, position, message",
    [
        ("dark matter year:abc", 12, "year must look like"),
        ('halos author:"Vera Rubin', 6, "unterminated quote"),
        ("x cat: y", 2, "cat: needs a value"),
        ("x -year:2019", 2, "cannot be negated"),
        ("year:2019 x year:2020", 12, "given twice"),
    ],
)
def test_fielded_errors_point_at_the_position(query, position, message):
    with pytest.raises(QuerySyntaxError, match=message) as err:
        parse_fielded(query)
    assert err.value.position == position and f"at position {position}" in str(err.value)


def test_fielded_and_call_filters_must_not_clash():
    merged = merge_filters(SearchFilters(categories=("cs.LG",)), {"year_min": 2019})
    assert merged == SearchFilters(year_min=2019, categories=("cs.LG",))
    with pytest.raises(FilterError, match="categories given both"):
        merge_filters(SearchFilters(categories=("cs.LG",)), {"categories": ("math.NT",)})


@pytest.mark.model
def test_fielded_lane_lifts_filters_before_all_lanes(searcher):
    result = searcher.search(
        "galaxies cat:astro-ph.GA -author:Lecun year:2018-2022", limit=10, lanes="fielded"
    )
    assert result.metadata["filters"] == {
        "year_min": 2018,
        "year_max": 2022,
        "categories": ["astro-ph.GA"],
        "exclude_authors": ["Lecun"],
    }
    assert set(result.ids) == {"p03", "p04"} and result.metadata["query_text"] == "galaxies"
    with pytest.raises(UnknownNameError, match="valid: alias, fielded, sparse"):
        searcher.search("x", lanes="fuzzy")


@pytest.mark.model
def test_broad_query_guard_is_an_opt_in_policy(built):
    guarded = Searcher(built.index, built.config.replace(**{"search.broad_query_guard": True}))
    with pytest.raises(BroadQueryError) as err:
        guarded.search("neural networks for galaxies")
    assert err.value.code == "unscoped_broad_query"
    assert guarded.search("galaxies", limit=2).hits  # short: allowed
    assert guarded.search("neural networks for galaxies", filters={"year": "2020-"}, limit=2).hits  # scoped
    assert (
        Searcher(built.index, built.config).search("neural networks for galaxies", limit=2).hits
    )  # off by default


@pytest.mark.model
def test_alias_lanes_one_per_canonical_name(and_searcher):
    searcher = and_searcher
    result = searcher.search("CNN or GNN networks", limit=10, lanes="alias")
    assert [a["lane"] for a in result.metadata["aliases"]] == ["alias_1", "alias_2"]
    assert {"alias_1", "alias_2"} <= set(result.metadata["lanes_run"])
    assert set(result.rankings["alias_1"].ids) == {"p02", "p09"}  # "convolutional neural network or networks"
    assert set(result.rankings["alias_2"].ids) == {"p01"}  # "or graph neural network networks"
    assert result.rankings["lexical"].ids == ()  # nothing says "CNN" or "GNN" literally
    none = searcher.search("galaxy rotation", limit=3, lanes="alias")
    assert none.metadata["lanes_skipped"]["alias"] == "no alias of the alias table in the query"


@pytest.mark.model
def test_sparse_lane_is_fused_when_switched_on(searcher, built_client):
    result = searcher.search("riemann zeta primes", limit=5, lanes="sparse")
    assert "sparse" in result.metadata["lanes_run"] and result.rankings["sparse"].ids[0] == "p06"
    assert result.hits[0].lanes["sparse"].rank == 1
    assert (
        "sparse" not in searcher.search("riemann zeta primes", limit=5).metadata["lanes_run"]
    )  # off by default
    client = Searcher(built_client.index, built_client.config)
    skipped = client.search("riemann", limit=2, lanes="sparse")
    assert "--sparse" in skipped.metadata["lanes_skipped"]["sparse"]
