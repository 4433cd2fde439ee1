"""qdrant-client: a Qdrant server by URL (REST), or the client's own local modes.

``location=":memory:"`` and ``path=`` are qdrant-client's exact brute-force
local mode, used as a reference in tests; serving at scale goes to a server.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from scix_core.errors import BackendUnavailableError
from scix_core.vectors.base import PAYLOAD_INDEXES, VectorFilter, VectorHit, hits, with_payload

BATCH = 512


def client_filter(flt: VectorFilter | None):
    if not flt:
        return None
    from qdrant_client import models as m

    must = []
    if flt.year_min is not None or flt.year_max is not None:
        must.append(m.FieldCondition(key="year", range=m.Range(gte=flt.year_min, lte=flt.year_max)))
    if flt.listed_min is not None:
        must.append(m.FieldCondition(key="listed", range=m.Range(gte=flt.listed_min)))
    if flt.categories:
        must.append(m.FieldCondition(key="categories", match=m.MatchAny(any=list(flt.categories))))
    if flt.paper_ids:
        must.append(m.FieldCondition(key="paper_id", match=m.MatchAny(any=list(flt.paper_ids))))
    must_not = (
        [m.FieldCondition(key="categories", match=m.MatchAny(any=list(flt.exclude_categories)))]
        if flt.exclude_categories
        else []
    )
    if flt.exclude_points:
        must_not.append(m.HasIdCondition(has_id=sorted({int(i) for i in flt.exclude_points})))
    return m.Filter(must=must or None, must_not=must_not or None)


def _rows(matrix: np.ndarray) -> list[list[float]]:
    return np.asarray(matrix, dtype=np.float32).reshape(-1, np.shape(matrix)[-1]).tolist()


class ClientVectorStore:
    name = "qdrant"

    def __init__(
        self,
        collection: str,
        dim: int | None = None,
        url: str | None = None,
        location: str | None = None,
        path: str | None = None,
        timeout_s: float = 10.0,
    ):
        try:
            from qdrant_client import QdrantClient
            from qdrant_client import models as m
        except ImportError:
            raise BackendUnavailableError(
                "qdrant-client is not installed: `pip install qdrant-client`"
            ) from None
        self.collection = collection
        self.remote = url is not None  # local mode is exact brute force: no indexes, no search params
        # against a server that does not answer, the client's version check (a thread its constructor starts)
        # warns that it could not read the version; the first request fails too and is reported below (typed,
        # naming the URL): one message, not two. A version *mismatch* warning still shows. Process-wide, as
        # the thread may warn after this returns.
        warnings.filterwarnings(
            "ignore", message="Failed to obtain server version", module=r"qdrant_client\."
        )
        try:
            self.client = QdrantClient(
                url=url, location=location, path=path, timeout=max(1, round(timeout_s))
            )
            if dim is not None:
                if self.client.collection_exists(collection):
                    self.client.delete_collection(collection)
                self.client.create_collection(
                    collection, vectors_config=m.VectorParams(size=dim, distance=m.Distance.COSINE)
                )
                kinds = {"keyword": m.PayloadSchemaType.KEYWORD, "integer": m.PayloadSchemaType.INTEGER}
                for field, kind in PAYLOAD_INDEXES.items() if self.remote else ():
                    self.client.create_payload_index(collection, field, kinds[kind])
            elif not self.client.collection_exists(collection):
                raise BackendUnavailableError(
                    f"Qdrant collection {collection!r} does not exist; run `scix ingest` first"
                )
        except BackendUnavailableError:
            raise
        except Exception as exc:
            where = url or path or location
            raise BackendUnavailableError(f"cannot reach Qdrant at {where}: {exc}") from exc

    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        from qdrant_client import models as m

        for start in range(0, len(ids), BATCH):
            self.client.upsert(
                self.collection,
                points=[
                    m.PointStruct(id=int(i), vector=v.astype(np.float32).tolist(), payload=p)
                    for i, v, p in zip(
                        ids[start : start + BATCH],
                        vectors[start : start + BATCH],
                        payloads[start : start + BATCH],
                    )
                ],
            )

    def delete_papers(self, paper_ids: Sequence[str]) -> None:
        """Remove every point of these papers (an appended paper's old passages)."""
        if paper_ids:
            from qdrant_client import models as m

            flt = client_filter(VectorFilter(paper_ids=tuple(paper_ids)))
            self.client.delete(self.collection, points_selector=m.FilterSelector(filter=flt))

    def finish(self) -> None:
        pass

    def search(
        self,
        vector: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[VectorHit]:
        from qdrant_client import models as m

        res = self.client.query_points(
            self.collection,
            query=np.asarray(vector, dtype=np.float32).tolist(),
            limit=k,
            query_filter=client_filter(flt),
            with_payload=with_payload(ids),
            search_params=m.SearchParams(exact=exact) if self.remote else None,
        )
        return hits(res.points)

    def search_batch(
        self,
        vectors: np.ndarray,
        limits: Sequence[int],
        flt: VectorFilter | None = None,
        exact: bool = False,
        ids: bool = True,
    ) -> list[list[VectorHit]]:
        from qdrant_client import models as m

        f = client_filter(flt)
        params = m.SearchParams(exact=exact) if self.remote else None
        payload = with_payload(ids)
        requests = [
            m.QueryRequest(query=v, limit=int(k), filter=f, with_payload=payload, params=params)
            for v, k in zip(_rows(vectors), limits)
        ]
        if not requests:
            return []
        return [hits(r.points) for r in self.client.query_batch_points(self.collection, requests)]

    def recommend(
        self,
        positives: np.ndarray,
        negatives: np.ndarray,
        k: int,
        flt: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        from qdrant_client import models as m

        query = m.RecommendQuery(
            recommend=m.RecommendInput(
                positive=_rows(positives),
                negative=_rows(negatives) if len(negatives) else None,
                strategy=m.RecommendStrategy.BEST_SCORE,
            )
        )
        res = self.client.query_points(
            self.collection,
            query=query,
            limit=k,
            query_filter=client_filter(flt),
            with_payload=with_payload(),
            search_params=m.SearchParams(exact=exact) if self.remote else None,
        )
        return hits(res.points)

    def count(self) -> int:
        return int(self.client.count(self.collection, exact=True).count)

    def close(self) -> None:
        self.client.close()
