"""The feed: only the window's papers, ranked by the user's tier's pipeline on them, with provenance; the
window by listing day, by arrival since the last visit, or the newest day; bad input typed, an empty window
an empty list with its reason — through the library, the command line and the API. And the pool store the
feed ranks with answers as the real engine does under exact search."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from scix_core.append import append
from scix_core.config import load_config
from scix_core.errors import FilterError, UnknownUserError
from scix_core.ingest import ingest
from scix_core.recommend import Recommender, UserState
from scix_core.recommend.catalog import Catalog
from scix_core.recommend.feed import arrivals, window
from scix_core.recommend.interests import Neighbourhood, interest_rows
from scix_core.recommend.pool import PoolStore, within
from scix_core.vectors.base import VectorFilter
from tests.corpus import PAPERS
from tests.helpers import listing_file

pytestmark = pytest.mark.model

DAY1, DAY2 = dt.date(2025, 1, 1), dt.date(2025, 1, 2)
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
PAPERS_BY_ID = {p.paper_id: p for p in PAPERS}


def _day_file(folder: Path, day: dt.date, papers) -> Path:
    return listing_file(folder / f"{day.isoformat()}.jsonl", papers)


@pytest.fixture(scope="module")
def listed(tmp_path_factory, encoder):
    """An arXiv-format index: six papers listed on 2025-01-01, the other six appended as 2025-01-02."""
    folder = tmp_path_factory.mktemp("feed-days")
    cfg = load_config().replace(home=folder / "home")
    ingest(
        _day_file(folder, DAY1, PAPERS[:6]),
        "feed",
        "arxiv-jsonl",
        config=cfg,
        progress=False,
        encoder=encoder,
    )
    append(_day_file(folder, DAY2, PAPERS[6:]), "feed", config=cfg, progress=False, encoder=encoder)
    rec = Recommender("feed", cfg, persist_clusters=False)
    yield cfg, rec
    rec.close()


def _user(rec, name: str, saves=(), categories=()) -> str:
    rec.create_user(name, categories)
    for p in saves:
        rec.interact(name, p, "save")
    return name


def _days(rec, ids) -> set[str]:
    cat = rec.side.catalog
    return {dt.date.fromordinal(int(cat.listed[cat.row[p]])).isoformat() for p in ids}


def test_the_default_feed_is_the_newest_listing_day_ranked_by_the_users_tier(listed):
    _, rec = listed
    day1 = [p.paper_id for p in PAPERS[:6]]
    user = _user(rec, "clustered", saves=day1[:5])
    feed = rec.feed(user, limit=3)
    assert feed.window.by == "listing day" and feed.window.start == feed.window.newest == DAY2.isoformat()
    assert len(feed.window.rows) == 6 and feed.recommendations.tier == 1 and not feed.empty
    ranked = [i for i in feed.items if not i.exploration]
    assert len(ranked) == 3 and _days(rec, feed.recommendations.ids) == {DAY2.isoformat()}
    assert {i.source for i in ranked} <= {"cluster-knn", "supplement", "co-saved"}
    assert all(i.cluster_id is not None and i.mmr_position for i in ranked)  # the provenance is kept
    # each paper scored as the whole pipeline scores it over the index (MMR then picks among the window's)
    everything = {i.paper_id: i.score for i in rec.recommend(user, 12, log=False).items if not i.exploration}
    assert [i.score for i in ranked] == pytest.approx([everything[i.paper_id] for i in ranked], abs=1e-4)


def test_since_a_day_widens_the_window_and_never_returns_a_saved_paper(listed):
    _, rec = listed
    user = _user(rec, "widened", saves=[PAPERS[0].paper_id, PAPERS[6].paper_id, PAPERS[2].paper_id])
    feed = rec.feed(user, since="2025-01-01", limit=12)
    assert len(feed.window.rows) == 12 and feed.recommendations.tier == 2
    assert not set(feed.recommendations.ids) & {PAPERS[0].paper_id, PAPERS[6].paper_id, PAPERS[2].paper_id}
    assert _days(rec, feed.recommendations.ids) == {DAY1.isoformat(), DAY2.isoformat()}


def test_tier0_gets_the_windows_papers_in_its_categories(listed):
    _, rec = listed
    user = _user(rec, "newcomer", categories=["astro-ph.GA"])
    feed = rec.feed(user, since="2025-01-01")
    cat = rec.side.catalog
    assert feed.recommendations.tier == 0 and feed.items
    assert all("astro-ph.GA" in cat.codes[cat.row[p]] for p in feed.recommendations.ids)
    assert {p.paper_id for p in PAPERS if "astro-ph.GA" in p.categories} == set(feed.recommendations.ids)
    today = rec.feed(user)  # 2025-01-02: p09 and p12 are astro-ph.GA
    assert set(today.recommendations.ids) == {"p09", "p12"}
    nothing = rec.feed(_user(rec, "vision", categories=["cs.CV"]))  # p02, the only cs.CV paper, is of the 1st
    assert (
        not nothing.items and "none of the window's 6 papers is in your categories (cs.CV)" in nothing.empty
    )


def test_bad_input_is_typed_and_an_empty_window_says_why(listed):
    _, rec = listed
    user = _user(rec, "careful", saves=[PAPERS[0].paper_id])
    for bad in ("2025-13-01", "yesterday", "2025/01/02"):
        with pytest.raises(FilterError, match="YYYY-MM-DD or 'last-visit'"):
            rec.feed(user, since=bad)
    with pytest.raises(UnknownUserError):
        rec.feed("nobody-here")
    future = rec.feed(user, since="2030-01-01")
    assert not future.items and len(future.window.rows) == 0 and "nothing in the window" in future.empty
    assert future.to_dict()["empty"] == future.empty


def test_last_visit_opens_the_window_at_the_previous_read(tmp_path, encoder):
    cfg = load_config().replace(home=tmp_path / "home")
    ingest(
        _day_file(tmp_path, DAY1, PAPERS[:6]),
        "visits",
        "arxiv-jsonl",
        config=cfg,
        progress=False,
        encoder=encoder,
    )
    rec = Recommender("visits", cfg, persist_clusters=False)
    try:
        user = _user(rec, "reader", saves=[PAPERS[0].paper_id])
        first = rec.feed(user, since="last-visit")  # no visit yet: the newest day
        assert first.window.start == DAY1.isoformat() and len(first.window.rows) == 6
        again = rec.feed(user, since="last-visit")  # nothing arrived since
        assert (
            again.window.by == "arrival"
            and not again.items
            and "arrived since your last visit" in again.empty
        )
        peek = rec.feed(user, since="last-visit", visit=False)
        assert not peek.items
    finally:
        rec.close()
    append(_day_file(tmp_path, DAY2, PAPERS[6:9]), "visits", config=cfg, progress=False, encoder=encoder)
    rec = Recommender("visits", cfg, persist_clusters=False)
    try:
        news = rec.feed("reader", since="last-visit", visit=False)
        assert sorted(rec.side.catalog.ids[r] for r in news.window.rows) == [p.paper_id for p in PAPERS[6:9]]
        assert set(news.recommendations.ids) <= {p.paper_id for p in PAPERS[6:9]} and news.items
        assert rec.feed("reader", since="last-visit").items  # not a visit: the window was still open
        assert not rec.feed("reader", since="last-visit").items
    finally:
        rec.close()


def test_a_corpus_without_listing_days_is_dated_by_arrival():
    ids = ("a", "b", "c", "d")
    cat = Catalog("t", ids, {p: i for i, p in enumerate(ids)}, ((),) * 4, "none", np.full(4, -1), np.zeros(4))
    manifest = {
        "built_at": "2025-03-01T08:00:00+00:00",
        "appends": [{"at": "2025-03-04T06:00:00+00:00", "first_new": 2, "added": 2}],
    }
    assert arrivals(manifest, 4).tolist() == [1740816000.0] * 2 + [1741068000.0] * 2
    today = window(cat, manifest, None, None)
    assert (today.by, today.start, today.rows.tolist()) == ("arrival", "2025-03-04", [2, 3])
    assert window(cat, manifest, "2025-03-01", None).rows.tolist() == [0, 1, 2, 3]
    visit = dt.datetime(2025, 3, 2, tzinfo=dt.UTC)
    assert window(cat, manifest, "last-visit", visit).rows.tolist() == [2, 3]
    legacy = window(cat, {}, None, None)  # built before arrival times were recorded
    assert not len(legacy.rows) and "scix ingest --force" in legacy.described


def test_the_pool_store_answers_as_the_engine_under_exact_search(rec_indexes):
    rec = Recommender(rec_indexes.edge, rec_indexes.config, persist_clusters=False)
    try:
        side = rec.side
        rows = np.arange(len(side.catalog))
        pool = within(side, rows).store
        assert isinstance(pool, PoolStore) and pool.count() == len(rows)
        q = side.vectors.get([0, 3]).mean(axis=0)
        flt = VectorFilter(exclude_points=(3,))
        want = side.store.search(q, 6, flt, exact=True)
        got = pool.search(q, 6, flt)
        assert [h.point_id for h in got] == [h.point_id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)
        batch = pool.search_batch(side.vectors.get([1, 2]), [3, 5], flt, ids=False)
        assert [[h.point_id for h in hits] for hits in batch] == [
            [h.point_id for h in hits]
            for hits in side.store.search_batch(side.vectors.get([1, 2]), [3, 5], flt, exact=True)
        ]
        pos, neg = side.vectors.get([0, 1]), side.vectors.get([5])
        examples = VectorFilter(exclude_points=(0, 1, 5))  # as Tier 3 asks: never the examples themselves
        assert [h.point_id for h in pool.recommend(pos, neg, 8, examples)] == [
            h.point_id for h in side.store.recommend(pos, neg, 8, examples, exact=True)
        ]
        some = within(side, [2, 4, 6]).store
        assert {h.point_id for h in some.search(q, 10)} == {2, 4, 6}
        with pytest.raises(Exception, match="evaluates exclude_points only"):
            some.search(q, 3, VectorFilter(year_min=2000))
    finally:
        rec.close()


def test_over_a_pool_every_tier_also_takes_the_papers_nearest_the_neighbours_heaviest_interests(
    rec_indexes, tmp_path
):
    """``interest_rows`` by hand on real vectors: the pool papers nearest each of the neighbourhood's ``n``
    heaviest interests, ``pool_interest_hits`` each, the heaviest first, none taken or seen twice, none
    outside a pool; and over a pool with neighbours Tier 3 takes them as candidates and Tier 1 as its stage
    6c, each a candidate in the cluster nearest it."""
    state = UserState(tmp_path / "s.sqlite")
    for i in range(3):  # three users saved p01 and p05, far apart in content
        state.import_library(rec_indexes.edge, f"other-{i}", ["p01", "p05"], T0, [])
    cfg = rec_indexes.config.replace(**{"recommend.pool_interest_hits": 2})
    rec = Recommender(rec_indexes.edge, cfg, state=state, build_community=False)
    pooled_recs = []
    try:
        side, row = rec.side, rec.side.catalog.row
        rec.create_user("me", [])
        rec.interact("me", "p01", "save")
        ctx = rec.context("me")
        rows = [r for r in range(len(side.catalog)) if r != row["p01"]]
        pooled = within(side, rows)
        # two interests by hand: the heavier at p09, the lighter at p05
        centroids = side.vectors.get([row["p09"], row["p05"]])
        hood = Neighbourhood(centroids, np.array([0, 1]), np.array([1, 1]), np.array([0.7, 0.3]), 2)
        sims = side.vectors.get(rows) @ centroids.T
        nearest = [[rows[i] for i in np.argsort(-sims[:, k], kind="stable")[:2]] for k in (0, 1)]
        assert nearest[0][0] == row["p09"] and nearest[1][0] == row["p05"]
        want = list(dict.fromkeys(nearest[0] + nearest[1]))
        assert interest_rows(pooled, ctx, hood, set(), 2) == want
        taken = {row["p09"]}
        assert interest_rows(pooled, ctx, hood, taken, 2) == [r for r in want if r != row["p09"]]
        assert taken == set(want)  # what it took is taken
        assert interest_rows(pooled, ctx, hood, set(), 1) == nearest[0]
        assert interest_rows(side, ctx, hood, set(), 2) == []  # no pool: the co-saved papers do this
        assert interest_rows(pooled, ctx, None, set(), 2) == []
        # Tier 3 over the pool: the others' interest (their libraries of p01 and p05) brings its nearest
        # pool papers to the few content hits of a short list (and to the one co-saved paper let in: in this
        # 12-paper fixture the bridge gives every pool paper a co-save estimate)
        few = cfg.replace(**{"recommend.cosave_candidates": 1, "recommend.pool_interest_hits": 6})
        pooled_recs.append(Recommender(rec_indexes.edge, few, state=state, build_community=False, pool=rows))
        result = pooled_recs[-1].recommend("me", limit=1, log=False)
        summary = result.stages[0].summary
        assert result.tier == 3 and summary["neighbours"] == 3 and summary["neighbour_interest"] >= 1
        assert summary["pool"] == 3 + 1 + summary["neighbour_interest"]
        assert {i.source for i in result.items} <= {"vector", "neighbour-interest", "co-saved"}
        # Tier 1 (five saves) over a pool: stage 6c adds what the earlier stages did not find
        for paper in ("p07", "p03", "p04", "p06"):
            rec.interact("me", paper, "save")
        for other in range(3):
            state.import_library(rec_indexes.edge, f"more-{other}", ["p07", "p11", "p12"], T0, [])
        saved = {row[p] for p in ("p01", "p07", "p03", "p04", "p06")}
        narrow = few.replace(  # a cluster's kNN of one paper, nothing else found: room for stage 6c
            **{
                "recommend.total_slots": 2,
                "recommend.min_slots": 1,
                "recommend.oversample": 1,
                "recommend.shortterm_supplement": 0,
            }
        )
        pooled_recs.append(
            Recommender(rec_indexes.edge, narrow, state=state, build_community=False, pool=rows)
        )
        tier1 = pooled_recs[-1].recommend("me", limit=1, log=False)
        stage = tier1.stage("neighbour-interest")
        assert tier1.tier == 1 and stage.summary["neighbours"] >= 3 and stage.summary["added"] >= 1
        before = {c.row for c in tier1.stage("co-saved").output}
        added = [c for c in stage.output if c.row not in before]
        assert len(added) == stage.summary["added"] and all(c.source == "neighbour-interest" for c in added)
        assert not {c.row for c in added} & saved
        assert {c.cluster_id for c in added} <= {c.cluster_id for c in tier1.stage("quota").output}
        outside = rec.recommend("me", limit=1, log=False).stage("neighbour-interest")  # not over a pool
        assert outside.summary["added"] == 0 and "not over a pool" in outside.summary["reason"]
    finally:
        for r in (rec, *pooled_recs):
            r.close()


def test_over_a_pool_tiers_3_and_2_weigh_the_co_save_estimate_by_their_pool_weights(rec_indexes, tmp_path):
    """Over a pool a tier scores weight_cosine · similarity + pool_community_weight (Tier 3;
    tier2_pool_community_weight in Tier 2) · the co-save score (a pool paper nobody saved: its text's
    estimate); outside a pool community_weight and tier2_community_weight, as before."""
    state = UserState(tmp_path / "s.sqlite")
    for i in range(3):
        state.import_library(rec_indexes.edge, f"other-{i}", ["p01", "p07", "p03", "p05"], T0, [])
    cfg = rec_indexes.config.replace(
        **{"recommend.pool_community_weight": 3.0, "recommend.tier2_pool_community_weight": 5.0}
    )
    rec = Recommender(rec_indexes.edge, cfg, state=state, build_community=False)
    recs = [rec]
    try:
        row = rec.side.catalog.row
        saved = {row[p] for p in ("p01", "p07", "p03")}
        rows = [r for r in range(len(rec.side.catalog)) if r not in saved]
        pooled = Recommender(rec_indexes.edge, cfg, state=state, build_community=False, pool=rows)
        recs.append(pooled)
        rec.create_user("me", [])
        r = cfg.recommend
        for saves, tier, in_pool, outside in ((["p01"], 3, 3.0, 1.0), (["p07", "p03"], 2, 5.0, 1.25)):
            for paper in saves:
                rec.interact("me", paper, "save")
            assert (getattr(r, "community_weight" if tier == 3 else "tier2_community_weight")) == outside
            for recommender, weight in ((pooled, in_pool), (rec, outside)):
                result = recommender.recommend("me", limit=4, log=False)
                assert result.tier == tier
                assert any(dict(i.scores)["cosave"] > 0 for i in result.items)
                for item in result.items:
                    scores = dict(item.scores)
                    sim = scores.get("best_score", scores.get("longterm_sim"))
                    assert item.score == pytest.approx(r.weight_cosine * sim + weight * scores["cosave"])
    finally:
        for each in recs:
            each.close()


def test_feed_from_the_command_line_and_the_api(listed, monkeypatch, capsys):
    from fastapi.testclient import TestClient

    from scix_core.cli.main import main
    from scix_core.serve.app import create_app

    cfg, rec = listed
    user = _user(rec, "everywhere", saves=[p.paper_id for p in PAPERS[:5]])
    monkeypatch.setenv("SCIX_HOME", str(cfg.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    assert main(["feed", "--index", "feed", "--user", user, "--json", "--limit", "4", "--no-visit"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["window"]["start"] == DAY2.isoformat() and out["tier"] == 1 and out["items"]
    assert main(["feed", "--index", "feed", "--user", user, "--since", "2025-01-01", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "12 papers listed on or after 2025-01-01" in text and "stages" in text
    assert main(["feed", "--index", "feed", "--user", user, "--since", "soon"]) == 2
    assert "invalid_filter" in capsys.readouterr().err
    with TestClient(create_app("feed", cfg)) as client:
        r = client.get("/api/feed", params={"user": user, "limit": 3})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["window"]["papers"] == 6 and _days(rec, [i["paper_id"] for i in body["items"]]) == {
            DAY2.isoformat()
        }
        assert client.get("/api/feed", params={"user": user, "since": "2025-02-30"}).status_code == 422
        assert client.get("/api/feed", params={"user": "ghost"}).status_code == 404
        visited = client.get("/api/feed", params={"user": user, "since": "last-visit"}).json()
        assert visited["window"]["by"] == "arrival" and visited["empty"]  # the first request was a visit


def test_the_digest_renders_each_paper_with_why_and_its_save_is_instant(listed):
    import time

    from scix_core.notebook import DigestView

    cfg, rec = listed
    user = _user(rec, "digest-reader", saves=[p.paper_id for p in PAPERS[:5]])
    view = DigestView("feed", user=user, config=cfg, limit=4)
    page = view.render().html
    ranked = [i for i in view.feed.items if not i.exploration]
    assert ranked and all(PAPERS_BY_ID[i.paper_id].title in page for i in ranked)
    assert page.count('class="paper') == len(view.feed.items) and "nearest saved paper" in page
    assert "interest cluster" in page and "heuristic 0." in page and "listed 2025-01-02" in page
    first = ranked[0].paper_id
    t = time.perf_counter()
    view.rec.interact(user, first, "save")
    assert time.perf_counter() - t < 1.0  # a save fits nothing
    again = view.act(first, "dismiss").html  # and the digest is ranked again without it
    assert f'data-paper="{first}"' not in again
    assert rec.state.last_visit("feed", user) is None  # reading a digest is not a feed visit
    # a page of 4: a library of few interests gets the 4th pick spread, and the digest says why it is there
    short = DigestView("feed", user=user, config=cfg.replace(**{"recommend.limit": 4}), limit=4)
    page = short.render().html
    mmr = short.feed.recommendations.stage("mmr").summary
    clusters = short.feed.recommendations.stage("cluster").summary["k"]
    assert clusters <= cfg.recommend.pool_spread_clusters and page.count("picked to spread the page") == 1
    assert mmr["spread_pick"] == [i for i in short.feed.items if not i.exploration][3].paper_id
    short.rec.close()
