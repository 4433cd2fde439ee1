"""The community's refit clock outside a server: ``scix users refit`` and the detached refit.

A save never fits a model (:meth:`Recommender.interact <scix_core.recommend.Recommender.interact>` only
writes). The co-save model's slow parts (EASE, iALS) are fitted on their own clock: a lagging
:class:`~scix_core.recommend.community.Community` starts from its own last cached fit and, once that fit is
``recommend.community_refit_age_s`` old and the saves have grown by ``recommend.community_refit_growth``,
asks for a refit — a server in a background thread, the command line (whose process ends first) through
:func:`spawn`: a detached process running :func:`main` for the index at the lowest priority, with the
caller's configuration, its output in ``SCIX_HOME/cache/collab/refit-INDEX.log``. :func:`refit_index` fits
every part on the saves of now into the fit cache, where the next process of the index starts from them,
holding the index's refit lock (one refit of an index at a time; a second one returns at once, saying so).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scix_core.config import Config, config_from_dict, load_config
from scix_core.locks import held, try_exclusive
from scix_core.recommend.catalog import Catalog, shared_catalog
from scix_core.recommend.community import Community, collab_model, joined, part_names
from scix_core.recommend.fits import lowest_priority, read_record, refit_lock
from scix_core.recommend.library import library_pairs
from scix_core.recommend.state import UserState
from scix_core.recommend.state_postgres import open_state
from scix_core.workspace import Workspace

CONFIG_ENV = "SCIX_REFIT_CONFIG"  # the detached refit's configuration (JSON), the caller's exactly
# what the detached process runs (not ``-m``: the package imports this module before runpy would run it)
ENTRY = "import sys; from scix_core.recommend.refit import main; sys.exit(main())"


def fit_cache(config: Config) -> Path:
    """Where EASE's and iALS's fits, the tier weights and each index's fit record are kept (indexes share
    fits: a fit depends only on its parameters and the saves)."""
    return config.home / "cache" / "collab"


def community_for(
    config: Config,
    index: str,
    state: UserState,
    catalog: Catalog,
    build_dir: Path,
    *,
    build_community: bool = True,
    lag: bool = True,
    detached: Callable[[], object] | None = None,
) -> Community:
    """The co-save community of ``index`` as the configuration describes it: Tier 1's parts
    (``recommend.collab``) and the tiers' (``tier_collab``) fitted once, the index's own libraries as other
    users' saves (``build_community``), and the refit clock's settings."""
    r = config.recommend
    tier_collab = r.tier_collab if r.community_tiers else ""  # no tier blends co-saves: fit none for them
    cache = fit_cache(config)
    return Community(
        state,
        index,
        catalog,
        collab_model(
            joined(r.collab, tier_collab), r.collab_alpha, r.collab_beta, r.collab_ease_lambda, cache
        ),
        (lambda: library_pairs(build_dir)) if build_community else None,
        refresh_s=r.community_refresh_s or 0.0,
        parts=part_names(r.collab),
        tier_parts=part_names(tier_collab or r.collab),
        weigh_tiers=r.tier_weights == "validated",
        weights_cache=cache,
        weights_at=r.tier_weights_at,
        lag=lag,
        refit_age_s=r.community_refit_age_s if lag else 0.0,  # the evaluation's: as soon as the saves grew
        refit_growth=r.community_refit_growth,
        detached=detached,
    )


@dataclass(frozen=True)
class RefitReport:
    """What one refit did: whether it ran (not when another process was refitting the index), the saves it
    fitted on, each part's fit time (seconds; a fit already in the cache costs its load only) and the whole
    run's."""

    index: str
    ran: bool
    reason: str
    saves: int = 0
    model: str = ""
    parts: tuple[tuple[str, float], ...] = ()
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "parts": dict(self.parts)}


def refit_index(config: Config, index: str) -> RefitReport:
    """Fit ``index``'s community on its saves of now into the fit cache (:meth:`Community.refit_now`), unless
    another process is refitting it."""
    t0 = time.perf_counter()
    with try_exclusive(refit_lock(fit_cache(config), index)) as mine:
        if not mine:
            return RefitReport(index, False, "another process is refitting this index; its fit is taken next")
        workspace = Workspace(config.home)
        lease = workspace.lease_build(index)
        state = open_state(config)
        try:
            catalog = shared_catalog(index, lease.path)
            community = community_for(config, index, state, catalog, lease.path)
            community.refit_now()
        finally:
            lease.release()
    status = community.status()
    parts = tuple((p["part"], p["fit_s"]) for p in status["parts"])
    reason = community.failure or "fitted on the saves of now"
    return RefitReport(index, True, reason, status["saves"], status["model"], parts, time.perf_counter() - t0)


def fit_status(config: Config, index: str) -> dict | None:
    """The last fit of ``index``'s community any process used (its record), with each part's age and the
    saves recorded since it was read; None before the first fit (``scix info``)."""
    state = open_state(config)
    record = read_record(fit_cache(config), index, state.location)
    if record is None:
        return None
    now = time.time()
    since = len(state.saves_since(index, int(record.get("last_id", 0))))
    return {
        "model": record.get("model"),
        "saves": record.get("saves"),
        "saves_recorded_since": since,
        "parts": {
            name: {
                "fitted_on": part.get("saves"),
                "age_s": round(now - part["at"], 1) if part.get("at") else None,
                "fit_s": part.get("seconds"),
            }
            for name, part in record.get("parts", {}).items()
        },
        "refit_age_s": config.recommend.community_refit_age_s,
        "refitting": held(refit_lock(fit_cache(config), index)),
    }


def spawn(config: Config, index: str) -> bool:
    """Start :func:`refit_index` in a detached process at the lowest priority (it outlives the caller); False
    when a refit of the index is running already."""
    folder = fit_cache(config)
    if held(refit_lock(folder, index)):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, CONFIG_ENV: json.dumps(dataclasses.asdict(config), default=str)}
    with open(folder / f"refit-{index}.log", "ab") as log:
        subprocess.Popen(
            [sys.executable, "-c", ENTRY, index],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in the caller's process group: a Ctrl-C there does not reach it
            close_fds=True,
        )
    return True


def main(argv: list[str] | None = None) -> int:
    """The detached refit of the index named on its command line (:data:`ENTRY`; its configuration from
    ``SCIX_REFIT_CONFIG``, else as :func:`~scix_core.config.load_config` finds it)."""
    (index,) = sys.argv[1:] if argv is None else argv
    given = os.environ.get(CONFIG_ENV)
    config = config_from_dict(json.loads(given)) if given else load_config()
    lowest_priority()
    report = refit_index(config, index)
    print(time.strftime("%Y-%m-%dT%H:%M:%S"), json.dumps(report.to_json()), flush=True)
    return 0
