"""Per-call switches for the optional stages and lanes, resolved against the config."""

from __future__ import annotations

from dataclasses import dataclass

from scix_core.config import SearchConfig
from scix_core.errors import UnknownNameError

OPTIONAL_LANES = ("alias", "fielded", "sparse")
MAX_ALIAS_LANES = 3  # the reference design's _MAX_ALIAS_LEXICAL_LANES


def parse_lanes(spec: str | list[str] | tuple[str, ...] | None) -> frozenset[str]:
    names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec or ()) if n and n.strip()]
    for name in names:
        if name not in OPTIONAL_LANES:
            raise UnknownNameError("optional lane", name, OPTIONAL_LANES)
    return frozenset(names)


def reranks(spec: str | None) -> bool:
    """Whether a ``search.rerank`` value names a reranker ("off", "" and None do not)."""
    return spec not in ("off", "", None)


@dataclass(frozen=True)
class SearchOptions:
    rerank: str  # "off", a path, or a workspace reranker name
    boosts: bool
    rewrite: str  # "off", "local", or a URL
    lanes: frozenset[str]

    @classmethod
    def resolve(
        cls,
        cfg: SearchConfig,
        rerank: str | None = None,
        boosts: bool | None = None,
        rewrite: str | None = None,
        lanes=None,
    ) -> SearchOptions:
        return cls(
            cfg.rerank if rerank is None else rerank,
            cfg.boosts if boosts is None else bool(boosts),
            cfg.rewrite if rewrite is None else rewrite,
            parse_lanes(cfg.lanes if lanes is None else lanes),
        )
