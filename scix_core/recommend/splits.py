"""Library splits: each user's saves into training saves and held-out saves.

Shared by the evaluation harness (``scix eval-recs``) and the scorer trainer (its examples are labelled by
an inner hold-out), so it sits below both.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scix_core.errors import ConfigError


@dataclass(frozen=True)
class UserSplit:
    user: str
    train: tuple[str, ...]  # in save order
    test: frozenset[str]


def split_libraries(
    libraries: Mapping[str, Sequence[str]],
    holdout: float,
    seed: int,
    min_saves: int,
    real_times: bool = False,
    train_size: int | None = None,
) -> list[UserSplit]:
    """A hold-out per user, seeded by (seed, user) so a sample never changes anyone's split.

    ``train_size`` N (Dacrema et al.'s "P = N"): users with more than N saves keep N training saves, drawn at
    random (the earliest N where the source has real times), and every other save is held out.
    """
    if not 0 < holdout < 1:
        raise ConfigError(f"--holdout must be in (0, 1), not {holdout}")
    if train_size is not None and train_size < 1:
        raise ConfigError(f"--train-size must be a positive number of saves, not {train_size}")
    out = []
    for user, papers in libraries.items():
        papers = list(dict.fromkeys(papers))
        if len(papers) < max(2, min_saves) or (train_size is not None and len(papers) <= train_size):
            continue
        n_test = max(1, int(round(holdout * len(papers)))) if train_size is None else len(papers) - train_size
        if real_times:
            test = set(papers[-n_test:])
        else:
            rng = np.random.default_rng([seed, zlib.crc32(user.encode())])
            test = {papers[i] for i in rng.choice(len(papers), size=n_test, replace=False)}
        out.append(UserSplit(user, tuple(p for p in papers if p not in test), frozenset(test)))
    return out


def cold_split(
    libraries: Mapping[str, Sequence[str]], new: frozenset[str], min_saves: int
) -> list[UserSplit]:
    """The cold-item protocol's split: each user's saves of the ``new`` items held out, the rest trained on;
    users with at least one new save and ``min_saves`` others."""
    out = []
    for user, papers in libraries.items():
        papers = list(dict.fromkeys(papers))
        train = tuple(p for p in papers if p not in new)
        test = frozenset(p for p in papers if p in new)
        if test and len(train) >= max(1, min_saves):
            out.append(UserSplit(user, train, test))
    return out


def new_items(ids: Sequence[str], share: float, seed: int) -> frozenset[str]:
    """A seeded ``share`` of the catalogue's ids: the cold-item protocol's papers "listed today"."""
    if not 0 < share < 1:
        raise ConfigError(f"--new-items must be a share in (0, 1), not {share}")
    n = max(1, int(round(share * len(ids))))
    rng = np.random.default_rng([seed, 3])
    return frozenset(ids[i] for i in rng.choice(len(ids), size=min(n, len(ids)), replace=False))


def sample(splits: list[UserSplit], users: int | None, seed: int) -> list[UserSplit]:
    if users is None or users >= len(splits):
        return splits
    keep = set(np.random.default_rng(seed).choice(len(splits), size=users, replace=False).tolist())
    return [s for i, s in enumerate(splits) if i in keep]
