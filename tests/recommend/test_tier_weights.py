"""The tiers' co-save weights chosen on a validation split of the community's own saves."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from scix_core.recommend import UserState
from scix_core.recommend import community as community_module
from scix_core.recommend.catalog import Catalog
from scix_core.recommend.collab import weights
from scix_core.recommend.collab.ease import Ease
from scix_core.recommend.collab.ensemble import Ensemble
from scix_core.recommend.collab.walk import RP3Beta
from scix_core.recommend.collab.weights import MIN_USERS, Question, TierWeights, choose, grid, questions
from scix_core.recommend.community import Community

BLOCKS, PER_BLOCK = 4, 12  # papers in topical blocks; a user saves within one block


@dataclass
class Elsewhere:
    """A useless part: it scores the papers of the next block over, the saves it was fitted on recorded."""

    name = "elsewhere"
    seen: list = field(default_factory=list, compare=False)

    def fit(self, matrix):
        self.seen.append(matrix.copy())
        return self

    def scores(self, rows):
        out = np.zeros(BLOCKS * PER_BLOCK, dtype=np.float32)
        block = (int(rows[0]) // PER_BLOCK + 1) % BLOCKS
        out[block * PER_BLOCK : (block + 1) * PER_BLOCK] = 1.0
        return out


@dataclass
class SameWalk(RP3Beta):
    name = "walk2"  # RP3beta again under another name: a part that adds nothing


def _libraries(users: int, seed: int = 3) -> csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for u in range(users):
        block = u % BLOCKS
        for c in rng.choice(PER_BLOCK, size=8, replace=False):
            rows.append(u)
            cols.append(block * PER_BLOCK + int(c))
    return csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(users, BLOCKS * PER_BLOCK))


def test_the_grid_the_questions_and_which_weights_a_library_takes():
    assert grid(("a", "b")) == [(1.0, 1.0), (0.0, 1.0), (0.5, 1.0), (1.0, 0.0), (1.0, 0.5)]  # equal first
    assert grid(("a", "b"), (1.0, 0.0))[:2] == [(1.0, 0.0), (0.0, 1.0)]  # the configured weights first
    one, three, whole = questions(("rp3beta", "ease"), ("rp3beta", "ease", "ials"))
    assert (one.size, three.size, whole.size) == (1, 3, None) and one.configured == (1.0, 1.0, 1.0)
    assert whole.names == ("rp3beta", "ease", "ials") and whole.configured == (1.0, 1.0, 0.0)
    chosen = TierWeights(
        (("1", (("a", 1.0), ("b", 0.0))), ("3", (("a", 0.5), ("b", 1.0))), ("all", (("a", 0.0), ("b", 1.0))))
    )
    assert chosen.for_saves(1) == chosen.for_saves(2) == {"a": 1.0, "b": 0.0}
    assert chosen.for_saves(3) == chosen.for_saves(40) == {"a": 0.5, "b": 1.0}
    assert chosen.for_tier1() == {"a": 0.0, "b": 1.0}
    assert TierWeights().for_saves(2) is None and TierWeights().for_tier1() is None  # as configured


def test_a_part_that_predicts_nothing_is_weighted_out_on_the_saves_alone():
    x = _libraries(400)
    spy = Elsewhere()
    asked = questions(("rp3beta",), ("rp3beta", "elsewhere"))
    weights = choose(Ensemble(((RP3Beta(), 1.0), (spy, 1.0))), x, asked, seed=1)
    assert weights.for_tier1() == {"rp3beta": 1.0, "elsewhere": 0.0}  # as configured: nothing beats it
    assert weights.facts["all"]["p"] == 1.0
    for size in (1, 3):
        assert weights.for_saves(size) == {"rp3beta": 1.0, "elsewhere": 0.0}, weights.facts
        facts = weights.facts[str(size)]
        assert (
            facts["users"] >= MIN_USERS
            and facts["best_recall"] > facts["configured_recall"]
            and facts["p"] < 0.05
        )
    # the validation users' rows in what the parts were fitted on: none for the one- and three-save questions
    # (they ask with saves of their own the fit never saw), their kept saves for the whole-library one —
    # never the ones set aside
    assert len(spy.seen) == 2  # one fit for the tiers' questions, one for Tier 1's
    apart, whole = spy.seen
    emptied = [u for u in range(x.shape[0]) if apart[u].nnz != x[u].nnz]
    assert len(emptied) == weights.facts["1"]["users"] and all(apart[u].nnz == 0 for u in emptied)
    changed = [u for u in range(x.shape[0]) if whole[u].nnz != x[u].nnz]
    assert changed == emptied and weights.facts["1"]["queries"] == 5
    for u in changed:  # (8 saves: 2 set aside, 6 kept)
        mine, theirs = set(whole[u].indices), set(x[u].indices)
        assert len(mine) == 6 and mine < theirs
    # the same saves, the same choice
    assert choose(Ensemble(((RP3Beta(), 1.0), (Elsewhere(), 1.0))), x, asked, 1) == weights
    # Tier 1 configured with the useless part alone takes the walk instead
    wrong = choose(
        Ensemble(((RP3Beta(), 1.0), (Elsewhere(), 1.0))),
        x,
        (Question("all", None, ("rp3beta", "elsewhere"), (0.0, 1.0)),),
        1,
    )
    assert wrong.for_tier1() == {"rp3beta": 1.0, "elsewhere": 0.0} and wrong.facts["all"]["p"] < 0.05


def test_the_choice_does_not_depend_on_the_order_users_joined(monkeypatch):
    from scix_core.recommend.collab import weights as module

    monkeypatch.setattr(module, "USERS", 60)  # a sample of the eligible users validates
    rng = np.random.default_rng(5)
    x = _libraries(300).tolil()
    for u in range(x.shape[0]):  # and two saves anywhere: recall that depends on who validates
        for c in rng.choice(BLOCKS * PER_BLOCK, size=2, replace=False):
            x[u, int(c)] = 1.0
    x = x.tocsr()
    both = ("rp3beta", "elsewhere")
    made = [
        choose(Ensemble(((RP3Beta(), 1.0), (Elsewhere(), 1.0))), m, questions(both, both), 1)
        for m in (x, x[::-1])
    ]
    keys = ("users", "best", "p", "configured_recall", "best_recall")
    assert made[0] == made[1]
    assert all(made[0].facts[q][k] == made[1].facts[q][k] for q in ("1", "3", "all") for k in keys)


def test_equal_weights_stay_unless_another_point_is_clearly_better():
    x = _libraries(400)
    both = ("rp3beta", "walk2")
    weights = choose(Ensemble(((RP3Beta(), 1.0), (SameWalk(), 1.0))), x, questions(both, both), seed=1)
    assert (
        weights.for_saves(1) == weights.for_saves(3) == weights.for_tier1() == {"rp3beta": 1.0, "walk2": 1.0}
    )
    asked = questions(("rp3beta",), ("rp3beta", "elsewhere"))
    few = choose(Ensemble(((RP3Beta(), 1.0), (Elsewhere(), 1.0))), _libraries(40), asked)
    assert few.by_size == () and "too few" in few.facts["reason"] and few.for_saves(1) is None


def _community(
    tmp_path, name: str, x: csr_matrix, cache, index: str = "idx", refresh_s: float = 0.0, at: int = 10
) -> Community:
    ids = tuple(f"p{i}" for i in range(x.shape[1]))
    catalog = Catalog(
        index,
        ids,
        {p: i for i, p in enumerate(ids)},
        ((),) * len(ids),
        "none",
        np.full(len(ids), -1, dtype=np.int32),
        np.zeros(len(ids), dtype=np.int64),
    )
    state = UserState(tmp_path / f"{name}.sqlite")
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for u in range(x.shape[0]):
        state.import_library(index, f"u{u}", [ids[i] for i in x[u].indices], t0, [])
    model = Ensemble(((RP3Beta(), 1.0), (Elsewhere(), 1.0)))
    return Community(
        state,
        index,
        catalog,
        model,
        refresh_s=refresh_s,
        parts=frozenset({"rp3beta"}),
        tier_parts=frozenset({"rp3beta", "elsewhere"}),
        weigh_tiers=True,
        weights_cache=cache,
        weights_at=at,
    )


def test_a_community_weighs_its_tier_parts_and_keeps_the_choice(tmp_path):
    x = _libraries(300)
    community = _community(tmp_path, "one", x, tmp_path / "cache")
    rows = np.array([0])
    cos = community.cosaves(rows)
    assert cos.tier_weights == {"rp3beta": 1.0, "elsewhere": 0.0}
    each = community._fitted.normalised(rows)
    np.testing.assert_allclose(cos.for_tiers, each["rp3beta"] / each["rp3beta"].max(), rtol=1e-5)
    np.testing.assert_allclose(cos.scores, cos.for_tiers, rtol=1e-5)  # Tier 1: its own part, as configured
    assert cos.model == "rp3beta"
    assert community.weights_chosen["3"]["taken"] == {"rp3beta": 1.0, "elsewhere": 0.0}
    again = _community(tmp_path, "two", x, tmp_path / "cache")  # the same saves: the kept choice is read
    assert again.tier_weights().facts["kept"].startswith("tier-weights-")
    assert again.tier_weights().by_size == community.tier_weights().by_size
    # the same saves under another index's name share it; other saves are chosen anew ...
    named = _community(tmp_path, "three", x, tmp_path / "cache", index="other")
    assert named.tier_weights().facts["kept"] == again.tier_weights().facts["kept"]
    fewer = _libraries(280)
    assert "kept" not in _community(tmp_path, "four", fewer, tmp_path / "cache").tier_weights().facts
    # ... except by a server, which takes the newest choice of its index: no wait at a start after saves
    server = _community(tmp_path, "five", _libraries(290), tmp_path / "cache", refresh_s=60.0)
    assert server.tier_weights().facts["kept"].startswith("tier-weights-")
    # ... made on much the same saves: not an offline evaluation's, on a split's share of them
    bigger = _community(tmp_path, "six", _libraries(400), tmp_path / "cache", refresh_s=60.0)
    assert "kept" not in bigger.tier_weights().facts


def test_a_choice_is_made_at_the_configured_list_length(tmp_path):
    # a community told a list of fifty (recommend.tier_weights_at) chooses by recall@50 — not the choice kept
    # at ten
    x = _libraries(300)
    ten = _community(tmp_path, "ten", x, tmp_path / "cache").tier_weights().facts
    fifty = _community(tmp_path, "fifty", x, tmp_path / "cache", at=50).tier_weights().facts
    assert "kept" not in fifty and ten["3"]["k"] == 10 and fifty["3"]["k"] == 50
    # 48 papers, 6 kept a validation user: fifty is every paper, so every set-aside save is found
    assert fifty["3"]["configured_recall"] == fifty["1"]["best_recall"] == 1.0 > ten["3"]["configured_recall"]
    again = _community(tmp_path, "again", x, tmp_path / "cache", at=50).tier_weights().facts
    assert again["kept"] and again["3"] == fifty["3"]


def test_a_community_takes_anothers_weights_without_choosing(tmp_path, monkeypatch):
    # the scorer trainer's community (its recommender's saves less an inner hold-out) serves the features
    # with its recommender's weights: one choice, not two
    served = _community(tmp_path, "served", _libraries(300), None)
    trainer = _community(tmp_path, "trainer", _libraries(280), None)
    calls = []
    real = community_module.choose
    monkeypatch.setattr(community_module, "choose", lambda *a, **k: calls.append(1) or real(*a, **k))
    trainer.take_weights(served)
    assert len(calls) == 1 and trainer.tier_weights() is served.tier_weights()
    assert trainer.cosaves(np.array([0])).tier_weights == {"rp3beta": 1.0, "elsewhere": 0.0}
    assert len(calls) == 1  # the trainer's own saves chose nothing


def test_a_choice_waits_only_for_the_same_choice(tmp_path, monkeypatch):
    """One lock per choice: a choice being made for other saves (an evaluation's split beside a notebook)
    does not hold this one up; one being made for the same saves is waited for and read back."""
    import threading

    from scix_core.recommend import community as module

    cache = tmp_path / "cache"
    slow_saves, going, release = _libraries(300), threading.Event(), threading.Event()

    def choose(model, matrix, *args, **kwargs):
        if matrix.nnz == slow_saves.nnz:  # the slow choice: still being made until released
            going.set()
            assert release.wait(60)
        return weights.choose(model, matrix, *args, **kwargs)

    monkeypatch.setattr(module, "choose", choose)
    done = {}
    asks = {
        name: threading.Thread(target=lambda n=name, c=c: done.__setitem__(n, c.tier_weights()))
        for name, c in (
            ("slow", _community(tmp_path, "one", slow_saves, cache)),
            ("other", _community(tmp_path, "two", _libraries(280), cache)),
            ("same", _community(tmp_path, "three", _libraries(300), cache)),
        )
    }
    asks["slow"].start()
    try:
        assert going.wait(60)
        asks["other"].start()
        asks["other"].join(timeout=60)
        assert "other" in done and "kept" not in done["other"].facts  # chosen while the slow one is made
        asks["same"].start()
        asks["same"].join(timeout=0.5)
        assert "same" not in done  # waits for the choice of its saves ...
    finally:
        release.set()
    for t in asks.values():
        t.join(timeout=60)
    assert done["same"].facts["kept"].startswith("tier-weights-")  # ... and reads it back
    assert done["same"].by_size == done["slow"].by_size


@dataclass
class CountedEase(Ease):
    """EASE^R counting its solves (its factorisations of the Gram matrix)."""

    solves = [0]

    def _solve(self, gram, n):
        self.solves[0] += 1
        return super()._solve(gram, n)


def _mixed(users: int, items: int = 90, seed: int = 5) -> csr_matrix:
    """Libraries of 6 to 14 saves, most within a user's block of items, some among the popular ones."""
    rng = np.random.default_rng(seed)
    popular = (np.arange(1, items + 1) ** -0.8) / (np.arange(1, items + 1) ** -0.8).sum()
    rows, cols = [], []
    for u in range(users):
        block = rng.integers(0, items // 10)
        own = block * 10 + rng.choice(10, size=rng.integers(4, 9), replace=False)
        saved = set(own.tolist()) | set(rng.choice(items, size=rng.integers(2, 6), p=popular).tolist())
        rows += [u] * len(saved)
        cols += sorted(saved)
    return csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(users, items))


def test_the_validation_fits_update_the_communitys_ease_rather_than_refit_it(monkeypatch):
    monkeypatch.setattr(weights, "USERS", 150)  # of 500: the fits without them are not empty
    x = _mixed(500)
    asked = questions(("rp3beta", "ease"), ("rp3beta", "ease"))
    model = Ensemble(((RP3Beta(), 1.0), (CountedEase(lam=5.0), 1.0)))
    refitted = choose(model, x, asked, seed=1)
    assert CountedEase.solves == [2]  # the community without the validation users; with their kept saves
    start = model.fit(x)
    updated = choose(model, x, asked, seed=1, start=start)
    assert CountedEase.solves == [3]  # the community's own fit only: both validation fits are its update
    assert updated.by_size == refitted.by_size
    for label, facts in refitted.facts.items():
        assert 0.05 < facts["configured_recall"] < 0.95, facts  # a question that can tell fits apart
        for key in ("configured_recall", "best_recall", "p"):
            assert updated.facts[label][key] == pytest.approx(facts[key], abs=1e-3), (label, key)
    # a start fitted on other saves (one save fewer) is not updated: the validation fits are refitted
    fewer = x.tolil(copy=True)
    fewer.rows[0], fewer.data[0] = fewer.rows[0][1:], fewer.data[0][1:]
    choose(model, x, asked, seed=1, start=model.fit(fewer.tocsr()))
    assert CountedEase.solves == [6]


def test_a_corrected_fits_batched_scores_are_its_scores():
    x = _mixed(300)
    fit = Ease(lam=5.0).fit(x)
    libraries = [x.indices[x.indptr[u] : x.indptr[u + 1]] for u in range(20)]
    corrected = fit.with_rows_changed([(rows, rows[:2]) for rows in libraries])
    assert corrected is not None and corrected._w is not None
    queries = [np.array([3]), np.array([1, 7, 20]), np.array([], dtype=np.int64), libraries[0]]
    for ease in (fit, corrected):
        for query, batched in zip(queries, ease.scores_many(queries)):
            assert np.allclose(batched, ease.scores(query), atol=1e-5)
    model = Ensemble(((RP3Beta(), 1.0), (Ease(lam=5.0), 0.5))).fit(x)
    for query, each in zip(queries, model.normalised_many(queries)):
        alone = model.normalised(query)
        assert set(each) == set(alone) and all(np.allclose(each[n], alone[n]) for n in alone)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.sampled_from([12, 60, 400]),
    levels=st.sampled_from([3, 50, 0]),  # 3: many ties; 0: continuous scores
    kept=st.integers(0, 8),
    k=st.sampled_from([1, 10, 50]),  # 50: longer than the 12-row lists
)
def test_the_grid_counts_each_points_best_k_as_a_whole_partition_does(seed, rows, levels, kept, k):
    rng = np.random.default_rng(seed)
    parts = rng.random((3, rows), dtype=np.float32)
    if levels:
        parts = np.round(parts * levels) / levels  # ties at the tenth place, and rows outside every top
    points = np.array(grid(("a", "b", "c")), dtype=np.float32)
    scores = points @ parts
    kept_rows = rng.choice(rows, size=min(kept, rows - 1), replace=False)
    scores[:, kept_rows] = -1.0
    held = rng.choice(np.setdiff1d(np.arange(rows), kept_rows), size=3, replace=False)
    got = weights._hits(scores, parts, len(kept_rows), held, k)
    if k >= rows:  # the list is every row: each held one in it
        assert np.array_equal(got, np.full(len(points), len(held)))
        return
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    assert np.array_equal(got, np.isin(top, held).sum(axis=1))
