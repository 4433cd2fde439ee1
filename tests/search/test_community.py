"""Citation community expansion: the fixture's hand-drawn graph, and CACM's real one."""

from __future__ import annotations

import pytest

from scix_core.errors import QueryError
from scix_core.search import Searcher
from scix_core.search.community import SeedTooBroadError

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="module")
def searcher(built):
    return Searcher(built.index, built.config)


def test_seed_returns_its_community_ranked_by_closeness(searcher):
    result = searcher.community(["p04"], limit=10)
    assert set(result.ids) == {"p03", "p09", "p12"}
    assert result.ids[0] in ("p03", "p09")  # direct neighbours of p04 before p12, two hops away
    assert result.metadata["mode"] == "community" and result.metadata["community"]["community_size"] == 4
    assert all(h.lanes["community"].rank == i for i, h in enumerate(result.hits, start=1))


def test_two_seeds_union_their_communities(searcher):
    result = searcher.community(["p04", "p07"], limit=20)
    assert set(result.ids) == {"p01", "p02", "p03", "p08", "p09", "p12"}


def test_seed_too_broad_and_bad_seeds(built, searcher):
    narrow = Searcher(built.index, built.config.replace(**{"search.community_max": 3}))
    with pytest.raises(SeedTooBroadError, match="4 papers") as err:
        narrow.community(["p04"])
    assert err.value.code == "seed_too_broad"
    with pytest.raises(QueryError, match="unknown seed paper id"):
        searcher.community(["nope"])
    with pytest.raises(QueryError, match="at least one seed"):
        searcher.community([])
    lonely = searcher.community(["p05"])
    assert lonely.ids == () and lonely.metadata["community"]["seeds_without_links"] == ["p05"]


@pytest.mark.realdata
def test_cacm_communities(tmp_path, data_dir):
    from scix_core.config import load_config
    from scix_core.ingest import ingest

    cfg = load_config().replace(home=tmp_path, data_dir=data_dir)
    ingest(data_dir / "cacm", "cacm", config=cfg, embed=False, progress=False)
    searcher = Searcher("cacm", cfg)
    seed = searcher.store.conn.execute(
        "SELECT source FROM citations WHERE kind = 'direct' GROUP BY source ORDER BY count(*) DESC, source "
        "LIMIT 1"
    ).fetchone()[0]
    result = searcher.community([seed], limit=10)
    size = result.metadata["community"]["community_size"]
    assert 10 <= size < 3204 and len(result.hits) == 10
    cited = {
        r[0] for r in searcher.store.conn.execute("SELECT target FROM citations WHERE source = ?", [seed])
    }
    assert cited & set(result.ids), "the seed's own references should rank near the top"
    with pytest.raises(SeedTooBroadError):
        Searcher("cacm", cfg.replace(**{"search.community_max": size - 1})).community([seed])
