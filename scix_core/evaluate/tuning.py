"""Peer hyper-parameters chosen on a validation split carved from the training saves only.

For each evaluated user a seeded ``share`` of their *training* saves is set
aside (at least one; at least one stays); every model of a peer's grid
(``scix_core.recommend.collab.GRIDS``) is fitted on what is left — every
other user's training saves included — and scored by recall@k on the
set-aside saves of up to ``max_users`` sampled users; the best setting
(ties: the earlier in the grid) is then refitted on the whole training
matrix by the caller. The held-out evaluation saves are never read: the
function is not given them. Choices are cached as JSON per index build,
split and grid (``SCIX_HOME/cache/rec-tuning/``), so a second run on the
same split reuses them.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix

from scix_core.errors import ConfigError
from scix_core.workspace import read_json, write_json_atomic


@dataclass(frozen=True)
class Tuned:
    peer: str
    params: dict
    table: tuple[tuple[str, float | None], ...]  # (params as JSON, validation recall@k or None: did not fit)
    seconds: float
    cached: bool = False

    def to_dict(self) -> dict:
        return {
            "params": self.params,
            "validation": [{"params": json.loads(p), "recall": v} for p, v in self.table],
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
        }


def carve(
    train: Mapping[str, Sequence[str]], users: Sequence[str], share: float, seed: int
) -> tuple[dict[str, tuple[str, ...]], dict[str, frozenset[str]]]:
    """(what the grid is fitted on, user -> set-aside saves): a seeded share of each listed user's training
    saves."""
    fit = {u: tuple(p) for u, p in train.items()}
    val: dict[str, frozenset[str]] = {}
    for user in users:
        papers = list(dict.fromkeys(train[user]))
        if len(papers) < 2:
            continue
        n = min(len(papers) - 1, max(1, int(round(share * len(papers)))))
        rng = np.random.default_rng([seed, 1, zlib.crc32(user.encode())])
        held = frozenset(papers[i] for i in rng.choice(len(papers), size=n, replace=False))
        fit[user] = tuple(p for p in papers if p not in held)
        val[user] = held
    return fit, val


def matrix(libraries: Mapping[str, Sequence[str]], row: Mapping[str, int], n_items: int) -> csr_matrix:
    """Binary users × catalogue-rows matrix, users in ``libraries`` order."""
    r = [i for i, papers in enumerate(libraries.values()) for p in set(papers) if p in row]
    c = [row[p] for papers in libraries.values() for p in set(papers) if p in row]
    return csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(max(len(libraries), 1), n_items))


def recall_at(
    model, fit: Mapping[str, Sequence[str]], val: Mapping[str, frozenset[str]], row: Mapping[str, int], k: int
) -> float:
    out = []
    for user, held in val.items():
        rows = np.array([row[p] for p in fit[user] if p in row], dtype=np.int64)
        scores = model.scores(rows).astype(np.float64)
        scores[rows] = -np.inf
        top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
        out.append(len({int(t) for t in top} & {row[p] for p in held if p in row}) / len(held))
    return float(np.mean(out)) if out else 0.0


def cache_key(parts: Mapping) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tune(
    peer: str,
    grid: Sequence[dict],
    build: Callable[[dict], object],
    fit: Mapping[str, Sequence[str]],
    val: Mapping[str, frozenset[str]],
    row: Mapping[str, int],
    n_items: int,
    k: int,
    cache: Path | None = None,
) -> Tuned:
    """The grid's best setting by validation recall@k (``build(params)`` makes an unfitted model).

    A setting the model refuses (a ``ConfigError``: no terms left after ``min_df`` on a tiny corpus, say) is
    recorded with no value and skipped; when every setting is refused the last refusal is raised."""
    if cache is not None and cache.exists():
        got = read_json(cache)
        return Tuned(
            peer,
            got["params"],
            tuple((json.dumps(v["params"], sort_keys=True), v["recall"]) for v in got["validation"]),
            got["seconds"],
            cached=True,
        )
    t = time.perf_counter()
    x = matrix(fit, row, n_items)
    table: list[tuple[str, float | None]] = []
    refused: ConfigError | None = None
    for params in grid:
        try:
            value = recall_at(build(params).fit(x), fit, val, row, k)
        except ConfigError as exc:
            refused, value = exc, None
        table.append((json.dumps(params, sort_keys=True), value))
    usable = [i for i, (_, v) in enumerate(table) if v is not None]
    if not usable:
        raise refused
    best = max(usable, key=lambda i: (table[i][1], -i))
    tuned = Tuned(peer, dict(grid[best]), tuple(table), time.perf_counter() - t)
    if cache is not None:
        write_json_atomic(cache, tuned.to_dict())
    return tuned
