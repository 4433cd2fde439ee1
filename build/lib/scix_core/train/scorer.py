"""Training the LightGBM Tier-1 scorer, with a feature audit on every training (``scix train-scorer``).

Examples come from two sources, both with the features *as served*:

* the offline protocol's training parts — per user, a seeded inner hold-out
  of 20% of the (training) saves; the rest replayed into a private user
  state (every user's: the co-save features see the same community as at
  serving time); for a seeded sample of at most 1,000 users, Tier-1 stages
  1-8 produce the candidates and their features; label 1 when the candidate
  is in the inner hold-out, else 0 — labels never come from papers an
  evaluation holds out;
* the recommendation log — Tier-1 items served with their features; label 1
  when the user saved the paper after it was served, 0 when they dismissed
  it (items with no later interaction are not labelled).

The audit (split count and gain per feature; features constant over the
training examples — the reference design's citation count hard-coded to 0 at
serving time) is written to the manifest; zero-split and constant features
are **errors** there and in ``Recommender.health()``: never silently
trained on.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scix_core import __version__
from scix_core.errors import ConfigError
from scix_core.recommend import Recommender, UserState
from scix_core.recommend.library import library_saves, replay_many
from scix_core.recommend.pipeline import candidate_stages, ranking_stages, run_stages
from scix_core.recommend.scorers.features import FEATURES
from scix_core.recommend.scorers.heuristic import HeuristicScorer
from scix_core.recommend.scorers.lgbm import LightGBMScorer
from scix_core.recommend.splits import sample, split_libraries
from scix_core.recommend.stages.base import Tier1State
from scix_core.recommend.state import utc_text
from scix_core.workspace import write_json_atomic

OBJECTIVE = "lambdarank"  # each user's candidates ranked together; "binary": pointwise log-loss


@dataclass(frozen=True)
class Examples:
    values: np.ndarray  # (n, len(FEATURES))
    labels: np.ndarray  # (n,) 0/1
    users: int
    from_log: int
    groups: tuple[int, ...] = ()  # consecutive rows ranked together (one user's candidates, one served list)


def protocol_examples(
    rec,
    libraries: Mapping[str, Sequence[str]],
    holdout: float = 0.2,
    seed: int = 42,
    example_users: Sequence[str] | None = None,
    max_users: int | None = 1000,
) -> Examples:
    """Candidates of stages 1-8 for each user's inner-training saves, labelled by the inner hold-out.

    Every user's inner-training saves are replayed (the community the co-save features see, as at serving
    time); examples come from ``example_users`` (default: everyone), a seeded sample of ``max_users``."""

    rows, labels, groups = [], [], []
    cfg = rec.config.recommend
    known = {u: [p for p in papers if p in rec.side.catalog.row] for u, papers in libraries.items()}
    splits = {s.user: s for s in split_libraries(known, holdout, seed, 2)}
    wanted = set(known if example_users is None else example_users)
    chosen = sample(
        [s for u, s in splits.items() if u in wanted and len(s.train) >= cfg.tier1_min_saves], max_users, seed
    )
    with tempfile.TemporaryDirectory(prefix="scix-train-scorer-") as tmp:
        private = Recommender(
            rec.index,
            rec.config,
            persist_clusters=False,
            state=UserState(Path(tmp) / "s.sqlite"),
            build_community=False,
        )
        private.community.take_weights(rec.community)
        replay_many(
            private, ((u, splits[u].train if u in splits else papers, None) for u, papers in known.items())
        )
        pipeline = [*candidate_stages(), *ranking_stages(HeuristicScorer(cfg), {})]
        for split in chosen:
            state, _ = run_stages(Tier1State(private.side, private.context(split.user), 10), pipeline)
            for c in state.kept:
                scores = dict(c.scores)
                rows.append([scores[f] for f in FEATURES])
                labels.append(int(c.paper_id in split.test))
            if state.kept:
                groups.append(len(state.kept))
    return Examples(
        np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)),
        np.asarray(labels),
        len(chosen),
        0,
        tuple(groups),
    )


def log_examples(rec) -> Examples:
    """Served Tier-1 items labelled by what the user did with them afterwards (save 1, dismiss 0)."""

    rows, labels, events, groups = [], [], {}, []
    for entry in rec.state.served(rec.index):
        if entry["tier"] != 1:
            continue
        if entry["user"] not in events:
            events[entry["user"]] = rec.state.events(rec.index, entry["user"])
        after = {}
        for e in events[entry["user"]]:
            if utc_text(e.at) > entry["at"] and e.kind in ("save", "dismiss"):
                after.setdefault(e.paper_id, e.kind)
        before = len(rows)
        for item in entry["items"]:
            features = item.get("features") or {}
            if item["paper_id"] in after and all(f in features for f in FEATURES):
                rows.append([features[f] for f in FEATURES])
                labels.append(int(after[item["paper_id"]] == "save"))
        if len(rows) > before:
            groups.append(len(rows) - before)
    return Examples(
        np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)),
        np.asarray(labels),
        0,
        len(rows),
        tuple(groups),
    )


def audit(booster, values: np.ndarray) -> dict:
    """Split count and gain per feature; zero-split and constant features are errors."""
    splits = booster.feature_importance(importance_type="split")
    gains = booster.feature_importance(importance_type="gain")
    constant = [f for i, f in enumerate(FEATURES) if len(values) and np.ptp(values[:, i]) == 0]
    features = {
        f: {"splits": int(s), "gain": round(float(g), 4), "constant": f in constant}
        for f, s, g in zip(FEATURES, splits, gains)
    }
    errors = [
        f"feature {f!r} is constant over the training examples (value {values[0, FEATURES.index(f)]:g}): "
        "it carries no signal at serving time"
        for f in constant
    ]
    errors += [
        f"feature {f!r} has zero splits: it cannot change any score"
        for f, a in features.items()
        if a["splits"] == 0 and f not in constant
    ]
    return {"features": features, "errors": errors}


def train_scorer(
    rec,
    libraries: Mapping[str, Sequence[str]] | None = None,
    *,
    out: Path | None = None,
    holdout: float = 0.2,
    seed: int = 42,
    rounds: int = 200,
    example_users: Sequence[str] | None = None,
    max_users: int | None = 1000,
    objective: str = OBJECTIVE,
    threads: int = 2,
) -> dict:
    """Train, audit and save ``model.txt`` + ``manifest.json`` (default ``models/scorers/INDEX``); returns the
    manifest. ``threads``: LightGBM's (its model depends on them even when deterministic)."""
    import lightgbm

    t = time.perf_counter()
    libraries = library_saves(rec.build_dir) if libraries is None else libraries
    proto = (
        protocol_examples(rec, libraries, holdout, seed, example_users, max_users)
        if libraries
        else Examples(np.zeros((0, len(FEATURES))), np.zeros(0), 0, 0)
    )
    logged = log_examples(rec)
    values = np.concatenate([proto.values, logged.values])
    labels = np.concatenate([proto.labels, logged.labels])
    if len(set(labels.tolist())) < 2:
        raise ConfigError(
            f"cannot train a scorer for {rec.index!r}: {len(labels)} examples, positives "
            f"{int(labels.sum())} — need both saved and unsaved candidates (import libraries first)"
        )
    params = {
        "objective": objective,
        "learning_rate": 0.05,
        "num_leaves": 15,
        "min_data_in_leaf": 20,
        "feature_fraction": 1.0,
        "seed": seed,
        "deterministic": True,
        "verbose": -1,
        "num_threads": threads,
    }
    data = lightgbm.Dataset(
        values,
        labels,
        feature_name=list(FEATURES),
        group=[*proto.groups, *logged.groups] if objective == "lambdarank" else None,
    )
    booster = lightgbm.train(params, data, num_boost_round=rounds)
    report = audit(booster, values)
    folder = Path(out) if out else None
    manifest = {
        "index": rec.index,
        "features": list(FEATURES),
        "params": params,
        "rounds": rounds,
        "examples": int(len(labels)),
        "positives": int(labels.sum()),
        "users": proto.users,
        "from_log": logged.from_log,
        "holdout": holdout,
        "seed": seed,
        "scix_core": __version__,
        "model": rec.manifest.get("model"),
        "corpus_hash": rec.manifest.get("corpus_hash"),
        "audit": report,
        "seconds": round(time.perf_counter() - t, 2),
    }
    if folder is None:
        with rec.workspace.new_model("scorers", rec.index) as tmp:
            booster.save_model(str(tmp / "model.txt"))
            write_json_atomic(tmp / "manifest.json", manifest)
        manifest["path"] = str(rec.workspace.model_dir("scorers", rec.index))
    else:
        folder.mkdir(parents=True, exist_ok=True)
        booster.save_model(str(folder / "model.txt"))
        write_json_atomic(folder / "manifest.json", manifest)
        manifest["path"] = str(folder)
    return manifest


def in_run_scorer(rec, train: Mapping[str, Sequence[str]], users: Sequence[str]):
    """A LightGBM scorer trained inside ``scix eval-recs`` (its ``tier1-lgbm`` run): every user's training
    saves are the community, the evaluated ``users``' inner hold-outs the labels (no evaluation label
    leaks); returns the scorer and its feature audit. On one thread: the evaluation's second process has the
    other core (OpenMP threads that share a core with it only spin), and the model is then the same with one
    process or two."""
    with tempfile.TemporaryDirectory(prefix="scix-eval-lgbm-") as tmp:
        manifest = train_scorer(rec, train, out=Path(tmp), seed=7, example_users=list(users), threads=1)
        scorer = LightGBMScorer.load(Path(tmp) / "model.txt")
    return scorer, manifest["audit"]
