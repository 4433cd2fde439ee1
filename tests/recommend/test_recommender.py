"""The tiered recommender on real engines (SQLite, qdrant-edge, qdrant-client, MiniLM) over the fixture
corpus."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from scix_core.errors import (
    ConfigError,
    InteractionError,
    UnknownNameError,
    UnknownPaperError,
    UnknownUserError,
)
from scix_core.recommend import Recommender
from scix_core.recommend.profile import ewma, profile_tag
from scix_core.recommend.recommender import NON_NEGATIVE
from scix_core.recommend.reuse import REUSED
from scix_core.recommend.state import utc_text
from tests.corpus import BY_ID

pytestmark = pytest.mark.model

LEARNING = ["p01", "p07", "p02", "p08", "p09"]  # ML-ish papers, saved in this order


def test_tiers_cascade_with_the_save_counts_and_say_what_unlocks_next(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    assert rec.create_user(user, ["cs.LG"]) == "created"
    seen = []
    expected = {
        0: (0, "1 more save unlocks"),
        1: (3, "2 more saves unlock profile"),
        2: (3, "1 more save unlocks profile"),
        3: (2, "2 more saves unlock clustered"),
        4: (2, "1 more save unlocks clustered"),
        5: (1, None),
    }
    for saves in range(6):
        if saves:
            rec.interact(user, LEARNING[saves - 1], "save")
            seen.append(LEARNING[saves - 1])
        result = rec.recommend(user, limit=3)
        tier, message = expected[saves]
        assert result.tier == tier, (saves, result.reason)
        assert (result.next_tier is None) if message is None else result.next_tier.startswith(message)
        assert f"{saves} saves" in result.reason
        assert not set(result.ids) & set(seen), "a saved paper came back"
        assert result.items and all(i.tier == tier for i in result.items)
    assert rec.create_user(user, ["cs.LG", "astro-ph.GA"]) == "updated"


def test_tier0_trending_by_the_onboarding_categories(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, ["astro-ph.GA"])
    result = rec.recommend(user, limit=10)
    # astro-ph.GA papers: p03 (2020), p04 (2018), p09 (2022), p12 (2023); newest paper 2023-06 -> 24 months:
    # p09, p12 too few for 10: widened to 96 months (all four); p03 is cited 3 times (by p04, p12, p09), p04
    # once (p09), p09 once (p12): the tie goes to the newer p09; p12 is uncited
    assert result.ids == ("p03", "p09", "p04", "p12")
    assert [i.score for i in result.items] == [3, 1, 1, 0]
    assert result.stage("trending").summary["window_months"] == 96
    assert all(i.source == "trending" for i in result.items) and result.items[0].title == BY_ID["p03"].title


def test_dismissed_and_saved_papers_never_come_back_in_any_tier(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, ["cs.LG"])
    rec.interact(user, "p09", "dismiss")
    assert "p09" not in rec.recommend(user, limit=12).ids  # tier 0
    for n, paper in enumerate(["p01", "p03", "p07", "p04", "p06"], start=1):
        rec.interact(user, paper, "save")
        rec.interact(user, ["p02", "p11", "p10", "p05", "p08"][n - 1], "dismiss")
        result = rec.recommend(user, limit=12)
        assert not set(result.ids) & (rec.context(user).seen), (result.tier, result.ids)


def test_tier1_pipeline_records_every_stage_and_returns_limit_plus_exploration(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04", "p06"]:
        rec.interact(user, paper, "save")
    result = rec.recommend(user, limit=3)
    assert result.tier == 1 and result.tier_name == "clustered"
    assert [s.name for s in result.stages] == [
        "vectors",
        "cluster",
        "match",
        "quota",
        "candidates",
        "supplement",
        "co-saved",
        "neighbour-interest",
        "score",
        "suppress",
        "mmr",
        "explore",
    ]
    clusters = result.stage("quota").output
    assert sum(c.quota for c in clusters) == 100 and all(c.quota >= 3 for c in clusters)
    assert sorted(p for c in clusters for p in c.members) == sorted(["p01", "p07", "p03", "p04", "p06"])
    picked = [i for i in result.items if not i.exploration]
    explore = [i for i in result.items if i.exploration]
    assert len(picked) == 3 and [i.mmr_position for i in picked] == [1, 2, 3]
    assert len(result.items) <= 3 + 2 and all(
        i.source == "exploration" and i.mmr_position is None for i in explore
    )
    for item in picked:
        scores = dict(item.scores)
        assert item.source in ("cluster-knn", "supplement", "co-saved") and item.cluster_id in {
            c.cluster_id for c in clusters
        }
        assert scores["heuristic"] == pytest.approx(
            0.65 * scores["cosine"]  # the default: cosine heuristic
            + rec.config.recommend.weight_cosave * scores["cosave"]
        )  # others' saves
    assert result.scorer["scoring_with"] == "heuristic" and rec.health()["last_scored_with"] == "heuristic"
    frame = result.to_frame()
    assert list(frame["paper_id"]) == list(result.ids) and "longterm_sim" in frame
    assert '"tier": 1' in result.to_json()


def test_cluster_ids_survive_a_recluster(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04", "p06", "p09"]:
        rec.interact(user, paper, "save")
    first = {c.medoid: c.cluster_id for c in rec.recommend(user).stage("match").output}
    rec.interact(user, "p12", "save")  # one more astronomy paper: the same interests
    again = rec.recommend(user).stage("match").output
    assert {c.medoid: c.cluster_id for c in again if c.medoid in first}.items() <= first.items()
    assert all(c.matched_from == c.cluster_id for c in again if c.medoid in first)
    stored, next_id = rec.state.clusters(rec.index, user)
    assert {c.cluster_id for c in stored} == {c.cluster_id for c in again} and next_id > max(first.values())


def test_a_served_list_leaves_its_medoids_and_log_row_until_the_answer_has_gone_out(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.log": True}))
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04", "p06", "p09"]:
        rec.interact(user, paper, "save")
    result, finish = rec.serve(user, limit=4)
    assert result.tier == 1 and result.stage("match").output
    # what a server writes after answering is not written yet: no medoids, no log row
    assert rec.state.clusters(rec.index, user) == ([], 0) and not rec.state.served(rec.index, user)
    at = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC)
    finish(at)
    stored, next_id = rec.state.clusters(rec.index, user)
    assert {c.cluster_id for c in stored} == {c.cluster_id for c in result.stage("match").output}
    assert next_id > max(c.cluster_id for c in stored)
    (row,) = rec.state.served(rec.index, user)
    assert row["at"] == utc_text(at) and [i["paper_id"] for i in row["items"]] == list(result.ids)
    # a plain recommend writes both before it returns; the medoids read back match them again
    again = rec.recommend(user, limit=4)
    assert again.ids == result.ids and len(rec.state.served(rec.index, user)) == 2
    assert all(c.matched_from == c.cluster_id for c in again.stage("match").output)


def test_profiles_are_persisted_and_equal_the_ewma_of_the_saves(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.community_tiers": False}))
    rec.create_user(user, [])
    for paper in ["p03", "p04", "p09"]:
        rec.interact(user, paper, "save")
    stored = Recommender(rec_indexes.edge, rec_indexes.config).state.profiles(rec.index, user)
    vecs = rec.side.vectors.get(rec.side.rows(["p03", "p04", "p09"]))
    assert stored["long"].saves == 3 and stored["long"].vector == pytest.approx(ewma(vecs, 20.0), abs=1e-6)
    assert stored["short"].vector == pytest.approx(ewma(vecs, 3.0), abs=1e-6)
    assert stored["long"].model == profile_tag(rec.side)
    result = rec.recommend(user, limit=4)
    long = stored["long"].vector / np.linalg.norm(stored["long"].vector)
    sims = rec.side.vectors.get([rec.side.catalog.row[i] for i in result.ids]) @ long
    assert list(sims) == sorted(sims, reverse=True) and result.tier == 2


def test_profiles_stored_by_another_averaging_are_recomputed_when_read(rec_indexes, user):
    first = rec_indexes.config.replace(**{"recommend.ewma_start": "first"})
    old = Recommender(rec_indexes.edge, first)
    old.create_user(user, [])
    for paper in ["p03", "p04", "p09"]:
        old.interact(user, paper, "save")
    vecs = old.side.vectors.get(old.side.rows(["p03", "p04", "p09"]))
    assert old.state.profiles(old.index, user)["long"].vector == pytest.approx(
        ewma(vecs, 20.0, "first"), abs=1e-6
    )
    rec = Recommender(rec_indexes.edge, rec_indexes.config)  # corrected, the default
    assert rec.context(user).profiles["long"].vector == pytest.approx(ewma(vecs, 20.0), abs=1e-6)
    stored = rec.state.profiles(rec.index, user)
    assert {p.model for p in stored.values()} == {profile_tag(rec.side)} != {profile_tag(old.side)}
    assert stored["short"].vector == pytest.approx(ewma(vecs, 3.0), abs=1e-6)
    with pytest.raises(UnknownNameError, match="ewma_start"):
        Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.ewma_start": "last"}))


def test_tier3_edge_and_client_return_the_same_ids(rec_indexes, user):
    results = []
    for index in (rec_indexes.edge, rec_indexes.client):  # content only: the two indexes' communities differ
        rec = Recommender(index, rec_indexes.config.replace(**{"recommend.community_tiers": False}))
        rec.create_user(user, [])
        rec.interact(user, "p03", "save")
        rec.interact(user, "p01", "save")
        rec.interact(user, "p02", "dismiss")
        results.append(rec.recommend(user, limit=6))
    assert results[0].tier == results[1].tier == 3
    assert results[0].ids == results[1].ids and len(results[0].ids) == 6
    assert [i.score for i in results[0].items] == pytest.approx([i.score for i in results[1].items], abs=1e-4)


def test_index_without_vectors_degrades_to_trending_and_says_so(rec_indexes, user):
    rec = Recommender(rec_indexes.bare, rec_indexes.config)
    rec.create_user(user, ["cs.LG"])
    for paper in ["p01", "p07", "p03"]:
        rec.interact(user, paper, "save")
    result = rec.recommend(user)
    assert result.tier == 0 and "Tier 2 skipped" in result.reason and "Tier 3 skipped" in result.reason
    assert any("--no-embed" in n for n in result.notes) and not set(result.ids) & {"p01", "p07", "p03"}


def test_bad_input_is_a_typed_error_and_writes_nothing(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    with pytest.raises(UnknownUserError, match=user):
        rec.interact(user, "p01", "save")
    rec.create_user(user, [])
    with pytest.raises(UnknownPaperError, match="'nope'"):
        rec.interact(user, "nope", "save")
    with pytest.raises(InteractionError, match="'like'"):
        rec.interact(user, "p01", "like")
    with pytest.raises(InteractionError, match="'last tuesday'"):
        rec.interact(user, "p01", "save", at="last tuesday")
    with pytest.raises(InteractionError, match="outside the years"):
        rec.interact(user, "p01", "save", at="0001-01-01T00:00:00")
    with pytest.raises(InteractionError, match="control"):
        rec.create_user("bad\x00id", [])
    with pytest.raises(InteractionError, match="cs.LGG.*close: cs.LG"):
        rec.create_user(user, ["cs.LGG"])
    with pytest.raises(ConfigError, match="limit"):
        rec.recommend(user, limit=0)
    assert rec.state.events(rec.index, user) == [] and rec.state.profiles(rec.index, user) == {}


def test_a_paper_of_another_index_is_named_as_such(rec_indexes, user, tmp_path):
    from scix_core.data import Dataset
    from scix_core.ingest import ingest
    from scix_core.types import Paper

    ingest(
        Dataset("other", "python", (Paper("zz-1", "Another corpus entirely"),)),
        "rec-other",
        config=rec_indexes.config,
        progress=False,
        embed=False,
    )
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    with pytest.raises(
        UnknownPaperError, match="'zz-1' is not in index 'rec-edge' \\(it is a paper of index rec-other\\)"
    ):
        rec.interact(user, "zz-1", "save")


def test_thresholds_are_configuration(rec_indexes, user):
    cfg = rec_indexes.config.replace(**{"recommend.tier1_min_saves": 2, "recommend.tier2_min_saves": 2})
    rec = Recommender(rec_indexes.edge, cfg)
    rec.create_user(user, [])
    rec.interact(user, "p01", "save")
    assert rec.recommend(user).next_tier == "1 more save unlocks profile-based recommendations (Tier 2)"
    rec.interact(user, "p03", "save")
    assert rec.recommend(user).tier == 1
    with pytest.raises(ConfigError, match="thresholds"):
        Recommender(rec_indexes.edge, rec_indexes.config.replace(**{"recommend.tier3_min_saves": 9}))
    for name in NON_NEGATIVE:  # each named alone when it is the one below zero
        with pytest.raises(ConfigError, match=rf"^recommend\.{name} must be >= 0, not -1"):
            Recommender(rec_indexes.edge, rec_indexes.config.replace(**{f"recommend.{name}": -1}))
    for bad, match in (
        ({"recommend.mmr_tail_lambda": 1.5}, "mmr_tail_lambda"),
        ({"recommend.tier2_tail_every": 0}, "tier2_tail_every"),
        ({"recommend.cosave_per_slot": -1.0}, "cosave_per_slot"),
        ({"recommend.tier_weights_at": 0}, "tier_weights_at must be a list length"),
    ):
        with pytest.raises(ConfigError, match=match):
            Recommender(rec_indexes.edge, rec_indexes.config.replace(**bad))


def test_every_recommendation_served_is_logged(rec_indexes, user):
    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, ["cs.LG"])
    result = rec.recommend(user, limit=2)
    rec.recommend(user, limit=2, log=False)
    served = rec.state.served(rec.index, user)
    assert (
        len(served) == 1
        and served[0]["tier"] == 0
        and [i["paper_id"] for i in served[0]["items"]] == list(result.ids)
    )


def test_concurrent_saves_from_threads_keep_every_interaction_and_a_consistent_profile(rec_indexes, user):
    from concurrent.futures import ThreadPoolExecutor

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    papers = ["p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08"]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: rec.interact(user, p, "save"), papers))
    ctx = rec.context(user)
    assert sorted(ctx.saved) == papers and len(ctx.events) == 8
    # the stored profile is the EWMA of the saves in their stored order, whatever order the threads committed
    # in
    vecs = rec.side.vectors.get(rec.side.rows(ctx.saved))
    assert ctx.profiles["long"].vector == pytest.approx(ewma(vecs, 20.0), abs=1e-6)
    assert ctx.profiles["long"].saves == 8


def test_local_vectors_fall_back_to_the_embedding_cache_then_degrade_with_the_reason(tmp_path, encoder, user):
    import shutil

    from scix_core.config import load_config
    from scix_core.ingest import ingest
    from scix_core.vectors import close_readers
    from scix_core.vectors.local import FILE
    from tests.corpus import CORPUS

    cfg = load_config().replace(home=tmp_path / "home")
    report = ingest(CORPUS, "fallback", config=cfg, progress=False, encoder=encoder)
    copy = np.load(report.path / FILE)
    assert copy.dtype == np.float16 and copy.shape == (12, 384)
    (report.path / FILE).unlink()  # a build made before the local copy existed
    rec = Recommender("fallback", cfg)
    assert np.array_equal(rec.side.vectors.matrix, copy)
    rec.create_user(user, [])
    rec.interact(user, "p01", "save")
    assert rec.recommend(user).tier == 3
    close_readers()
    shutil.rmtree(cfg.home / "cache")
    from scix_core.recommend import catalog
    from scix_core.vectors import local

    local._OPEN.clear()
    catalog._CATALOGS.clear()
    result = Recommender("fallback", cfg).recommend(user)
    assert result.tier == 0 and "Tier 3 skipped" in result.reason and "scix ingest --force" in result.reason


def test_a_failing_tier_hands_over_to_the_next_and_says_why(rec_indexes, user):
    from scix_core.errors import BackendUnavailableError

    class Unreachable:
        number = 2

        def run(self, side, ctx, limit):
            raise BackendUnavailableError("cannot reach Qdrant at http://10.0.0.1:6333: timed out")

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.tiers[2] = Unreachable()
    rec.create_user(user, [])
    for paper in ["p01", "p03", "p07"]:
        rec.interact(user, paper, "save")
    result = rec.recommend(user)
    assert result.tier == 3 and "Tier 2 failed: backend_unavailable: cannot reach Qdrant" in result.reason
    assert result.items


def test_a_list_is_reused_until_the_user_or_the_community_changes(rec_indexes, user):
    cfg = rec_indexes.config.replace(**{"recommend.reuse_s": 30.0})
    rec, other_worker = Recommender(rec_indexes.edge, cfg), Recommender(rec_indexes.edge, cfg)
    rec.create_user(user, ["cs.LG"])
    trending = rec.recommend(user, limit=3)
    other_worker.create_user(user, ["astro-ph.GA"])  # new onboarding categories: Tier 0's list made anew
    assert trending.tier == 0 and REUSED not in rec.recommend(user, limit=3).notes
    for paper in LEARNING:
        rec.interact(user, paper, "save")
    first = rec.recommend(user, limit=3)
    again = rec.recommend(user, limit=3)
    assert first.tier == 1 and REUSED not in first.notes and "tier1" in first.timing_ms
    assert again.ids == first.ids and again.notes[-1] == REUSED and "tier1" not in again.timing_ms
    assert len(rec.state.served(rec.index, user)) == 4  # two trending lists, then this one twice
    assert REUSED not in rec.recommend(user, limit=4).notes  # another limit: its own list
    # the user's save through another worker (the same state): the next list is made anew, without it
    top = first.ids[0]
    other_worker.interact(user, top, "save")
    after = rec.recommend(user, limit=3)
    assert REUSED not in after.notes and top not in after.ids
    # another user's save changes the community's model, and with it the list's key
    version = rec.community.current()
    other = f"{user}-other"
    other_worker.create_user(other, [])
    other_worker.interact(other, LEARNING[0], "save")
    assert rec.community.current() > version
    assert REUSED not in rec.recommend(user, limit=3).notes
    # without recommend.reuse_s (the default outside a server) every call makes its list
    plain = Recommender(rec_indexes.edge, rec_indexes.config)
    assert plain.reused is None and REUSED not in plain.recommend(user, limit=3).notes
