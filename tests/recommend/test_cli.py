"""``scix users | interact | recommend`` in-process against the fixture indexes."""

from __future__ import annotations

import json

import pytest

from scix_core.cli.main import main

pytestmark = pytest.mark.model


@pytest.fixture
def env(rec_indexes, monkeypatch):
    monkeypatch.setenv("SCIX_HOME", str(rec_indexes.config.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    return rec_indexes


def test_create_interact_recommend_explain(env, user, capsys):
    assert (
        main(["users", "create", "--index", env.edge, "--user", user, "--categories", "cs.LG,astro-ph.GA"])
        == 0
    )
    assert f"created user '{user}'" in capsys.readouterr().out
    assert main(["recommend", "--index", env.edge, "--user", user, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tier"] == 0 and out["next_tier"].startswith("1 more save") and out["items"]
    for paper in ("p01", "p07", "p03", "p04"):
        assert (
            main(
                [
                    "interact",
                    "--index",
                    env.edge,
                    "--user",
                    user,
                    "--save",
                    paper,
                    "--at",
                    "2024-05-01T10:00:00Z",
                ]
            )
            == 0
        )
    assert main(["interact", "--index", env.edge, "--user", user, "--dismiss", "p02"]) == 0
    assert "recorded dismiss of p02" in capsys.readouterr().out
    assert main(["recommend", "--index", env.edge, "--user", user, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "Tier 2 (profile): 4 saves >= 3" in out and "1 more save unlocks clustered recommendations" in out
    main(["interact", "--index", env.edge, "--user", user, "--save", "p06"])
    assert main(["recommend", "--index", env.edge, "--user", user, "--limit", "3", "--explain"]) == 0
    out = capsys.readouterr().out
    for part in (
        "Tier 1 (clustered)",
        "clusters (Hungarian-stable ids)",
        "quota",
        "MMR moves",
        "suppressed codes",
        "exploration *",
        "scorer:",
    ):
        assert part in out, part
    assert main(["users", "show", user, "--index", env.edge, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["saves"], shown["dismissals"], shown["tier"]) == (5, 1, 1) and shown["clusters"]
    assert main(["users", "list", "--index", env.edge, "--json"]) == 0
    assert any(u["user"] == user and u["saves"] == 5 for u in json.loads(capsys.readouterr().out))


def test_errors_exit_2_with_the_typed_code(env, user, capsys):
    assert main(["interact", "--index", env.edge, "--user", user, "--save", "p01"]) == 2
    assert "[unknown_user]" in capsys.readouterr().err
    main(["users", "create", "--index", env.edge, "--user", user])
    assert main(["interact", "--index", env.edge, "--user", user, "--view", "p99"]) == 2
    assert "[unknown_paper]" in capsys.readouterr().err
    assert main(["interact", "--index", env.edge, "--user", user, "--save", "p01", "--at", "tomorrow"]) == 2
    assert "[invalid_interaction]" in capsys.readouterr().err
    assert main(["users", "create", "--index", env.edge, "--user", user, "--categories", "astro-ph.GAA"]) == 2
    assert "close: astro-ph.GA" in capsys.readouterr().err
    assert main(["recommend", "--index", "no-such-index", "--user", user]) == 2
    assert "[index_not_found]" in capsys.readouterr().err


def test_users_import_on_a_citeulike_folder(home, capsys):
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike"), "--index", "cu", "--quiet"]) == 0
    assert main(["users", "import", "--index", "cu", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "imported 2 users with 5 saves" in out and "synthesised in file order" in out
    assert main(["users", "import", "--index", "cu", "--quiet"]) == 0
    assert "imported 0 users" in capsys.readouterr().out
    assert main(["recommend", "--index", "cu", "--user", "0", "--json", "--no-log"]) == 0
    out = json.loads(capsys.readouterr().out)  # user 0 saved items 0 and 2 of the three
    assert out["tier"] == 3 and [i["paper_id"] for i in out["items"]] == ["1"]
    assert main(["recommend", "--index", "cu", "--user", "1", "--json", "--no-log"]) == 0
    out = json.loads(capsys.readouterr().out)  # user 1 saved all three papers: every tier is empty
    assert out["tier"] == 0 and out["items"] == [] and "answered nothing" in out["reason"]
    assert out["next_tier"] == "2 more saves unlock clustered recommendations (Tier 1)"


def test_the_bag_of_words_release_variant_is_searchable_embeddable_and_recommendable(home, capsys):
    from tests.conftest import FIXTURES

    assert main(["ingest", "--path", str(FIXTURES / "citeulike_mult"), "--index", "bow", "--quiet"]) == 0
    assert "embeddings: 3 encoded" in capsys.readouterr().out
    assert main(["search", "protein", "--index", "bow", "--mode", "keyword", "--json"]) == 0
    assert [h["paper_id"] for h in json.loads(capsys.readouterr().out)["hits"]] == ["1"]
    assert main(["users", "import", "--index", "bow", "--quiet"]) == 0
    assert "imported 2 users" in capsys.readouterr().out
    assert main(["recommend", "--index", "bow", "--user", "0", "--json", "--no-log"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tier"] == 3 and [i["paper_id"] for i in out["items"]] == ["1"]
    assert main(["users", "create", "--index", "bow", "--user", "astro-fan", "--categories", "astro"]) == 0
    capsys.readouterr()
    assert main(["recommend", "--index", "bow", "--user", "astro-fan", "--json", "--no-log"]) == 0
    assert {i["paper_id"] for i in json.loads(capsys.readouterr().out)["items"]} == {
        "0",
        "2",
    }  # tag-item.dat tags


def test_real_save_times_are_kept_on_import_and_split_latest_first(home, capsys):
    import datetime as dt

    from scix_core.config import load_config
    from scix_core.data import Dataset
    from scix_core.evaluate.recs import split_libraries
    from scix_core.ingest import ingest
    from scix_core.recommend import Recommender
    from scix_core.recommend.library import import_libraries, library_saves, library_times
    from scix_core.types import Interaction, Paper

    t0 = dt.datetime(2023, 5, 1, tzinfo=dt.UTC)
    papers = tuple(Paper(f"d{i}", f"paper number {i}") for i in range(6))
    saves = tuple(
        Interaction("u", f"d{i}", "save", pos, t0 + dt.timedelta(days=10 - i))
        for pos, i in enumerate(range(6))
    )
    cfg = load_config()
    ingest(
        Dataset("timed", "python", papers, interactions=saves),
        "timed",
        config=cfg,
        progress=False,
        embed=False,
    )
    rec = Recommender("timed", cfg)
    assert library_saves(rec.build_dir)["u"] == [
        "d5",
        "d4",
        "d3",
        "d2",
        "d1",
        "d0",
    ]  # oldest first, not file order
    assert library_times(rec.build_dir)["u"][0] == t0 + dt.timedelta(days=5)
    report = import_libraries(rec)
    assert report.synthetic_times is False
    events = rec.state.events("timed", "u")
    assert [e.paper_id for e in events][:2] == ["d5", "d4"] and not any(e.synthetic for e in events)
    assert events[0].at == t0 + dt.timedelta(days=5)
    split = split_libraries(library_saves(rec.build_dir), 0.34, seed=1, min_saves=5, real_times=True)[0]
    assert split.test == {"d1", "d0"}  # the latest two saves are held out
