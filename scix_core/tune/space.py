"""The search space of ``scix tune``: what a pipeline can be, as candidates to cross-validate.

A candidate is one complete search pipeline: the encoder (the index's as shipped, fine-tuned for ``epochs``
on the fold's training queries, or its query side alone fine-tuned for ``query_epochs`` against the index's
vectors, :mod:`scix_core.train.query_side`), the dense lane scoring whole papers or by their best passage
(MaxP), the lexical lanes' semantics, and the fusion (RRF with its k, or a convex combination of min-max or
z-score normalised lane scores with the dense lane's weight α), and — when the space lists rerankers — the
cross-encoder stage over the fused top window (a cross-encoder you have, or one fine-tuned on the fold's
training queries: :mod:`scix_core.tune.rerank`). Its :meth:`Candidate.overrides` are the ``search.*``
settings that make the pipeline do exactly that.

A ``--space FILE.toml`` narrows or widens it: a ``[space]`` table with any of the fields of :class:`Space`
(``epochs = [0]``: no fine-tuning of both towers; ``query_epochs = []``: none of the query side). Three are
shipped by name: ``fusion`` (the fusion and the lexical semantics on the index's encoder as built),
``no-fine-tuning``, and ``full-fine-tuning`` (both towers as well: an encoder and a re-encoded corpus per
fold, hours on a laptop CPU). Unknown keys and values are typed
errors.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from scix_core.errors import ConfigError
from scix_core.search.fusion import fusion_step
from scix_core.search.stages.rerank import MAX_LIMIT as RERANK_LIMIT

LEXICAL_MODES = ("auto", "and", "or")
NORMALISERS = ("minmax", "zscore")
ALPHAS = tuple(i / 10 for i in range(11))


@dataclass(frozen=True, order=True)
class Fusion:
    """``kind`` "rrf" with ``value`` its k, or "minmax" / "zscore" (convex) with ``value`` the dense lane's
    α."""

    kind: str
    value: float

    def step(self):
        if self.kind == "rrf":
            return fusion_step("rrf", int(self.value), 0.5)
        return fusion_step("convex", 60, self.value, self.kind)

    def overrides(self) -> dict[str, object]:
        if self.kind == "rrf":
            return {"search.fusion": "rrf", "search.rrf_k": int(self.value)}
        return {
            "search.fusion": "convex",
            "search.convex_alpha": self.value,
            "search.convex_normalise": self.kind,
        }

    @property
    def label(self) -> str:
        return f"rrf k={int(self.value)}" if self.kind == "rrf" else f"{self.kind} α={self.value:g}"


@dataclass(frozen=True, order=True)
class Candidate:
    epochs: int  # 0: the index's encoder as shipped; n: fine-tuned n epochs on the fold's training queries
    passages: bool  # the dense lane scores a paper by its best vector, whole or passage (MaxP)
    lexical: str  # the lexical lanes' semantics: auto, and, or
    fusion: Fusion
    query_epochs: int = 0  # n: the query side alone fine-tuned n epochs against the index's vectors
    rerank: str = ""  # "": no reranker; "fine-tuned" (on the fold's training queries) or a cross-encoder
    rerank_window: int = 0  # the fused papers the reranker re-scores

    @property
    def encoder(self) -> str:
        """The dense pieces this candidate reads: ``shipped``, ``ftE`` or ``qE``."""
        if self.query_epochs:
            return f"q{self.query_epochs}"
        return "shipped" if self.epochs == 0 else f"ft{self.epochs}"

    @property
    def name(self) -> str:
        encoder = f"q-ft{self.query_epochs}" if self.query_epochs else self.encoder
        name = f"{encoder}{'+passages' if self.passages else ''} · {self.lexical} · {self.fusion.label}"
        if self.rerank:
            name += f" · rerank {Path(self.rerank).name or self.rerank} top {self.rerank_window}"
        return name

    @property
    def first_stage(self) -> Candidate:
        """This pipeline without its reranker: what the reranker re-scores."""
        return replace(self, rerank="", rerank_window=0)

    def reranked(self, model: str, window: int) -> Candidate:
        return replace(self, rerank=model, rerank_window=window)

    @property
    def dense(self) -> str:
        """The dense lane this candidate reads: ``whole`` or ``maxp``."""
        return "maxp" if self.passages else "whole"

    def overrides(self) -> dict[str, object]:
        """The ``search.*`` settings of this pipeline (the encoder is the index's: see the preset)."""
        rerank = (
            {"search.rerank": self.rerank, "search.rerank_window": self.rerank_window} if self.rerank else {}
        )
        return {
            "search.lexical_mode": self.lexical,
            "search.passages": self.passages,
            **self.fusion.overrides(),
            **rerank,
        }

    def changes(self, other: Candidate) -> tuple[str, ...]:
        """The choices (encoder, passages, lexical, fusion, reranker) in which this candidate differs from
        ``other``."""
        pairs = {
            "encoder": (self.encoder, other.encoder),
            "passages": (self.passages, other.passages),
            "lexical": (self.lexical, other.lexical),
            "fusion": (self.fusion, other.fusion),
            "reranker": ((self.rerank, self.rerank_window), (other.rerank, other.rerank_window)),
        }
        return tuple(name for name, (a, b) in pairs.items() if a != b)


@dataclass(frozen=True)
class Space:
    """Every choice ``scix tune`` tries (the defaults: the issue's space)."""

    # both towers fine-tuned this many epochs (0: the shipped encoder); the default leaves them to
    # ``--space full-fine-tuning``: an encoder and a re-encoded corpus per fold model
    epochs: tuple[int, ...] = (0,)
    query_epochs: tuple[int, ...] = (1, 2)  # the query side alone fine-tuned this many epochs (none: [])
    passages: tuple[bool, ...] = (False, True)
    lexical: tuple[str, ...] = LEXICAL_MODES
    rrf_k: tuple[int, ...] = (10, 30, 60)
    normalise: tuple[str, ...] = NORMALISERS
    alphas: tuple[float, ...] = ALPHAS
    # a reranker over the fused top ``rerank_window``, tried on the pipeline chosen without it (stage-wise):
    # "fine-tuned" (a cross-encoder per fold, trained on its training queries: hours) or a cross-encoder you
    # have (a workspace reranker's name or a path; the queries it was trained on are left out)
    rerankers: tuple[str, ...] = ()
    rerank_window: int = 30
    # fine-tuning needs this many training queries in the smallest training set it would use (the inner
    # folds' (K-2)/K of the judged queries): fewer make a handful of optimiser steps that move nothing
    min_train_queries: int = 200

    def __post_init__(self):
        if not self.epochs or any(e < 0 for e in self.epochs):
            raise ConfigError(f"space.epochs: epochs >= 0 (0: the shipped encoder), got {list(self.epochs)}")
        if any(e < 1 for e in self.query_epochs):
            raise ConfigError(f"space.query_epochs: epochs >= 1, got {list(self.query_epochs)}")
        for name, values, allowed in (
            ("lexical", self.lexical, LEXICAL_MODES),
            ("normalise", self.normalise, NORMALISERS),
        ):
            bad = [v for v in values if v not in allowed]
            if bad:
                raise ConfigError(f"space.{name}: {bad} not among {list(allowed)}")
        if not self.lexical or not self.passages:
            raise ConfigError("space.lexical and space.passages need at least one value each")
        if any(k < 0 for k in self.rrf_k) or any(not 0 <= a <= 1 for a in self.alphas):
            raise ConfigError("space.rrf_k must be >= 0 and space.alphas within [0, 1]")
        if self.rerank_window <= RERANK_LIMIT:
            raise ConfigError(
                f"space.rerank_window must exceed {RERANK_LIMIT} (the most results the pipeline reranks: a "
                f"smaller window could only reshuffle a page), got {self.rerank_window}"
            )
        if any(not r or r == "off" for r in self.rerankers):
            raise ConfigError(
                f"space.rerankers: cross-encoder names or paths, or 'fine-tuned'; got {list(self.rerankers)}"
            )
        if not self.rrf_k and not (self.normalise and self.alphas):
            raise ConfigError(
                "the space has no fusion: give space.rrf_k or space.normalise with space.alphas"
            )

    def fusions(self) -> tuple[Fusion, ...]:
        rrf = [Fusion("rrf", float(k)) for k in self.rrf_k]
        return (*rrf, *(Fusion(n, float(a)) for n in self.normalise for a in self.alphas))

    def encoders(self) -> tuple[tuple[int, int], ...]:
        """(epochs, query_epochs) of every encoder the space tries."""
        return (*((e, 0) for e in self.epochs), *((0, q) for q in self.query_epochs))

    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(
            Candidate(e, p, m, f, q)
            for (e, q), p, m, f in itertools.product(
                self.encoders(), self.passages, self.lexical, self.fusions()
            )
        )

    def to_dict(self) -> dict:
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
        }


SPACES = Path(__file__).parent / "spaces"  # named spaces shipped with the package: ``--space fusion``


def space_names() -> list[str]:
    return sorted(p.stem for p in SPACES.glob("*.toml"))


def load_space(path: Path | str | None) -> Space:
    """The ``[space]`` table of a TOML file over the defaults (None: the defaults); a name of
    :func:`space_names` (``fusion``, ``no-fine-tuning``) is the space shipped under it."""
    if path is None:
        return Space()
    if not Path(path).exists() and str(path) in space_names():
        path = SPACES / f"{path}.toml"
    path = Path(path).expanduser()
    try:
        table = tomllib.loads(path.read_text()).get("space")
    except FileNotFoundError:
        raise ConfigError(f"--space: no file {path} (shipped spaces: {', '.join(space_names())})") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--space: {path} is not readable TOML: {exc}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"--space: {path} has no [space] table")
    return space_from(table, str(path))


def space_from(table: Mapping, where: str = "the space") -> Space:
    """A :class:`Space` from a ``[space]`` table's values (lists or single values), type-checked."""
    known = {f.name: f for f in fields(Space)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"--space: unknown key(s) {unknown} in {where}; known: {sorted(known)}")
    values = {}
    for key, value in table.items():
        if key in ("min_train_queries", "rerank_window"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"space.{key} must be a positive integer, got {value!r}")
            values[key] = value
            continue
        items = value if isinstance(value, list) else [value]
        kind = {"epochs": int, "query_epochs": int, "rrf_k": int, "passages": bool, "alphas": float}.get(
            key, str
        )
        if not all(isinstance(v, kind) or (kind is float and isinstance(v, int)) for v in items):
            raise ConfigError(f"space.{key}: expected a list of {kind.__name__}, got {value!r}")
        values[key] = tuple(kind(v) for v in dict.fromkeys(items))
    return Space(**values)
