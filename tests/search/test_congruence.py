"""Backends agree: FTS5, the BM25 term matrix and PostgreSQL full text match the same papers for AND queries;
the term matrix ranks exactly alike in numpy and in PostgreSQL (``postgres.ranking = "bm25"``); qdrant-edge
and qdrant-client (exact) return the same dense top ids.

Rankings differ by design: FTS5 ranks with Okapi BM25 (``bm25()``, column
weights), PostgreSQL with cover density (``ts_rank_cd``, flag 32, title
weighted A over abstract B). Matching differs only where the engines'
tokenisers do, pinned below: FTS5's ``unicode61`` folds diacritics
(``café`` = ``cafe``), PostgreSQL's ``english`` config does not; and the
stemmers (Porter vs Snowball) disagree on rare forms.
"""

from __future__ import annotations

import pytest

from scix_core.search import Searcher
from tests.corpus import Built
from tests.helpers import make_request

pytestmark = [pytest.mark.postgres, pytest.mark.model]

AND_QUERIES = [
    "neural networks",
    "dark matter",
    "galaxy",
    "graph",
    "protein structure",
    "running",
    "runners",
    "vitamin deficiency",
    "prime gaps zeta",
    "networks graph",
    "simulations",
    "halo mass",
    "convolutional images",
    "social networks power laws",
    "attention",
    "transformer",
    "message passing",
    "clusters",
    "neural",
    "spiral galaxies",
    "data augmentation",
]


def _lanes(built, backend: str | None = None):
    config = built.config.replace(**{"search.lexical_backend": backend}) if backend else built.config
    searcher = Searcher(built.index, config)
    return {lane.name: lane for lane in searcher.lexical}


@pytest.fixture(params=["sqlite", "bm25"])
def backends(request, built, pg_ts_mirror):
    """An embedded lexical backend (FTS5, or the term matrix with FTS5's body lane) and PostgreSQL full
    text."""
    return _lanes(built, request.param), _lanes(pg_ts_mirror)


@pytest.mark.parametrize("mode", ["and", "or", "auto"])
@pytest.mark.parametrize(
    "spec", [None, {"year": "2019-2022"}, {"categories": ["astro-ph.GA"]}, {"exclude_authors": ["rubin"]}]
)
def test_bm25_in_postgres_ranks_as_the_term_matrix(built, pg_mirror, mode, spec):
    from scix_core.search.lanes.postgres import PostgresBm25Lane

    config = {"search.lexical_mode": mode}
    numpy_lane = _lanes(
        Built(built.config.replace(**{**config, "search.lexical_backend": "bm25"}), built.index)
    )
    pg_lanes = _lanes(Built(pg_mirror.config.replace(**config), pg_mirror.index))
    assert isinstance(pg_lanes["lexical"], PostgresBm25Lane)
    compared = 0
    for query in [*AND_QUERIES, "neural neural networks", "café", "cafe", "zzzunknown graph"]:
        request = make_request(query, filters=spec, pool=None)
        a = numpy_lane["lexical"].search(request, 10)
        b = pg_lanes["lexical"].search(request, 10)
        assert a.ids == b.ids, (query, a.ids, b.ids)
        assert [i.score for i in b.items] == pytest.approx([i.score for i in a.items], rel=1e-5)
        compared += len(a)
    assert compared >= 10  # the 12-paper fixture: filtered AND queries match few papers


@pytest.mark.parametrize("query", AND_QUERIES)
def test_same_matched_set(backends, query):
    sqlite, postgres = backends
    request = make_request(query, pool=None)
    matched = set()
    for name in ("lexical", "body"):
        a = set(sqlite[name].search(request, 1000).ids)
        b = set(postgres[name].search(request, 1000).ids)
        assert a == b, (name, query, a ^ b)
        matched |= a
    assert matched, f"{query!r} should match something"


def test_known_tokeniser_difference_diacritics(backends):
    """Pinned so a change in either engine is noticed: only FTS5 folds accents."""
    sqlite, postgres = backends
    request = make_request("cafe", pool=None)
    assert sqlite["lexical"].search(request, 10).ids == ("p11",)
    assert postgres["lexical"].search(request, 10).ids == ()
    assert postgres["lexical"].search(make_request("café", pool=None), 10).ids == ("p11",)


@pytest.mark.parametrize(
    "spec", [None, {"year": "2019-2022"}, {"categories": ["astro-ph.GA"]}, {"authors": ["rubin"]}]
)
@pytest.mark.parametrize("query", ["galaxy images", "graph learning for chemistry", "number theory"])
def test_dense_edge_and_client_agree(built, built_client, encoder, query, spec):
    edge = Searcher(built.index, built.config).dense
    client = Searcher(built_client.index, built_client.config).dense
    request = make_request(query, encoder, spec, exact=True)
    a, b = edge.search(request, 5), client.search(request, 5)
    assert a.ids == b.ids
    assert [round(i.score, 4) for i in a.items] == [round(i.score, 4) for i in b.items]
