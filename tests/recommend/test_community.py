"""Co-saves: the item-kNN scores by hand, the matrix following the store, and the co-saved candidates in Tier
1."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from scix_core.errors import UnknownNameError
from scix_core.locks import try_exclusive
from scix_core.recommend import Recommender, UserState
from scix_core.recommend import community as community_module
from scix_core.recommend.catalog import Catalog
from scix_core.recommend.collab.ease import Ease
from scix_core.recommend.collab.ensemble import Ensemble
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.collab.walk import RP3Beta
from scix_core.recommend.community import Community, collab_model, joined, part_names
from scix_core.recommend.fits import refit_lock

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
LIBRARIES = {"a": ["p1", "p2"], "b": ["p1", "p3"], "c": ["p2", "p3", "p4"], "me": ["p1"]}


def _catalog(n: int = 6) -> Catalog:
    ids = tuple(f"p{i}" for i in range(n))
    return Catalog(
        "idx",
        ids,
        {p: i for i, p in enumerate(ids)},
        ((),) * n,
        "none",
        np.full(n, -1, dtype=np.int32),
        np.zeros(n, dtype=np.int64),
    )


def _state(tmp_path, libraries=LIBRARIES) -> UserState:
    state = UserState(tmp_path / "users.sqlite")
    for user, papers in libraries.items():
        state.import_library("idx", user, papers, T0, [])
    return state


def _by_hand(libraries, mine) -> dict[str, float]:
    """Σ_s co(s, c) / √(n_s n_c) over my saves s, for every paper c I have not saved."""
    savers = {p: {u for u, ps in libraries.items() if p in ps} for ps in libraries.values() for p in ps}
    out = {}
    for c in savers:
        if c not in mine:
            out[c] = sum(
                len(savers[s] & savers[c]) / math.sqrt(len(savers[s]) * len(savers[c])) for s in mine
            )
    return out


def test_the_same_saves_in_another_arrival_order_make_the_same_matrix_and_fits(tmp_path):
    """An evaluation replays its users in an order that depends on its per-tier sample, and a server's
    arrive as they come: the matrix's rows follow the user ids, and iALS's fit the libraries' contents."""
    catalog = _catalog(8)
    rng = np.random.default_rng(3)
    libraries = {f"u{n}": [f"p{i}" for i in sorted(rng.choice(8, 3, replace=False))] for n in range(12)}
    flipped = dict(reversed(list(libraries.items())))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    made = []
    for folder, order in (("a", libraries), ("b", flipped)):
        model = Ials(factors=4, alpha=10.0, regularization=0.1, iterations=3)
        community = Community(_state(tmp_path / folder, order), "idx", catalog, model)
        made.append((community.libraries().by_user, community.cosaves(np.array([0, 1])).scores))
    (a, a_scores), (b, b_scores) = made
    assert (a != b).nnz == 0 and np.array_equal(a_scores, b_scores)
    assert [a.indices[a.indptr[r] : a.indptr[r + 1]].tolist() for r in range(2)] == [
        [catalog.row[p] for p in libraries[u]] for u in sorted(libraries)[:2]
    ]


def test_cosave_scores_by_hand(tmp_path):
    catalog = _catalog()
    community = Community(_state(tmp_path), "idx", catalog, collab_model("cosine"))
    got = community.cosaves(np.array([catalog.row["p1"]]))
    expected = _by_hand(LIBRARIES, ["p1"])  # p2: 1/√6, p3: 1/√6, p4: 0
    best = max(expected.values())
    for paper, value in expected.items():
        assert got.scores[catalog.row[paper]] == pytest.approx(value / best)
    assert got.scores[catalog.row["p1"]] == 0.0 and got.scores[catalog.row["p5"]] == 0.0  # mine; nobody's
    assert got.savers.tolist() == [0, 3, 2, 2, 1, 0]
    assert [catalog.ids[r] for r in got.top(5, np.array([catalog.row["p3"]]))] == [
        "p2"
    ]  # positive only, exclusions


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=12), st.integers(1, 12))
def test_a_shorter_top_is_the_start_of_a_longer_one_whatever_the_ties(values, n):
    scores = np.array(values, dtype=np.float32)
    cos = community_module.CoSaves(scores, np.zeros(len(values), dtype=np.int64))
    whole = cos.top(len(values), np.zeros(0, dtype=np.int64))
    assert list(whole) == sorted(np.flatnonzero(scores > 0), key=lambda r: (-scores[r], r))
    assert list(cos.top(n, np.zeros(0, dtype=np.int64))) == list(whole[:n])


def test_the_matrix_follows_the_store_and_other_indexes_never_count(tmp_path):
    catalog = _catalog()
    state = _state(tmp_path)
    community = Community(state, "idx", catalog, collab_model("cosine"))
    assert community.cosaves(np.array([catalog.row["p4"]])).scores[catalog.row["p5"]] == 0.0
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("other", "e", ["p4", "p0"], T0, [])  # another index's saves
    after = community.cosaves(np.array([catalog.row["p4"]]))
    libraries = {**LIBRARIES, "d": ["p4", "p5"]}
    expected = _by_hand(libraries, ["p4"])
    best = max(expected.values())
    assert after.scores[catalog.row["p5"]] == pytest.approx(expected["p5"] / best) and after.scores[0] == 0.0


def test_with_a_refresh_interval_others_saves_join_late_and_warm_forces_them(tmp_path, monkeypatch):
    """A server's community (``recommend.community_refresh_s``) re-reads the store at most that often."""
    catalog = _catalog()
    state = _state(tmp_path)
    clock = [100.0]
    monkeypatch.setattr(community_module.time, "monotonic", lambda: clock[0])
    community = Community(state, "idx", catalog, collab_model("cosine"), refresh_s=5.0)
    assert community.cosaves(np.array([catalog.row["p4"]])).scores[catalog.row["p5"]] == 0.0
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    clock[0] += 4.9  # within the interval: the matrix of the last read
    assert community.cosaves(np.array([catalog.row["p4"]])).scores[catalog.row["p5"]] == 0.0
    clock[0] += 0.2
    assert community.cosaves(np.array([catalog.row["p4"]])).scores[catalog.row["p5"]] > 0.0
    state.import_library("idx", "e", ["p0", "p5"], T0, [])
    community.warm()  # never lazy
    assert community.saves == len({(u, p) for u, ps in LIBRARIES.items() for p in ps}) + 4


def test_rp3beta_by_hand_and_the_build_libraries_count_once(tmp_path):
    catalog = _catalog()
    rp3 = Community(_state(tmp_path), "idx", catalog, collab_model("rp3beta"))  # α 0.8, β 0.4
    # from p1 (savers a, b, me: n = 3; each 2 saves but me 1): p2 via a, p3 via b, weight (1/3)^.8 (1/2)^.8 /
    # 2^.4 each
    got = rp3.cosaves(np.array([catalog.row["p1"]]))
    assert got.scores[catalog.row["p2"]] == pytest.approx(1.0) and got.scores[
        catalog.row["p3"]
    ] == pytest.approx(1.0)
    assert got.scores[catalog.row["p4"]] == 0.0
    # the libraries an index was built from are its community without an import; an imported copy counts once
    pairs = [(u, p) for u, ps in LIBRARIES.items() for p in ps]
    built = Community(
        UserState(tmp_path / "empty.sqlite"), "idx", catalog, collab_model("cosine"), lambda: pairs
    )
    expected = Community(_state(tmp_path / "a"), "idx", catalog, collab_model("cosine"))
    both = Community(_state(tmp_path / "b"), "idx", catalog, collab_model("cosine"), lambda: pairs)
    for c in (built, both):
        np.testing.assert_allclose(c.cosaves(np.array([1])).scores, expected.cosaves(np.array([1])).scores)
        assert c.saves == expected.saves == sum(len(ps) for ps in LIBRARIES.values())


def _matrix(libraries, catalog):
    users = {u: i for i, u in enumerate(libraries)}
    pairs = [(users[u], catalog.row[p]) for u, ps in libraries.items() for p in ps]
    return csr_matrix((np.ones(len(pairs), np.float32), tuple(zip(*pairs))), shape=(len(users), len(catalog)))


def _normalised(scores, rows):
    scores = np.maximum(scores, 0.0)
    scores[rows] = 0.0
    return scores / scores.max()


def test_the_default_is_rp3beta_plus_ease_each_normalised_per_user(tmp_path):
    catalog = _catalog()
    community = Community(_state(tmp_path), "idx", catalog)
    assert community.model_label == "rp3beta+ease"
    rows = np.array([catalog.row["p1"]])
    x = _matrix(LIBRARIES, catalog)
    both = _normalised(RP3Beta(alpha=0.8, beta=0.4).fit(x).scores(rows), rows) + _normalised(
        Ease(lam=50.0).fit(x).scores(rows), rows
    )
    cos = community.cosaves(rows)
    np.testing.assert_allclose(cos.scores, both / both.max(), rtol=1e-5, atol=1e-6)
    assert cos.tier_scores is None and cos.for_tiers is cos.scores  # one co-save score for every tier
    with pytest.raises(UnknownNameError, match="rp3beta\\+ease"):
        collab_model("rp3beta+svd")


def test_tiers_3_and_2_score_with_their_own_parts_of_one_fitted_community(tmp_path):
    catalog = _catalog()
    model = collab_model(joined("rp3beta+ease", "rp3beta+ease+ials"))
    community = Community(
        _state(tmp_path),
        "idx",
        catalog,
        model,
        parts=part_names("rp3beta+ease"),
        tier_parts=part_names("rp3beta+ease+ials"),
    )
    assert community.model_label == "rp3beta+ease+ials"  # each part fitted once
    rows = np.array([catalog.row["p1"]])
    x = _matrix(LIBRARIES, catalog)
    each = [
        _normalised(part.fit(x).scores(rows), rows)
        for part in (
            RP3Beta(alpha=0.8, beta=0.4),
            Ease(lam=50.0),
            Ials(factors=128, alpha=60.0, regularization=1.0),
        )
    ]
    cos = community.cosaves(rows)
    assert not cos.kept  # iALS is scored only when a tier asks (Tier 1 never does)
    tier1, tiers = each[0] + each[1], each[0] + each[1] + each[2]
    np.testing.assert_allclose(cos.scores, tier1 / tier1.max(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cos.for_tiers, tiers / tiers.max(), rtol=1e-5, atol=1e-6)
    assert cos.model == "rp3beta+ease"
    exclude = np.array([], dtype=np.int64)
    best = [r for r in np.argsort(-cos.for_tiers, kind="stable") if cos.for_tiers[r] > 0]  # positive only
    assert list(cos.top(3, exclude, tiers=True)) == best[:3] and len(best) >= 2
    # Tier 1 on cosine, the tiers on RP3beta: two walks, each fitted once
    assert joined("cosine", "rp3beta+ease+ials") == "cosine+rp3beta+ease+ials"
    assert joined("rp3beta+ease", "") == "rp3beta+ease" and part_names("cosine+ease") == {"cosine", "ease"}
    mixed = Community(
        _state(tmp_path / "mixed"),
        "idx",
        catalog,
        collab_model(joined("cosine", "rp3beta")),
        parts=part_names("cosine"),
        tier_parts=part_names("rp3beta"),
    )
    walks = mixed.cosaves(rows)
    alone = Community(_state(tmp_path / "cos"), "idx", catalog, collab_model("cosine")).cosaves(rows).scores
    np.testing.assert_allclose(walks.scores, alone, rtol=1e-5, atol=1e-6)
    walk = Community(_state(tmp_path / "walk"), "idx", catalog, collab_model("rp3beta")).cosaves(rows).scores
    np.testing.assert_allclose(walks.for_tiers, walk, rtol=1e-5, atol=1e-6)
    assert walks.model == "cosine"


def test_a_part_that_does_not_fit_is_left_out_saying_why(tmp_path):
    catalog = _catalog()
    model = Ensemble(((RP3Beta(), 1.0), (Ease(max_items=2), 1.0)))
    community = Community(_state(tmp_path), "idx", catalog, model)
    rows = np.array([catalog.row["p1"]])
    alone = Community(_state(tmp_path / "a"), "idx", catalog, RP3Beta()).cosaves(rows).scores
    np.testing.assert_allclose(community.cosaves(rows).scores, alone)
    assert community.model_label == "rp3beta" and "ease: " in community.failure
    only = Community(_state(tmp_path / "b"), "idx", catalog, Ensemble(((Ease(max_items=2), 1.0),)))
    assert only.cosaves(rows) is None and "no part of the co-save ensemble" in only.failure


def test_a_slow_part_keeps_scoring_and_is_refitted_in_the_background(tmp_path, monkeypatch):
    monkeypatch.setattr(community_module, "INLINE_FIT_S", -1.0)  # every part counts as slow to fit
    catalog = _catalog()
    state = _state(tmp_path)
    community = Community(state, "idx", catalog, Ensemble(((Ease(lam=1.0), 1.0),)))
    rows = np.array([catalog.row["p4"]])
    assert community.cosaves(rows).scores[catalog.row["p5"]] == 0.0  # nobody saved p5 yet
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("idx", "e", ["p4", "p5"], T0, [])
    stale = community.cosaves(rows)  # the EASE fitted before d's and e's saves still scores, without p5
    assert stale is not None and stale.scores[catalog.row["p5"]] == 0.0
    community.wait(30)
    fresh = community.cosaves(rows).scores
    assert fresh[catalog.row["p5"]] == pytest.approx(1.0)  # the refit sees d and e: p5 is p4's best co-save
    assert community.failure == ""


def test_a_server_community_starts_from_the_cached_fit_and_refits_it_in_the_background(tmp_path, monkeypatch):
    monkeypatch.setattr(community_module, "INLINE_FIT_S", -1.0)  # every part counts as slow to fit
    catalog = _catalog()
    state = _state(tmp_path)
    model = Ensemble(((Ease(lam=1.0, cache_dir=tmp_path / "collab"), 1.0),))
    Community(
        state, "idx", catalog, model, lag=True
    ).warm()  # an earlier process fitted (and cached) these saves
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("idx", "e", ["p4", "p5"], T0, [])
    server = Community(state, "idx", catalog, model, refresh_s=5.0)
    rows = np.array([catalog.row["p4"]])
    assert server.cosaves(rows).scores[catalog.row["p5"]] == 0.0  # started from the cached fit, without p5
    server.wait(30)  # the stale part was refitted in the background on every save
    server.warm()
    assert server.cosaves(rows).scores[catalog.row["p5"]] == pytest.approx(1.0)
    assert len(list((tmp_path / "collab").glob("ease-*.npy"))) == 2 and server.failure == ""


def test_one_process_refits_at_a_time_and_the_others_take_its_fit_later(tmp_path, monkeypatch):
    monkeypatch.setattr(community_module, "INLINE_FIT_S", -1.0)  # every part counts as slow to fit
    catalog = _catalog()
    state = _state(tmp_path)
    model = Ensemble(((Ease(lam=1.0, cache_dir=tmp_path / "collab"), 1.0),))
    Community(state, "idx", catalog, model, lag=True).warm()
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("idx", "e", ["p4", "p5"], T0, [])
    server = Community(state, "idx", catalog, model, refresh_s=5.0)
    rows = np.array([catalog.row["p4"]])
    assert not server.refit_elsewhere
    with try_exclusive(refit_lock(tmp_path / "collab", "idx")) as mine:  # another worker is refitting
        assert mine
        assert server.cosaves(rows).scores[catalog.row["p5"]] == 0.0
        server.wait(30)
        assert len(list((tmp_path / "collab").glob("ease-*.npy"))) == 1  # this one left the refit to it
        # ... and says a refit is running, though not its own (a server's /healthz, whichever worker answers)
        assert server.refitting == () and server.refit_elsewhere
    assert not server.refit_elsewhere
    state.import_library("idx", "f", ["p4", "p5"], T0, [])
    server.warm()  # the next refresh finds the refit still due and makes it
    server.wait(30)
    server.warm()
    assert server.cosaves(rows).scores[catalog.row["p5"]] == pytest.approx(1.0)
    assert server.failure == ""


def test_a_refit_child_ends_with_the_process_that_started_it():
    child = (
        "import os, sys, time; from scix_core.recommend.fits import follow_parent; "
        "follow_parent(int(sys.argv[1])); time.sleep(60)"
    )
    parent = (
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "time.sleep(1.5); print(p.pid, p.poll() is None, flush=True); os._exit(0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, timeout=60, check=True
    )
    pid, running = out.stdout.split()
    pid = int(pid)
    assert running == "True"  # the child was fitting when its parent ended
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_nobody_else_means_no_signal(tmp_path):
    catalog = _catalog()
    community = Community(_state(tmp_path, {"me": ["p1", "p2"]}), "idx", catalog)
    assert community.cosaves(np.array([1, 2])) is None  # my own saves are never a co-save
    assert Community(UserState(tmp_path / "empty.sqlite"), "idx", catalog).cosaves(np.array([1])) is None


@pytest.mark.model
def test_tier1_adds_what_others_saved_alongside_and_scores_it(rec_indexes, tmp_path):
    """Others who saved the user's graph/protein papers also saved p05 (vitamin D): far in content, found by
    co-saves."""
    users = itertools.count()
    narrow = {
        "recommend.total_slots": 2,
        "recommend.min_slots": 1,
        "recommend.oversample": 1,
        "recommend.shortterm_supplement": 0,
    }  # the vector queries find only a few of the 12 papers
    rec = Recommender(
        rec_indexes.edge, rec_indexes.config.replace(**narrow), state=UserState(tmp_path / "s.sqlite")
    )
    mine = ["p01", "p07", "p03", "p04", "p06"]
    for _ in range(3):
        rec.state.import_library(rec.index, f"other-{next(users)}", ["p01", "p07", "p05"], T0, [])
    rec.create_user("me", [])
    for paper in mine:
        rec.interact("me", paper, "save")
    result = rec.recommend("me", limit=5, log=False)
    assert "p05" not in {c.paper_id for c in result.stage("supplement").output}
    assert result.stage("co-saved").summary["added"] == 1
    assert [c.paper_id for c in result.stage("co-saved").output if c.source == "co-saved"] == ["p05"]
    scored = {c.paper_id: dict(c.scores) for c in result.stage("score").output}
    assert scored["p05"]["cosave"] == pytest.approx(1.0) and scored["p05"]["savers"] == 3
    assert result.items[0].paper_id == "p05"  # 0.65·cosine + 0.5·1.0 beats every content-only candidate
    assert all(
        dict(i.scores).get("cosave", 0) == 0
        for i in result.items
        if i.paper_id != "p05" and not i.exploration
    )
    off = Recommender(
        rec_indexes.edge,
        rec_indexes.config.replace(
            **narrow, **{"recommend.cosave_candidates": 0, "recommend.weight_cosave": 0.0}
        ),
        state=rec.state,
    )
    plain = off.recommend("me", limit=5, log=False)
    assert plain.stage("co-saved").summary == {"added": 0, "reason": "disabled"}
    assert plain.items[0].paper_id != "p05"


@pytest.mark.model
def test_alone_on_an_index_tier1_is_content_only_and_says_why(rec_indexes, tmp_path):
    rec = Recommender(rec_indexes.edge, rec_indexes.config, state=UserState(tmp_path / "s.sqlite"))
    rec.create_user("me", [])
    for paper in ["p01", "p07", "p03", "p04", "p06"]:
        rec.interact("me", paper, "save")
    result = rec.recommend("me", limit=3, log=False)
    assert result.stage("co-saved").summary == {
        "added": 0,
        "reason": "no other user saved any of these papers",
    }
    assert "cosave" in result.stage("score").summary["constant_features"]


@pytest.mark.model
@pytest.mark.parametrize("tier_saves", [["p01"], ["p01", "p07", "p03"]])
def test_tiers_3_and_2_add_what_others_saved_alongside(rec_indexes, tmp_path, tier_saves):
    """One save (Tier 3) or three (Tier 2): others who saved them also saved p05, far in content; it joins the
    list with 0.65 · similarity + community_weight (Tier 3; tier2_community_weight in Tier 2) · cosave, and
    community_tiers = false is the content-only tier."""
    state = UserState(tmp_path / "s.sqlite")
    for i in range(3):
        state.import_library(rec_indexes.edge, f"other-{i}", [*tier_saves, "p05"], T0, [])
    rec = Recommender(rec_indexes.edge, rec_indexes.config, state=state, build_community=False)
    rec.create_user("me", [])
    for paper in tier_saves:
        rec.interact("me", paper, "save")
    result = rec.recommend("me", limit=4, log=False)
    assert result.tier == (3 if len(tier_saves) == 1 else 2)
    assert (
        result.ids[0] == "p05"
    )  # the 12-paper fixture: every paper is a content hit too, p05 near the bottom
    scores = dict(result.items[0].scores)
    sim = scores.get("best_score", scores.get("longterm_sim"))
    assert scores["cosave"] == pytest.approx(1.0)
    r = rec.config.recommend
    weight = r.community_weight if result.tier == 3 else r.tier2_community_weight
    assert (r.community_weight, r.tier2_community_weight) == (1.0, 1.25)
    assert result.items[0].score == pytest.approx(0.65 * sim + weight * 1.0)
    for item in result.items[1:]:  # nobody saved anything else next to mine: content alone
        assert dict(item.scores)["cosave"] == 0.0 and item.score == pytest.approx(0.65 * item.scores[0][1])
    assert result.items[0].score == max(i.score for i in result.items)  # MMR may reorder the rest
    summary = result.stages[0].summary
    assert summary["community"] is True and summary["pool"] > 4
    # the three users who saved the same papers steer the pick with their interests (in place of the pool
    # clusters' bonus)
    assert summary["neighbours"] == 3 and "pool_slot_targets" not in summary
    if result.tier == 3:  # without them the pool's clusters share the four slots (tier3_quota_bonus)
        off = Recommender(
            rec_indexes.edge,
            rec_indexes.config.replace(**{"recommend.tier3_neighbour_cover": 0.0}),
            state=state,
            build_community=False,
        ).recommend("me", limit=4, log=False)
        summary = off.stages[0].summary
        assert sum(summary["pool_slot_targets"]) == 4 and 1 <= summary["pool_clusters_picked"] <= 4
        assert "neighbours" not in summary
    plain = Recommender(
        rec_indexes.edge,
        rec_indexes.config.replace(**{"recommend.community_tiers": False}),
        state=state,
        build_community=False,
    ).recommend("me", limit=4, log=False)
    assert "p05" not in plain.ids and all(i.source != "co-saved" for i in plain.items)


@pytest.mark.model
@pytest.mark.parametrize("mine", [["p01"], ["p01", "p07", "p03"], ["p01", "p07", "p03", "p04", "p06"]])
def test_a_long_lists_tail_reaches_further_and_keeps_its_head(rec_indexes, tmp_path, mine):
    """Past the configured limit (2 here) every tail pick may take the co-saved papers past
    cosave_candidates (cosave_per_slot × the list asked for): the head is the list without the tail's
    settings, in every tier."""
    state = UserState(tmp_path / "s.sqlite")
    for i in range(3):
        state.import_library(
            rec_indexes.edge, f"other-{i}", [*mine, "p05", "p08", "p10", "p11", "p12"], T0, []
        )
    base = {"recommend.limit": 2, "recommend.cosave_candidates": 1, "recommend.n_explore": 0}
    base |= {"recommend.tail_reach": False}
    # the vector queries find only a few of the 12 papers: the rest are for the community to reach
    base |= {"recommend.oversample": 1, "recommend.total_slots": 2, "recommend.min_slots": 1}
    base |= {"recommend.shortterm_supplement": 0}
    tail = {"recommend.tail_reach": True, "recommend.cosave_per_slot": 1.0, "recommend.mmr_tail_lambda": 0.0}
    tail |= {f"recommend.{n}_tail_every": 1 for n in ("mmr", "tier", "tier2")}
    lists = []
    for over in (base, {**base, **tail}):
        rec = Recommender(
            rec_indexes.edge, rec_indexes.config.replace(**over), state=state, build_community=False
        )
        if not lists:
            rec.create_user("me", [])
            for paper in mine:
                rec.interact("me", paper, "save")
        lists.append(rec.recommend("me", limit=6, log=False))
    plain, reaching = lists
    assert reaching.tier == plain.tier == {1: 3, 3: 2, 5: 1}[len(mine)]
    assert reaching.ids[:2] == plain.ids[:2] and len(reaching.ids) >= len(plain.ids)
    if reaching.tier == 1:
        assert (
            plain.stage("co-saved").summary["reach"] == 0 and reaching.stage("co-saved").summary["reach"] > 0
        )
        picks = reaching.stage("mmr").summary["reach_picks"]
        assert plain.stage("mmr").summary["reach_picks"] == []
    else:
        assert plain.stages[0].summary["reach"] == 0 and reaching.stages[0].summary["reach"] > 0
        picks = reaching.stages[0].summary["reach_picks"]
        assert "reach_picks" not in plain.stages[0].summary
    assert picks == list(reaching.ids[2:])  # every pick after the first two (mmr_tail_every 1)


def test_a_community_started_from_another_updates_its_slow_parts_for_the_changed_libraries(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(community_module, "INLINE_FIT_S", -1.0)  # every part counts as slow to fit
    catalog = _catalog()
    model = Ensemble(((RP3Beta(), 1.0), (Ease(lam=1.0), 1.0)))
    full = Community(_state(tmp_path / "full"), "idx", catalog, model)
    rows = np.array([catalog.row["p1"]])
    full.cosaves(rows)
    fewer = {**LIBRARIES, "c": ["p2"]}  # c's library truncated
    truncated = Community(_state(tmp_path / "t", fewer), "idx", catalog, model)
    changes = [(np.array([catalog.row[p] for p in LIBRARIES["c"]]), np.array([catalog.row["p2"]]))]
    truncated.start_from(full, changes)
    fresh = Community(_state(tmp_path / "f", fewer), "idx", catalog, model).cosaves(rows).scores
    np.testing.assert_allclose(truncated.cosaves(rows).scores, fresh, rtol=1e-4, atol=1e-6)
    assert truncated._background is None and truncated.saves == sum(len(p) for p in fewer.values())
