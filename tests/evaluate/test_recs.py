"""``scix eval-recs``: the hold-out protocol, the metrics by hand, and a run on real CiteULike-a libraries."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest

from scix_core.config import RecommendConfig
from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate import rec_runs
from scix_core.evaluate.recs import (
    METRICS,
    UserSplit,
    cluster_coverage,
    diversity,
    evaluate_recs,
    nearest_clusters,
    random_line,
    random_lists,
    ranking_metrics,
    split_libraries,
    subtopic_recall,
)
from tests.slices import library_counts


def test_split_is_seeded_per_user_and_never_loses_a_save():
    libs = {"a": [f"p{i}" for i in range(10)], "b": [f"q{i}" for i in range(5)], "c": ["x", "y", "z", "w"]}
    one = split_libraries(libs, 0.2, seed=1, min_saves=5)
    assert [s.user for s in one] == ["a", "b"]  # c has fewer than 5 saves
    a = one[0]
    assert len(a.test) == 2 and set(a.train) | a.test == set(libs["a"]) and not set(a.train) & a.test
    assert list(a.train) == [p for p in libs["a"] if p not in a.test]  # save order kept
    assert split_libraries({"a": libs["a"]}, 0.2, seed=1, min_saves=5)[0] == a  # other users do not move it
    latest = split_libraries(libs, 0.2, seed=1, min_saves=5, real_times=True)[0]
    assert latest.test == {"p8", "p9"}  # real times: the latest 20%
    with pytest.raises(ConfigError, match="holdout"):
        split_libraries(libs, 1.5, seed=1, min_saves=5)


def test_the_cold_item_split_holds_out_the_new_items_of_every_user():
    from scix_core.evaluate import tuning
    from scix_core.recommend.splits import cold_split, new_items

    ids = tuple(f"p{i}" for i in range(20))
    new = new_items(ids, 0.25, seed=3)
    assert len(new) == 5 and new == new_items(ids, 0.25, seed=3) and new != new_items(ids, 0.25, seed=4)
    libs = {"a": list(ids[:12]), "b": [p for p in ids if p not in new][:6], "c": list(ids[5:9])}
    splits = {s.user: s for s in cold_split(libs, new, min_saves=3)}
    assert "b" not in splits  # no new item saved: nothing to find
    a = splits["a"]
    assert a.test == set(libs["a"]) & new and set(a.train) == set(libs["a"]) - new
    assert list(a.train) == [p for p in libs["a"] if p not in new]  # save order kept
    assert all(len(s.train) >= 3 for s in splits.values())
    with pytest.raises(ConfigError, match="new-items"):
        new_items(ids, 1.0, seed=3)
    # the peers' cold tuning: new items carved from the training items only, gone from every fit
    train = {u: s.train for u, s in splits.items()}
    fit, val, carved = tuning.carve_items(train, list(train), 0.3, seed=1)
    assert carved <= {p for t in train.values() for p in t} and not carved & new
    assert all(not set(f) & carved for f in fit.values())
    assert all(held <= carved and held == set(train[u]) & carved for u, held in val.items())


def test_ranking_metrics_by_hand():
    splits = [UserSplit("u", ("t1",), frozenset({"a", "b"})), UserSplit("v", ("t2",), frozenset({"c"}))]
    values = ranking_metrics({"u": ["x", "a", "y"], "v": ["z"]}, splits)
    assert values["recall@10"] == {"u": 0.5, "v": 0.0}
    assert values["hit@10"] == {"u": 1.0, "v": 0.0}
    # one hit at rank 2 of two relevant: (1/log2(3)) / (1 + 1/log2(3))
    assert values["ndcg@10"]["u"] == pytest.approx((1 / np.log2(3)) / (1 + 1 / np.log2(3)))


def test_diversity_and_cluster_coverage_by_hand():
    e = np.eye(3)
    assert (
        diversity(e) == pytest.approx(1.0)
        and diversity(e[[0, 0]]) == pytest.approx(0.0)
        and diversity(e[:1]) == 0.0
    )
    centroids = np.eye(3)[:2]
    assert cluster_coverage(np.array([[1.0, 0.1, 0], [0.9, 0.2, 0]]), centroids) == 0.5
    assert cluster_coverage(np.array([[1.0, 0, 0], [0, 1.0, 0]]), centroids) == 1.0


def test_subtopic_recall_over_interest_clusters_by_hand():
    centroids = np.eye(3)[:2]  # two interests
    assert nearest_clusters(np.array([[0.9, 0.1, 0], [0.2, 0.8, 0.5]]), centroids).tolist() == [0, 1]
    held = {"a": 0, "b": 0, "c": 1}  # held-out saves in both interests
    assert subtopic_recall(["x", "a", "b"], held) == 0.5  # two hits, one interest
    assert subtopic_recall(["c", "y", "a"], held) == 1.0
    assert subtopic_recall(["x", "y"], held) == 0.0  # spread without a saved paper reaches nothing
    assert subtopic_recall(["a"], {}) == 0.0


def test_unknown_runs_list_the_valid_ones():
    with pytest.raises(UnknownNameError, match="content-knn"):
        rec_runs.check_runs(["tier1", "popularity"])
    assert "mmr_0.6" in rec_runs.ALL_RUNS and "mmr_1.0" in rec_runs.ALL_RUNS


@pytest.mark.model
@pytest.mark.realdata
def test_eval_recs_on_real_libraries(citeulike_home, citeulike_data, monkeypatch):
    from scix_core.evaluate import recs
    from scix_core.train.scorer import in_run_scorer

    asked = []

    def full_saves_table(rec, lists, splits, peer_runs, depth):  # the real table, and the cascade asked anew
        made, ran = real(rec, lists, splits, peer_runs, depth)
        without = {r: v for r, v in lists.items() if r != "tier1"}
        asked.append((made, ran, real(rec, without, splits, peer_runs, depth)))
        return made, ran

    real = recs.full_saves_table
    monkeypatch.setattr(recs, "full_saves_table", full_saves_table)

    runs = (
        "tier3",
        "tier2",
        "tier1",
        "tier1-nommr",
        "tier1-rrf",
        "tier1-quota",
        "tier1-cosine",
        "tier1-content",
        "mmr_0.0",
        "mmr_1.0",
        "most-popular",
        "content-knn",
        "rp3beta",
        "als",
    )
    # the default co-saves (RP3beta + EASE); 60 users as notebook 06 evaluates: the same training saves, so
    # the two share one cached EASE fit (the LightGBM run, whose private community would need its own, is
    # measured below with RP3beta co-saves)
    cfg = citeulike_home.replace(
        **{"recommend.collab": RecommendConfig.collab, "recommend.tier_collab": RecommendConfig.tier_collab}
    )
    report = evaluate_recs("cul", cfg, users=60, runs=runs, permutations=500, progress=False)
    assert report.n_users == 60 and set(report.runs) == set(runs)
    assert report.setup["collab"] == "rp3beta+ease+ials" and not report.setup["collab_failure"]
    assert report.setup["users_eligible"] == library_counts(citeulike_data)[0]  # every user has 10+ saves
    for run in runs:
        for metric in METRICS:
            assert 0.0 <= report.runs[run][metric] <= 1.0, (run, metric)
        assert set(report.per_user[run]["recall@10"]) == set(report.per_user["content-knn"]["recall@10"])
    # MMR at λ = 1 is the score order bent only by the quota bonus (plain MMR at λ = 1 is the score order: the
    # unit tests); λ = 0 trades everything for diversity
    assert report.runs["mmr_1.0"]["cluster_coverage"] >= report.runs["tier1-nommr"]["cluster_coverage"]
    assert report.runs["mmr_0.0"]["ild@10"] > report.runs["mmr_1.0"]["ild@10"]
    # quota over the final slots spreads the picks over more of the user's clusters than pooled MMR
    assert report.runs["tier1-quota"]["cluster_coverage"] >= report.runs["tier1"]["cluster_coverage"]
    # learned peers beat popularity on real libraries; the co-saves lift Tier 1 above its content-only self
    assert report.runs["als"]["recall@10"] > report.runs["most-popular"]["recall@10"]
    assert report.runs["rp3beta"]["recall@10"] > report.runs["most-popular"]["recall@10"]
    assert report.setup["tuned"]["rp3beta"]["params"] in [
        v["params"] for v in report.setup["tuned"]["rp3beta"]["validation"]
    ]
    assert report.runs["tier1"]["recall@10"] > report.runs["tier1-content"]["recall@10"]
    assert {c.candidate for c in report.comparisons if c.baseline == "content-knn"} == set(runs) - {
        "content-knn"
    }
    # the other scorers have their own gates against the default heuristic; the default's own name (cosine) is
    # tier1
    assert "tier1-content over tier1" in report.gates
    assert "tier1-cosine over tier1" not in report.gates and citeulike_home.recommend.heuristic == "cosine"
    assert report.gates["most-popular"].ship is False
    assert set(report.per_tier) == {"1", "3", "5", "all"}
    assert report.per_tier["1"]["tiers"] == {"tier3": 60} and report.per_tier["3"]["tiers"] == {"tier2": 60}
    assert report.per_tier["all"]["tiers"] == {"tier1": 60}
    assert all(
        set(block["runs"]) == {"cascade", "content-knn", "rp3beta"} for block in report.per_tier.values()
    )
    # the table of all the saves takes the cascade's lists from the main table's tier1, which finishes the
    # way Tier 1 itself picks: the cascade asked of the recommender gives every user the same list
    ((made, ran, anew),) = asked
    assert anew == (made, ran) and len(made["cascade"]) == 60
    for metric in ("recall@10", "cluster_coverage"):
        assert report.per_tier["all"]["runs"]["cascade"][metric] == pytest.approx(
            report.runs["tier1"][metric]
        )
    # each per-tier table tests the cascade against each peer on recall and coverage, Holm over the table
    for block in report.per_tier.values():
        tests = {(c["baseline"], c["metric"]): c for c in block["comparisons"]}
        assert set(tests) == {
            (p, m) for p in ("content-knn", "rp3beta") for m in ("recall@10", "cluster_coverage")
        }
        for (peer, metric), c in tests.items():
            assert c["candidate"] == "cascade" and c["p"] <= c["p_adj"] <= 1.0
            assert c["delta"] == pytest.approx(block["runs"]["cascade"][metric] - block["runs"][peer][metric])
    lgbm = evaluate_recs(
        "cul",
        citeulike_home,
        users=60,
        runs=("tier1", "tier1-lgbm"),
        baseline=None,
        per_tier=False,
        permutations=500,
        progress=False,
        scorer_trainer=in_run_scorer,
    )
    assert "tier1-lgbm over tier1" in lgbm.gates and 0.0 <= lgbm.runs["tier1-lgbm"]["recall@10"] <= 1.0
    assert "age_months" in lgbm.setup["lgbm_audit"]["features"] and lgbm.setup["lgbm_audit"]["errors"]


@pytest.mark.model
@pytest.mark.realdata
def test_the_cold_item_protocol_on_real_libraries(citeulike_home):
    runs = ("tier1", "content-knn", "svm", "cf-from-text", "rp3beta", "most-popular")
    report = evaluate_recs(
        "cul",
        citeulike_home,
        users=30,
        runs=runs,
        new_share=0.2,
        permutations=200,
        progress=False,
        per_tier_users=10,
        cutoffs=(10, 50),
    )
    setup = report.setup
    assert setup["protocol"] == "cold-item" and setup["new_papers"] == round(0.2 * 6000)
    # the peers that rank only saved items are listed, with why, never scored as zeros
    assert set(setup["not_applicable"]) == {"rp3beta", "most-popular"}
    assert "nobody saved" in setup["not_applicable"]["rp3beta"]
    assert set(report.runs) == {"tier1", "content-knn", "svm", "cf-from-text"}
    for run in report.runs:
        assert 0.0 < report.runs[run]["recall@10"] <= 1.0, run  # every run finds new papers
        assert report.catalogue_coverage[run] <= 1.0  # of the new papers: the candidates
    assert set(setup["tuned"]) == {"svm", "cf-from-text"}  # tuned on new items carved from the training ones
    drawn = setup["random_list"]  # a random list's measures beside the runs': their reference
    for m in (drawn["users"], drawn["per_tier_users"]):
        assert 0.0 < m["cluster_coverage"] <= 1.0 and 0.0 <= m["s_recall@10"] <= 1.0
    assert f"coverage {drawn['users']['cluster_coverage']:.3f}" in random_line(setup)
    assert random_line({}) == ""
    # S-recall needs held-out saves in the list: the cascade's lists beat a random one there
    assert report.runs["tier1"]["s_recall@10"] > drawn["users"]["s_recall@10"]
    assert all(
        block["runs"].keys() == {"cascade", "content-knn", "svm", "cf-from-text"}
        for block in report.per_tier.values()
    )
    for block in report.per_tier.values():  # the cascade against each peer at every cutoff and on coverage
        assert {(c["baseline"], c["metric"]) for c in block["comparisons"]} == {
            (p, m)
            for p in ("content-knn", "svm", "cf-from-text")
            for m in ("recall@10", "recall@50", "cluster_coverage")
        }


@pytest.mark.model
@pytest.mark.realdata
def test_cold_lists_are_drawn_from_the_new_papers_only(citeulike_home, tmp_path):
    from scix_core.evaluate.rec_lists import replay
    from scix_core.recommend import Recommender, UserState
    from scix_core.recommend.library import library_saves
    from scix_core.recommend.splits import cold_split, new_items, sample

    cfg = citeulike_home
    probe = Recommender("cul", cfg, persist_clusters=False, build_community=False)
    libraries = library_saves(probe.build_dir)
    new = new_items(probe.side.catalog.ids, 0.2, seed=1)
    rows = sorted(probe.side.catalog.row[p] for p in new)
    splits = sample(cold_split(libraries, new, min_saves=5), 8, seed=1)
    train = {u: tuple(p for p in ps if p not in new) for u, ps in libraries.items()}
    rec = Recommender(
        "cul",
        cfg,
        persist_clusters=False,
        state=UserState(tmp_path / "cold.sqlite"),
        build_community=False,
        pool=rows,
    )
    replay(rec, train, splits)
    peers = rec_runs.Peers(rec, train, evaluated=[s.user for s in splits], cold=0.2, validation_users=50)
    outside = np.ones(len(rec.side.catalog), dtype=bool)
    outside[rows] = False
    bridged, spread = 0, 0
    for s in splits:
        got = rec.recommend(s.user, 10, log=False)
        assert got.ids and set(got.ids) <= new, got.ids
        # Tier 1 over a pool: no reach past the page; a library of few interests gets its 10th pick spread
        mmr, k = got.stage("mmr").summary, got.stage("cluster").summary["k"]
        assert "reach_picks" not in mmr and got.tier == 1
        assert all(c.later is not None for c in got.stage("mmr").output)  # past the page: the later score
        assert mmr["later_from_pick"] == rec.config.recommend.limit + 1
        assert (mmr["spread_pick"] is not None) == (k <= rec.config.recommend.pool_spread_clusters), k
        if mmr["spread_pick"] is not None:
            spread += 1
            assert mmr["spread_pick"] == got.ids[9]
        ctx = rec.context(s.user)
        for peer in ("content-knn", "svm", "cf-from-text"):
            assert set(peers.recommend(peer, ctx, 10)) <= new, peer
        # a new paper nobody saved gets a co-save score through the papers like it; nothing outside the pool
        assert not ctx.cosaves.scores[outside].any()
        bridged += int((ctx.cosaves.scores[rows] > 0).sum())
    assert bridged > 0 and spread > 0
    # a random list (the measures' reference): drawn from the candidates a user has not saved — with the
    # user's saves and 10 new papers as the candidates, those 10 are the list
    first = splits[0]
    saved = rec.side.rows(p for p in first.train if p in rec.side.catalog.row)
    ten = np.array(rows[:10])
    drawn = random_lists(rec.side, [first], 10, np.concatenate([saved, ten]), seed=3)
    assert sorted(drawn[first.user]) == sorted(rec.side.catalog.ids[r] for r in ten)
    with pytest.raises(ConfigError, match="two protocols"):
        evaluate_recs("cul", cfg, new_share=0.2, train_size=5, runs=("tier1",), progress=False)
    with pytest.raises(ConfigError, match="cannot rank new items"):
        evaluate_recs("cul", cfg, new_share=0.2, baseline="rp3beta", runs=("tier1",), progress=False)


@pytest.mark.model
def test_eval_recs_cli_json_and_no_training_save_is_a_hit(home, capsys, tmp_path):
    from scix_core.cli.main import main
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    out = tmp_path / "recs.json"
    assert (
        main(
            [
                "eval-recs",
                "--index",
                "cu",
                "--min-saves",
                "2",
                "--holdout",
                "0.3",
                "--runs",
                "tier3,content-knn,most-popular",
                "--permutations",
                "100",
                "--no-per-tier",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "cu: 2 users" in printed and "content-knn" in printed
    saved = json.loads(out.read_text())
    assert saved["n_users"] == 2 and saved["per_user"]["tier3"]["recall@10"]
    assert main(["eval-recs", "--index", "cu", "--min-saves", "50", "--quiet"]) == 2
    assert "no user of index 'cu' has 50 or more saves" in capsys.readouterr().err
    # P = 2: only the user with 3 saves qualifies (one user: every p is 1); two cutoffs; the tuned choices in
    # the JSON
    assert (
        main(
            [
                "eval-recs",
                "--index",
                "cu",
                "--min-saves",
                "2",
                "--train-size",
                "2",
                "--cutoffs",
                "1,2",
                "--runs",
                "tier3,rp3beta,text-knn",
                "--baseline",
                "tier3",
                "--permutations",
                "100",
                "--no-per-tier",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert "1 users, 2 training saves a user" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    assert saved["setup"]["cutoffs"] == [1, 2] and saved["setup"]["train_size"] == 2
    assert saved["setup"]["tier_weights_at"] == 10  # the co-save weights' list length, not the cutoff
    assert {"recall@1", "recall@2", "ndcg@2", "hit@1", "ild@1"} <= set(saved["runs"]["rp3beta"])
    assert set(saved["setup"]["tuned"]) == {"rp3beta", "text-knn"}
    assert saved["setup"]["tuned"]["rp3beta"]["params"] in [
        v["params"] for v in saved["setup"]["tuned"]["rp3beta"]["validation"]
    ]
    assert {c["metric"] for c in saved["comparisons"]} >= {"recall@1", "recall@2"}
    assert main(["eval-recs", "--index", "cu", "--cutoffs", "10,x", "--quiet"]) == 2


def test_train_size_keeps_n_saves_and_holds_out_the_rest():
    libs = {
        "a": [f"p{i}" for i in range(12)],
        "b": [f"q{i}" for i in range(10)],
        "c": [f"r{i}" for i in range(30)],
    }
    splits = {s.user: s for s in split_libraries(libs, 0.2, seed=3, min_saves=5, train_size=10)}
    assert set(splits) == {"a", "c"}  # b has exactly 10: nothing would be held out
    assert len(splits["a"].train) == 10 and len(splits["a"].test) == 2
    assert len(splits["c"].train) == 10 and set(splits["c"].train) | splits["c"].test == set(libs["c"])
    assert split_libraries(libs, 0.2, seed=3, min_saves=5, train_size=10, real_times=True)[0].test == {
        "p10",
        "p11",
    }
    with pytest.raises(ConfigError, match="train-size"):
        split_libraries(libs, 0.2, seed=3, min_saves=5, train_size=0)


def test_metrics_at_every_cutoff_by_hand():
    from scix_core.evaluate.recs import check_cutoffs, metric_names

    splits = [UserSplit("u", ("t",), frozenset({"a", "b"}))]
    ranked = [f"x{i}" for i in range(11)] + ["a"]  # "a" at rank 12: a hit at @50, not at @10
    values = ranking_metrics({"u": ranked}, splits, (10, 50))
    assert (
        values["recall@10"] == {"u": 0.0}
        and values["recall@50"] == {"u": 0.5}
        and values["hit@50"] == {"u": 1.0}
    )
    assert values["ndcg@50"]["u"] == pytest.approx((1 / np.log2(13)) / (1 + 1 / np.log2(3)))
    assert metric_names((50, 100))[:4] == ("recall@50", "ndcg@50", "hit@50", "recall@100")
    assert metric_names((50, 100))[-3:] == ("ild@50", "cluster_coverage", "s_recall@50")
    with pytest.raises(ConfigError, match="cutoffs"):
        check_cutoffs([0])
    with pytest.raises(ConfigError, match="per-tier-users"):  # before any index is opened
        evaluate_recs("no-such-index", per_tier_users=-1, progress=False)


def test_validation_split_is_carved_from_training_saves_only():
    from scipy.sparse import csr_matrix

    from scix_core.evaluate import tuning

    libs = {f"u{i}": [f"p{(i + j) % 12}" for j in range(6)] for i in range(8)}
    splits = split_libraries(libs, 0.2, seed=1, min_saves=5)
    train = {s.user: s.train for s in splits}
    held = {(s.user, p) for s in splits for p in s.test}
    fit, val = tuning.carve(train, list(train), 0.2, seed=1)
    for user in train:
        assert val[user] and set(fit[user]) | val[user] == set(train[user]) and not set(fit[user]) & val[user]
    assert tuning.carve(train, list(train), 0.2, seed=1) == (fit, val)  # seeded
    row = {f"p{i}": i for i in range(12)}
    seen = []

    class Spy:  # records what it is fitted on; scores by popularity
        def fit(self, x: csr_matrix):
            seen.append(x)
            self.pop = np.asarray(x.sum(axis=0)).ravel().astype(np.float32)
            return self

        def scores(self, rows):
            return self.pop.copy()

    got = tuning.tune("spy", [{"a": 1}, {"a": 2}], lambda p: Spy(), fit, val, row, 12, k=3)
    assert got.params == {"a": 1} and len(got.table) == 2  # a tie keeps the first setting
    users = list(fit)
    for x in seen:  # neither the held-out evaluation saves nor the validation saves were ever fitted on
        pairs = {(users[u], f"p{i}") for u, i in zip(*x.nonzero())}
        assert not pairs & held and not pairs & {(u, p) for u, ps in val.items() for p in ps}


def test_steps_beyond_the_grid_edge_only_from_an_edge_best():
    from scix_core.evaluate.tuning import on_edge, steps_beyond

    grid = [{"lam": v, "k": k} for v in (50.0, 100.0) for k in (1, 2)]
    beyond = {"lam": ((25.0, 12.5), (200.0,)), "k": ((), (3,))}
    # best at lam's lower edge and k's upper edge: one step down lam, one step up k
    assert steps_beyond({"lam": 50.0, "k": 2}, grid, beyond) == [{"lam": 25.0, "k": 2}, {"lam": 50.0, "k": 3}]
    assert steps_beyond({"lam": 100.0, "k": 1}, grid, beyond) == [{"lam": 200.0, "k": 1}]  # k: none below
    tried = [*grid, {"lam": 25.0, "k": 2}]
    assert steps_beyond({"lam": 25.0, "k": 2}, tried, beyond)[0] == {"lam": 12.5, "k": 2}  # the next one
    assert steps_beyond({"lam": 50.0, "k": 2}, tried, {"lam": beyond["lam"]}) == []  # 50 is inside now
    tried += [{"lam": 12.5, "k": 2}, {"lam": 50.0, "k": 3}]
    # lam's values below are used up with the best on that edge: flagged; k = 1 is a bound (none listed)
    assert on_edge({"lam": 12.5, "k": 3}, tried, beyond) == ("lam", "k")
    assert on_edge({"lam": 50.0, "k": 1}, tried, beyond) == ()


def test_tuning_steps_past_the_edge_while_it_improves():
    from scix_core.evaluate import tuning

    fit = {"u": ("p0", "p1"), "v": ("p2",)}
    val = {"u": frozenset({"p3"})}
    row = {f"p{i}": i for i in range(6)}

    class Peaked:  # validation recall 1 only for lam = 12.5: p3 scores highest there, lowest elsewhere
        def __init__(self, lam):
            self.lam = lam

        def fit(self, x):
            return self

        def scores(self, rows):
            out = np.arange(6, dtype=np.float32)
            out[3] = 10.0 if self.lam == 12.5 else -1.0
            return out

    grid = [{"lam": v} for v in (50.0, 100.0, 200.0)]
    beyond = {"lam": ((25.0, 12.5, 6.25, 3.0), (400.0,))}
    got = tuning.tune("peaked", grid, lambda p: Peaked(**p), fit, val, row, 6, k=1, beyond=beyond)
    # 25 does not improve on 50 (both 0): the search stops there, before reaching the peak at 12.5
    assert [json.loads(p)["lam"] for p, _ in got.table] == [50.0, 100.0, 200.0, 25.0]
    assert got.params == {"lam": 50.0} and got.to_dict()["validation"][3]["beyond_grid"]

    class Rising(Peaked):  # recall 1/3, 2/3, 1 as lam falls to 12.5, then 0: the search walks down to 12.5
        def scores(self, rows):
            out = np.array([0, 0, 0, 0, 0, 1, 1, 1], dtype=np.float32)  # p2-p4 held out, p5-p7 not
            out[2 : 2 + {50.0: 1, 25.0: 2, 12.5: 3}.get(self.lam, 0)] = 2.0
            return out

    val = {"u": frozenset({"p2", "p3", "p4"})}
    row = {f"p{i}": i for i in range(8)}
    got = tuning.tune("rising", grid, lambda p: Rising(**p), fit, val, row, 8, k=3, beyond=beyond)
    assert [json.loads(p)["lam"] for p, _ in got.table] == [50.0, 100.0, 200.0, 25.0, 12.5, 6.25]
    assert got.params == {"lam": 12.5} and got.to_dict()["grid"] == 3 and got.on_edge == ()


@pytest.mark.model
def test_per_tier_peers_are_refitted_on_the_truncated_saves_with_their_tuned_parameters(
    home, tmp_path, monkeypatch
):
    from scix_core.cli.main import main
    from scix_core.recommend import Recommender, UserState
    from scix_core.recommend.library import library_saves
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    rec = Recommender("cu", state=UserState(tmp_path / "s.sqlite"), build_community=False)
    train = {u: tuple(p) for u, p in library_saves(rec.build_dir).items()}
    peers = rec_runs.Peers(rec, train, k=2)
    full = peers.model("rp3beta")
    # EASE's validation fits come from the users' side (fewer users than items here) or, with more users, are
    # its whole training fit updated for the set-aside saves: either way the same table as fitting each λ on
    # the carved saves
    from scix_core.evaluate import tuning
    from scix_core.recommend import collab
    from scix_core.recommend.collab import ease, ease_dual

    tuned = peers.tune("ease")
    fit, val = tuning.carve(train, peers.validation_users, 0.2, peers.seed)
    assert isinstance(peers._updated_for("ease", fit)(tuned.params), ease_dual.EaseDual)
    monkeypatch.setattr(ease_dual, "worth_it", lambda matrix: False)
    updated = rec_runs.Peers(rec, train, k=2)
    assert updated._updated_for("ease", fit)(tuned.params)._w is not None  # an update, not a refit
    assert updated.tune("ease").table == tuned.table
    cat = rec.side.catalog
    refit_table = tuning.tune(
        "ease",
        collab.GRIDS["ease"],
        lambda p: collab.make("ease", **p),
        fit,
        val,
        cat.row,
        len(cat),
        2,
        beyond=collab.BEYOND["ease"],
    ).table
    assert [p for p, _ in tuned.table] == [p for p, _ in refit_table]
    np.testing.assert_allclose([v for _, v in tuned.table], [v for _, v in refit_table], atol=1e-9)
    # with a fit cache, the update's whole fits: the community's own λ in the community's folder, every other
    # λ in the peers' own subfolder, so that a tuning never displaces a community's fits (EASE keeps three a
    # folder)
    cached = rec_runs.Peers(rec, train, k=2, fit_cache=tmp_path / "fits")
    assert cached.tune("ease").table == tuned.table
    lams = {json.loads(f.read_text())["lam"] for f in (tmp_path / "fits").glob("ease-*.json")}
    assert lams == {rec.config.recommend.collab_ease_lambda}
    folder = tmp_path / "fits" / rec_runs.PEER_FITS
    others = {json.loads(f.read_text())["lam"] for f in folder.glob("ease-*.json")}
    tried = {json.loads(p)["lam"] for p, _ in tuned.table} - lams
    assert others <= tried and len(others) == min(ease.KEEP, len(tried))
    monkeypatch.undo()
    # from the users' side the tuning fits nothing on the item side; the chosen λ alone is fitted there
    dual = rec_runs.Peers(rec, train, k=2, fit_cache=tmp_path / "dual")
    assert dual.tune("ease").table == tuned.table and not list((tmp_path / "dual").rglob("ease-*.json"))
    dual.model("ease")
    assert [json.loads(f.read_text())["lam"] for f in (tmp_path / "dual").rglob("ease-*.json")] == [
        tuned.params["lam"]
    ]
    truncated = {u: p[:1] for u, p in train.items()}
    again = peers.refitted(rec, truncated)
    assert again.tuned == peers.tuned  # no second tuning
    assert again.matrix().nnz == len(truncated) < peers.matrix().nnz == sum(len(p) for p in train.values())
    refit = again.model("rp3beta")
    assert refit is not full and refit.alpha == full.alpha and refit.beta == full.beta
    row = rec.side.catalog.row[train[next(iter(train))][0]]
    assert not np.array_equal(refit.scores(np.array([row])), full.scores(np.array([row])))
    # EASE from the full fit by its exact low-rank update (the per-tier tables' path) = a refit
    changes = [(rec.side.rows(train[u]), rec.side.rows(truncated[u])) for u in train]
    updated, base = peers.refitted(rec, truncated, changes), peers.model("ease")
    assert updated._updated("ease") is not None and updated.model("ease") is not base
    for u in train:
        saved = rec.side.rows(truncated[u])
        np.testing.assert_allclose(
            updated.model("ease").scores(saved), again.model("ease").scores(saved), atol=1e-4
        )


@pytest.mark.model
def test_two_processes_make_the_lists_one_process_makes(home, monkeypatch):
    from scix_core.cli.main import main
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    runs = ("tier3", "tier2", "tier1", "tier1-quota", "content-knn", "most-popular", "rp3beta", "ease")
    kw = dict(min_saves=2, holdout=0.3, runs=runs, permutations=100, progress=False, per_tier_users=None)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a one-core budget (each make test worker's): one process
    one = evaluate_recs("cu", **kw)
    two = evaluate_recs("cu", workers=2, **kw)
    assert (
        one.setup["processes"] == 1 and two.setup["processes"] == 2 and not two.setup["one_process_because"]
    )
    # the peers and Tier 3 come from the second process, the per-tier lists from either: every figure the same
    assert two.per_user == one.per_user and two.per_tier == one.per_tier
    # the first, done with its own runs, made the one-save table (it claims from the fewest saves up, the
    # second from five saves down, after its main lists); the table of all the saves, which truncates nothing,
    # the first makes from the main lists once both are done
    first = two.setup["per_tier_first_process"]
    assert "1" in first and "all" not in first and one.setup["per_tier_first_process"] == []
    assert "per-tier tables (lists, first process)" in two.seconds
    assert "community (co-save model fit)" in two.seconds
    assert set(two.setup["tuned"]) == {"rp3beta", "ease"} and two.setup["tuned"]["ease"]["cached"]
    for peer, tuned in one.setup["tuned"].items():  # the second run read the first's tuning from the cache
        assert {**two.setup["tuned"][peer], "cached": False} == {**tuned, "cached": False}
    assert "peers process" in two.seconds and "peers process" not in one.seconds
    assert set(two.per_tier) == {"1", "3", "5", "all"} and two.n_users == 2
    with pytest.raises(ConfigError, match="--workers"):
        evaluate_recs("cu", workers=0, **kw)

    def failing_trainer(rec, train, users):
        raise RuntimeError("the scorer could not be trained")

    # this process fails while the second works: the error comes through and no process is left behind
    with pytest.raises(RuntimeError, match="could not be trained"):
        evaluate_recs(
            "cu", workers=2, **{**kw, "runs": (*runs, "tier1-lgbm")}, scorer_trainer=failing_trainer
        )
    assert not multiprocessing.active_children()


def test_per_tier_parts_are_seeded_disjoint_and_cover_the_sample(monkeypatch):
    from scix_core.evaluate import rec_lists

    splits = [UserSplit(f"u{i}", ("a",), frozenset({"b"})) for i in range(5)]
    assert rec_lists.per_tier_parts(splits, 0) == (tuple(splits),)  # no larger than a part: one part
    monkeypatch.setattr(rec_lists, "PER_TIER_PART", 2)
    parts = rec_lists.per_tier_parts(splits, 0)
    assert sorted(len(p) for p in parts) == [1, 2, 2]  # ceil(5 / 2) parts, sizes within one of each other
    assert sorted(s.user for p in parts for s in p) == [s.user for s in splits]  # each user once
    assert all(list(p) == sorted(p, key=splits.index) for p in parts)  # each in the split's order
    assert rec_lists.per_tier_parts(splits, 0) == parts and rec_lists.per_tier_parts(splits, 1) != parts


@pytest.mark.model
def test_per_tier_tables_truncate_a_part_at_a_time(home, monkeypatch, capsys):
    from rich.console import Console

    from scix_core.cli.main import main
    from scix_core.evaluate import rec_lists
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one process: the part size patched below holds there
    kw = dict(min_saves=2, holdout=0.3, runs=("tier1", "rp3beta"), permutations=100, progress=False)
    whole = evaluate_recs("cu", per_tier_users=None, **kw)
    monkeypatch.setattr(rec_lists, "PER_TIER_PART", 1)
    calls, real = [], rec_lists.replay

    def replay(rec, train, splits, truncate=None, evaluated=None):  # the real replay, its users noted
        calls.append(({s.user for s in splits}, truncate))
        return real(rec, train, splits, truncate, evaluated)

    monkeypatch.setattr(rec_lists, "replay", replay)
    parted = evaluate_recs("cu", per_tier_users=None, **kw)
    assert whole.setup["per_tier_parts"] == [2] and parted.setup["per_tier_parts"] == [1, 1]
    users = [next(iter(u)) for u, t in calls if t == 1]  # the parts in turn, at one save
    for report in (whole, parted):  # both users in every table; at one save Tier 3 answered each
        assert all(sum(block["tiers"].values()) == 2 for block in report.per_tier.values())
        assert report.per_tier["1"]["tiers"] == {"tier3": 2}
    parted.print(Console(width=200))
    assert "2 parts of up to 1 in turn" in capsys.readouterr().out
    # each part truncated while the other part's users keep their whole training saves
    assert calls[-4:] == [
        ({users[1]}, None),
        ({users[0]}, 5),
        ({users[0]}, None),
        ({users[1]}, 5),
    ]
