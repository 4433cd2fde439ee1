"""The candidate pool's exact kNN (seconds, no data): its top k is a full sort's, ties by row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scix_core.recommend.pool import PoolStore
from scix_core.vectors.base import VectorFilter

# three distinct unit vectors, repeated: most scores tie exactly
BASIS = np.eye(4, dtype=np.float32)[:3]
QUERIES = [(1.0, 0.5, 0.5, 0.0), (0.0, 1.0, 1.0, 0.0), (1.0, 1.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0)]


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    k=st.integers(1, 120),
    query=st.sampled_from(QUERIES),
)
def test_the_top_k_is_a_full_sorts_ties_broken_by_row(seed, n, k, query):
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, 3, n)
    rows = np.arange(n, dtype=np.int64) * 3 + 5  # ascending catalogue rows, not positions
    store = PoolStore(rows, BASIS[kinds], [f"p{i}" for i in range(rows[-1] + 1)])
    excluded = rows[rng.random(n) < 0.1]
    flt = VectorFilter(exclude_points=tuple(int(r) for r in excluded))
    got = [(h.point_id, h.score) for h in store.search(np.array(query, dtype=np.float32), k, flt)]
    q = np.array(query, dtype=np.float32)
    scores = BASIS[kinds] @ (q / np.linalg.norm(q))
    want = sorted(
        ((int(r), float(s)) for r, s in zip(rows, scores) if int(r) not in flt.exclude_points),
        key=lambda rs: (-rs[1], rs[0]),
    )[:k]
    assert got == want
