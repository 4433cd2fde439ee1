"""The lists ``scix eval-recs`` scores: every run's top ``depth`` per user, in one process or two.

The per-user loop is Python bound — one core whatever the thread pools say
(the BLAS threads only spin). With ``workers`` ≥ 2, :func:`evaluate_recs
<scix_core.evaluate.recs.evaluate_recs>` hands a :class:`PeerJob` — every
peer (tuned and fitted there), the forced Tiers 3 and 2 (they share the
neighbours' interest cache) and the per-tier tables' lists — to a spawned
process and runs the Tier-1 family, Tier 0 and the LightGBM scorer itself,
each process on one thread. The second process reads the same index (a
private replica of the embedded shard, :mod:`scix_core.vectors.replica`), a
snapshot of the same replayed private state, the same cached community fit
and the same cached tuning, so its lists are the ones one process makes: a
test holds the two modes equal. (EASE's and iALS's final fits are cached on
disk too; one made on one BLAS thread can differ from one made on two in the
fifth decimal, so a run's EASE figures are those of whichever fit is cached.)
A spawned process, not a fork: the parent's vector-store and OpenMP threads
do not survive a fork. Where the second process cannot read the vectors
(``vectors.replicas = false`` with the embedded store) the job runs in the
first, after its own runs.

The two processes share the work that one of them would otherwise wait out.
The second starts before the first fits the community's co-save model (it
tunes the peers first, and reads that fit from the cache when it needs it);
once it has tuned and fitted the peers it says so (:data:`TUNED`), and the
first, done with its own runs, makes the per-tier tables of 1, 3 and 5 saves
the second has not claimed yet (:func:`share_per_tier`, :class:`Claims`): the
first claims from the fewest saves up (the one-save table as soon as its own
runs are done), the second from five saves down.
Which process makes a table changes nothing in it. The table of all the saves
truncates nothing, so it is made from the main lists, over every evaluated
user (:func:`full_saves_table`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from scix_core.config import Config
from scix_core.evaluate import rec_runs
from scix_core.recommend import Recommender, UserState
from scix_core.recommend.library import replay_many
from scix_core.recommend.profile import unit
from scix_core.recommend.scorers.heuristic import HeuristicScorer
from scix_core.recommend.splits import UserSplit
from scix_core.recommend.stages.cluster import ward_labels
from scix_core.recommend.tiers import entitled

TRUNCATIONS = (1, 3, 5, None)
#: the tables that truncate the sample's saves; the last of TRUNCATIONS (all the saves) truncates nothing
TRUNCATED = tuple(n for n in TRUNCATIONS if n)
#: the per-tier tables truncate at most this many users at once: a larger sample (every evaluated user, say)
#: is truncated a part at a time, every other user's saves kept — each part joins the whole community, as
#: a new user does, instead of a community of the few users left untruncated
PER_TIER_PART = 1000
# the second process's runs (Tiers 3 and 2 share the neighbours' interest cache); the rest run in the first
LANE_RUNS = frozenset((*rec_runs.PEERS, "tier3", "tier2"))
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# the file the second process makes in the job's folder once the peers are tuned and fitted
TUNED = "peers-tuned"

Lists = dict[str, dict[str, list[str]]]  # run -> user -> paper ids


def replay(
    rec,
    train: Mapping[str, Sequence[str]],
    splits: Sequence[UserSplit],
    truncate: int | None = None,
    evaluated: bool | None = None,
) -> None:
    """Users' training saves (the evaluated users' truncated to ``truncate``): the community the co-save
    signal and the collaborative peers see. ``evaluated`` True / False: only the evaluated users / only the
    others (None: everyone)."""
    chosen = {s.user for s in splits}
    replay_many(
        rec,
        (
            (user, papers[:truncate] if truncate and user in chosen else papers, None)
            for user, papers in train.items()
            if evaluated is None or (user in chosen) == evaluated
        ),
    )


def interest_centroids(rec, ctx, tier1=None) -> np.ndarray:
    """The user's interest clusters (Tier 1's Ward rule on the training saves), as unit centroids;
    ``tier1``: the user's Tier-1 state when its stages ran, whose labels are these (not computed twice)."""
    cfg = rec.config.recommend
    if tier1 is not None and len(tier1.saved_vectors) >= cfg.tier1_min_saves:
        vecs, labels = tier1.saved_vectors, tier1.labels
    else:
        vecs = rec.side.vectors.get(rec.side.rows(ctx.saved))
        labels = (
            ward_labels(vecs, cfg.max_clusters, cfg.min_silhouette)[0]
            if len(vecs) >= cfg.tier1_min_saves
            else np.zeros(len(vecs), dtype=np.int64)
        )
    return np.stack([unit(vecs[labels == k].mean(axis=0)) for k in range(int(labels.max()) + 1)])


def scorers(rec, lgbm_scorer=None) -> dict[str, object]:
    cfg = rec.config.recommend
    out = {
        "default": rec.scorer,
        "cosine": HeuristicScorer(cfg, use_profiles=False),
        "profile": HeuristicScorer(cfg, use_profiles=True),
        "content": HeuristicScorer(replace(cfg, weight_cosave=0.0)),
    }
    if lgbm_scorer is not None:
        out["lgbm"] = lgbm_scorer
    return out


def run_lists(
    rec,
    runs: Sequence[str],
    splits: Sequence[UserSplit],
    peers: rec_runs.Peers | None,
    seconds: dict[str, float],
    progress: bool = False,
    lgbm_scorer=None,
    depth: int = 10,
    centroids: bool = True,
) -> tuple[Lists, dict[str, np.ndarray]]:
    """Every run's list per user (and each user's interest centroids, for coverage, unless not
    ``centroids``); each stage's seconds added to ``seconds``."""
    from tqdm.auto import tqdm

    family = rec_runs.Tier1Family(rec, depth, scorers(rec, lgbm_scorer), runs)
    tier1 = [r for r in runs if r in rec_runs.TIER1 or r in rec_runs.VARIANTS]
    out: Lists = {r: {} for r in runs}
    cents: dict[str, np.ndarray] = {}

    def timed(name: str, fn, *args):
        t = time.perf_counter()
        value = fn(*args)
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t
        return value

    cfg = rec.config.recommend
    default = cfg.heuristic if cfg.scorer == "heuristic" else None  # that variant is the default scorer
    for s in tqdm(splits, desc="users", unit="user", disable=not progress, leave=False):
        ctx = rec.context(s.user)
        ranked, finished, base = {}, {}, None
        if tier1:
            base = timed("tier1 candidates (stages 1-6c)", family.candidates, ctx)
        if centroids:
            cents[s.user] = timed("interest clusters (coverage)", interest_centroids, rec, ctx, base)
        for run in runs:
            if run in tier1:
                v = rec_runs.variant(run, default)
                if v not in ranked:
                    ranked[v] = timed(f"tier1 scoring ({v})", family.ranked, base, v)
                key = (v, rec_runs.finish_key(run))
                if key not in finished:
                    finished[key] = timed(run, family.finish, ranked[v], run)
                ids = finished[key]
            elif run in rec_runs.TIERS:
                ids = timed(run, rec_runs.forced_tier(rec, run), ctx, depth)
            else:
                ids = timed(run, peers.recommend, run, ctx, depth)
            out[run][s.user] = ids
    return out, cents


@dataclass(frozen=True)
class PeerJob:
    """What the second process needs: where the replayed state and its snapshots are, the split, its runs.
    ``per_tier_runs`` empty: no per-tier tables."""

    index: str
    config: Config
    state: Path  # a snapshot of the replayed private state (everyone's training saves)
    others: Path | None  # the state before the evaluated users were replayed (the per-tier tables)
    tmp: Path
    train: dict[str, tuple[str, ...]]
    splits: tuple[UserSplit, ...]
    truncated: tuple[UserSplit, ...]
    runs: tuple[str, ...]
    per_tier_runs: tuple[str, ...]
    seed: int
    k: int
    depth: int
    cache_dir: Path  # the peers' tuning cache
    fit_cache: Path | None = None  # where EASE and iALS keep their final fits (Recommender.fit_cache)
    parts: tuple[tuple[UserSplit, ...], ...] = ()  # ``truncated`` a part at a time (:func:`per_tier_parts`)
    pool: tuple[int, ...] | None = None  # the cold-item protocol's new items: every list is drawn from them
    cold: float | None = None  # ... and the share of training items the peers' tuning sets aside as new


@dataclass(frozen=True)
class PeerLists:
    """The job's lists, its per-tier tables' lists (truncation -> (run -> user -> ids, tier -> users)), the
    peers' tuning and the job's stage seconds."""

    lists: Lists
    per_tier: dict[str, tuple[Lists, dict[int, int]]]
    tuned: dict = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    unreadable: str = ""  # why a second process could not read the vectors (the job then runs in the first)


def run_job(job: PeerJob, rec=None) -> PeerLists:
    """The job, with ``rec`` (the first process's recommender: one process) or in a recommender of its own
    over the job's state snapshot (the second)."""
    t0, seconds = time.perf_counter(), {}
    own = rec is None
    if own:
        rec = Recommender(
            job.index,
            job.config,
            persist_clusters=False,
            state=UserState(job.state),
            build_community=False,
            pool=job.pool,
        )
        if rec.side.vectors is None or rec.side.unavailable:
            return PeerLists({}, {}, unreadable=rec.side.unavailable or "no vectors")
    peers = _peers(rec, job, [r for r in job.runs if r in rec_runs.COLLAB], seconds)
    if own:
        (job.tmp / TUNED).touch()  # the first process may now share the per-tier tables
        t = time.perf_counter()
        rec.warm()  # the first process's community fit (made while the peers were tuned), from the fit cache
        seconds["peers process: community (co-save model fit)"] = time.perf_counter() - t
    lists, _ = run_lists(rec, job.runs, job.splits, peers, seconds, depth=job.depth, centroids=False)
    per_tier = {}
    if job.per_tier_runs:
        t = time.perf_counter()
        claims = Claims(job.tmp) if own else None  # shared with the first process; alone, every table here
        per_tier = per_tier_lists(rec, job, peers, claims, TRUNCATED[::-1] if own else TRUNCATED)
        seconds["per-tier tables (lists)"] = time.perf_counter() - t
    if own:
        seconds["peers process"] = time.perf_counter() - t0
    return PeerLists(lists, per_tier, dict(peers.tuned), seconds)


def _peers(rec, job: PeerJob, names: Sequence[str], seconds: dict[str, float]) -> rec_runs.Peers:
    """The job's peers with ``names`` tuned on the training saves and fitted (from the tuning and fit caches
    where they hold them), each one's seconds in ``seconds``: every tuning first — none needs the community,
    which the first process is fitting meanwhile — then the fits, the first of which waits for that fit
    (each peer that is one of its parts is the community's own)."""
    peers = rec_runs.Peers(
        rec,
        job.train,
        seed=job.seed,
        evaluated=[s.user for s in job.splits],
        k=job.k,
        cache_dir=job.cache_dir,
        fit_cache=job.fit_cache,
        cold=job.cold,
    )
    for name in names:
        t = time.perf_counter()
        peers.tune(name)
        seconds[f"{name} tuning"] = time.perf_counter() - t
    for name in names:
        t = time.perf_counter()
        peers.model(name)
        seconds[f"{name} fit"] = time.perf_counter() - t
    return peers


class Claims:
    """Which of two processes makes each per-tier table: the one that claims it first (a file created with
    ``O_EXCL`` in the job's folder, so exactly one claim of a name succeeds; a name this object claimed
    stays its own)."""

    def __init__(self, folder: Path):
        self.folder, self.mine = folder, set()

    def take(self, name: str) -> bool:
        if name not in self.mine:
            try:
                os.close(
                    os.open(self.folder / f"per-tier-{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                )
            except FileExistsError:
                return False
            self.mine.add(name)
        return True


def share_per_tier(rec, job: PeerJob, second: Future, seconds: dict[str, float]) -> dict:
    """The per-tier tables this, the first, process makes while the second is busy: the one-save table,
    claimed at once (the second claims from all the saves down, after its main lists, so it reaches that
    table last), then — once the second has tuned and fitted the peers (:data:`TUNED`; their tuning and
    EASE's and iALS's fits then come from the caches) — each of 1, 3 and 5 saves the second has not claimed
    yet, fewest saves first. {} when the second claimed them all, or ended without tuning the peers (it
    could not read the vectors: the job then runs here; or it failed)."""
    claims = Claims(job.tmp)
    if not job.per_tier_runs or not claims.take(table_name(TRUNCATED[0])):
        return {}
    flag = job.tmp / TUNED
    while not flag.exists() and not second.done():
        time.sleep(0.2)
    if not flag.exists():
        return {}
    t = time.perf_counter()
    peers = _peers(rec, job, [r for r in job.per_tier_runs if r in rec_runs.COLLAB], {})
    made = per_tier_lists(rec, job, peers, claims)
    seconds["per-tier tables (lists, first process)"] = time.perf_counter() - t
    return made


def table_name(trunc: int | None) -> str:
    """A per-tier table's name: its save count, or "all"."""
    return str(trunc) if trunc else "all"


def per_tier_parts(truncated: Sequence[UserSplit], seed: int) -> tuple[tuple[UserSplit, ...], ...]:
    """``truncated`` in seeded parts of at most :data:`PER_TIER_PART` users (sizes differing by one at
    most), each in the split's order; one part when it is no larger."""
    n = -(-len(truncated) // PER_TIER_PART)
    if n <= 1:
        return (tuple(truncated),)
    order = np.random.default_rng(seed).permutation(len(truncated))
    return tuple(tuple(truncated[i] for i in sorted(order[k::n].tolist())) for k in range(n))


def per_tier_lists(
    main,
    job: PeerJob,
    peers: rec_runs.Peers,
    claims: Claims | None = None,
    truncations: Sequence[int] = TRUNCATED,
) -> dict:
    """The default cascade and the peers with each sampled user's training saves truncated to each of
    ``truncations`` (1, 3, 5; with ``claims``, only those this process claims, in that order). Everything
    is refitted on the truncated saves — a model that kept the user's full row would offer their own
    truncated-away saves back: the peers (with the parameters tuned on the full saves), the cascade's
    community, and EASE by the exact low-rank update of the full fit (a refit where that is not cheaper).
    The users are truncated a part at a time (``job.parts``), the other parts' users keeping their saves."""
    out = {}
    parts = job.parts or (job.truncated,)
    others = UserState(job.others) if job.others is not None else None
    for trunc in truncations:
        name = table_name(trunc)
        if claims is not None and not claims.take(name):
            continue
        made: Lists = {run: {} for run in ("cascade", *job.per_tier_runs)}
        ran: dict[int, int] = {}
        for number, part in enumerate(parts):
            rec, fitted = _truncated(main, job, peers, others, parts, number, trunc)
            for s in part:
                tier, made["cascade"][s.user] = _cascade(rec, s.user, job.depth)
                ran[tier] = ran.get(tier, 0) + 1
                ctx = rec.stored(s.user)  # the peers read the saves alone, no co-save scores
                for peer in job.per_tier_runs:
                    made[peer][s.user] = fitted.recommend(peer, ctx, job.depth)
        out[name] = (made, ran)
    return out


def full_saves_table(
    rec, lists: Lists, splits: Sequence[UserSplit], per_tier_runs: Sequence[str], depth: int
) -> tuple[Lists, dict[int, int]]:
    """The per-tier table of all the training saves, over every evaluated user: it truncates nothing, so
    its community and peers are the main run's and so are its lists — each peer's its own, the cascade's
    the Tier 1 run's for a user Tier 1 answers (what ``rec.recommend`` gives; a test holds them equal),
    asked of ``rec`` for anyone else or where that run was not made."""
    made: Lists = {
        "cascade": {},
        **{run: {s.user: lists[run][s.user] for s in splits} for run in per_tier_runs},
    }
    ran: dict[int, int] = {}
    tier1 = lists.get("tier1", {})
    for s in splits:
        ids = tier1.get(s.user)
        if ids and entitled(rec.config.recommend, len(rec.stored(s.user).saved)) == 1:
            tier = 1
        else:
            tier, ids = _cascade(rec, s.user, depth)
        made["cascade"][s.user] = ids
        ran[tier] = ran.get(tier, 0) + 1
    return made, ran


def _cascade(rec, user: str, depth: int) -> tuple[int, list[str]]:
    """The tier the default cascade ran for ``user``, and its list without the exploration picks."""
    result = rec.recommend(user, depth, log=False)
    return result.tier, [i.paper_id for i in result.items if not i.exploration][:depth]


def _truncated(main, job: PeerJob, peers: rec_runs.Peers, others: UserState, parts, number: int, trunc: int):
    """A recommender and the peers refitted with part ``number``'s users truncated to ``trunc`` saves and
    every other user's saves kept."""
    part, cat = parts[number], main.side.catalog
    rec = Recommender(
        main.index,
        job.config,
        persist_clusters=False,
        state=others.snapshot(job.tmp / f"trunc-{trunc}-{number}.sqlite"),
        build_community=False,
        pool=job.pool,
    )
    rest = [s for i, p in enumerate(parts) if i != number for s in p]
    if rest:
        replay(rec, job.train, rest, evaluated=True)
    chosen = {s.user for s in part}
    changes = [
        (
            main.side.rows(p for p in job.train[u] if p in cat.row),
            main.side.rows(p for p in job.train[u][:trunc] if p in cat.row),
        )
        for u in chosen
    ]
    rec.community.start_from(main.community, changes)
    replay(rec, job.train, part, trunc, evaluated=True)
    train = {u: p[:trunc] if u in chosen else p for u, p in job.train.items()}
    fitted = peers.refitted(rec, train, changes)
    # the corrected EASE fits score the part's users in one batch, not one read of their correction a user
    asked = [new for _, new in changes]
    rec.community.prime(asked)
    if "ease" in job.per_tier_runs:
        fitted.model("ease").prime(asked)
    return rec, fitted


def _one_thread() -> None:
    """The second process's thread pools: one thread each (set before implicit or LightGBM load their
    OpenMP runtime; OpenBLAS, loaded with numpy already, through threadpoolctl)."""
    import threadpoolctl

    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    threadpoolctl.threadpool_limits(1)


def start(job: PeerJob) -> tuple[ProcessPoolExecutor, Future]:
    """The job in a spawned process (its result: :class:`PeerLists`)."""
    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_one_thread)
    return pool, pool.submit(run_job, job)


def stop(pool: ProcessPoolExecutor) -> None:
    """End the second process now (the first failed or was interrupted): without this the pool's shutdown
    would wait for the job to finish. (The executor's own process table: Python 3.14's
    ``terminate_workers`` is this.)"""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def one_thread_here(parallel: bool):
    """This process's BLAS and OpenMP pools on one thread while the second process runs (its threads would
    only contend for the other core)."""
    if not parallel:
        return nullcontext()
    import threadpoolctl

    return threadpoolctl.threadpool_limits(1)
