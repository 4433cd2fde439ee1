"""Offline recommendation evaluation (docs/design.md#rec-eval): ``scix eval-recs``.

Protocol, on the user libraries an index was built with (any folder the
``citeulike`` loader reads): users with at least ``min_saves`` saves (a
seeded sample of ``users`` of them, or all); per user a seeded random
hold-out of ``holdout`` of the saves — the *latest* ``holdout`` where the
source has real timestamps — at least one; the rest are replayed as saves
into a private user-state database (never the workspace's); the held-out
papers are the relevant set, and training saves can never be hits (every run
excludes them). Per user and run: recall@10, nDCG@10 and hit-rate@10
(trec_eval), intra-list diversity (mean pairwise cosine distance of the
recommended papers), and coverage of the user's interest clusters (the Ward
clusters of the training saves, Tier 1's rule; a recommended paper covers
the cluster whose centroid it is nearest to) and S-recall over those clusters
(:func:`subtopic_recall`); per run, catalogue coverage; beside the runs, a
random list's figures (:func:`random_lists`), their reference.
Paired per-user randomisation tests with Holm correction and the search
gate (``scix_core.evaluate.significance``) compare every run with the
baseline. ``per_tier`` truncates the training saves of a seeded sample of
``per_tier_users`` evaluated users (all when None) to 1, 3 and 5 — the
other users keep theirs: the community a new user joins; more than
:data:`~scix_core.evaluate.rec_lists.PER_TIER_PART` are truncated that many
at a time, everyone else kept — runs the default
tier cascade, ``content-knn`` and every tuned peer of
the runs (on the truncated saves) on each, and reports which tier ran; every
peer and the cascade's community are refitted on the truncated saves (peers
with the parameters tuned on the full ones; EASE by an exact low-rank update
of the full fit). The table of all the saves truncates nothing: every evaluated
user, from the main run's lists (:func:`~scix_core.evaluate.rec_lists.full_saves_table`).
``new_share`` F is the cold-item protocol instead (``--new-items``): a seeded
share F of the catalogue is "new" — in nobody's training saves, so in no
fit — each user's saves of it are held out, users with one such save and
``min_saves`` others are evaluated, and every run ranks the new papers only
(the recommender restricted to them, :func:`~scix_core.recommend.pool.within`;
the peers' lists likewise); runs that rank only saved papers
(``rec_runs.NEEDS_SAVES``) are left out and listed, and the peers are tuned on
new items carved from the training items (``tuning.carve_items``).
``train_size`` N replaces the hold-out share: N training saves per user with
more than N, the rest held out (Dacrema et al.'s P = N); ``cutoffs`` gives
recall, nDCG and hit rate at each (the gate decides on the first). The
collaborative and text peers are tuned on a validation split of the training
saves first (``scix_core.evaluate.tuning``). Every user's training
saves — not only the evaluated users' — are replayed: they are the community
Tier 1's co-saves and the collaborative peers learn from.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scix_core.config import Config, load_config
from scix_core.errors import ConfigError
from scix_core.evaluate import rec_runs
from scix_core.evaluate.metrics import means, trec_values
from scix_core.evaluate.rec_lists import (
    LANE_RUNS,
    TRUNCATIONS,
    PeerJob,
    full_saves_table,
    one_thread_here,
    per_tier_parts,
    replay,
    run_job,
    run_lists,
    share_per_tier,
    start,
    stop,
    table_name,
)
from scix_core.evaluate.significance import PERMUTATIONS, compare, gate, holm
from scix_core.recommend import Recommender, UserState
from scix_core.recommend.library import library_saves, library_times
from scix_core.recommend.splits import UserSplit, cold_split, new_items, sample, split_libraries
from scix_core.workspace import write_json_atomic

K = 10
CUTOFFS = (K,)


def metric_names(cutoffs: Sequence[int] = CUTOFFS) -> tuple[str, ...]:
    """recall, nDCG and hit rate at every cutoff, then at the first diversity, interest-cluster coverage and
    subtopic recall over the interest clusters."""
    return (
        *(f"{m}@{k}" for k in cutoffs for m in ("recall", "ndcg", "hit")),
        f"ild@{cutoffs[0]}",
        "cluster_coverage",
        f"s_recall@{cutoffs[0]}",
    )


METRICS = metric_names()
PRIMARY = "recall@10"


def in_parts(setup: Mapping) -> str:
    """How a per-tier table's users were truncated, when in parts
    (:func:`~scix_core.evaluate.rec_lists.per_tier_parts`)."""
    sizes = setup.get("per_tier_parts") or ()
    return f", {len(sizes)} parts of up to {max(sizes):,} in turn" if len(sizes) > 1 else ""


def tier_table_title(trunc: str, block: Mapping, n_users: int, setup: Mapping) -> str:
    """What a per-tier table (``per_tier[trunc]``) holds: whose training saves, truncated to what, and the
    tiers that ran."""
    users = sum(block["tiers"].values())
    if trunc == table_name(None):
        return (
            f"all the training saves of all {users:,} users (nothing truncated: the main run's lists): "
            f"tiers run {block['tiers']}"
        )
    return (
        f"{users:,} of the {n_users:,} users' training saves truncated to {trunc}{in_parts(setup)} "
        f"(the others' kept): tiers run {block['tiers']}"
    )


def check_cutoffs(cutoffs: Sequence[int]) -> tuple[int, ...]:
    cutoffs = tuple(dict.fromkeys(int(k) for k in cutoffs))
    if not cutoffs or any(k < 1 or k > 1000 for k in cutoffs):
        raise ConfigError(f"--cutoffs must be integers in 1..1000, not {cutoffs!r}")
    return cutoffs


def ranking_metrics(
    recommended: Mapping[str, Sequence[str]], splits: Sequence[UserSplit], cutoffs: Sequence[int] = CUTOFFS
) -> dict[str, dict[str, float]]:
    """recall, nDCG and hit rate at each cutoff per user through trec_eval (binary relevance = held out)."""
    depth = max(cutoffs)
    qrels = {s.user: dict.fromkeys(s.test, 1) for s in splits}
    run = {
        s.user: {p: float(depth - r) for r, p in enumerate(recommended.get(s.user, [])[:depth])}
        for s in splits
    }
    return trec_values(qrels, run, [f"{m}@{k}" for k in cutoffs for m in ("recall", "ndcg", "hit")])


def diversity(vectors: np.ndarray) -> float:
    """Mean pairwise cosine distance (unit vectors); 0 for fewer than two items."""
    n = len(vectors)
    if n < 2:
        return 0.0
    sims = vectors @ vectors.T
    return float(1.0 - (sims.sum() - np.trace(sims)) / (n * (n - 1)))


def tested_per_tier(cutoffs: Sequence[int]) -> tuple[str, ...]:
    """What a per-tier table tests the cascade against each peer on: recall at every cutoff, and coverage."""
    return (*(f"recall@{k}" for k in cutoffs), "cluster_coverage")


def cluster_coverage(rec_vectors: np.ndarray, centroids: np.ndarray) -> float:
    if not len(rec_vectors) or not len(centroids):
        return 0.0
    return len(set(nearest_clusters(rec_vectors, centroids).tolist())) / len(centroids)


def nearest_clusters(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each vector's interest cluster: the one whose centroid it is nearest to (cosine, unit vectors)."""
    if not len(vectors) or not len(centroids):
        return np.zeros(len(vectors), dtype=np.int64)
    return (vectors @ centroids.T).argmax(axis=1)


def subtopic_recall(listed: Sequence[str], held_out: Mapping[str, int]) -> float:
    """S-recall (Zhai, Cohen & Lafferty 2003) with the user's interest clusters as the subtopics: of the
    clusters holding a held-out save (``held_out``: paper -> cluster), the share in which the list holds
    one. A list of papers from every cluster but none the user saves scores 0; coverage would score it 1.
    (ndeval's, through ir-measures, stops at cutoff 20; the lists here go to 1000.)"""
    wanted = set(held_out.values())
    if not wanted:
        return 0.0
    return len({held_out[p] for p in listed if p in held_out}) / len(wanted)


def random_lists(side, splits: Sequence[UserSplit], k: int, candidates, seed: int) -> dict[str, list[str]]:
    """Each user's ``k`` of the ``candidates`` (catalogue rows) they have not saved, drawn at random (seeded):
    what spread alone reaches on each measure — the runs' reference, not a peer."""
    rows = np.asarray(candidates, dtype=np.int64)
    rng = np.random.default_rng(seed)
    out = {}
    for s in splits:
        free = rows[~np.isin(rows, side.rows(p for p in s.train if p in side.catalog.row))]
        drawn = rng.choice(free, size=min(k, len(free)), replace=False)
        out[s.user] = [side.catalog.ids[int(r)] for r in drawn]
    return out


def random_line(setup: Mapping) -> str:
    """What a report says of a random list (``setup.random_list``: its means over every evaluated user and
    over the per-tier tables' sample); "" in a report without."""
    drawn = setup.get("random_list")
    if not drawn:
        return ""
    k, every, sample = setup["k"], drawn["users"], drawn.get("per_tier_users")

    def text(m: Mapping) -> str:
        return f"coverage {m['cluster_coverage']:.3f}, S-recall@{k} {m[f's_recall@{k}']:.3f}"

    return (
        f"a random list of {k} of the candidates: {text(every)}, recall@{k} {every[f'recall@{k}']:.4f}"
        + (f" ({text(sample)} for the per-tier tables' users)" if sample else "")
        + ": what spread alone reaches on each measure — their reference, not a peer"
    )


@dataclass(frozen=True)
class RecEvalReport:
    index: str
    n_users: int
    runs: dict[str, dict[str, float]]  # run -> metric -> mean
    per_user: dict[str, dict[str, dict[str, float]]]  # run -> metric -> user -> value
    catalogue_coverage: dict[str, float]
    comparisons: tuple = ()
    gates: dict = field(default_factory=dict)
    per_tier: dict = field(
        default_factory=dict
    )  # truncation -> {"tiers": {tier: users}, run -> metric -> mean}
    seconds: dict[str, float] = field(default_factory=dict)
    setup: dict = field(default_factory=dict)

    def to_dict(self, per_user: bool = False) -> dict:
        out = {
            "index": self.index,
            "n_users": self.n_users,
            "runs": self.runs,
            "catalogue_coverage": self.catalogue_coverage,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "gates": {k: g.to_dict() for k, g in self.gates.items()},
            "per_tier": self.per_tier,
            "seconds": self.seconds,
            "setup": self.setup,
        }
        if per_user:
            out["per_user"] = self.per_user
        return out

    def write_json(self, path: Path | str) -> None:
        write_json_atomic(Path(path), self.to_dict(per_user=True))

    @property
    def metrics(self) -> tuple[str, ...]:
        return metric_names(tuple(self.setup.get("cutoffs", CUTOFFS)))

    @property
    def primary(self) -> str:
        return self.metrics[0]

    def print(self, console) -> None:
        from rich.table import Table

        base = self.setup.get("baseline")
        metrics, primary = self.metrics, self.primary
        protocol = (
            f"{self.setup['train_size']} training saves a user"
            if self.setup.get("train_size")
            else f"hold-out {self.setup['holdout']:.0%}"
        )
        if self.setup.get("protocol") == "cold-item":
            protocol = (
                f"cold items: {self.setup['new_items']:.0%} of the catalogue new "
                f"({self.setup['new_papers']:,} papers nobody trained on), ranked among the new only"
            )
        table = Table(
            "run",
            *metrics,
            "catalogue",
            *((f"Δ {primary} vs " + base, "p_adj", "gate") if base else ()),
            title=f"{self.index}: {self.n_users} users, {protocol} ({self.setup['split']}), "
            f"seed {self.setup['seed']}",
        )
        by = {c.candidate: c for c in self.comparisons if c.metric == primary and c.baseline == base}
        for run, avg in self.runs.items():
            cells = [f"{avg[m]:.4f}" for m in metrics] + [f"{self.catalogue_coverage[run]:.4f}"]
            if base:
                c = by.get(run)
                cells += (
                    [f"{c.delta:+.4f}", f"{c.p_adj:.4f}", "SHIP" if self.gates[run].ship else "no"]
                    if c
                    else ["—"] * 3
                )
            table.add_row(run, *cells)
        console.print(table)
        if random_line(self.setup):
            console.print(random_line(self.setup), highlight=False)
        for run, why in self.setup.get("not_applicable", {}).items():
            console.print(f"{run}: not applicable under this protocol — {why}", highlight=False)
        for name, decision in self.gates.items():
            if " over " in name:
                console.print(
                    f"gate {name}: {'SHIP' if decision.ship else 'NO-SHIP'} — {'; '.join(decision.reasons)}",
                    highlight=False,
                )
        for trunc, block in self.per_tier.items():
            tests = {(c["baseline"], c["metric"]): c for c in block.get("comparisons", [])}
            tested = tested_per_tier(self.setup.get("cutoffs", CUTOFFS))
            t = Table(
                "run",
                *metrics,
                *(h for m in tested for h in (f"cascade Δ {m}", "p_adj")),
                title=tier_table_title(trunc, block, self.n_users, self.setup),
            )
            for run, avg in block["runs"].items():
                cells = [f"{avg[m]:.4f}" for m in metrics]
                for m in tested:
                    c = tests.get((run, m))
                    cells += [f"{c['delta']:+.4f}", f"{c['p_adj']:.4f}"] if c else ["—", "—"]
                t.add_row(run, *cells)
            console.print(t)
        for peer, tuned in self.setup.get("tuned", {}).items():
            past = sum(1 for v in tuned["validation"] if v.get("beyond_grid"))
            console.print(
                f"{peer}: {tuned['params']} (validation recall@{self.setup['cutoffs'][0]} on training saves, "
                f"{len(tuned['validation'])} settings{f', {past} past the grid' if past else ''}"
                f"{', cached' if tuned['cached'] else ''})"
                + (
                    f" — still on the edge of what was tried: {', '.join(tuned['on_edge'])} "
                    "(list further values in scix_core.recommend.collab.BEYOND)"
                    if tuned.get("on_edge")
                    else ""
                ),
                highlight=False,
            )
        chosen = self.setup.get("tier_weights") or {}
        for label, who in (("1", "Tier 3, one save"), ("3", "Tier 2, three saves"), ("all", "Tier 1")):
            c = chosen.get(label)
            if c and "taken" in c:
                console.print(
                    f"co-save weights, {who}: {c['taken']} (validation recall@{c.get('k', 10)} on training "
                    f"saves, {c['users']} users × {c.get('queries', 1)} asks: configured {c['configured']} "
                    f"{c['configured_recall']:.4f}, best "
                    f"{c['best']} {c['best_recall']:.4f}, p {c['p']:.3f})",
                    highlight=False,
                )
            elif c:
                console.print(f"co-save weights, {who}: as configured — {c['reason']}", highlight=False)
        if chosen.get("reason"):
            console.print(f"co-save weights: as configured — {chosen['reason']}", highlight=False)


def held_out_clusters(
    side, splits: Sequence[UserSplit], centroids: dict[str, np.ndarray]
) -> dict[str, dict[str, int]]:
    """Each user's held-out papers with the interest cluster of each (S-recall's subtopics): the same for
    every run and every per-tier table (a truncation changes the training saves, not the held-out ones)."""
    out = {}
    for s in splits:
        held = sorted(p for p in s.test if p in side.catalog.row)
        found = nearest_clusters(side.vectors.get(side.rows(held)), centroids[s.user])
        out[s.user] = dict(zip(held, found.tolist()))
    return out


def _score(
    rec,
    recommended: dict[str, list[str]],
    splits: Sequence[UserSplit],
    centroids: dict[str, np.ndarray],
    held: dict[str, dict[str, int]],
    cutoffs: Sequence[int] = CUTOFFS,
):
    """Every per-user measure of one run's lists (``held``: :func:`held_out_clusters`)."""
    values = ranking_metrics(recommended, splits, cutoffs)
    side = rec.side
    first = cutoffs[0]
    vectors = {s.user: side.vectors.get(side.rows(recommended[s.user][:first])) for s in splits}
    values[f"ild@{first}"] = {s.user: diversity(vectors[s.user]) for s in splits}
    values["cluster_coverage"] = {
        s.user: cluster_coverage(vectors[s.user], centroids[s.user]) for s in splits
    }
    values[f"s_recall@{first}"] = {
        s.user: subtopic_recall(recommended[s.user][:first], held[s.user]) for s in splits
    }
    return values


def _timed_scorer(trainer: Callable, rec, train, splits, seconds: dict[str, float]):
    t = time.perf_counter()
    out = trainer(rec, train, [s.user for s in splits])
    seconds["tier1-lgbm training"] = time.perf_counter() - t
    return out


def evaluate_recs(
    index: str,
    config: Config | None = None,
    *,
    users: int | None = None,
    holdout: float = 0.2,
    seed: int = 42,
    runs: Sequence[str] = rec_runs.DEFAULT_RUNS,
    baseline: str | None = "content-knn",
    min_saves: int = 5,
    per_tier: bool = True,
    per_tier_users: int | None = 1000,
    permutations: int = PERMUTATIONS,
    progress: bool = True,
    train_size: int | None = None,
    cutoffs: Sequence[int] = CUTOFFS,
    scorer_trainer: Callable | None = None,
    workers: int | None = None,
    new_share: float | None = None,
) -> RecEvalReport:
    """``scorer_trainer``: how the ``tier1-lgbm`` run gets its LightGBM scorer — training belongs to the
    room above (:func:`scix_core.train.scorer.in_run_scorer`; the command line and the notebook pass it).
    ``workers``: processes (None: two where this process may use two cores — :func:`_workers`;
    :mod:`scix_core.evaluate.rec_lists` says what the second runs — more than two run as two).
    ``new_share``: the cold-item protocol (module doc) with that share of the catalogue new."""

    cfg = config or load_config()
    cutoffs = check_cutoffs(cutoffs)
    if per_tier_users is not None and per_tier_users < 1:
        raise ConfigError(f"--per-tier-users must be a number of users (0: all), not {per_tier_users}")
    metrics, primary, depth = metric_names(cutoffs), f"recall@{cutoffs[0]}", max(cutoffs)
    runs = rec_runs.check_runs(runs)
    if rec_runs.LGBM in runs and scorer_trainer is None:
        raise ConfigError(
            f"the {rec_runs.LGBM} run trains a scorer during the run: pass "
            "scorer_trainer=scix_core.train.scorer.in_run_scorer, or leave the run out"
        )
    if baseline and baseline not in runs:
        runs = (*runs, rec_runs.check_runs([baseline])[0])
    cold = new_share is not None
    not_applicable: dict[str, str] = {}
    if cold:
        if train_size is not None:
            raise ConfigError("--new-items and --train-size are two protocols: choose one")
        if baseline in rec_runs.NEEDS_SAVES:
            raise ConfigError(f"--baseline {baseline} cannot rank new items: choose a content-side run")
        not_applicable = {r: rec_runs.NEEDS_SAVES[r] for r in runs if r in rec_runs.NEEDS_SAVES}
        runs = tuple(r for r in runs if r not in not_applicable)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scix-eval-recs-") as tmp:
        probe = Recommender(
            index,
            cfg,
            persist_clusters=False,
            state=UserState(Path(tmp) / "probe.sqlite"),
            build_community=False,
        )
        if probe.side.vectors is None:
            raise ConfigError(f"index {index!r} cannot be evaluated: {probe.side.unavailable}")
        libraries = library_saves(probe.build_dir)
        real_times = library_times(probe.build_dir) is not None
        if not libraries:
            raise ConfigError(f"index {index!r} holds no user libraries (ingest a citeulike-format folder)")
        new: frozenset[str] = frozenset()
        new_rows = None
        if cold:
            new = new_items(probe.side.catalog.ids, new_share, seed)
            new_rows = tuple(sorted(probe.side.catalog.row[p] for p in new))
            eligible = cold_split(libraries, new, min_saves)
        else:
            eligible = split_libraries(libraries, holdout, seed, min_saves, real_times, train_size)
        splits = sample(eligible, users, seed)
        if not splits:
            raise ConfigError(
                f"no user of index {index!r} has {min_saves} or more saves"
                + (f" and more than {train_size}" if train_size else "")
            )
        evaluated = {s.user: s for s in splits}
        # (the cold-item protocol: the new items are nobody's training save, the evaluated users' or others')
        train = {
            u: (evaluated[u].train if u in evaluated else tuple(x for x in p if x not in new))
            for u, p in libraries.items()
        }
        seconds: dict[str, float] = {}
        rec = Recommender(
            index,
            cfg,
            persist_clusters=False,
            state=UserState(Path(tmp) / "main.sqlite"),
            build_community=False,
            pool=new_rows,
        )
        # the per-tier tables truncate a sample of the evaluated users; everyone else is the same community in
        # every per-tier run (with every user truncated there would be none: at one save nobody co-saves)
        truncated = sample(splits, per_tier_users, seed) if per_tier else splits
        t = time.perf_counter()
        replay(rec, train, truncated, evaluated=False)
        others = Path(tmp) / "others.sqlite" if per_tier else None
        if others is not None:
            rec.state.snapshot(others)
        replay(rec, train, truncated, evaluated=True)
        seconds["replay (training saves into the private state)"] = time.perf_counter() - t
        peer_runs = ("content-knn", *[r for r in runs if r in rec_runs.COLLAB]) if per_tier else ()
        job = PeerJob(
            index,
            cfg,
            Path(tmp) / "peers.sqlite",
            others,
            Path(tmp),
            train,
            tuple(splits),
            tuple(truncated),
            tuple(dict.fromkeys([r for r in runs if r in LANE_RUNS] + list(peer_runs))),
            peer_runs,
            seed,
            cutoffs[0],
            depth,
            cfg.home / "cache" / "rec-tuning" / index,
            rec.fit_cache,
            per_tier_parts(truncated, seed) if per_tier else (),
            new_rows,
            new_share,
        )
        parallel = _workers(workers) > 1
        if parallel:
            rec.state.snapshot(job.state)
            pool, future = start(job)
        mine = [r for r in runs if r not in LANE_RUNS]
        shared: dict = {}  # the per-tier tables this process made for the second (rec_lists.share_per_tier)
        try:
            with one_thread_here(parallel):
                t = time.perf_counter()
                rec.warm()  # beside the second process's peer tuning, which does not need it
                seconds["community (co-save model fit)"] = time.perf_counter() - t
                lgbm_scorer, lgbm_audit = (
                    _timed_scorer(scorer_trainer, rec, train, splits, seconds)
                    if rec_runs.LGBM in runs
                    else (None, None)
                )
                recommended, centroids = run_lists(
                    rec, mine, splits, None, seconds, progress, lgbm_scorer, depth
                )
                if parallel and per_tier:
                    shared = share_per_tier(rec, job, future, seconds)
            t = time.perf_counter()
            lane = future.result() if parallel else None
            alone = lane.unreadable if lane is not None else ""
            if lane is None or alone:  # one process, or the second could not read the vectors: the job here
                lane = run_job(job, rec)
            seconds["waiting for the peers process" if parallel and not alone else "peers (this process)"] = (
                time.perf_counter() - t
            )
        except BaseException:
            if parallel:  # this process failed or was interrupted: the second's work is of no use now
                stop(pool)
            raise
        finally:
            if parallel:
                pool.shutdown(cancel_futures=True)
        seconds.update(lane.seconds)
        recommended.update(lane.lists)
        made = {**lane.per_tier, **shared}
        if per_tier:
            t = time.perf_counter()
            made[table_name(None)] = full_saves_table(rec, recommended, splits, peer_runs, depth)
            seconds["per-tier table of all the saves (lists)"] = time.perf_counter() - t
        made = {n: made[n] for n in map(table_name, TRUNCATIONS) if n in made}
        recommended = {r: recommended[r] for r in runs}
        t = time.perf_counter()
        held = held_out_clusters(rec.side, splits, centroids)
        per_user = {run: _score(rec, recommended[run], splits, centroids, held, cutoffs) for run in runs}
        seconds["metrics"] = time.perf_counter() - t
        candidates = len(new_rows) if cold else len(rec.side.catalog)
        drawn = _score(
            rec,
            random_lists(rec.side, splits, cutoffs[0], new_rows if cold else np.arange(candidates), seed),
            splits,
            centroids,
            held,
            cutoffs[:1],
        )
        catalogue = {
            run: len({p for ids in recommended[run].values() for p in ids}) / candidates for run in runs
        }
        tiers: dict = {}
        if per_tier:
            t = time.perf_counter()
            tiers = _per_tier_tables(rec, made, splits, centroids, held, cutoffs, peer_runs, permutations)
            seconds["per-tier tables (metrics)"] = time.perf_counter() - t
    comparisons, gates = (), {}
    t = time.perf_counter()
    if baseline:
        table = holm(
            [
                c
                for run in runs
                if run != baseline
                for c in compare(baseline, run, per_user, metrics, permutations)
            ]
        )
        comparisons = tuple(table)
        gates = {
            run: gate([c for c in table if c.candidate == run], primary) for run in runs if run != baseline
        }
    same = f"tier1-{cfg.recommend.heuristic}" if cfg.recommend.scorer == "heuristic" else None  # = tier1
    variants = [r for r in runs if r in rec_runs.VARIANTS and r != same]
    if variants and "tier1" in runs and baseline != "tier1":
        # does another scorer ship over the default? their own gates, on their own Holm table
        own = holm([c for r in variants for c in compare("tier1", r, per_user, metrics, permutations)])
        comparisons = (*comparisons, *own)
        for r in variants:
            gates[f"{r} over tier1"] = gate([c for c in own if c.candidate == r], primary)
    seconds["significance"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    setup = {
        "protocol": "cold-item" if cold else "hold-out",
        "new_items": new_share,
        "new_papers": len(new),
        "not_applicable": not_applicable,
        "holdout": holdout,
        "train_size": train_size,
        "seed": seed,
        "min_saves": min_saves,
        "baseline": baseline,
        "k": cutoffs[0],
        "cutoffs": list(cutoffs),
        "lgbm_audit": lgbm_audit,
        "split": "latest per user (real times)" if real_times else "seeded random per user",
        "users_eligible": len(eligible),
        "tuned": {n: t.to_dict() for n, t in lane.tuned.items()},
        "processes": 2 if parallel and not alone else 1,
        "one_process_because": alone,
        "collab": rec.community.model_label,
        "collab_failure": rec.community.failure,
        "tier_weights": rec.community.weights_chosen,
        "tier_weights_at": rec.community.weights_at,  # the list length the choice compared recall at
        "scorer": cfg.recommend.scorer,
        "mmr_lambda": cfg.recommend.mmr_lambda,
        "per_tier_users": len(truncated) if per_tier else 0,
        "per_tier_parts": [len(p) for p in job.parts],  # the users truncated at a time
        "per_tier_first_process": list(shared),  # the tables the first process made (two processes)
        # a random list's measures: every evaluated user's means, the per-tier sample's
        "random_list": {
            "users": means(drawn),
            "per_tier_users": (
                means({m: {s.user: v[s.user] for s in truncated} for m, v in drawn.items()})
                if per_tier
                else None
            ),
        },
    }
    return RecEvalReport(
        index,
        len(splits),
        {r: means(per_user[r]) for r in runs},
        per_user,
        catalogue,
        comparisons,
        gates,
        tiers,
        {k: round(v, 3) for k, v in seconds.items()},
        setup,
    )


def _workers(workers: int | None) -> int:
    """Processes to run (at most two); None: as many as the cores this process may use — its CPU affinity,
    and ``OMP_NUM_THREADS`` when set (``make test`` gives each of its pytest workers one core's worth)."""
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be 1 or more, not {workers}")
    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        budget = os.environ.get("OMP_NUM_THREADS", "")
        workers = min(cores, int(budget)) if budget.isdigit() and int(budget) > 0 else cores
    return min(2, workers)


def _per_tier_tables(
    rec,
    lists: dict,
    splits: Sequence[UserSplit],
    centroids: dict[str, np.ndarray],
    held: dict[str, dict[str, int]],
    cutoffs: Sequence[int],
    peer_runs: Sequence[str],
    permutations: int = PERMUTATIONS,
) -> dict:
    """Each table's lists (:func:`~scix_core.evaluate.rec_lists.per_tier_lists`,
    :func:`~scix_core.evaluate.rec_lists.full_saves_table`) scored over the users they hold, and the cascade
    tested against each peer on recall at every cutoff and on coverage, Holm over each table."""
    out = {}
    tested = tested_per_tier(cutoffs)
    for name, (made, ran) in lists.items():
        users = [s for s in splits if s.user in made["cascade"]]
        values = {run: _score(rec, ids, users, centroids, held, cutoffs) for run, ids in made.items()}
        out[name] = {
            "tiers": {f"tier{t}": n for t, n in sorted(ran.items())},
            "runs": {run: means(v) for run, v in values.items()},
            # the cascade against each peer, Holm over this table (cascade = candidate: Δ > 0 is its lead)
            "comparisons": [
                c.to_dict()
                for c in holm(
                    [c for p in peer_runs for c in compare(p, "cascade", values, tested, permutations)]
                )
            ],
        }
    return out
