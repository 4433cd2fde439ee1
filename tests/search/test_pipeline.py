"""The pipeline and its result contract: modes, timings, metadata, isolation, bad input."""

from __future__ import annotations

import dataclasses
import json

import pytest

from scix_core.errors import FilterError, QueryError, UnknownNameError, VectorIndexUnavailableError
from scix_core.fusion import rrf
from scix_core.ingest import ingest
from scix_core.search import Searcher, SearchFilters
from tests.corpus import BY_ID, CORPUS
from tests.helpers import BAD_QUERIES, passes

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="module")
def searcher(built):
    return Searcher(built.index, built.config)


@pytest.fixture(scope="module")
def no_vectors(built):
    """The same corpus ingested with --no-embed: no dense lane exists."""
    ingest(CORPUS, "fixture-lexical", config=built.config, embed=False, progress=False)
    return Searcher("fixture-lexical", built.config)


def test_json_contract(searcher):
    result = searcher.search("graph neural networks", limit=5)
    doc = json.loads(result.to_json())
    assert set(doc) >= {"hits", "total", "timing_ms", "metadata"}
    assert {"lanes_run", "dropped_lanes", "mode", "rrf_k", "filters", "degraded"} <= set(doc["metadata"])
    assert len(doc["hits"]) == 5 and doc["total"] >= 5
    for hit in doc["hits"]:
        assert {"paper_id", "title", "score", "lanes"} <= set(hit)
        assert hit["title"] == BY_ID[hit["paper_id"]].title
        for lane, where in hit["lanes"].items():
            assert lane in doc["metadata"]["lanes_run"] and set(where) == {"rank", "score"}
    assert doc["metadata"]["lanes_run"] == ["lexical", "body", "dense"]
    assert doc["metadata"]["dropped_lanes"] == {} and doc["metadata"]["degraded"] is False


def test_hits_are_the_rrf_of_the_lanes(searcher):
    result = searcher.search("graph neural networks", limit=8, boosts=False)
    lanes = [result.rankings[n] for n in result.metadata["lanes_run"]]
    expected = rrf(lanes, k=60)
    assert result.ids == expected.ids[:8]
    top = result.hits[0]
    assert top.score == pytest.approx(sum(1 / (60 + s.rank) for s in top.lanes.values()))
    for hit in result.hits:  # lane ranks in the hit are the lanes' own
        for name, where in hit.lanes.items():
            assert result.rankings[name].ranks()[hit.paper_id] == where.rank


@pytest.mark.parametrize(
    "mode, stages",
    [
        ("hybrid", {"prepare", "encode", "lexical", "body", "dense", "fusion", "hydrate", "total"}),
        ("keyword", {"prepare", "lexical", "body", "fusion", "hydrate", "total"}),
        ("semantic", {"prepare", "encode", "dense", "fusion", "hydrate", "total"}),
    ],
)
def test_every_stage_that_ran_reports_a_time(searcher, mode, stages):
    result = searcher.search("dark matter halos", mode, limit=3)
    assert set(result.timing_ms) == stages
    boosted = searcher.search("dark matter halos", mode, limit=3, boosts=True)
    assert set(boosted.timing_ms) == stages | {"boosts"} and boosted.timing_ms["boosts"] > 0
    assert all(ms > 0 for ms in result.timing_ms.values())
    assert result.timing_ms["total"] >= max(v for k, v in result.timing_ms.items() if k != "total")
    assert result.metadata["mode"] == mode


def test_semantic_without_vectors_is_a_structured_error(no_vectors):
    with pytest.raises(VectorIndexUnavailableError) as err:
        no_vectors.search("dark matter", "semantic")
    assert err.value.code == "vector_index_unavailable" and "--no-embed" in str(err.value)


def test_hybrid_without_vectors_degrades_to_lexical(no_vectors, caplog):
    result = no_vectors.search("dark matter", limit=3)
    assert result.metadata["lanes_run"] == ["lexical", "body"]
    assert "dense" in result.metadata["dropped_lanes"] and result.metadata["degraded"] is True
    assert "encode" not in result.timing_ms and "dense" not in result.timing_ms
    assert result.ids[0] in ("p03", "p04")
    assert "ran lexical-only" in caplog.text


def test_dense_failure_mid_query_is_isolated(built, monkeypatch):
    """A dense store that errors (e.g. a server gone away) drops only that lane."""
    searcher = Searcher(built.index, built.config)

    def gone(*args, **kwargs):
        raise ConnectionError("vector server went away")

    monkeypatch.setattr(searcher.dense.store, "search", gone)
    result = searcher.search("dark matter", limit=3)
    assert result.metadata["dropped_lanes"] == {"dense": "ConnectionError: vector server went away"}
    assert result.metadata["lanes_run"] == ["lexical", "body"] and result.hits
    with pytest.raises(VectorIndexUnavailableError, match="went away"):
        searcher.search("dark matter", "semantic")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("query", BAD_QUERIES, ids=range(len(BAD_QUERIES)))
def test_bad_queries_get_sane_answers(pg_mirror, backend, query):
    result = Searcher(pg_mirror.index, pg_mirror.config, backend=backend).search(query, limit=5)
    assert result.metadata["dropped_lanes"] == {}, "no backend syntax error may drop a lane"
    assert len(result.hits) == 5  # the dense lane always has an answer
    if len(query) > 2000:
        assert any("truncated from 100,006 to 2,000" in n for n in result.metadata["notes"])


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\x00", None, 42])
def test_empty_or_non_text_query_is_a_typed_error(searcher, query):
    with pytest.raises(QueryError):
        searcher.search(query)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"yaer": "2019"}, "unknown filter key.*'yaer'.*valid: authors, categories"),
        ({"year": "2021-2019"}, "reversed year range: 2021 > 2019"),
        ({"year": "last year"}, "year must look like"),
        ({"year_min": "2019"}, "year_min must be an integer"),
        ({"categories": [""]}, "categories must be a list of non-empty strings"),
        ({"has_body": "yes"}, "has_body must be"),
    ],
)
def test_bad_filters_are_typed_errors(searcher, spec, message):
    with pytest.raises(FilterError, match=message):
        searcher.search("graph", filters=spec)


def test_bad_mode_and_limit(searcher):
    with pytest.raises(UnknownNameError, match="valid: hybrid, keyword, semantic"):
        searcher.search("graph", mode="fuzzy")
    for limit in (0, -1, 10_001, 2.5, True):
        with pytest.raises(QueryError, match="limit"):
            searcher.search("graph", limit=limit)


@pytest.mark.parametrize(
    "spec",
    [
        {"year": "2019-2021"},
        {"categories": ["astro-ph.GA"]},
        {"authors": ["lecun"]},
        {"has_body": True},
        {"year": 2021, "categories": ["cs.LG", "math.NT"]},
    ],
)
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_filters_hold_in_every_mode(searcher, spec, mode):
    flt = SearchFilters.parse(spec)
    result = searcher.search("neural networks galaxy graph", mode, spec, limit=10)
    assert all(passes(BY_ID[p], flt) for p in result.ids)
    assert result.metadata["filters"] == flt.to_dict()


def test_limit_beyond_depth_widens_the_lanes(built):
    searcher = Searcher(built.index, built.config.replace(**{"search.depth": 2}))
    result = searcher.search("neural networks", "semantic", limit=7)
    assert len(result.hits) == 7 and result.metadata["depth"] == 7


def test_result_is_frozen(searcher):
    result = searcher.search("graph", limit=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.hits = ()
    with pytest.raises(TypeError):
        result.metadata["mode"] = "keyword"
    with pytest.raises(TypeError):
        result.hits[0].lanes["dense"] = None
