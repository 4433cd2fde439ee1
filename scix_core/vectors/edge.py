"""qdrant-edge: the Qdrant engine in-process (HNSW, payload indexes), the embedded default."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scix_core.errors import BackendUnavailableError
from scix_core.vectors.base import PAYLOAD_INDEXES, VectorFilter, VectorHit, hits, with_payload
from scix_core.vectors.replica import replica_of

BATCH = 1024


def edge_api():
    try:
        import qdrant_edge
    except ImportError:
        raise BackendUnavailableError("qdrant-edge is not installed: `pip install qdrant-edge-py`") from None
    return qdrant_edge


def edge_filter(flt: VectorFilter | None):
    if not flt:
        return None
    qe = edge_api()
    must = []
    if flt.year_min is not None or flt.year_max is not None:
        must.append(
            qe.FieldCondition(
                key="year",
                range=qe.RangeFloat(
                    gte=None if flt.year_min is None else float(flt.year_min),
                    lte=None if flt.year_max is None else float(flt.year_max),
                ),
            )
        )
    if flt.listed_min is not None:
        must.append(qe.FieldCondition(key="listed", range=qe.RangeFloat(gte=float(flt.listed_min))))
    if flt.categories:
        must.append(qe.FieldCondition(key="categories", match=qe.MatchAny(list(flt.categories))))
    if flt.paper_ids:
        must.append(qe.FieldCondition(key="paper_id", match=qe.MatchAny(list(flt.paper_ids))))
    must_not = (
        [qe.FieldCondition(key="categories", match=qe.MatchAny(list(flt.exclude_categories)))]
        if flt.exclude_categories
        else []
    )
    if flt.exclude_points:
        must_not.append(qe.HasIdCondition({int(i) for i in flt.exclude_points}))
    return qe.Filter(must=must or None, must_not=must_not or None)


def _rows(matrix: np.ndarray) -> list[list[float]]:
    return np.asarray(matrix, dtype=np.float32).reshape(-1, np.shape(matrix)[-1]).tolist()


class EdgeVectorStore:
    name = "edge"

    def __init__(
        self, path: Path, dim: int | None = None, hnsw_m: int = 16, ef_construct: int = 100, quantization=None
    ):
        """``quantization``: a qdrant-edge quantization config for a new shard (None: float32 only)."""
        qe = edge_api()
        self.path = Path(path)
        self.replica: Path | None = None  # a private copy this store removes when it closes
        try:
            if dim is None:
                self.shard = qe.EdgeShard.load(str(self.path))
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                config = qe.EdgeConfig(
                    vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
                    hnsw_config=qe.HnswIndexConfig(
                        m=hnsw_m, ef_construct=ef_construct, full_scan_threshold=10_000
                    ),
                    quantization_config=quantization,
                )
                self.shard = qe.EdgeShard.create(str(self.path), config)
                kinds = {"keyword": qe.PayloadSchemaType.Keyword, "integer": qe.PayloadSchemaType.Integer}
                for field, kind in PAYLOAD_INDEXES.items():
                    self.shard.update(qe.UpdateOperation.create_field_index(field, kinds[kind]))
        except Exception as exc:
            raise BackendUnavailableError(f"cannot open qdrant-edge shard at {self.path}: {exc}") from exc

    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        qe = edge_api()
        for start in range(0, len(ids), BATCH):
            points = [
                qe.Point(int(i), v.astype(np.float32).tolist(), p)
                for i, v, p in zip(
                    ids[start : start + BATCH],
                    vectors[start : start + BATCH],
                    payloads[start : start + BATCH],
                )
            ]
            self.shard.update(qe.UpdateOperation.upsert_points(points))

    def delete_papers(self, paper_ids: Sequence[str]) -> None:
        """Remove every point of these papers (an appended paper's old passages)."""
        if paper_ids:
            self.shard.update(
                edge_api().UpdateOperation.delete_points_by_filter(
                    edge_filter(VectorFilter(paper_ids=tuple(paper_ids)))
                )
            )

    def finish(self) -> None:
        self.shard.optimize()
        self.shard.flush()

    def _request(self, query, k: int, flt, exact: bool = False, ids: bool = True):
        qe = edge_api()
        return qe.QueryRequest(
            limit=k,
            query=query,
            filter=flt,
            with_payload=with_payload(ids),
            params=qe.SearchParams(exact=exact),
        )

    def search(
        self,
        vector: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[VectorHit]:
        query = edge_api().Query.Nearest(np.asarray(vector, dtype=np.float32).tolist())
        return hits(self.shard.query(self._request(query, k, edge_filter(flt), exact, ids)))

    def search_batch(
        self,
        vectors: np.ndarray,
        limits: Sequence[int],
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[list[VectorHit]]:
        qe = edge_api()
        f = edge_filter(flt)
        requests = [
            self._request(qe.Query.Nearest(v), int(k), f, exact, ids) for v, k in zip(_rows(vectors), limits)
        ]
        if not requests:
            return []
        return [hits(points) for points in self.shard.query_batch(qe.QueryBatchRequest(requests))]

    def recommend(
        self,
        positives: np.ndarray,
        negatives: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        qe = edge_api()
        query = qe.Query.RecommendBestScore(
            qe.RecommendQuery(_rows(positives), _rows(negatives) if len(negatives) else [])
        )
        return hits(self.shard.query(self._request(query, k, edge_filter(flt), exact)))

    def count(self) -> int:
        return int(self.shard.info().points_count)

    def close(self) -> None:
        self.shard.close()
        if self.replica is not None:
            shutil.rmtree(self.replica, ignore_errors=True)

    @classmethod
    def replica_of(cls, path: Path) -> EdgeVectorStore:
        """Open a private copy of a finished build's shard another process holds (:mod:`.replica`)."""
        copy = replica_of(path)
        try:
            store = cls(copy)
        except BaseException:
            shutil.rmtree(copy, ignore_errors=True)
            raise
        store.replica = copy
        return store
