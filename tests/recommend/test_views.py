"""The cluster view and the recommendation-evaluation view, rendered as plain Python (tables + figures) and
driven through their widgets, on real engines over the fixture corpus."""

from __future__ import annotations

import json

import pytest

from scix_core.notebook import ClusterView, RecEvalView

pytestmark = pytest.mark.model


def test_cluster_view_shows_clusters_quotas_picks_and_the_map(rec_indexes, user):
    from scix_core.recommend import Recommender

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04", "p06"]:
        rec.interact(user, paper, "save")
    view = ClusterView(rec_indexes.edge, user, rec_indexes.config, limit=3)
    rendered = view.render()
    assert view.result.tier == 1
    for part in (
        "Tier 1 (clustered)",
        "scix-clusters",
        "quota",
        "kept id from",
        "suppressed codes",
        "scix-recs",
        "MMR pick",
        "exploration" if any(i.exploration for i in view.result.items) else "scix-stages",
    ):
        assert part in rendered.html, part
    assert len(rendered.figures) == 2  # the 2-D map and the stage timings
    axes = rendered.figures[0].axes[0]
    assert "medoids" in axes.get_title() and any(
        "quota" in t.get_text() for t in axes.get_legend().get_texts()
    )


def test_cluster_view_widgets_write_real_interactions_and_rerun(rec_indexes, user, monkeypatch):
    monkeypatch.delenv("SCIX_NOTEBOOK_STATIC", raising=False)
    from scix_core.recommend import Recommender

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user(user, [])
    for paper in ["p01", "p07", "p03", "p04"]:
        rec.interact(user, paper, "save")
    # no quota bonus, no neighbourhood cover: λ = 1 below is then the score order
    plain = rec_indexes.config.replace(
        **{"recommend.mmr_quota_bonus": 0.0, "recommend.tier1_neighbour_cover": 0.0}
    )
    view = ClusterView(rec_indexes.edge, user, plain, limit=3)
    widget = view.widget
    view.refresh()
    assert view.result.tier == 2 and len(view.buttons.children) == len(view.result.items)
    first = view.result.items[0].paper_id
    view.buttons.children[0].children[0].click()  # "save" on the first recommendation
    assert first in rec.context(user).saved and view.result.tier == 1 and first not in view.result.ids
    view.lambda_control.value = 1.0  # MMR off: the picks follow the scores
    assert view.rec.config.recommend.mmr_lambda == 1.0 and view.result.stage("mmr").summary["moved"] == 0
    dismissed = view.result.items[0].paper_id
    view.buttons.children[0].children[1].click()
    assert dismissed in rec.context(user).dismissed and dismissed not in view.result.ids
    assert widget is view.widget


def test_cluster_view_can_make_a_demo_user_from_queries(rec_indexes):
    view = ClusterView(
        rec_indexes.edge,
        "demo-from-queries",
        rec_indexes.config,
        demo_queries=["dark matter halos", "graph neural networks", "vitamin D bone", "primes zeta"],
        demo_saves=2,
    )
    view.render()
    saved = view.rec.context("demo-from-queries").saved
    assert {"p03", "p04", "p01", "p05", "p06"} <= set(saved) and view.result.tier == 1


def test_rec_eval_view_renders_a_saved_report(home, tmp_path):
    from scix_core.cli.main import main
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    out = tmp_path / "eval-recs.json"
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
                "tier3,mmr_0.0,mmr_1.0,content-knn,most-popular,rp3beta",
                "--per-tier-users",
                "1",
                "--permutations",
                "100",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    rendered = RecEvalView(out).render()
    assert (
        "scix-rec-eval" in rendered.html
        and "1 of the 2 users&#x27; training saves truncated to 1 (the others" in rendered.html
        and "All the training saves of all 2 users (nothing truncated" in rendered.html
        and "content-knn" in rendered.html
    )
    assert "cascade Δ recall" in rendered.html and "p_adj coverage" in rendered.html  # per-tier tests
    assert "scix-rec-tuned" in rendered.html and "Peers tuned on a validation split" in rendered.html
    assert len(rendered.figures) == 2  # recall by run, and the λ sweep curve
    saved = json.loads(out.read_text())
    assert saved["n_users"] == 2 and saved["setup"]["per_tier_users"] == 1  # the other user is the community
    # the sample's tables truncate the one user; the table of all the saves is every user's main lists
    assert [sum(block["tiers"].values()) for block in saved["per_tier"].values()] == [1, 1, 1, 2]
    assert saved["setup"]["tier_weights"]["reason"]  # two users: no validation split, the configured weights
    chosen = {"users": 900, "k": 50, "configured": {"a": 1.0, "b": 1.0}, "configured_recall": 0.05, "p": 0.01}
    saved["setup"]["tier_weights"] = {
        "3": {**chosen, "best": {"a": 0.0, "b": 1.0}, "taken": {"a": 0.0, "b": 1.0}}
    }
    out.write_text(json.dumps(saved))
    rendered = RecEvalView(out).render()
    assert (
        "scix-rec-weights" in rendered.html
        and "&quot;a&quot;: 0.0" in rendered.html
        and "(recall@50)" in rendered.html
    )


def test_cluster_view_takes_a_numeric_user_parameter(rec_indexes):
    from scix_core.recommend import Recommender

    rec = Recommender(rec_indexes.edge, rec_indexes.config)
    rec.create_user("4711", [])
    rec.interact("4711", "p01", "save")
    view = ClusterView(
        rec_indexes.edge, 4711, rec_indexes.config
    )  # papermill hands `-p user 4711` over as an int
    assert view.user == "4711" and view.render() and view.result.tier == 3
