"""Stages 1-2: the saved papers' vectors (one local batch read) and Ward clustering.

The number of clusters is chosen, never fixed: one Ward tree (SciPy's ``ward``, the tree scikit-learn's
``AgglomerativeClustering`` builds without a connectivity graph, without its per-call validation) is cut
at every k from 2 to ``min(recommend.max_clusters, n − 1)`` in one pass down the tree (:func:`cuts`); k is
the cut with the highest silhouette (Euclidean on unit vectors, i.e. cosine order; every cut scored on one
distance matrix in one product, :func:`silhouettes`); when no cut reaches ``recommend.min_silhouette``
the library is one interest (k = 1). A user whose clusters are stored keeps their number while its cut's
silhouette is within ``recommend.cluster_k_tolerance`` of the best: one more save moves flat silhouettes by
less than that (a 51-paper CiteULike-a library's ran 0.088–0.094 over k = 2..8, and one save took the best
from k = 8 to k = 3, keeping three of eight interests), and re-clustering on that noise would throw away the
Hungarian-stable ids the user knows their interests by.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scix_core.recommend.stages.base import Tier1State


def cuts(children: np.ndarray, n: int, ks: range) -> dict[int, np.ndarray]:
    """Every cut in ``ks`` at once — for each k the labels of applying the first n − k merges, numbered by
    first member — from one pass down the tree: in the tree's leaf order every node's members are
    contiguous, so undoing the last merges one at a time splits a range of that order in two."""
    size = np.ones(2 * n - 1, dtype=np.int64)
    for step, (a, b) in enumerate(children[: n - 1]):
        size[n + step] = size[a] + size[b]
    begin = np.zeros(2 * n - 1, dtype=np.int64)
    # from the root down: a node's first child starts where the node does, its second after the first
    for step in range(n - 2, -1, -1):
        a, b = children[step]
        begin[a] = begin[n + step]
        begin[b] = begin[n + step] + size[a]
    place = begin[:n]  # each paper's position in the leaf order
    out: dict[int, np.ndarray] = {}
    nodes = [2 * n - 2]
    for k in range(2, max(ks, default=1) + 1):
        a, b = children[n - k]  # undo merge n - k: its node splits into the two it joined
        nodes.remove(2 * n - k)
        nodes += [int(a), int(b)]
        if k in ks:
            by_place = np.empty(n, dtype=np.int64)
            for label, node in enumerate(nodes):
                by_place[begin[node] : begin[node] + size[node]] = label
            labels = by_place[place]
            first = np.unique(labels, return_index=True)[1]  # number the clusters by their first member
            rank = np.empty(len(first), dtype=np.int64)
            rank[np.argsort(first)] = np.arange(len(first))
            out[k] = rank[labels]
    return out


def silhouette(distances: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of ``labels`` (0..k-1, 2 <= k < n) over a full distance matrix, as
    ``sklearn.metrics.silhouette_score(distances, labels, metric="precomputed")`` computes it (a member of a
    singleton cluster scores 0; tests hold the two equal)."""
    return silhouettes(distances, [labels])[0]


def silhouettes(distances: np.ndarray, label_sets: list[np.ndarray]) -> list[float]:
    """:func:`silhouette` of several labellings of one library, their distances to every cluster in one
    product: scikit-learn's own call spends 0.7 ms a cut on validation and chunking for a 30-save library,
    seven cuts a user — most of the cluster stage."""
    n = len(distances)
    ks = [int(labels.max()) + 1 for labels in label_sets]
    offsets = np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(np.int64)
    members = np.zeros((n, sum(ks)))
    for offset, labels in zip(offsets, label_sets):
        members[np.arange(n), offset + labels] = 1.0
    counts, totals = members.sum(axis=0), distances @ members  # each point's total distance to each cluster
    out = []
    every = np.arange(n)
    for offset, k, labels in zip(offsets, ks, label_sets):
        sums, count = totals[:, offset : offset + k], counts[offset : offset + k]
        own = count[labels]
        a = sums[every, labels] / np.maximum(own - 1, 1)
        means = sums / count
        means[every, labels] = np.inf
        b = means.min(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(own > 1, (b - a) / np.maximum(a, b), 0.0)
        out.append(float(np.nan_to_num(s).mean()))
    return out


def ward_labels(
    vectors: np.ndarray, max_clusters: int, min_silhouette: float, keep_k: int = 0, tolerance: float = 0.0
) -> tuple[np.ndarray, dict[int, float]]:
    """Ward labels and the silhouette of every cut tried (k -> silhouette): the best cut, or the one of
    ``keep_k`` clusters (the user's stored number) while its silhouette is within ``tolerance`` of the
    best's."""
    from scipy.cluster.hierarchy import ward
    from scipy.spatial.distance import pdist, squareform

    n = len(vectors)
    if n < 3:
        return np.zeros(n, dtype=np.int64), {}
    condensed = pdist(np.asarray(vectors, dtype=np.float64))  # Euclidean: what ward() computes first
    children = ward(condensed)[:, :2].astype(np.int64)  # what AgglomerativeClustering(linkage="ward") keeps
    distances = squareform(condensed)  # the silhouette's, as sklearn's default
    labelled = cuts(children, n, range(2, min(max_clusters, n - 1) + 1))
    scores = dict(zip(labelled, silhouettes(distances, list(labelled.values()))))
    best, best_labels = min_silhouette, np.zeros(n, dtype=np.int64)
    for k, labels in labelled.items():
        if scores[k] > best:
            best, best_labels = scores[k], labels
    if keep_k in scores and min_silhouette < scores[keep_k] >= best - tolerance:
        best_labels = labelled[keep_k]
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
    """Stage 2: Ward clustering with k chosen by silhouette (only with >= tier1_min_saves saves); ``stored``:
    how many clusters the user has stored (their k is kept within ``recommend.cluster_k_tolerance``)."""

    name, writes = "cluster", "labels"

    def __init__(self, stored: int = 0):
        self.stored = stored

    def run(self, state: Tier1State) -> tuple[Tier1State, dict]:
        cfg = state.side.config
        labels, scores = ward_labels(
            state.saved_vectors, cfg.max_clusters, cfg.min_silhouette, self.stored, cfg.cluster_k_tolerance
        )
        k = int(labels.max()) + 1 if len(labels) else 0
        rule = f"max silhouette over k=2..{cfg.max_clusters}, 1 below {cfg.min_silhouette}"
        if self.stored >= 2:
            rule += f"; the stored k={self.stored} within {cfg.cluster_k_tolerance} of it"
        summary = {"k": k, "rule": rule, "silhouettes": {k_: round(v, 4) for k_, v in scores.items()}}
        return replace(state, labels=labels, silhouettes=scores), summary
