"""Fusion: rankings in, one ranking out. Pure functions; inputs are never mutated.

``FUSERS`` is the registry used by experiments; :func:`get_fuser` raises a
typed error listing the valid names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from scix_core.errors import UnknownNameError
from scix_core.fusion.combsum import combmnz, combsum
from scix_core.fusion.convex import convex
from scix_core.fusion.dbsf import dbsf
from scix_core.fusion.rrf import RRF_K, rrf, weighted_rrf
from scix_core.types import Ranking

Fuser = Callable[..., Ranking]

FUSERS: dict[str, Fuser] = {
    "rrf": rrf,
    "weighted_rrf": weighted_rrf,
    "combsum": combsum,
    "combmnz": combmnz,
    "dbsf": dbsf,
    "convex": convex,
}


def get_fuser(name: str, **params) -> Callable[[Sequence[Ranking]], Ranking]:
    """The fuser ``name`` with its parameters bound (e.g. ``k=30``, ``weights=[...]``)."""
    if name not in FUSERS:
        raise UnknownNameError("fuser", name, list(FUSERS))
    return partial(FUSERS[name], **params)


__all__ = ["FUSERS", "RRF_K", "combmnz", "combsum", "convex", "dbsf", "get_fuser", "rrf", "weighted_rrf"]
