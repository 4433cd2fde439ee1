"""Peer hyper-parameters chosen on a validation split carved from the training saves only.

For each evaluated user a seeded ``share`` of their *training* saves is set
aside (at least one; at least one stays); every model of a peer's grid
(``scix_core.recommend.collab.GRIDS``) is fitted on what is left — every
other user's training saves included — and scored by recall@k on the
set-aside saves of up to ``max_users`` sampled users; the best setting
(ties: the earlier tried) is then refitted on the whole training matrix by
the caller (EASE's settings are instead scored from the users' side, every
λ from one eigendecomposition, or, with more users than items, as the whole
training fit updated exactly for the set-aside saves: the same fits either
way; ``scix_core.evaluate.rec_runs.Peers``). A best value on the edge of its axis is not taken on trust:
where the peer names values beyond the grid
(``scix_core.recommend.collab.BEYOND``), the search steps past that edge,
one axis at a time from the best setting, while it improves (a grid whose
optimum sits on its border only says the border was drawn too close).
The held-out evaluation saves are never read: the function is not given
them. Under the cold-item protocol the split is of items instead
(:func:`carve_items`): a share of the training items becomes new, and each
setting ranks only those. Choices are cached as JSON per index build,
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
    grid: int | None = None  # the table's first ``grid`` rows are the grid; the rest stepped beyond its edges
    # axes whose chosen value is still the last one listed past that edge (see :func:`on_edge`)
    on_edge: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        grid = len(self.table) if self.grid is None else self.grid
        return {
            "params": self.params,
            "validation": [
                {"params": json.loads(p), "recall": v, **({"beyond_grid": True} if i >= grid else {})}
                for i, (p, v) in enumerate(self.table)
            ],
            "grid": grid,
            "on_edge": list(self.on_edge),
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


def carve_items(
    train: Mapping[str, Sequence[str]], users: Sequence[str], share: float, seed: int
) -> tuple[dict[str, tuple[str, ...]], dict[str, frozenset[str]], frozenset[str]]:
    """The cold-item protocol's validation split, from the training saves only: a seeded ``share`` of the
    saved items becomes "new" — removed from every user's saves — and each listed user's saves of them are
    set aside, for users who keep a save. (What the grid is fitted on, user -> set-aside saves, the new
    items: the candidates a validation list is drawn from.)"""
    items = sorted({p for papers in train.values() for p in papers})
    n = max(1, int(round(share * len(items))))
    rng = np.random.default_rng([seed, 2])
    new = frozenset(items[i] for i in rng.choice(len(items), size=min(n, len(items)), replace=False))
    fit = {u: tuple(p for p in papers if p not in new) for u, papers in train.items()}
    val = {}
    for user in users:
        held = frozenset(p for p in train[user] if p in new)
        if held and fit[user]:
            val[user] = held
    return fit, val, new


def matrix(libraries: Mapping[str, Sequence[str]], row: Mapping[str, int], n_items: int) -> csr_matrix:
    """Binary users × catalogue-rows matrix, users in ``libraries`` order."""
    r = [i for i, papers in enumerate(libraries.values()) for p in set(papers) if p in row]
    c = [row[p] for papers in libraries.values() for p in set(papers) if p in row]
    return csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(max(len(libraries), 1), n_items))


def recall_at(
    model,
    fit: Mapping[str, Sequence[str]],
    val: Mapping[str, frozenset[str]],
    row: Mapping[str, int],
    k: int,
    candidates: np.ndarray | None = None,
) -> float:
    """Mean recall@k of ``model`` on the set-aside saves; ``candidates`` (a bool mask over the rows): only
    those are ranked (the cold-item protocol's new items)."""
    asked = {user: np.array([row[p] for p in fit[user] if p in row], dtype=np.int64) for user in val}
    prime = getattr(model, "prime", None)  # a corrected EASE fit scores every user in one batch
    if prime is not None:
        prime(list(asked.values()))
    out = []
    for user, held in val.items():
        rows = asked[user]
        scores = model.scores(rows).astype(np.float64)
        scores[rows] = -np.inf
        if candidates is not None:
            scores[~candidates] = -np.inf
        top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
        out.append(len({int(t) for t in top} & {row[p] for p in held if p in row}) / len(held))
    return float(np.mean(out)) if out else 0.0


def cache_key(parts: Mapping) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _edges(best: Mapping, tried: Sequence[Mapping], beyond: Mapping[str, tuple[Sequence, Sequence]]):
    """(axis, the values tried on it, the values listed past the edge) for each edge of an axis — its lowest
    or highest value tried, two or more tried — that ``best`` sits on."""
    for axis, (below, above) in beyond.items():
        values = {p[axis] for p in tried if axis in p}
        if axis not in best or len(values) < 2:
            continue
        for edge, further in ((min(values), below), (max(values), above)):
            if best[axis] == edge:
                yield axis, values, further


def steps_beyond(
    best: Mapping, tried: Sequence[Mapping], beyond: Mapping[str, tuple[Sequence, Sequence]]
) -> list[dict]:
    """The untried settings one step past an edge from ``best``: for each axis whose best value is the
    lowest (highest) of that axis tried so far, ``best`` with the next value of ``beyond[axis][0]`` (``[1]``)
    not yet tried — the values below (above) the grid, nearest first."""
    seen = {json.dumps(dict(p), sort_keys=True) for p in tried}
    out = []
    for axis, values, further in _edges(best, tried, beyond):
        step = next((v for v in further if v not in values), None)
        if step is not None and json.dumps({**best, axis: step}, sort_keys=True) not in seen:
            out.append({**best, axis: step})
    return out


def on_edge(
    best: Mapping, tried: Sequence[Mapping], beyond: Mapping[str, tuple[Sequence, Sequence]]
) -> tuple:
    """Axes whose best value is the lowest (highest) tried and every value listed past that edge was tried:
    the optimum may lie further out than the search was allowed to go. An edge with nothing listed past
    it (a shrinkage of 0, a β of 0) is a bound, not flagged."""
    return tuple(
        axis for axis, values, further in _edges(best, tried, beyond) if further and set(further) <= values
    )


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
    beyond: Mapping[str, tuple[Sequence, Sequence]] | None = None,
    candidates: np.ndarray | None = None,
    fitted: Callable[[dict], object | None] | None = None,
) -> Tuned:
    """The best setting by validation recall@k (``build(params)`` makes an unfitted model): the grid, then
    steps past its edges while they improve (:func:`steps_beyond`; ``beyond``: axis -> (values below the
    grid, values above it), nearest first). ``fitted(params)``: the model already fitted on ``fit`` another
    way (EASE: from the users' side, or the whole training fit updated exactly for the set-aside saves), or
    None to fit ``build(params)`` here.

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
            grid=got.get("grid"),
            on_edge=tuple(got.get("on_edge", ())),
        )
    t = time.perf_counter()
    x = matrix(fit, row, n_items)
    tried: list[dict] = []
    table: list[tuple[str, float | None]] = []
    refused: ConfigError | None = None

    def evaluate(settings: Sequence[dict]) -> None:
        nonlocal refused
        for params in settings:
            try:
                model = fitted(params) if fitted is not None else None
                value = recall_at(model or build(params).fit(x), fit, val, row, k, candidates)
            except ConfigError as exc:
                refused, value = exc, None
            tried.append(dict(params))
            table.append((json.dumps(params, sort_keys=True), value))

    def best() -> int | None:
        usable = [i for i, (_, v) in enumerate(table) if v is not None]
        return max(usable, key=lambda i: (table[i][1], -i)) if usable else None

    evaluate(grid)
    if best() is None:
        raise refused
    while beyond and (steps := steps_beyond(tried[best()], tried, beyond)):
        before = best()
        evaluate(steps)
        if best() == before:  # no step past the edge improved: the edge was the optimum after all
            break
    chosen = best()
    tuned = Tuned(
        peer,
        dict(tried[chosen]),
        tuple(table),
        time.perf_counter() - t,
        grid=len(grid),
        on_edge=on_edge(tried[chosen], tried, beyond or {}),
    )
    if cache is not None:
        write_json_atomic(cache, tuned.to_dict())
    return tuned
