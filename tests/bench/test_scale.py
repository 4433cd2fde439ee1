"""The scale bench's pieces: perturbed copies and the exact top-k it measures recall against."""

import numpy as np

from scix_core.bench.scale import exact_top, points


def test_points_keep_the_real_vectors_and_add_unit_copies_near_them():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((50, 16)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    out = points(base, 130, noise=0.5, seed=7)
    assert out.shape == (130, 16) and np.array_equal(out[:50], base)
    assert np.allclose(np.linalg.norm(out, axis=1), 1, atol=1e-5)
    cos = (out[50:100] * base).sum(1)  # copy 1 of each paper to its original
    assert 0.8 < cos.mean() < 0.97 and not np.allclose(out[50:100], out[100:130].repeat(2, 0)[:50])
    assert np.array_equal(points(base, 130, 0.5, 7), out), "seeded: the same points every run"


def test_exact_top_matches_argsort_in_chunks_and_under_a_mask():
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((1000, 8)).astype(np.float32)
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    mask = rng.random(1000) < 0.3
    for m in (None, mask):
        scores = queries @ matrix.T
        if m is not None:
            scores[:, ~m] = -np.inf
        want = np.argsort(-scores, axis=1)[:, :10]
        got = exact_top(queries, matrix, 10, m, chunk=137)
        assert all(set(a) == set(b) for a, b in zip(got, want))
