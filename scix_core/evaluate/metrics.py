"""Per-query IR metrics through ranx; graded qrels, negative grades as non-relevant.

Every call is cross-checked on a sample of its queries against ``trec_eval`` (through ``pytrec_eval``), an
independent implementation: a disagreement beyond 1e-6 raises :class:`MetricMismatchError` instead of
reporting a wrong figure. ranx compiles its metrics with numba and caches the machine code; that cache lives
in a folder of its own per numba version (``NUMBA_CACHE_DIR``, set unless the user set it) and the first
compilation holds a file lock, so concurrent cold processes never read each other's half-written entries — the
order effect once seen as nDCG@10 ≈ 0.14 for every lane of a long-lived process.
"""

from __future__ import annotations

import os
import random
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from scix_core.errors import MetricMismatchError
from scix_core.evaluate.gold import Gold
from scix_core.types import Ranking

METRICS = ("ndcg@10", "mrr@10", "recall@50", "recall@100")
PRIMARY = "ndcg@10"


def per_query(gold: Gold, rankings: Mapping[str, Ranking], metrics=METRICS) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, over ``gold.judged`` (a query with no ranking scores 0)."""
    Qrels, Run, evaluate = ranx_api()

    ids = gold.judged
    qrels = Qrels({q: {d: g for d, g in gold.qrels[q].items() if g > 0} for q in ids})
    run = {}
    for q in ids:
        ranking = rankings.get(q)
        scores = {}
        if ranking is not None:
            n = len(ranking.items)
            for rank, item in enumerate(
                ranking.items
            ):  # rank-derived scores: ties and odd scales cannot reorder
                scores.setdefault(item.paper_id, float(n - rank))
        run[q] = scores or {"__no_result__": 0.0}
    values = evaluate(qrels, Run(run), list(metrics), return_mean=False, make_comparable=True)
    if len(metrics) == 1:
        values = {metrics[0]: values}
    order = list(qrels.keys())  # ranx sorts query ids: align by its order, not ours
    out = {m: {q: float(v) for q, v in zip(order, np.asarray(values[m]))} for m in metrics}
    cross_check(gold, run, out)
    return out


#: ranx metric -> (trec_eval measure, its key in pytrec_eval's output, cut the run to this depth first)
TREC = {
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", None),
    "mrr@10": ("recip_rank", "recip_rank", 10),
    "recall@50": ("recall.50", "recall_50", None),
    "recall@100": ("recall.100", "recall_100", None),
}
CHECK_SAMPLE = 25
TOLERANCE = 1e-6


def cross_check(
    gold: Gold,
    run: Mapping[str, Mapping[str, float]],
    values: Mapping[str, Mapping[str, float]],
    sample: int = CHECK_SAMPLE,
    seed: int = 0,
) -> int:
    """Recompute ``values`` for up to ``sample`` queries with trec_eval; returns how many values were
    compared."""
    import pytrec_eval

    queries = sorted(q for q in values[next(iter(values))]) if values else []
    chosen = random.Random(seed).sample(queries, min(sample, len(queries)))
    qrels = {q: {d: int(g) for d, g in gold.qrels[q].items() if g > 0} for q in chosen}
    compared = 0
    for metric, per in values.items():
        if metric not in TREC:
            continue
        measure, key, cut = TREC[metric]
        docs = {
            q: dict(sorted(run[q].items(), key=lambda x: -x[1])[:cut]) if cut else dict(run[q])
            for q in chosen
        }
        got = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(docs)
        for q in chosen:
            if abs(got[q][key] - per[q]) > TOLERANCE:
                raise MetricMismatchError(
                    f"{metric} of query {q!r}: ranx {per[q]:.6f}, trec_eval {got[q][key]:.6f}; "
                    "no figure is reported (stale numba cache? set NUMBA_CACHE_DIR to a new folder)"
                )
            compared += 1
    return compared


_RANX_LOCK = threading.Lock()


def _numba_cache() -> Path:
    from importlib.metadata import version

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "scix_core" / f"numba-{version('numba')}-py{sys.version_info[0]}{sys.version_info[1]}"


def ranx_api():
    """ranx's (Qrels, Run, evaluate), imported once per process with a private numba cache under a file
    lock."""
    import fcntl
    import warnings

    with _RANX_LOCK:
        if "ranx" not in sys.modules:
            if "NUMBA_CACHE_DIR" not in os.environ and "numba" not in sys.modules:
                os.environ["NUMBA_CACHE_DIR"] = str(_numba_cache())
            folder = Path(os.environ.get("NUMBA_CACHE_DIR") or _numba_cache())
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / ".compile.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one process compiles (and writes the cache) at a time
                from numba.core.errors import NumbaTypeSafetyWarning
                from ranx import Qrels, Run, evaluate

                # ranx's own uint64 -> int64 cast inside its jitted nDCG: not a fault of ours or of the input
                warnings.filterwarnings(
                    "ignore", message="unsafe cast from uint64 to int64", category=NumbaTypeSafetyWarning
                )
                evaluate(
                    Qrels({"q": {"d": 1}}),
                    Run({"q": {"d": 1.0, "e": 0.5}}),
                    list(TREC),
                    return_mean=False,
                    make_comparable=True,
                )  # compile (or load) every metric while holding the lock
    from ranx import Qrels, Run, evaluate

    return Qrels, Run, evaluate


def means(values: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {m: float(np.mean(list(v.values()))) if v else 0.0 for m, v in values.items()}
