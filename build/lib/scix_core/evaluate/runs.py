"""The named runs of ``scix eval`` and how each is produced.

One base pass per query (hybrid, depth 100, no optional stages) yields the
lane runs (``lexical``, ``body``, ``dense``), ``hybrid`` (the default
pipeline: RRF k=60 of the lanes) and the ``rrf_k*`` runs (the same lane
rankings re-fused: pure functions, no second search); the score-fusion runs
(``convex_*``) are made from those lane rankings too, once the gold set has
cross-validated their weight (:mod:`scix_core.evaluate.score_fusion`). Pipeline variants
(``hybrid+boosts``, ``hybrid+rerank``, ``hybrid+rewrite``, ``hybrid-body``)
run the pipeline again with one switch changed. Configured runs
(``scix_core.evaluate.config_runs``) run the pipeline of a Searcher built
from another configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scix_core.evaluate.score_fusion import SCORE_RUNS
from scix_core.fusion import rrf
from scix_core.search.options import reranks
from scix_core.search.stages.rerank import (
    MAX_LIMIT as RERANK_LIMIT,
)  # reranked runs are scored on that window
from scix_core.types import Ranking

DEPTH = 100
LANE_RUNS = ("lexical", "body", "dense")
RRF_RUNS = {"rrf_k10": 10, "rrf_k30": 30, "rrf_k60": 60, "rrf_k100": 100}
PIPELINE_RUNS = ("hybrid+boosts", "hybrid+rerank", "hybrid+rewrite", "hybrid-body")
ALL_RUNS = (*LANE_RUNS, "hybrid", *RRF_RUNS, *SCORE_RUNS, *PIPELINE_RUNS)
DEFAULT_RUNS = ("lexical", "dense", "hybrid")


@dataclass
class RunSet:
    rankings: dict[str, dict[str, Ranking]] = field(default_factory=dict)  # run -> query id -> ranking
    lanes: dict[str, dict[str, Ranking]] = field(
        default_factory=dict
    )  # query id -> lane -> ranking (base pass)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # run -> lane -> queries it dropped on
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # run -> why it was not run


def _note_dropped(runs: RunSet, run: str, result) -> None:
    for lane in result.metadata["dropped_lanes"]:
        runs.dropped.setdefault(run, {}).setdefault(lane, 0)
        runs.dropped[run][lane] += 1


def collect(
    searcher,
    queries: dict[str, str],
    names: tuple[str, ...],
    reranker: str | None = None,
    rewrite: str = "local",
    body_searcher: Callable[[], object] | None = None,
    progress: bool = False,
    configured: dict[str, Callable[[], object]] | None = None,
) -> RunSet:
    """Produce every run in ``names`` for ``queries`` (query id -> text)."""
    from tqdm.auto import tqdm

    runs = RunSet()
    base_names = [n for n in names if n in LANE_RUNS or n == "hybrid" or n in RRF_RUNS]
    if not searcher.has_body and "body" in base_names:
        runs.skipped["body"] = "no paper in this index has a full text"
        base_names.remove("body")
    if base_names or any(n in SCORE_RUNS for n in names):
        t = time.perf_counter()
        for qid, text in tqdm(queries.items(), desc="hybrid pass", disable=not progress, leave=False):
            result = searcher.search(
                text, "hybrid", limit=DEPTH, boosts=False, rerank="off", rewrite="off", lanes=""
            )
            lanes = {n: result.rankings[n] for n in result.metadata["lanes_run"]}
            runs.lanes[qid] = lanes
            for name in base_names:
                if name in LANE_RUNS:
                    ranking = lanes.get(name, Ranking(name))
                    if name in result.metadata["dropped_lanes"]:
                        runs.dropped.setdefault(name, {}).setdefault(name, 0)
                        runs.dropped[name][name] += 1
                elif name == "hybrid":
                    ranking = result.ranking()
                    _note_dropped(runs, name, result)
                else:
                    ranking = rrf(list(lanes.values()), k=RRF_RUNS[name]).top(DEPTH)
                    _note_dropped(runs, name, result)
                runs.rankings.setdefault(name, {})[qid] = ranking
        shared = time.perf_counter() - t
        runs.seconds.update({n: shared for n in (*base_names, *(n for n in names if n in SCORE_RUNS))})

    variants: dict[str, tuple[object, dict]] = {}
    if "hybrid+boosts" in names:
        variants["hybrid+boosts"] = (searcher, {"boosts": True, "limit": DEPTH})
    if "hybrid+rewrite" in names:
        variants["hybrid+rewrite"] = (searcher, {"rewrite": rewrite, "limit": DEPTH})
    if "hybrid+rerank" in names:
        if reranker and reranker != "off":
            variants["hybrid+rerank"] = (searcher, {"rerank": reranker, "limit": RERANK_LIMIT})
        else:
            runs.skipped["hybrid+rerank"] = "no reranker: pass --reranker NAME|PATH or set search.rerank"
    if "hybrid-body" in names:
        if searcher.has_body and body_searcher is not None:
            variants["hybrid-body"] = (body_searcher(), {"limit": DEPTH})
        else:
            runs.skipped["hybrid-body"] = "no paper in this index has a full text: identical to hybrid"
    for name, make in (configured or {}).items():
        engine = make()
        # a run that reranks is scored on the reranked window (the stage is bypassed above MAX_LIMIT results)
        variants[name] = (engine, {"limit": RERANK_LIMIT if reranks(engine.config.search.rerank) else DEPTH})
    for name, (engine, options) in variants.items():
        t = time.perf_counter()
        # a configured run's own configuration decides boosts, rerank and rewrite
        fixed = {} if name in (configured or {}) else {"boosts": False, "rerank": "off", "rewrite": "off"}
        for qid, text in tqdm(queries.items(), desc=name, disable=not progress, leave=False):
            result = engine.search(text, "hybrid", **{**fixed, **options})
            last = "rerank" if "rerank" in result.rankings else None
            runs.rankings.setdefault(name, {})[qid] = result.rankings[last] if last else result.ranking()
            _note_dropped(runs, name, result)
        runs.seconds[name] = time.perf_counter() - t
    return runs
