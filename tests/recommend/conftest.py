"""The hand-checkable search fixture corpus (12 papers, real categories and citations) built twice into real
indexes — qdrant-edge (default) and qdrant-client local mode — plus one without vectors, in one session
home."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from scix_core.config import load_config
from tests.corpus import CORPUS

_ids = itertools.count()


@dataclass(frozen=True)
class Indexes:
    config: object
    edge: str = "rec-edge"
    client: str = "rec-client"
    bare: str = "rec-bare"


@pytest.fixture(scope="session")
def rec_indexes(tmp_path_factory, encoder) -> Indexes:
    from scix_core.ingest import ingest

    cfg = load_config().replace(home=tmp_path_factory.mktemp("rec-home"))
    ingest(CORPUS, "rec-edge", config=cfg, progress=False, encoder=encoder)
    ingest(
        CORPUS,
        "rec-client",
        config=cfg.replace(**{"vectors.backend": "qdrant"}),
        progress=False,
        encoder=encoder,
    )
    ingest(CORPUS, "rec-bare", config=cfg, progress=False, embed=False)
    return Indexes(cfg)


@pytest.fixture
def user() -> str:
    """A user id no other test uses (the session's user state is shared)."""
    return f"user-{next(_ids)}"
