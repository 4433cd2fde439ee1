"""The recommender on real data: CiteULike-a libraries (Tiers 1-3, tags as codes) and the arXiv listings
(Tier 0 windows, category suppression on real codes, dates decoded from real ids)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from scix_core.config import load_config
from scix_core.data.arxiv_ids import published_from_id
from scix_core.recommend import Recommender
from scix_core.recommend.catalog import months
from scix_core.recommend.context import IndexSide, UserContext
from scix_core.recommend.library import library_saves
from scix_core.recommend.stages.base import Candidate, Tier1State
from scix_core.recommend.stages.suppress import Suppress, suppressed_codes
from scix_core.recommend.state import Event, User

pytestmark = [pytest.mark.realdata]


@pytest.fixture(scope="session")
def citeulike(citeulike_home):
    return citeulike_home


@pytest.fixture(scope="session")
def arxiv(tmp_path_factory, data_dir):
    """Two of the real arXiv listing files (astro-ph and math.NT: 16,434 papers, cs.CL among their primary
    codes and cross-lists) without vectors: Tier 0 and the catalog. The third (cs.AI, 74,728 papers) would
    only make the ingest five times longer; the whole listings are the recommendation bench's."""
    from scix_core.ingest import ingest

    listings = tmp_path_factory.mktemp("arxiv-listings")
    for name in ("astro_ph_daily.jsonl.gz", "math_nt_daily.jsonl.gz"):
        (listings / name).symlink_to(data_dir / "arxiv-daily" / name)
    cfg = load_config().replace(home=tmp_path_factory.mktemp("arxiv-home"), data_dir=data_dir)
    ingest(listings, "arxiv", config=cfg, progress=False, embed=False)
    return cfg


def _library(cfg, user: str) -> list[str]:
    from scix_core.workspace import Workspace

    return library_saves(Workspace(cfg.home).index_dir("cul"))[user]


@pytest.mark.model
def test_import_is_idempotent_and_flags_synthetic_times(citeulike):
    from scix_core.recommend.library import import_libraries

    rec = Recommender("cul", citeulike)
    again = import_libraries(rec, ["0", "1"])
    assert (again.users, again.skipped_users) == (0, 2)
    ctx = rec.context("0")
    assert len(ctx.saved) == len(_library(citeulike, "0")) and all(e.synthetic for e in ctx.events)
    assert [e.paper_id for e in ctx.events] == _library(citeulike, "0")  # file order kept


@pytest.mark.model
@pytest.mark.parametrize("saves, tier", [(1, 3), (3, 2), (5, 1), (None, 1)])
def test_real_libraries_truncated_to_each_tier(citeulike, saves, tier):
    rec = Recommender("cul", citeulike)
    source = next(u["user"] for u in rec.state.users("cul") if u["saves"] >= 50)
    library = _library(citeulike, source)[:saves]
    user = f"{source}-first-{saves or 'all'}"
    rec.create_user(user, [])
    for i, paper in enumerate(library):
        rec.interact(user, paper, "save", at=dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i))
    result = rec.recommend(user, limit=10)
    assert result.tier == tier, result.reason
    assert not set(result.ids) & set(library)
    expected = 10 + (2 if tier == 1 else 0)
    assert len(result.items) == expected and len(set(result.ids)) == expected
    if tier == 1:
        clusters = result.stage("quota").output
        assert sum(c.quota for c in clusters) == 100 and all(c.quota >= 3 for c in clusters)
        assert {i.source for i in result.items} <= {"cluster-knn", "supplement", "co-saved", "exploration"}
        assert sum(i.exploration for i in result.items) == 2
        inside = {c.cluster_id for c in clusters}
        assert all(i.cluster_id in inside for i in result.items)


@pytest.mark.model
def test_a_fifty_save_user_gets_stable_clusters_and_deterministic_results(citeulike):
    rec = Recommender("cul", citeulike)
    user = next(u["user"] for u in rec.state.users("cul") if u["saves"] >= 50)
    first = rec.recommend(user, log=False)
    second = rec.recommend(user, log=False)
    assert first.ids == second.ids
    ids = [c.cluster_id for c in second.stage("match").output]
    assert all(c.matched_from == c.cluster_id for c in second.stage("match").output)  # persisted, then kept
    assert sorted(ids) == sorted(c.cluster_id for c in first.stage("match").output)
    assert second.stage("cluster").summary["k"] >= 1 and set(
        second.stage("cluster").summary["silhouettes"]
    ) >= {2}
    # the user saves a top recommendation: the interests stay, so do most ids
    rec.interact(user, second.items[0].paper_id, "save")
    third = rec.recommend(user, log=False)
    kept = [c for c in third.stage("match").output if c.matched_from is not None]
    assert len(kept) >= len(ids) - 1 and second.items[0].paper_id not in third.ids


@pytest.mark.model
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "hnsw"])
def test_tier3_congruent_on_real_libraries(citeulike_client, monkeypatch, exact):
    """qdrant-edge and qdrant-client (exact reference) recommend the same ids; with HNSW (the default)
    nearly."""
    monkeypatch.setenv("SCIX_QDRANT_EXACT", "1" if exact else "0")
    results = {}
    for index in ("cul", "cul-client"):  # the vector stores compared: content only (the states' users differ)
        rec = Recommender(index, citeulike_client.replace(**{"recommend.community_tiers": False}))
        for source in ("3", "4", "5"):
            library = _library(citeulike_client, source)
            user = f"congruence-{source}-{exact}"
            rec.create_user(user, [])
            rec.interact(user, library[0], "save")
            rec.interact(user, library[1], "save")
            rec.interact(user, library[2], "dismiss")
            results[index, source] = rec.recommend(user, limit=20, log=False)
    for source in ("3", "4", "5"):
        edge, client = results["cul", source], results["cul-client", source]
        assert edge.tier == client.tier == 3
        if exact:
            assert edge.ids == client.ids
            assert [i.score for i in edge.items] == pytest.approx([i.score for i in client.items], abs=1e-4)
        else:
            assert len(set(edge.ids) & set(client.ids)) >= 17, (source, edge.ids, client.ids)


@pytest.mark.model
def test_tag_suppression_in_the_tier1_pipeline(citeulike):
    rec = Recommender("cul", citeulike)
    cat = rec.side.catalog
    user = next(u["user"] for u in rec.state.users("cul") if u["saves"] >= 50)
    probe = rec.recommend(user, log=False)
    pool = probe.stage(
        "score"
    ).output  # the tag most of the candidates carry; dismiss three papers outside the pool
    tag = Counter(t for c in pool for t in cat.codes[c.row]).most_common(1)[0][0]
    in_pool = {c.paper_id for c in pool}
    victims = [
        p
        for p in cat.ids
        if tag in cat.codes[cat.row[p]] and p not in rec.context(user).seen and p not in in_pool
    ][:3]
    clone = f"{user}-suppress"
    rec.create_user(clone, [])
    for i, paper in enumerate(_library(citeulike, user)):
        rec.interact(clone, paper, "save", at=dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i))
    for d, paper in enumerate(victims):
        rec.interact(clone, paper, "dismiss", at=dt.datetime(2024, 2, 1) + dt.timedelta(days=d))
    result = rec.recommend(clone, log=False)
    assert tag in result.stage("suppress").output and result.stage("suppress").summary["removed"] >= 1
    assert all(tag not in i.codes for i in result.items)


@pytest.mark.model
def test_citeulike_tier0_uses_tags_and_says_it_has_no_dates(citeulike):
    rec = Recommender("cul", citeulike)
    tag = "bioinformatics"
    rec.create_user("tags-0", [tag])
    result = rec.recommend("tags-0", log=False)
    assert result.tier == 0 and all(tag in i.codes for i in result.items)
    scores = [i.score for i in result.items]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert any("no publication dates" in n for n in result.notes)


def test_arxiv_tier0_window_from_the_newest_paper_with_id_dates(arxiv):
    rec = Recommender("arxiv", arxiv)
    cat = rec.side.catalog
    assert all(
        cat.month[cat.row[p]] == months(published_from_id(p)) for p in cat.ids[:2000] if published_from_id(p)
    )
    code = "astro-ph.GA"
    rec.create_user("astro", [code])
    result = rec.recommend("astro", limit=25)
    newest = cat.newest_month
    assert result.tier == 0 and result.stage("trending").summary["window_months"] == 24
    for item in result.items:
        assert code in item.codes and newest - cat.month[cat.row[item.paper_id]] < 24
    assert any("no citation data" in n for n in result.notes)  # the listings carry no citation graph
    ranked_months = [cat.month[cat.row[i]] for i in result.ids]
    assert ranked_months == sorted(ranked_months, reverse=True)  # recency alone, newest first


def test_arxiv_thin_categories_widen_the_window(arxiv):
    rec = Recommender("arxiv", arxiv)
    cat = rec.side.catalog
    age = cat.newest_month - cat.month
    counts: dict[str, list[int]] = {}
    for row, codes in enumerate(cat.codes):
        for code in codes:
            counts.setdefault(code, [0, 0])[0 if age[row] < 24 else 1] += 24 <= age[row] < 96 or age[row] < 24
    # a real code with fewer than 10 papers in the last 24 months but older ones within 96
    thin = next(c for c, (recent, older) in sorted(counts.items()) if 0 < recent < 10 and older > 0)
    rec.create_user("thin", [thin])
    result = rec.recommend("thin", limit=10)
    assert result.stage("trending").summary["window_months"] > 24
    assert any("window widened" in n for n in result.notes)
    assert len(result.items) == min(10, sum(counts[thin]))
    assert any(age[cat.row[i]] >= 24 for i in result.ids) and all(age[cat.row[i]] < 96 for i in result.ids)


def test_arxiv_suppression_counts_primary_codes_in_the_window(arxiv):
    rec = Recommender("arxiv", arxiv)
    cat = rec.side.catalog
    cl = [p for p in cat.ids if cat.primary(cat.row[p]) == "cs.CL"][:4]
    cross = [p for p in cat.ids if "cs.CL" in cat.codes[cat.row[p]][1:]][:3]  # cs.CL only cross-listed
    t = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    events = [Event(i, p, "dismiss", t + dt.timedelta(days=i)) for i, p in enumerate(cl[:3])]
    assert suppressed_codes(events, cat, 3, 14) == {"cs.CL": 3}
    assert "cs.CL" not in suppressed_codes(
        [Event(i, p, "dismiss", t) for i, p in enumerate(cross)], cat, 3, 14
    )
    spread = [
        Event(0, cl[0], "dismiss", t),
        Event(1, cl[1], "dismiss", t + dt.timedelta(days=10)),
        Event(2, cl[2], "dismiss", t + dt.timedelta(days=20)),
    ]
    assert suppressed_codes(spread, cat, 3, 14) == {}  # 20 days from first to newest: two in the window
    # the stage drops every candidate whose primary code is suppressed, keeps cross-lists' own primaries
    side = IndexSide("arxiv", "", cat, rec.config.recommend)
    ctx = UserContext.build(User("x", (), ""), events, {})
    pool = [cl[3], *cross]
    state = Tier1State(
        side, ctx, 10, scored=tuple(Candidate(p, cat.row[p], "cluster-knn", 0, 0.5) for p in pool)
    )
    out, summary = Suppress().run(state)
    assert [c.paper_id for c in out.kept] == cross and summary["removed"] == 1
