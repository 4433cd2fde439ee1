"""The pipeline's fusion step (``search.fusion``): the lanes' rankings in, one ranking out.

``rrf`` (the default): Reciprocal Rank Fusion, k = ``search.rrf_k`` — ranks only, no score scale to agree on.
``convex``: a convex combination of normalised lane scores (Bruch et al., TOIS 2023), the dense lane weighing
``search.convex_alpha`` and every other lane 1 − α; ``search.convex_normalise`` maps each lane's scores to
[0, 1] (``minmax``) or to standard scores (``zscore``); a paper a lane did not return gets that lane's lowest
normalised value.
On SciFact (claims against long abstracts) it beat RRF significantly; on Cranfield and CACM the two are level
— figures in the README. Each step also says what each lane added to every paper's fused score (the
inspector's lane attribution) and the largest score it can give (the boosts' scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scix_core.errors import ConfigError, UnknownNameError
from scix_core.fusion import convex, rrf
from scix_core.fusion.convex import NORMALISERS
from scix_core.types import Ranking

FUSIONS = ("rrf", "convex")
DENSE = "dense"


@dataclass(frozen=True)
class RrfFusion:
    k: int = 60

    def fuse(self, lanes: Mapping[str, Ranking]) -> Ranking:
        return rrf(list(lanes.values()), self.k, "fused")

    def terms(self, lanes: Mapping[str, Ranking]) -> dict[str, dict[str, float]]:
        """lane -> paper -> its term of the fused score, 1 / (k + rank)."""
        return {n: {p: 1.0 / (self.k + rank) for p, rank in r.ranks().items()} for n, r in lanes.items()}

    def max_score(self, names: Sequence[str]) -> float:
        return len(names) / (self.k + 1)

    def describe(self) -> str:
        return f"RRF k={self.k}"


@dataclass(frozen=True)
class ConvexFusion:
    alpha: float = 0.5
    normalise: str = "minmax"

    def weight(self, name: str) -> float:
        return self.alpha if name == DENSE else 1.0 - self.alpha

    def fuse(self, lanes: Mapping[str, Ranking]) -> Ranking:
        return convex(list(lanes.values()), [self.weight(n) for n in lanes], self.normalise, "fused")

    def terms(self, lanes: Mapping[str, Ranking]) -> dict[str, dict[str, float]]:
        """lane -> paper -> its term of the fused score, weight × normalised lane score (a paper the lane did
        not return: its lowest, as in the fused score)."""
        out = {}
        for n, r in lanes.items():
            normed = NORMALISERS[self.normalise](r)
            out[n] = {p: self.weight(n) * v for p, v in normed.items()}
        return out

    def max_score(self, names: Sequence[str]) -> float:
        """The largest fused score (the boosts' scale): the weights' sum on [0, 1] scores; the z-scores of a
        lane of ``depth`` papers stay within a few units, so the same sum is the scale's order there too."""
        return sum(self.weight(n) for n in names)

    def describe(self) -> str:
        return f"convex α={self.alpha:g}" + ("" if self.normalise == "minmax" else f" {self.normalise}")


def fusion_step(fusion: str, rrf_k: int, alpha: float, normalise: str = "minmax") -> RrfFusion | ConvexFusion:
    """The step ``search.fusion`` names; bad values are typed errors."""
    if fusion == "rrf":
        if rrf_k < 0:
            raise ConfigError(f"search.rrf_k must be >= 0, got {rrf_k}")
        return RrfFusion(rrf_k)
    if fusion == "convex":
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"search.convex_alpha must be in [0, 1], got {alpha}")
        if normalise not in NORMALISERS:
            raise UnknownNameError("search.convex_normalise", normalise, list(NORMALISERS))
        return ConvexFusion(alpha, normalise)
    raise UnknownNameError("fusion", fusion, FUSIONS)


def from_metadata(metadata: Mapping) -> RrfFusion | ConvexFusion:
    """The step a search result was fused by (results from before ``search.fusion`` are RRF)."""
    alpha = metadata.get("convex_alpha")
    return fusion_step(
        metadata.get("fusion", "rrf"),
        metadata["rrf_k"],
        ConvexFusion.alpha if alpha is None else alpha,
        metadata.get("convex_normalise") or "minmax",
    )
