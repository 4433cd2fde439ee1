"""The co-save model's refit clock: a save never fits, a lagging community starts from its own last fit,
a due refit runs in the background (a thread, a detached process, ``scix users refit``), one at a time."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from scix_core.cli.main import main
from scix_core.locks import try_exclusive
from scix_core.recommend import Recommender
from scix_core.recommend import community as community_module
from scix_core.recommend.collab import weights as weights_module
from scix_core.recommend.collab.ease import Ease
from scix_core.recommend.collab.ensemble import Ensemble
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.community import Community
from scix_core.recommend.fits import read_record, refit_lock
from scix_core.recommend.refit import CONFIG_ENV, ENTRY, fit_cache, refit_index, spawn
from scix_core.recommend.state import UserState
from tests.recommend.test_community import T0, _catalog, _state


class Fits:
    """Counts the slow parts' real fits (EASE's solve, iALS's) and the tier weights' choices in this process;
    ``gate``, when set, holds every EASE solve until it is opened."""

    def __init__(self, monkeypatch):
        self.count = {"ease": 0, "ials": 0, "weights": 0}
        self.gate: threading.Event | None = None
        ease_solve, ials_solve, choose = Ease._solve, Ials._solve, weights_module.choose

        def ease(model, *args):
            self.count["ease"] += 1
            if self.gate is not None:
                assert self.gate.wait(30)
            return ease_solve(model, *args)

        def ials(model, *args):
            self.count["ials"] += 1
            return ials_solve(model, *args)

        def chosen(*args, **kwargs):
            self.count["weights"] += 1
            return choose(*args, **kwargs)

        monkeypatch.setattr(Ease, "_solve", ease)
        monkeypatch.setattr(Ials, "_solve", ials)
        monkeypatch.setattr(community_module, "choose", chosen)

    @property
    def total(self) -> int:
        return sum(self.count.values())


@pytest.fixture
def fits(monkeypatch) -> Fits:
    monkeypatch.setattr(community_module, "INLINE_FIT_S", -1.0)  # every part counts as slow to fit
    return Fits(monkeypatch)


def _ease(tmp_path) -> Ensemble:
    return Ensemble(((Ease(lam=1.0, cache_dir=tmp_path / "collab"), 1.0),))


def test_a_lagging_community_starts_from_its_own_last_fit_and_fits_nothing(tmp_path, fits):
    catalog, state = _catalog(), _state(tmp_path)
    rows = np.array([catalog.row["p4"]])
    Community(state, "idx", catalog, _ease(tmp_path), lag=True).cosaves(rows)  # an earlier process fitted
    assert fits.count["ease"] == 1
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("idx", "e", ["p4", "p5"], T0, [])
    later = Community(state, "idx", catalog, _ease(tmp_path), lag=True, refit_age_s=600.0)
    stale = later.cosaves(rows)  # the fit before d's and e's saves: no co-save of p5 yet
    assert stale.scores[catalog.row["p5"]] == 0.0 and stale.scores[catalog.row["p3"]] > 0
    assert fits.count["ease"] == 1  # nothing fitted: the newest fit of this community was taken
    status = later.status()
    (ease,) = status["parts"]
    assert status["saves"] == 12 and ease["fitted_on"] == 8 and ease["saves_since"] == 4
    assert ease["age_s"] < 60 and status["due"] == [] and not status["refitting"]  # 10 minutes not passed
    # the user's own saves count at once, through their rows (x_u · B): one more save of theirs moves their
    # scores with no fit
    more = later.cosaves(np.array([catalog.row["p4"], catalog.row["p2"]]))
    assert stale.scores[catalog.row["p2"]] == pytest.approx(1.0) and more.scores[catalog.row["p2"]] == 0.0
    assert not np.allclose(more.scores, stale.scores) and fits.count["ease"] == 1


def test_another_communitys_fit_is_never_taken(tmp_path, fits):
    """An evaluation split's community (another user state over the same index and catalogue) caches its fits
    in the same folder: a lagging community of the index fits its own instead of scoring with them."""
    catalog = _catalog()
    rows = np.array([catalog.row["p4"]])
    split = _state(tmp_path / "split", {"x": ["p4", "p5"], "y": ["p4", "p5"]})
    Community(split, "idx", catalog, _ease(tmp_path)).cosaves(rows)
    assert fits.count["ease"] == 1
    mine = Community(_state(tmp_path), "idx", catalog, _ease(tmp_path), lag=True).cosaves(rows)
    assert fits.count["ease"] == 2 and mine.scores[catalog.row["p5"]] == 0.0  # nobody of its own saved p5
    assert read_record(tmp_path / "collab", "idx", split.location) is None  # an evaluation keeps no record


def test_a_stale_fit_is_refitted_in_the_background_once_due_without_blocking_a_request(tmp_path, fits):
    catalog, state = _catalog(), _state(tmp_path)
    # no fit cache: the refit is made in the background thread itself, where the gate holds it
    community = Community(state, "idx", catalog, Ensemble(((Ease(lam=1.0), 1.0),)), lag=True, refit_age_s=0.5)
    rows = np.array([catalog.row["p4"]])
    community.cosaves(rows)
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    state.import_library("idx", "e", ["p4", "p5"], T0, [])
    assert community.cosaves(rows).scores[catalog.row["p5"]] == 0.0  # grown, but the fit is not 0.5 s old
    assert fits.count["ease"] == 1 and community.status()["due"] == []
    time.sleep(0.6)
    state.import_library("idx", "f", ["p4", "p5"], T0, [])
    fits.gate = threading.Event()  # the refit, once started, is held until the gate opens
    t = time.perf_counter()
    stale = community.cosaves(rows)
    # the request answered with the stale fit while the refit waits
    assert time.perf_counter() - t < 5 and stale.scores[catalog.row["p5"]] == 0.0
    deadline = time.monotonic() + 30
    while fits.count["ease"] < 2 and time.monotonic() < deadline:  # the background refit reaches the gate
        time.sleep(0.05)
    assert community.refitting == ("ease",) and community.status()["refitting"] and fits.count["ease"] == 2
    assert community.cosaves(rows).scores[catalog.row["p5"]] == 0.0  # another request meanwhile: answered
    fits.gate.set()
    community.wait(60)
    community.warm()
    assert community.cosaves(rows).scores[catalog.row["p5"]] == pytest.approx(1.0)
    (ease,) = community.status()["parts"]
    assert ease["saves_since"] == 0 and ease["fitted_on"] == 14 and community.failure == ""


def test_a_detached_community_asks_for_its_refit_instead_of_making_it(tmp_path, fits):
    catalog, state = _catalog(), _state(tmp_path)
    asked = []
    community = Community(
        state, "idx", catalog, _ease(tmp_path), lag=True, refit_age_s=0.0, detached=lambda: asked.append(1)
    )
    rows = np.array([catalog.row["p4"]])
    community.cosaves(rows)
    state.import_library("idx", "d", ["p4", "p5"], T0, [])
    assert community.cosaves(rows).scores[catalog.row["p5"]] == 0.0
    assert asked == [1] and fits.count["ease"] == 1 and community.refitting == ()  # asked, not fitted here


# the real index: a Recommender as the command line makes one, its interactions and lists, the refit job
# -------------------------------------------------------------------------------------------------------


def _libraries(state: UserState, index: str, prefix: str) -> None:
    """Four other users' libraries (users named after ``prefix``: the session's user state is shared)."""
    for user, papers in {
        "a": ["p01", "p02", "p05"],
        "b": ["p01", "p05", "p09"],
        "c": ["p03", "p04", "p05"],
        "d": ["p07", "p09", "p10"],
    }.items():
        state.import_library(index, f"{prefix}-{user}", papers, T0, [])


@pytest.mark.model
def test_a_save_and_the_next_list_fit_nothing_and_the_list_reflects_every_save(rec_indexes, tmp_path, fits):
    cfg = rec_indexes.config  # the session's workspace and fit cache, a user state of its own
    state = UserState(tmp_path / "users.sqlite")
    _libraries(state, rec_indexes.edge, "lib")
    first = Recommender(rec_indexes.edge, cfg, state=state, detach_refits=True)
    first.create_user("me", [])
    first.interact("me", "p01", "save")
    first.recommend("me", log=False)  # an earlier command fitted the community once
    first.close()
    before = dict(fits.count)
    saved = ["p01"]
    for paper in ["p03", "p07", "p06", "p10"]:  # each save its own process's, as from the command line
        rec = Recommender(rec_indexes.edge, cfg, state=state, detach_refits=True)
        rec.interact("me", paper, "save")
        saved.append(paper)
        assert fits.count == before  # the write fitted nothing
        assert len(rec.stored("me").saved) == len(saved)
        result = rec.recommend("me", log=False)
        assert fits.count == before, saved  # ... nor did the list: the community's last fit scored
        assert not set(saved) & set(result.ids)
        rec.close()
    assert result.tier == 1 and sum(len(c.members) for c in result.stage("quota").output) == 5
    # the community's last fit scored the user's saves of now: co-saved papers count in the list
    assert any(dict(i.scores).get("cosave", 0) > 0 for i in result.items)


@pytest.mark.model
def test_users_refit_fits_the_saves_of_now_once_at_a_time(rec_indexes, monkeypatch, capsys, fits):
    monkeypatch.setenv("SCIX_HOME", str(rec_indexes.config.home))
    monkeypatch.delenv("SCIX_CONFIG", raising=False)
    cfg, index = rec_indexes.config, rec_indexes.edge
    state = UserState.for_home(cfg.home)
    _libraries(state, index, "refit")
    with try_exclusive(refit_lock(fit_cache(cfg), index)) as mine:  # another process is refitting
        assert mine
        assert main(["users", "refit", "--index", index]) == 0
        assert "another process is refitting" in capsys.readouterr().out and fits.total == 0
    assert main(["users", "refit", "--index", index, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ran"] and report["saves"] >= 12 and set(report["parts"]) == {"rp3beta", "ease", "ials"}
    record = read_record(fit_cache(cfg), index, state.location)
    assert record["saves"] == report["saves"] and set(record["files"]) == {"ease", "ials", "weights"}
    assert main(["info", "--index", index, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)["community_fit"]
    assert fit["saves_recorded_since"] == 0 and fit["parts"]["ease"]["fitted_on"] == report["saves"]
    user = "refit-explain"
    assert main(["interact", "--index", index, "--user", user, "--save", "p05"]) != 0  # no such user
    capsys.readouterr()
    assert main(["users", "create", "--index", index, "--user", user]) == 0
    assert main(["interact", "--index", index, "--user", user, "--save", "p05"]) == 0
    assert main(["recommend", "--index", index, "--user", user, "--explain", "--no-log"]) == 0
    out = capsys.readouterr().out
    assert "co-save model rp3beta+ease+ials" in out and "refit clock" in out and "due: none" in out


@pytest.mark.model
def test_a_detached_refit_runs_with_the_callers_settings_and_a_killed_one_leaves_the_last_fit(rec_indexes):
    cfg, index = rec_indexes.config, rec_indexes.edge
    state = UserState.for_home(cfg.home)
    _libraries(state, index, "detached")
    # a setting only the caller has (not in any file the detached process could read): it must arrive
    cfg = cfg.replace(**{"recommend.collab_ease_lambda": 7.0})
    log = fit_cache(cfg) / f"refit-{index}.log"
    lines = log.read_text().count("\n") if log.exists() else 0
    assert spawn(cfg, index)
    deadline = time.monotonic() + 120
    while (log.read_text().count("\n") if log.exists() else 0) == lines and time.monotonic() < deadline:
        time.sleep(0.2)
    report = json.loads(log.read_text().splitlines()[-1].split(" ", 1)[1])
    assert report["ran"] and report["saves"] >= 12
    record = read_record(fit_cache(cfg), index, state.location)
    (ease,) = record["files"]["ease"][:1]
    assert json.loads((fit_cache(cfg) / ease).with_suffix(".json").read_text())["lam"] == 7.0
    # a refit killed at any point leaves the fits it would replace and its lock free: the next one runs
    env = {**os.environ, CONFIG_ENV: json.dumps(dataclasses.asdict(cfg), default=str)}
    for delay in (0.3, 1.0, 2.0):
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, index],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert refit_index(cfg, index).ran
        after = read_record(fit_cache(cfg), index, state.location)
        assert after["saves"] == report["saves"] and (fit_cache(cfg) / after["files"]["ease"][0]).exists()
