"""BM25-weighted sparse vectors in a qdrant-edge shard: the optional sparse lane's store.

qdrant-edge's own BM25 embedder turns text into sparse term-frequency
vectors; the collection applies the IDF modifier, so a dot product is a
BM25 score. Built at ingest (``scix ingest --sparse``) into ``sparse/`` of
the build folder, opened once per process like the dense shard.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from scix_core.errors import BackendUnavailableError
from scix_core.vectors.base import PAYLOAD_INDEXES, VectorFilter, VectorHit, hits, with_payload
from scix_core.vectors.edge import edge_api, edge_filter

VECTOR = "bm25"
BATCH = 2048


class SparseStore:
    def __init__(self, path: Path, create: bool = False, avg_len: float | None = None):
        qe = edge_api()
        self.path = Path(path)
        try:
            if create:
                self.path.mkdir(parents=True, exist_ok=True)
                config = qe.EdgeConfig(
                    vectors={}, sparse_vectors={VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}
                )
                self.shard = qe.EdgeShard.create(str(self.path), config)
                kinds = {"keyword": qe.PayloadSchemaType.Keyword, "integer": qe.PayloadSchemaType.Integer}
                for field, kind in PAYLOAD_INDEXES.items():
                    self.shard.update(qe.UpdateOperation.create_field_index(field, kinds[kind]))
            else:
                self.shard = qe.EdgeShard.load(str(self.path))
        except Exception as exc:
            raise BackendUnavailableError(f"cannot open the sparse shard at {self.path}: {exc}") from exc
        self.bm25 = qe.Bm25(qe.Bm25Config(avg_len=avg_len) if avg_len else qe.Bm25Config())

    def upsert(self, ids: Sequence[int], texts: Sequence[str], payloads: Sequence[dict]) -> None:
        qe = edge_api()
        for start in range(0, len(ids), BATCH):
            points = [
                qe.Point(int(i), {VECTOR: self.bm25.embed_document(t)}, p)
                for i, t, p in zip(
                    ids[start : start + BATCH], texts[start : start + BATCH], payloads[start : start + BATCH]
                )
            ]
            self.shard.update(qe.UpdateOperation.upsert_points(points))

    def finish(self) -> None:
        self.shard.optimize()
        self.shard.flush()

    def search(self, text: str, k: int, flt: VectorFilter | None = None) -> list[VectorHit]:
        qe = edge_api()
        query = qe.Query.Nearest(self.bm25.embed_query(text), using=VECTOR)
        request = qe.QueryRequest(limit=k, query=query, filter=edge_filter(flt), with_payload=with_payload())
        return hits(self.shard.query(request))

    def close(self) -> None:
        self.shard.close()


_READERS: dict[str, SparseStore] = {}
_LOCK = threading.Lock()


def open_sparse_reader(path: Path, avg_len: float | None) -> SparseStore:
    key = str(Path(path).resolve())
    with _LOCK:
        if key not in _READERS:
            _READERS[key] = SparseStore(path, avg_len=avg_len)
        return _READERS[key]
