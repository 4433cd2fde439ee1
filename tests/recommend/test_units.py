"""Hand-checkable units of the recommender: quota arithmetic, Ward + Hungarian, MMR, EWMA, suppression,
trending windows, tier messages. No model, no index: the expected values are arithmetic you can redo."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scix_core.config import RecommendConfig
from scix_core.recommend.blend import pool_targets
from scix_core.recommend.catalog import Catalog, months
from scix_core.recommend.context import cosaved_count
from scix_core.recommend.interests import InterestCache, neighbourhood
from scix_core.recommend.profile import ewma
from scix_core.recommend.result import RecItem, plain
from scix_core.recommend.stages.base import Features
from scix_core.recommend.stages.cluster import cuts, medoid, silhouette, silhouettes, ward_labels
from scix_core.recommend.stages.match import match_ids
from scix_core.recommend.stages.mmr import is_reach, mmr, mmr_many, tail_of
from scix_core.recommend.stages.quota import allocate, importance
from scix_core.recommend.stages.suppress import suppressed_codes
from scix_core.recommend.state import Event, StoredCluster
from scix_core.recommend.tiers import next_tier_message
from scix_core.recommend.trending import trending


def unit_rows(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_quota_min_slots_then_largest_remainder():
    # 3 each (9), 91 shared: 45.5 / 27.3 / 18.2 -> floors 45, 27, 18 (90); the spare slot to the largest
    # remainder
    assert allocate([0.5, 0.3, 0.2], 100, 3) == [3 + 46, 3 + 27, 3 + 18]
    assert sum(allocate([0.9, 0.05, 0.03, 0.02], 100, 3)) == 100
    # a tiny interest still gets min_slots: 88 shared; 85.36 -> 85 and 0.88 -> 0 x3; the 3 spare to remainders
    # .88
    assert allocate([0.97, 0.01, 0.01, 0.01], 100, 3) == [3 + 85, 3 + 1, 3 + 1, 3 + 1]


def test_quota_more_clusters_than_min_slots_allow():
    quotas = allocate([1.0] * 40, 100, 3)  # 40 x 3 > 100: 2 each, the 20 left to the first 20 (equal weights)
    assert sum(quotas) == 100 and set(quotas) == {2, 3} and quotas.count(3) == 20


def test_importance_weighs_size_and_recency():
    # 4 saves, half-life 1 save: weights by age 3,2,1,0 -> 1/8, 1/4, 1/2, 1
    imp = importance([[0, 1], [2, 3]], 4, 1.0)
    assert imp == pytest.approx(
        [(1 / 8 + 1 / 4) / (1 / 8 + 1 / 4 + 1 / 2 + 1), (1 / 2 + 1) / (1 / 8 + 1 / 4 + 1 / 2 + 1)]
    )


def test_ward_finds_separated_interests_and_one_interest_stays_one():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3]
    vecs = np.concatenate([c + 0.05 * rng.normal(size=(6, 8)) for c in centres])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    labels, scores = ward_labels(vecs, 8, 0.05)
    assert labels.max() + 1 == 3 and max(scores, key=scores.get) == 3
    assert len(set(labels[:6])) == len(set(labels[6:12])) == len(set(labels[12:])) == 1
    tight = unit_rows(*([1, 0, 0, 0] + 0.01 * rng.normal(size=4) for _ in range(6)))
    assert ward_labels(tight, 8, 0.9)[0].max() == 0  # no cut reaches the silhouette floor: one interest


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(3, 40),
    k=st.integers(2, 8),
    seed=st.integers(0, 2**16),
)
def test_silhouette_is_scikit_learns(n, k, seed):
    """The one-matrix silhouette of the cluster stage equals sklearn's, singleton clusters included."""
    from sklearn.metrics import pairwise_distances, silhouette_score

    rng = np.random.default_rng(seed)
    k = min(k, n - 1)
    labels = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])  # every label used, some once
    rng.shuffle(labels)
    vecs = rng.normal(size=(n, 5))
    distances = pairwise_distances(vecs)
    assert silhouette(distances, labels) == pytest.approx(silhouette_score(vecs, labels), abs=1e-9)


def test_silhouette_by_hand():
    # points 0, 1 at x = 0 and 1 (cluster 0), point 2 at x = 5 (cluster 1, alone: scores 0)
    # s(0) = (5 - 1) / 5 = 0.8, s(1) = (4 - 1) / 4 = 0.75, s(2) = 0 -> mean 0.5167
    d = np.abs(np.subtract.outer([0.0, 1.0, 5.0], [0.0, 1.0, 5.0]))
    assert silhouette(d, np.array([0, 0, 1])) == pytest.approx((0.8 + 0.75 + 0.0) / 3)


def cut_tree(children: np.ndarray, n: int, k: int) -> np.ndarray:
    """Labels 0..k-1 from the first n − k merges of an agglomerative tree (labels by first member): one cut
    by the definition, the reference the one-pass :func:`cuts` is tested against."""
    parent = list(range(2 * n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for step, (a, b) in enumerate(children[: n - k]):
        node = n + step
        parent[find(int(a))] = node
        parent[find(int(b))] = node
    roots = [find(i) for i in range(n)]
    first: dict[int, int] = {}
    return np.array([first.setdefault(r, len(first)) for r in roots], dtype=np.int64)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 60), seed=st.integers(0, 2**16))
def test_every_cut_at_once_is_each_cut_and_the_tree_is_scikit_learns(n, seed):
    """One pass down the tree gives, for every k, the labels of applying the first n − k merges; the tree is
    the one AgglomerativeClustering(linkage="ward") builds; the batched silhouettes are the single ones."""
    from scipy.cluster.hierarchy import ward
    from sklearn.cluster import AgglomerativeClustering

    vecs = np.random.default_rng(seed).normal(size=(n, 6))
    children = ward(vecs)[:, :2].astype(np.int64)
    tree = AgglomerativeClustering(n_clusters=None, distance_threshold=0.0, linkage="ward").fit(vecs)
    assert children.tolist() == tree.children_.tolist()
    ks = range(2, min(8, n - 1) + 1)
    every = cuts(children, n, ks)
    assert list(every) == list(ks)
    for k in ks:
        assert every[k].tolist() == cut_tree(children, n, k).tolist()
    distances = np.linalg.norm(vecs[:, None] - vecs[None], axis=2)
    assert silhouettes(distances, list(every.values())) == pytest.approx(
        [silhouette(distances, labels) for labels in every.values()], abs=1e-12
    )


def test_cut_tree_applies_the_first_merges():
    children = np.array([[0, 1], [2, 3], [4, 5]])  # nodes 4 = {0,1}, 5 = {2,3}, 6 = all
    assert cut_tree(children, 4, 2).tolist() == [0, 0, 1, 1]
    assert cut_tree(children, 4, 4).tolist() == [0, 1, 2, 3]
    assert cut_tree(children, 4, 1).tolist() == [0, 0, 0, 0]


def test_medoid_is_the_most_central_member():
    assert medoid(unit_rows([1, 0], [1, 1], [0, 1])) == 1


def test_hungarian_keeps_ids_across_a_permuted_recluster():
    a, b, c = unit_rows([1, 0, 0], [0, 1, 0], [0, 0, 1])
    old = [StoredCluster(4, "pa", a, 5), StoredCluster(7, "pb", b, 3), StoredCluster(9, "pc", c, 2)]
    ids, matched, sims, nxt = match_ids(np.stack([c, a, b]), old, next_id=10, min_similarity=0.5)
    assert ids == [9, 4, 7] and matched == [9, 4, 7] and nxt == 10 and sims == pytest.approx([1, 1, 1])
    far = unit_rows([1, 1, 1])[0] * 0 + unit_rows([-1, -1, -1])[0]
    ids, matched, _, nxt = match_ids(np.stack([b, far]), old, next_id=10, min_similarity=0.5)
    assert ids == [7, 10] and matched == [7, None] and nxt == 11  # a new interest gets a never-used id


def test_mmr_trades_relevance_for_novelty():
    vecs = unit_rows([1, 0], [1, 0], [0, 1])  # 0 and 1 identical, 2 orthogonal
    rel = np.array([1.0, 0.95, 0.9])  # scaled to 1, 0.5, 0
    # pick 1: 0.6*[1, .5, 0] -> 0; pick 2: idx1 0.6*.5 - 0.4*1 = -0.1 < idx2 0.6*0 - 0.4*0 = 0 -> 2
    assert mmr(rel, vecs, 3, 0.6) == [0, 2, 1]
    assert mmr(rel, vecs, 3, 1.0) == [0, 1, 2]  # lambda 1: relevance order
    assert mmr(np.array([0.3, 0.3]), unit_rows([1, 0], [0, 1]), 2, 0.6) == [
        0,
        1,
    ]  # equal scores: no division by 0


def test_mmr_tail_lambda_applies_after_the_head_only():
    # 0 and 1 identical, 2 and 3 orthogonal to them and to each other; relevance scaled to 1, .6, .2, 0
    vecs = unit_rows([1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1])
    rel = np.array([1.0, 0.8, 0.6, 0.5])
    assert mmr(rel, vecs, 3, 1.0) == [0, 1, 2]  # relevance order
    # head 1 at λ 1, then λ 0.5: idx1 .5*.6 - .5*1 = -.2 < idx2 .5*.2 - 0 = .1 -> 2; then idx3 0 > idx1 -.2
    assert mmr(rel, vecs, 3, 1.0, tail=(1, 0.5, 1)) == [0, 2, 3]
    # every second pick after the head: 0, 1, 3 alike and 2 orthogonal, scaled relevance 1, .8, 0, .6; the
    # third pick at λ .5 is 2 (0 > 3's .3 - .5), the others at λ 1
    alike = unit_rows([1, 0], [1, 0], [0, 1], [1, 0])
    assert mmr(np.array([1.0, 0.9, 0.5, 0.8]), alike, 4, 1.0) == [0, 1, 3, 2]
    assert mmr(np.array([1.0, 0.9, 0.5, 0.8]), alike, 4, 1.0, tail=(1, 0.5, 2)) == [0, 1, 2, 3]
    # 2 as reach: no other pick takes it while others remain, and its score sets no scale (1, .9, .8 -> 1, .5,
    # -1.5, 0: at λ .5 it gains -.75 < 3's -.5); at λ 0 only distance counts (0 > -1)
    reach = np.array([False, False, True, False])
    assert mmr(np.array([1.0, 0.9, 0.5, 0.8]), alike, 4, 1.0, reach=reach) == [0, 1, 3, 2]
    assert mmr(np.array([1.0, 0.9, 0.5, 0.8]), alike, 4, 1.0, tail=(1, 0.5, 2), reach=reach) == [0, 1, 3, 2]
    assert mmr(np.array([1.0, 0.9, 0.5, 0.8]), alike, 4, 1.0, tail=(1, 0.0, 2), reach=reach) == [0, 1, 2, 3]
    assert mmr(rel, vecs, 3, 1.0, tail=(2, 0.5, 1)) == [
        0,
        1,
        2,
    ]  # the head is the plain order; idx2 .1 > idx3 0
    assert mmr(rel, vecs, 3, 1.0, tail=(3, 0.0, 1)) == mmr(rel, vecs, 3, 1.0)  # a tail past k changes nothing


def test_cosaved_count_grows_with_the_list_only_past_the_floor():
    cfg = RecommendConfig(cosave_candidates=50, cosave_per_slot=2.5, tail_reach=False)
    assert cosaved_count(cfg, 100) == 50  # no tail reach
    cfg = RecommendConfig(cosave_candidates=50, cosave_per_slot=2.5)
    assert [cosaved_count(cfg, n) for n in (10, 20, 21, 100)] == [50, 50, 53, 250]
    assert cosaved_count(RecommendConfig(cosave_per_slot=8.0), 10) == 50  # a head alone
    assert cosaved_count(RecommendConfig(cosave_candidates=50, cosave_per_slot=0.0), 100) == 50  # the floor
    # over a candidate pool (new papers: no co-saves to reach into) no tail reach, so no reach candidates
    assert cosaved_count(cfg, 100, pooled=True) == 50
    assert tail_of(cfg) == (cfg.limit, cfg.mmr_tail_lambda, cfg.mmr_tail_every)
    assert tail_of(cfg, 3, pooled=True) is None and tail_of(cfg, 2, pooled=True) is None


def test_over_a_pool_a_library_of_few_interests_gets_the_pages_last_pick_spread():
    cfg = RecommendConfig(limit=10, pool_spread_clusters=3, pool_spread_lambda=0.6)
    tail = tail_of(cfg, 1, pooled=True, clusters=3)
    assert tail == (9, 0.6, 1, 10) and [i for i in range(50) if is_reach(tail, i)] == [9]  # the 10th only
    assert tail_of(cfg, 1, pooled=True, clusters=4) is None  # more interests known: the list as it was
    assert tail_of(cfg, 1, pooled=True) is None and tail_of(cfg, 3, pooled=True, clusters=1) is None
    assert tail_of(replace(cfg, pool_spread_clusters=0), 1, pooled=True, clusters=1) is None  # off
    assert tail_of(cfg, 1, clusters=1) == (10, cfg.mmr_tail_lambda, cfg.mmr_tail_every)  # no pool: the reach
    # 0–10 alike in falling relevance, 11 orthogonal and the least relevant: at the 10th pick λ .6 takes 11
    # (0 against .6 · .18 − .4 for 9), then relevance order again
    vecs = unit_rows(*([[1, 0]] * 11), [0, 1])
    rel = np.linspace(1.0, 0.0, 12)
    assert mmr(rel, vecs, 12, 1.0) == list(range(12))
    assert mmr(rel, vecs, 12, 1.0, tail=tail) == [*range(9), 11, 9, 10]


def test_picks_past_the_page_trade_the_later_relevance():
    # four orthogonal candidates: relevance 1, .9, .5, .1; past the first two picks the later relevance
    # (3 best, then 2) orders what is left; the page itself is the relevance order
    vecs = unit_rows([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1])
    rel, later = np.array([1.0, 0.9, 0.5, 0.1]), np.array([0.0, 0.1, 0.2, 0.9])
    assert mmr(rel, vecs, 4, 1.0) == [0, 1, 2, 3]
    assert mmr(rel, vecs, 4, 1.0, later=(2, later)) == [0, 1, 3, 2]
    assert mmr(rel, vecs, 4, 1.0, later=(0, later)) == [3, 2, 1, 0]
    # the tail's picks keep the first relevance: the spread pick at 2 (λ 1 here) takes 2 before 3
    assert mmr(rel, vecs, 4, 1.0, tail=(1, 1.0, 1, 3), later=(2, later)) == [0, 1, 2, 3]


def test_mmr_quota_bonus_gives_an_under_served_cluster_a_slot_softly():
    vecs = unit_rows([1, 0], [1, 0], [0, 1], [0, 1])
    rel = np.array([1.0, 0.9, 0.5, 0.2])  # scaled: 1, 0.875, 0.375, 0
    groups, targets = np.array([0, 0, 1, 1]), np.array([1, 1])  # one slot each
    assert mmr(rel, vecs, 2, 1.0) == [0, 1]  # relevance alone: both from cluster 0
    # bonus 0.6: pick 1 -> 0 (all under target); then cluster 0 is full: 0.875 vs 0.375 + 0.6 = 0.975 -> 2
    assert mmr(rel, vecs, 2, 1.0, groups, targets, 0.6) == [0, 2]
    # bonus 0.4: 0.375 + 0.4 = 0.775 < 0.875: a far less relevant candidate still loses its slot
    assert mmr(rel, vecs, 2, 1.0, groups, targets, 0.4) == [0, 1]
    assert mmr(rel, vecs, 2, 1.0, groups, targets, 0.0) == mmr(rel, vecs, 2, 1.0)  # 0: plain MMR


def test_mmr_deficit_bonus_favours_the_cluster_with_nothing_yet():
    vecs = unit_rows([1, 0], [1, 0], [1, 0], [0, 1], [0, 1])
    rel = np.array([1.0, 0.9, 0.8, 0.6, 0.0])  # scaled: 1, 0.9, 0.8, 0.6, 0
    groups, targets = np.array([0, 0, 0, 1, 1]), np.array([4, 1])
    # step, bonus 0.25: cluster 0 stays under its 4 slots, so it keeps the whole bonus: 0.9 + 0.25 beats
    # 0.6 + 0.25 for the second slot
    assert mmr(rel, vecs, 2, 1.0, groups, targets, 0.25) == [0, 1]
    # deficit: after one pick cluster 0 misses 3/4 of its slots (+0.1875), cluster 1 all of its one (+0.25):
    # 0.9 + 0.1875 = 1.0875 still beats 0.6 + 0.25 = 0.85 (a far less relevant cluster still waits)
    assert mmr(rel, vecs, 2, 1.0, groups, targets, 0.25, "deficit") == [0, 1]
    # with the third candidate of cluster 0 (0.8) against cluster 1's 0.6, after two picks cluster 0 misses
    # 2/4: 0.8 + 0.5·0.5 = 1.05 < 0.6 + 0.5 = 1.1 under deficit, > under step (0.8 + 0.5 = 1.3)
    assert mmr(rel, vecs, 3, 1.0, groups, targets, 0.5, "deficit") == [0, 1, 3]
    assert mmr(rel, vecs, 3, 1.0, groups, targets, 0.5) == [0, 1, 2]


def test_tier_pool_clusters_get_slot_shares_and_the_small_one_a_pick():
    """Tiers 3 and 2: Ward clusters of the blended pool, slots by each cluster's score mass (at least one
    each); the deficit bonus then lets the small cluster in before the dominant one's near-duplicate."""
    vecs = unit_rows([1, 0, 0], [0.99, 0.1, 0], [0.99, 0, 0.1], [0, 1, 0], [0.1, 0.99, 0])
    scores = np.array([0.9, 0.85, 0.84, 0.62, 0.1])  # scaled: 1, .9375, .925, .65, 0
    cfg = RecommendConfig()
    groups, targets = pool_targets(vecs, scores, 3, cfg, cfg.tier3_quota_bonus)
    assert groups[0] == groups[1] == groups[2] != groups[3] == groups[4]
    # masses 2.59 and 0.72: one slot each, the spare to the first cluster
    assert targets[groups[0]] == 2 and targets[groups[3]] == 1
    # pick 2, plain MMR (λ 0.8): the near-duplicate 0.8·.9375 − 0.2·0.995 = 0.551 beats 0.8·.65 = 0.52;
    # with the deficit bonus 0.1: 0.551 + 0.05 = 0.601 < 0.52 + 0.1 = 0.62
    assert mmr(scores, vecs, 3, 0.8)[:2] == [0, 1]
    assert mmr(scores, vecs, 3, 0.8, groups, targets, 0.1, "deficit")[:2] == [0, 3]
    assert pool_targets(vecs, scores, 3, cfg, cfg.tier2_quota_bonus) == (None, None)  # Tier 2: off


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 40),
    k=st.integers(1, 45),
    shape=st.sampled_from(["step", "deficit"]),
    bonus=st.sampled_from([0.0, 0.1, 0.5]),
    cover_gain=st.sampled_from([0.0, 1.0]),
    tail=st.sampled_from([None, (2, 0.0, 3), (0, 0.5, 1)]),
    ties=st.booleans(),
)
def test_mmr_at_many_lambdas_in_step_is_mmr_at_each_alone(seed, n, k, shape, bonus, cover_gain, tail, ties):
    """The λ sweep's one pass (every λ a row of the same arrays) picks exactly what MMR picks at each λ alone
    — quotas, the neighbourhood's cover, the tail's reach picks and tied scores included."""
    rng = np.random.default_rng(seed)
    rel = rng.integers(0, 3, n).astype(float) if ties else rng.random(n)
    vecs = rng.standard_normal((n, 4)).astype(np.float32)
    vecs[rng.random(n) < 0.3] = vecs[0]  # duplicates: tied similarities
    groups = rng.integers(-1, 3, n)
    targets = rng.integers(0, 4, 3)
    cover = (rng.integers(0, 6, (n, 5)), rng.random(6))
    reach = rng.random(n) < 0.3
    lams = [0.0, 0.3, 0.8, 0.8, 1.0]
    args = (groups, targets, bonus, shape, cover, cover_gain, tail, reach)
    assert mmr_many(rel, vecs, k, lams, *args) == [mmr(rel, vecs, k, lam, *args) for lam in lams]
    assert mmr_many(rel, vecs, k, [], *args) == []


class _Vectors:
    def __init__(self, rows):
        self.rows = np.asarray(rows, dtype=np.float32)

    def get(self, ids):
        return self.rows[np.asarray(ids, dtype=np.int64)]


def test_a_scored_candidate_s_features_read_as_name_value_pairs():
    from scix_core.recommend.result import plain
    from scix_core.recommend.stages.base import Features

    f = Features(("cosine", "cosave", "heuristic"), (0.5, 0.25, 0.6))
    assert tuple(f) == (("cosine", 0.5), ("cosave", 0.25), ("heuristic", 0.6)) and len(f) == 3
    assert dict(f)["cosave"] == 0.25 and f == tuple(f) and tuple(f) == f and f != (("cosine", 0.5),)
    assert plain({"scores": f}) == {"scores": [["cosine", 0.5], ["cosave", 0.25], ["heuristic", 0.6]]}


def test_savers_libraries_most_shared_first_without_the_asker():
    from scipy.sparse import csr_matrix

    from scix_core.recommend.community import Libraries

    # users × papers: u0 saved {0, 1} (the asker's own library), u1 {0, 2}, u2 {0, 1, 3}, u3 {4}, u4 {1, 5}
    pairs = [(0, 0), (0, 1), (1, 0), (1, 2), (2, 0), (2, 1), (2, 3), (3, 4), (4, 1), (4, 5)]
    users, items = zip(*pairs)
    libs = Libraries(csr_matrix((np.ones(len(pairs)), (users, items)), shape=(5, 6)))
    got = libs.savers_of(np.array([0, 1]), cap=10)
    # u2 shares both papers, then u1 and u4 one each (by user row); u0 holds nothing else; u3 shares none
    assert [(r.tolist(), w) for r, w in got] == [([0, 1, 3], 2), ([0, 2], 1), ([1, 5], 1)]
    assert [w for _, w in libs.savers_of(np.array([0, 1]), cap=1)] == [2]
    assert libs.savers_of(np.array([], dtype=np.int64), cap=10) == []


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sets(st.integers(0, 11), max_size=7), min_size=1, max_size=12),
    st.lists(st.integers(0, 11), max_size=5),
    st.integers(1, 6),
)
def test_savers_libraries_equal_their_definition_read_user_by_user(libraries, saved, cap):
    from scipy.sparse import csr_matrix

    from scix_core.recommend.community import Libraries

    pairs = [(u, p) for u, lib in enumerate(libraries) for p in sorted(lib)]
    users, items = zip(*pairs) if pairs else ((), ())
    libs = Libraries(csr_matrix((np.ones(len(pairs)), (users, items)), shape=(len(libraries), 12)))
    asked = set(saved)
    # every user sharing a paper whose library holds another, most shared first, ties by user row
    want = sorted(
        ((-len(lib & asked), u) for u, lib in enumerate(libraries) if lib & asked and lib - asked),
    )[:cap]
    got = libs.savers_of(np.array(saved, dtype=np.int64), cap)
    assert [(r.tolist(), n) for r, n in got] == [(sorted(libraries[u]), -neg) for neg, u in want]


def test_neighbour_cover_gives_the_interest_nobody_reached_a_pick():
    """Two users saved paper 0 beside the asker: one with two interests (x: papers 0, 1; y: 2, 3), one
    with one (x: 0, 4). The pool: two near-duplicates along x, one along y, less relevant."""
    from scipy.sparse import csr_matrix

    from scix_core.recommend.community import Libraries

    cfg = RecommendConfig(tier1_min_saves=2, min_silhouette=0.05)
    vectors = _Vectors(unit_rows([1, 0, 0], [0.98, 0.2, 0], [0, 1, 0], [0, 0.98, 0.2], [0.99, 0, 0.1]))
    pairs = [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 4)]  # user 0 is the asker
    users, items = zip(*pairs)
    libraries = Libraries(csr_matrix((np.ones(len(pairs)), (users, items)), shape=(3, 5)))
    cache = InterestCache()
    hood = neighbourhood(libraries, np.array([0]), cache, vectors, cfg)
    assert hood.users == 2 and hood.sizes.tolist() == [2, 1]  # both share one paper: equal weights
    assert hood.weight == pytest.approx([1 / 4, 1 / 4, 1 / 2])
    pool = unit_rows([1, 0.05, 0], [1, 0, 0.05], [0.1, 1, 0])
    assign, weight = hood.cover(pool)
    assert assign.tolist() == [[0, 2], [0, 2], [1, 2]]  # x, x, y for the first user; x for the second
    # with catalogue rows each candidate is placed once and kept, in whatever order the pool comes
    assert hood.cover(pool, [7, 8, 9])[0].tolist() == assign.tolist() and set(hood.assigned) == {7, 8, 9}
    assert hood.cover(pool[::-1], [9, 8, 7])[0].tolist() == assign[::-1].tolist()
    rel = np.array([1.0, 0.95, 0.6])  # scaled: 1, 0.875, 0
    # pick 1 covers interests 0 and 2; pick 2: the duplicate 0.875 + 0 against 0 + γ/4 (interest 1)
    assert mmr(rel, pool, 2, 1.0) == [0, 1]
    assert mmr(rel, pool, 2, 1.0, cover=(assign, weight), cover_gain=4.0) == [0, 2]  # 1.0 > 0.875
    assert mmr(rel, pool, 2, 1.0, cover=(assign, weight), cover_gain=3.0) == [0, 1]  # 0.75 < 0.875
    # centroids are kept per library, the neighbourhood per snapshot and saved papers
    assert len(cache._kept) == 2 and neighbourhood(libraries, np.array([0]), cache, vectors, cfg) is hood
    assert neighbourhood(libraries, np.array([3]), cache, vectors, cfg).users == 1
    assert neighbourhood(Libraries(libraries.by_user[:1]), np.array([0]), cache, vectors, cfg) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=12), st.integers(1, 30), st.integers(0, 2**16))
def test_each_candidate_falls_in_its_nearest_interest_of_each_user(sizes, n, seed):
    from scix_core.recommend.interests import Neighbourhood

    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((sum(sizes), 4)).astype(np.float32)
    centroids[-1] = centroids[0]  # equal similarities: the first of them, as a plain argmax takes
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    hood = Neighbourhood(centroids, starts, np.array(sizes), np.ones(sum(sizes)), len(sizes))
    candidates = rng.standard_normal((n, 4)).astype(np.float32)
    sims = candidates @ centroids.T
    want = [[a + int(np.argmax(sims[i, a : a + k])) for a, k in zip(starts, sizes)] for i in range(n)]
    assert hood.cover(candidates)[0].tolist() == want


def test_interest_warm_up_places_every_library_and_a_restart_reads_them_from_its_file(tmp_path):
    """A server's warm-up: every library's centroids computed once and written; a new process (a new cache)
    reads them all back, equal to what a request would compute; a cut-short file is computed again."""
    from scipy.sparse import csr_matrix

    from scix_core.recommend.community import Libraries

    cfg = RecommendConfig(tier1_min_saves=2, min_silhouette=0.05)
    vectors = _Vectors(unit_rows([1, 0, 0], [0.98, 0.2, 0], [0, 1, 0], [0, 0.98, 0.2], [0.99, 0, 0.1]))
    pairs = [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 4)]  # a user with no saves: row 3
    users, items = zip(*pairs)
    libraries = Libraries(csr_matrix((np.ones(len(pairs)), (users, items)), shape=(4, 5)))
    first = InterestCache(build="b1")
    assert first.warm(libraries, vectors, cfg, tmp_path) == {"libraries": 3, "read": 0, "computed": 3}
    assert first.warm(libraries, vectors, cfg, tmp_path) == {"libraries": 3, "read": 0, "computed": 0}
    (file,) = tmp_path.glob("interests-*.npz")
    again = InterestCache(build="b1")
    assert again.warm(libraries, vectors, cfg, tmp_path) == {"libraries": 3, "read": 3, "computed": 0}
    fresh = InterestCache()
    for rows in ([0], [0, 1, 2, 3], [0, 4]):
        assert again.centroids(np.array(rows), vectors, cfg) == pytest.approx(
            fresh.centroids(np.array(rows), vectors, cfg)
        )
    assert len(again._kept) == 3  # every one came from the file
    # another build's vectors (or other clustering settings) never read this file
    assert InterestCache(build="b2").warm(libraries, vectors, cfg, tmp_path)["read"] == 0
    assert len(list(tmp_path.glob("interests-*.npz"))) == 2
    file.write_bytes(file.read_bytes()[:100])
    assert InterestCache(build="b1").warm(libraries, vectors, cfg, tmp_path)["computed"] == 3


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), users=st.integers(1, 6), k=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_mmr_cover_term_is_the_weight_of_the_interests_not_yet_covered(n, users, k, seed):
    """MMR's sparse cover term picks what the definition picks: at every step each candidate gains γ × the
    summed weight of its interests (one per neighbour) that no earlier pick fell in."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, users)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    weight = np.repeat(rng.random(users) / sizes, sizes)
    assign = starts + (rng.integers(0, 4, (n, users)) % sizes)
    rel, vecs = rng.random(n), unit_rows(*rng.normal(size=(n, 4)))
    lam, gain = float(rng.choice([0.5, 0.8, 1.0])), float(rng.choice([0.5, 2.0]))
    picked, covered = [], np.zeros(len(weight), dtype=bool)
    scaled = (rel - rel.min()) / (rel.max() - rel.min()) if rel.max() > rel.min() else np.ones(n)
    for _ in range(min(k, n)):  # the greedy written out, candidate by candidate
        value = [
            -np.inf
            if i in picked
            else lam * scaled[i]
            - (1 - lam) * (max(float(vecs[i] @ vecs[j]) for j in picked) if picked else 0.0)
            + gain * sum(weight[a] for a in assign[i] if not covered[a])
            for i in range(n)
        ]
        best = int(np.argmax(value))
        picked.append(best)
        covered[assign[best]] = True
    assert mmr(rel, vecs, k, lam, cover=(assign, weight), cover_gain=gain) == picked


def test_ewma_by_hand():
    # half-life 1 save: alpha = 1/2. The first save starting the average: [1,0] then [0,1] -> [.5,.5]; then
    # [0,1] again -> [.25,.75]
    first = np.array([[1.0, 0], [0, 1]]), np.array([[1.0, 0], [0, 1], [0, 1]])
    assert ewma(first[0], 1.0, "first") == pytest.approx([0.5, 0.5])
    assert ewma(first[1], 1.0, "first") == pytest.approx([0.25, 0.75])
    # bias-corrected: weights 1/4, 1/2 (oldest first) over their sum 3/4 -> [1/3, 2/3]; three saves: 1/8, 1/4,
    # 1/2 over 7/8 -> [1/7, 6/7]
    assert ewma(first[0], 1.0) == pytest.approx([1 / 3, 2 / 3])
    assert ewma(first[1], 1.0) == pytest.approx([1 / 7, 6 / 7])
    for start in ("first", "corrected"):
        assert ewma(np.array([[3.0, 4.0]]), 20.0, start) == pytest.approx([3, 4])
    # a long half-life: the corrected average of a few saves is close to their plain mean, not the first save
    three = np.eye(3)
    assert ewma(three, 20.0) == pytest.approx([0.322, 0.333, 0.345], abs=1e-3)
    assert ewma(three, 20.0, "first")[0] == pytest.approx(0.933, abs=1e-3)


def _catalog(codes, dates=None, cites=None) -> Catalog:
    ids = tuple(f"p{i}" for i in range(len(codes)))
    month = np.array([months(d) if d else -1 for d in (dates or [None] * len(codes))], dtype=np.int32)
    return Catalog(
        "t",
        ids,
        {p: i for i, p in enumerate(ids)},
        tuple(tuple(c) for c in codes),
        "categories",
        month,
        np.array(cites or [0] * len(codes), dtype=np.int64),
    )


def _dismiss(paper, day):
    return Event(0, paper, "dismiss", dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=day))


def test_suppression_window_counts_back_from_the_newest_interaction():
    cat = _catalog([["cs.LG", "stat.ML"], ["cs.LG"], ["cs.LG"], ["cs.CV", "cs.LG"], ["cs.LG"]])
    inside = [_dismiss("p0", 0), _dismiss("p1", 5), _dismiss("p2", 13)]
    assert suppressed_codes(inside + [Event(0, "p4", "save", inside[-1].at)], cat, 3, 14) == {"cs.LG": 3}
    # the first dismissal is 15 days before the newest interaction: only 2 in the window
    late = [_dismiss("p0", 0), _dismiss("p1", 5), _dismiss("p2", 15)]
    assert suppressed_codes(late, cat, 3, 14) == {}
    # a cross-listed code does not count (p3's primary is cs.CV), and a paper counts once
    assert (
        suppressed_codes(
            [_dismiss("p0", 0), _dismiss("p0", 1), _dismiss("p3", 2), _dismiss("p1", 3)], cat, 3, 14
        )
        == {}
    )


def test_trending_window_from_the_newest_paper_and_widening():
    d = dt.date
    cat = _catalog(
        [["a"], ["a"], ["b"], ["a"], ["b"]],
        [d(2024, 6, 1), d(2023, 1, 1), d(2024, 5, 1), d(2019, 1, 1), d(2010, 1, 1)],
        [5, 50, 7, 500, 9],
    )
    # 24 months back from 2024-06: p0, p1 (2023-01) in; p3 (2019) out despite 500 citations
    assert cat.ids[trending(cat, ("a",), np.array([], dtype=np.int64), 2, (24, 48, 96)).rows[0]] == "p1"
    wide = trending(
        cat, ("a",), np.array([], dtype=np.int64), 3, (24, 48, 96)
    )  # 2 < 3 in 24 and 48 months: 96
    assert (
        wide.window_months == 96
        and [cat.ids[r] for r in wide.rows] == ["p3", "p1", "p0"]
        and len(wide.notes) == 2
    )
    excl = trending(cat, ("a",), np.array([1]), 1, (24,))
    assert [cat.ids[r] for r in excl.rows] == ["p0"]


def test_trending_without_citations_or_dates_says_what_it_lacked():
    nocite = _catalog([["a"], ["a"]], [dt.date(2020, 1, 1), dt.date(2021, 1, 1)])
    t = trending(nocite, (), np.array([], dtype=np.int64), 2, (24,))
    assert [nocite.ids[r] for r in t.rows] == ["p1", "p0"] and any("recency alone" in n for n in t.notes)
    nodate = _catalog([["a"], ["a"]], cites=[1, 3])
    t = trending(nodate, (), np.array([], dtype=np.int64), 2, (24,))
    assert [nodate.ids[r] for r in t.rows] == ["p1", "p0"] and any("citations alone" in n for n in t.notes)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "ab"]),
            st.one_of(st.none(), st.dates(dt.date(2018, 1, 1), dt.date(2024, 12, 31))),
            st.integers(0, 3),  # few citation counts: many ties
        ),
        min_size=1,
        max_size=30,
    ),
    st.sets(st.integers(0, 29)),
    st.sampled_from([(), ("a",), ("b",)]),
)
def test_trending_is_the_catalogues_one_order_filtered(papers, excluded, categories):
    cat = _catalog([list(c) for c, _, _ in papers], [d for _, d, _ in papers], [n for _, _, n in papers])
    exclude = np.array(sorted(i for i in excluded if i < len(papers)), dtype=np.int64)
    got = trending(cat, categories, exclude, 3, (24, 48)).rows
    # what each call once sorted for itself: the rows left, by citations, then newer, then corpus order
    mask = cat.rows_with_codes(frozenset(categories)) if categories else np.ones(len(cat), dtype=bool)
    mask[exclude] = False
    if cat.has_dates:
        window = next((m for m in (24, 48) if (mask & (cat.month > cat.newest_month - m)).sum() >= 3), 48)
        mask &= cat.month > cat.newest_month - window
    left = [r for r in range(len(cat)) if mask[r]]
    assert got.tolist() == sorted(left, key=lambda r: (-cat.citations[r], -cat.month[r], r))


def test_next_tier_messages_follow_the_configured_thresholds():
    cfg = RecommendConfig()
    assert next_tier_message(cfg, 2, 3) == "2 more saves unlock clustered recommendations (Tier 1)"
    assert next_tier_message(cfg, 3, 2) == "1 more save unlocks profile-based recommendations (Tier 2)"
    assert (
        next_tier_message(cfg, 0, 0) == "1 more save unlocks recommendations from your saved papers (Tier 3)"
    )
    assert next_tier_message(cfg, 1, 9) is None
    assert (
        next_tier_message(RecommendConfig(tier1_min_saves=8), 2, 3)
        == "5 more saves unlock clustered recommendations (Tier 1)"
    )


def test_the_warm_up_imports_what_tier1_imports_on_first_use():
    code = (
        "import sys; from scix_core.recommend import Recommender; from scix_core.recommend.pipeline import "
        "warm_stages; names = ('scipy.cluster.hierarchy', 'scipy.optimize'); "
        "before = any(n in sys.modules for n in names); "
        "warm_stages(); print(before, all(n in sys.modules for n in names))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["False", "True"]  # not on the cold path; loaded by the warm-up


@settings(max_examples=50, deadline=None)
@given(
    numpy_scalars=st.booleans(),
    cluster=st.one_of(st.none(), st.integers(0, 9)),
    position=st.one_of(st.none(), st.integers(1, 10)),
    codes=st.lists(st.text(min_size=1, max_size=12), max_size=80),
    scores=st.lists(st.tuples(st.sampled_from(["cosine", "cosave", "heuristic"]), st.floats(-2, 2))),
)
def test_an_items_json_is_its_fields_plain(numpy_scalars, cluster, position, codes, scores):
    num = (lambda v, t: t(v)) if numpy_scalars else (lambda v, t: v)
    item = RecItem(
        "p1",
        "A title",
        num(3, np.int64),
        num(0.25, np.float32),
        num(1, np.int64),
        "co-saved",
        None if cluster is None else num(cluster, np.int64),
        Features(tuple(n for n, _ in scores), tuple(v for _, v in scores)),
        None if position is None else num(position, np.int64),
        num(False, np.bool_),
        tuple(codes),
    )
    expected = {**plain(item), "scores": dict(item.scores)}  # what the walk over every field gives
    got = item.to_dict()
    assert got == expected and list(got) == list(expected)
    assert not any(isinstance(v, np.generic) for v in got.values())


def test_a_stored_number_of_clusters_is_kept_within_the_tolerance():
    rng = np.random.default_rng(5)
    centres = np.eye(6, 16)
    vecs = np.vstack([c + 0.35 * rng.standard_normal((8, 16)) for c in centres])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    labels, scores = ward_labels(vecs, 8, 0.05)
    best = int(labels.max()) + 1
    other = max((k for k in scores if k != best), key=scores.get)  # the runner-up cut
    gap = scores[best] - scores[other]
    kept, _ = ward_labels(vecs, 8, 0.05, keep_k=other, tolerance=gap + 1e-9)
    assert int(kept.max()) + 1 == other  # within the tolerance: the stored k stays
    moved, _ = ward_labels(vecs, 8, 0.05, keep_k=other, tolerance=gap / 2)
    assert np.array_equal(moved, labels)  # beyond it: the best cut
    assert np.array_equal(ward_labels(vecs, 8, 0.05, keep_k=1, tolerance=1.0)[0], labels)  # not a cut tried
