"""Several item scorers as one: each user's scores divided by their best, then summed with weights.

The strongest simple recommenders err in different places (RP3beta's walk
favours what a few close neighbours saved, EASE^R's regression what the
whole community co-saves), and a per-user max-normalised sum of the two beat
either alone inside the cascade on CiteULike-a (docs/history.md). The
normalisation keeps every part on [0, 1] for every user (EASE's negative
weights — "less likely than nothing" — count as 0), so a weight means
the same for a user with two saves and one with two hundred.

A part that cannot be fitted (EASE on a catalogue whose dense matrix does
not fit, :func:`scix_core.recommend.collab.ease.check_fits`; iALS without
the ``peers`` extra) is left out
with its reason in :attr:`Ensemble.dropped` — a documented degradation to
the parts that fit, never a crash; with no part left the error is raised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from scix_core.errors import ConfigError, MissingExtraError


@dataclass(frozen=True)
class Part:
    """One fitted part: the model, its weight, how long its fit took, how many saves it saw and when it was
    made (epoch seconds; a fit loaded from a cache, its own time)."""

    model: object
    weight: float
    seconds: float
    saves: int
    at: float = 0.0


@dataclass
class Ensemble:
    name = "ensemble"
    parts: tuple = ()  # (unfitted item scorer, weight) pairs
    dropped: tuple[str, ...] = ()  # "name: reason" of every part left out at the last fit
    fitted: tuple[Part, ...] = field(default=(), repr=False)

    @property
    def label(self) -> str:
        """The parts that score, e.g. ``rp3beta+ease`` (all parts before a fit)."""
        return "+".join(p.model.name for p in self.fitted) or "+".join(m.name for m, _ in self.parts)

    def fit(self, matrix) -> Ensemble:
        return self.refit(matrix, ())

    def refit(self, matrix, keep: tuple[str, ...] = ()) -> Ensemble:
        """A new fitted ensemble: the parts named in ``keep`` reused as fitted now (a stale part still
        scores a user's current saves), every other part fitted on ``matrix``."""
        previous = {p.model.name: p for p in self.fitted}
        fitted, dropped = [], []
        for model, weight in self.parts:
            if model.name in keep and model.name in previous:
                fitted.append(previous[model.name])
                continue
            t = time.perf_counter()
            try:
                part = replace(model).fit(matrix)
            except (ConfigError, MissingExtraError) as exc:  # too big for memory; an extra not installed
                dropped.append(f"{model.name}: {exc}")
                continue
            # a part loaded from a cache says what its fit cost and, when loaded stale, the saves it saw
            seconds = getattr(part, "fit_seconds", None) or time.perf_counter() - t
            saves = getattr(part, "fitted_saves", None) or int(matrix.nnz)
            # a part without a fit time fits in line (made now); a cached fit with no time in its note is old
            at = getattr(part, "fitted_at", time.time()) or 0.0
            fitted.append(Part(part, weight, seconds, saves, at))
        if not fitted:
            raise ConfigError("no part of the co-save ensemble could be fitted: " + "; ".join(dropped))
        return replace(self, dropped=tuple(dropped), fitted=tuple(fitted))

    def adopt(self, other: Ensemble, names: tuple[str, ...]) -> Ensemble:
        """This ensemble with the parts named in ``names`` taken from ``other`` (a background refit)."""
        theirs = {p.model.name: p for p in other.fitted}
        return replace(
            self,
            fitted=tuple(theirs.get(p.model.name, p) if p.model.name in names else p for p in self.fitted),
        )

    def normalised(self, rows: np.ndarray, names=None) -> dict[str, np.ndarray]:
        """Each fitted part's scores (those named in ``names``; all when None) for a user who saved ``rows``:
        negatives and the saved rows 0, divided by the user's best, times the part's weight; by part name."""
        return self.normalised_many([rows], names)[0]

    def prime(self, queries: list) -> None:
        """Each part that can score a batch ahead (a corrected EASE, :meth:`Ease.prime
        <scix_core.recommend.collab.ease.Ease.prime>`) scores ``queries`` now, for the asks one at a time."""
        for p in self.fitted:
            getattr(p.model, "prime", lambda _: None)(queries)

    def normalised_many(self, queries: list, names=None) -> list[dict[str, np.ndarray]]:
        """:meth:`normalised` for each of ``queries`` (lists of saved rows); a part with ``scores_many``
        scores them all at once (EASE with a correction: one matrix product instead of one a query)."""
        queries = [np.asarray(rows, dtype=np.int64) for rows in queries]
        out: list[dict[str, np.ndarray]] = [{} for _ in queries]
        for p in self.fitted:
            if names is not None and p.model.name not in names:
                continue
            many = getattr(p.model, "scores_many", None)
            scored = many(queries) if many else [p.model.scores(rows) for rows in queries]
            for each, rows, raw in zip(out, queries, scored):
                part = np.maximum(np.asarray(raw, dtype=np.float32), 0.0)
                part[rows] = 0.0
                best = float(part.max()) if len(part) else 0.0
                each[p.model.name] = part * np.float32(p.weight / best) if best > 0 else np.zeros_like(part)
        return out

    def scores(self, rows: np.ndarray) -> np.ndarray:
        return summed(self.normalised(rows))


def summed(
    parts: dict[str, np.ndarray], names=None, weights: dict[str, float] | None = None
) -> np.ndarray | None:
    """The sum of the ``parts`` named in ``names`` (all when None), each times its ``weights`` entry (1 when
    none is given); None when none of them is there."""
    total = None
    for name, part in parts.items():
        if names is None or name in names:
            if weights is not None:
                part = part * np.float32(weights.get(name, 1.0))
            total = part.copy() if total is None else total + part
    return total
