"""Stages 1-2: the saved papers' vectors (one local batch read) and Ward clustering.

The number of clusters is chosen, never fixed: one Ward tree (scikit-learn,
``AgglomerativeClustering`` with the full tree) is cut at every k from 2 to
``min(recommend.max_clusters, n − 1)``; k is the cut with the highest
silhouette (Euclidean on unit vectors, i.e. cosine order; every cut scored
on one distance matrix, :func:`silhouette`); when no cut
reaches ``recommend.min_silhouette`` the library is one interest (k = 1).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.stages.base import Tier1State


def cut_tree(children: np.ndarray, n: int, k: int) -> np.ndarray:
    """Labels 0..k-1 from the first n − k merges of an agglomerative tree (labels by first member)."""
    parent = list(range(2 * n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for step, (a, b) in enumerate(children[: n - k]):
        node = n + step
        parent[find(int(a))] = node
        parent[find(int(b))] = node
    roots = [find(i) for i in range(n)]
    first: dict[int, int] = {}
    return np.array([first.setdefault(r, len(first)) for r in roots], dtype=np.int64)


def silhouette(distances: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of ``labels`` (0..k-1, 2 <= k < n) over a full distance matrix, as
    ``sklearn.metrics.silhouette_score(distances, labels, metric="precomputed")`` computes it (a member of a
    singleton cluster scores 0; tests hold the two equal). Every cut of one library shares the matrix:
    scikit-learn's own call spends 0.7 ms a cut on validation and chunking for a 30-save library, seven
    cuts a user — most of the cluster stage."""
    k = int(labels.max()) + 1
    members = np.eye(k)[labels]  # n x k one-hot
    counts = members.sum(axis=0)
    sums = distances @ members  # each point's total distance to each cluster
    own = counts[labels]
    a = sums[np.arange(len(labels)), labels] / np.maximum(own - 1, 1)
    means = sums / counts
    means[np.arange(len(labels)), labels] = np.inf
    b = means.min(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(own > 1, (b - a) / np.maximum(a, b), 0.0)
    return float(np.nan_to_num(s).mean())


def ward_labels(
    vectors: np.ndarray, max_clusters: int, min_silhouette: float
) -> tuple[np.ndarray, dict[int, float]]:
    """Ward labels and the silhouette of every cut tried (k -> silhouette)."""
    import sklearn
    from scipy.spatial.distance import pdist, squareform
    from sklearn.cluster import AgglomerativeClustering

    n = len(vectors)
    if n < 3:
        return np.zeros(n, dtype=np.int64), {}
    with sklearn.config_context(skip_parameter_validation=True):  # the arguments are fixed here
        tree = AgglomerativeClustering(
            n_clusters=None, distance_threshold=0.0, linkage="ward", compute_full_tree=True
        ).fit(vectors)
    distances = squareform(pdist(np.asarray(vectors, dtype=np.float64)))  # Euclidean, as sklearn's default
    scores: dict[int, float] = {}
    best, best_labels = min_silhouette, np.zeros(n, dtype=np.int64)
    for k in range(2, min(max_clusters, n - 1) + 1):
        labels = cut_tree(tree.children_, n, k)
        scores[k] = silhouette(distances, labels)
        if scores[k] > best:
            best, best_labels = scores[k], labels
    return best_labels, scores


def medoid(vectors: np.ndarray) -> int:
    """Index of the member with the highest total cosine to the others (vectors are unit length)."""
    return int(np.argmax((vectors @ vectors.T).sum(axis=1)))


class SavedVectors:
    """Stage 1: every saved paper's vector in one local batch read (the seed: 1,247 ms for 20 remote
    fetches)."""

    name, writes = "vectors", "saved_vectors"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        side = state.side
        saved = [p for p in state.ctx.saved if p in side.catalog.row]
        rows = side.rows(saved)
        vecs = side.vectors.get(rows)
        return replace(state, saved_rows=rows, saved_vectors=vecs), {
            "saved": len(saved),
            "dim": int(vecs.shape[1]),
        }


class WardClustering:
    """Stage 2: Ward clustering with k chosen by silhouette (only with >= tier1_min_saves saves)."""

    name, writes = "cluster", "labels"

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        cfg = state.side.config
        labels, scores = ward_labels(state.saved_vectors, cfg.max_clusters, cfg.min_silhouette)
        k = int(labels.max()) + 1 if len(labels) else 0
        summary = {
            "k": k,
            "rule": f"max silhouette over k=2..{cfg.max_clusters}, 1 below {cfg.min_silhouette}",
            "silhouettes": {k_: round(v, 4) for k_, v in scores.items()},
        }
        return replace(state, labels=labels, silhouettes=scores), summary
