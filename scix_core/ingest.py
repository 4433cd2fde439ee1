"""Ingest: dataset -> paper store + FTS5 indexes -> embeddings -> vector store.

One call builds a whole index in a fresh folder and swaps it in atomically
(:meth:`Workspace.new_build`). The build key is the content of the corpus
plus the model and vector backend, so ingesting the same input twice is a
no-op that reports ``unchanged`` (``force=True`` rebuilds anyway).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from scix_core import __version__
from scix_core.config import Config, load_config
from scix_core.data import Dataset, load_dataset
from scix_core.embeddings import EmbeddingCache, Encoder, corpus_hash, resolve_backend
from scix_core.embeddings.onnx import onnx_variant
from scix_core.embeddings.passages import STRIDE, WINDOW, corpus_passages
from scix_core.errors import ConfigError
from scix_core.stores.papers import build_store
from scix_core.stores.terms import build_terms
from scix_core.types import Rejection
from scix_core.vectors import open_store, payload
from scix_core.vectors.local import write_local
from scix_core.vectors.sparse import SparseStore
from scix_core.workspace import Workspace, read_json, write_json_atomic


@dataclass(frozen=True)
class StageTiming:
    stage: str
    seconds: float
    records: int

    @property
    def per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class IngestReport:
    index: str
    path: Path
    status: str  # "built" or "unchanged"
    taken: int
    rejected: tuple[Rejection, ...]
    duplicates: int
    stages: tuple[StageTiming, ...] = ()
    encoded: int = 0
    reused: int = 0
    peak_rss_mb: float = 0.0
    manifest: dict = field(default_factory=dict)
    textless: int = 0  # papers kept with neither title nor abstract: no lane can find them by content
    # an append's records (scix_core.append): new ids, new versions of held ones, identical to held ones
    added: int = 0
    replaced: int = 0
    unchanged: int = 0

    @classmethod
    def of(cls, dataset: Dataset, index: str, path: Path, status: str, stages, manifest: dict, **more):
        """The report of ``dataset``'s ingest (or append) into ``index`` now at ``path``."""
        return cls(
            index,
            path,
            status,
            len(dataset.papers),
            dataset.rejected,
            dataset.duplicates,
            tuple(stages),
            peak_rss_mb=peak_rss_mb(),
            manifest=manifest,
            **more,
        )


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


TERMS_FORMAT = "terms-1"  # builds before the term matrix get a new key, so `scix ingest` rebuilds them


def _build_key(
    dataset: Dataset, texts_hash: str, cfg: Config, embed: bool, sparse: bool = False, passages: bool = False
) -> str:
    h = hashlib.sha256()
    for p in dataset.papers:
        h.update(json.dumps(dataclasses.astuple(p), default=str).encode())
    backend = resolve_backend(cfg.embedding).backend
    backend = "" if backend == "torch" else onnx_variant(backend)  # torch builds keep their key
    for part in (
        texts_hash,
        cfg.embedding.model + backend if embed else "-",
        str(cfg.embedding.max_length),
        cfg.vectors.backend,
        cfg.vectors.url or "",
        str(len(dataset.queries)),
        str(len(dataset.interactions)),
        json.dumps(dataset.qrels, sort_keys=True),
        str(len(dataset.citations)),
        "sparse" if sparse else "",
        TERMS_FORMAT,
        f"passages-{WINDOW}-{STRIDE}" if passages else "",
    ):
        h.update(part.encode())
    return h.hexdigest()[:16]


def _build_sparse(build: Path, dataset: Dataset, texts: list[str]) -> float:
    """BM25 sparse vectors for the optional sparse lane; returns the average length it was built with."""

    avg_len = sum(len(t.split()) for t in texts) / max(1, len(texts))
    store = SparseStore(build / "sparse", create=True, avg_len=avg_len)
    try:
        store.upsert(range(len(texts)), texts, [payload(p) for p in dataset.papers])
        store.finish()
    finally:
        store.close()
    return round(avg_len, 3)


def _upsert(store, papers, vectors, owners: list[int], progress: bool, desc: str) -> None:
    """Point i is ``vectors[i]`` with the payload of ``papers[owners[i]]``; then the store's indexes are
    built."""
    try:
        with _progress(len(owners), desc, progress) as bar:
            for start in range(0, len(owners), 4096):
                rows = owners[start : start + 4096]
                store.upsert(
                    range(start, start + len(rows)),
                    vectors[start : start + len(rows)],
                    [payload(papers[r]) for r in rows],
                )
                bar.update(len(rows))
        store.finish()
    finally:
        store.close()


def _build_passages(
    build: Path, index: str, cfg: Config, dataset: Dataset, cache, encoder, progress: bool
) -> tuple[int, int, int]:
    """The passage vectors (:mod:`scix_core.embeddings.passages`) in a store of their own; returns (passages,
    encoded, reused)."""
    owners, texts = corpus_passages(dataset.papers)
    with _progress(len(texts), "passages", progress) as bar:
        misses, hits = cache.misses, cache.hits
        vectors = cache.vectors(texts, encoder.encode, on_chunk=bar.update)
    if texts:
        store = open_store(cfg.vectors, build, index, dim=int(vectors.shape[1]), part="passages")
        _upsert(store, dataset.papers, vectors, owners, progress, "passage vectors")
    return len(texts), cache.misses - misses, cache.hits - hits


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rec", disable=not enabled, leave=False)


def ingest(
    source: Path | str | Dataset,
    index: str,
    fmt: str | None = None,
    *,
    config: Config | None = None,
    limit: int | None = None,
    embed: bool = True,
    force: bool = False,
    progress: bool = True,
    encoder: Encoder | None = None,
    sparse: bool = False,
    passages: bool = False,
) -> IngestReport:
    """Build (or confirm unchanged) the index ``index`` from a dataset path. ``passages``: also encode every
    paper's passages for the dense lane's MaxP (:mod:`scix_core.embeddings.passages`)."""
    cfg = config or load_config()
    if passages and not embed:
        raise ConfigError("passage vectors need the papers' vectors: --passages cannot go with --no-embed")
    ws = Workspace(cfg.home)
    stages: list[StageTiming] = []

    t = time.perf_counter()
    dataset = source if isinstance(source, Dataset) else load_dataset(source, fmt)
    stages.append(StageTiming("parse", time.perf_counter() - t, len(dataset.papers)))
    if limit is not None:
        dataset = dataclasses.replace(dataset, papers=dataset.papers[:limit])
    texts = [p.text for p in dataset.papers]
    key = _build_key(dataset, corpus_hash(texts), cfg, embed, sparse, passages)

    root = ws.index_root(index)
    if not force and (root / "current" / "manifest.json").exists():
        old = read_json(root / "current" / "manifest.json")
        if old.get("build_key") == key:
            return IngestReport.of(
                dataset,
                index,
                (root / "current").resolve(),
                "unchanged",
                stages,
                old,
                textless=texts.count(""),
            )

    manifest = {
        "index": index,
        "build_key": key,
        "scix_core": __version__,
        "dataset": dataset.name,
        "format": dataset.format,
        "sources": list(dataset.sources),
        "papers": len(dataset.papers),
        "rejected": len(dataset.rejected),
        "duplicates": dataset.duplicates,
        "limit": limit,
        "corpus_hash": corpus_hash(texts),
        # the path as given, so the index can be rebuilt from it (`scix tune` building its winner)
        "source": None if isinstance(source, Dataset) else str(Path(source).expanduser().resolve()),
    }
    with ws.new_build(index, key) as build:
        t = time.perf_counter()
        build_store(build / "papers.sqlite", dataset, {k: str(v) for k, v in manifest.items()})
        stages.append(StageTiming("store+fts", time.perf_counter() - t, len(dataset.papers)))
        t = time.perf_counter()
        manifest["terms"] = build_terms(build / "terms", texts)
        stages.append(StageTiming("terms", time.perf_counter() - t, len(texts)))
        encoded = reused = 0
        if embed and dataset.papers:
            encoder = encoder or Encoder(cfg.embedding, cfg.home)
            cache = EmbeddingCache(ws.embedding_cache(encoder.slug), cfg.embedding.model, encoder.max_length)
            t = time.perf_counter()
            with _progress(len(texts), "embed", progress) as bar:
                vectors = cache.vectors(texts, encoder.encode, on_chunk=bar.update)
            stages.append(StageTiming("embed", time.perf_counter() - t, cache.misses))
            encoded, reused = cache.misses, cache.hits
            t = time.perf_counter()
            store = open_store(cfg.vectors, build, index, dim=int(vectors.shape[1]))
            _upsert(store, dataset.papers, vectors, list(range(len(texts))), progress, "vectors")
            write_local(build, vectors)
            stages.append(StageTiming("vectors+index", time.perf_counter() - t, len(texts)))
            manifest.update(
                model=cfg.embedding.model,
                embedding_backend=encoder.config.backend,
                model_slug=encoder.slug,
                dim=int(vectors.shape[1]),
                max_length=encoder.max_length,
                vector_backend=cfg.vectors.backend,
                vector_url=cfg.vectors.url,
                vectors=len(texts),
                vector_dtype="float16-cache/float32-store",
            )
            if passages:
                t = time.perf_counter()
                count, more, again = _build_passages(build, index, cfg, dataset, cache, encoder, progress)
                encoded, reused = encoded + more, reused + again
                manifest.update(passages=count, passage_window=WINDOW, passage_stride=STRIDE)
                stages.append(StageTiming("passages", time.perf_counter() - t, count))
        if sparse and dataset.papers:
            t = time.perf_counter()
            manifest.update(sparse=True, sparse_avg_len=_build_sparse(build, dataset, texts))
            stages.append(StageTiming("sparse", time.perf_counter() - t, len(texts)))
        manifest["stages"] = {s.stage: round(s.seconds, 3) for s in stages}
        # when these papers arrived: a feed's window on a corpus without listing days (recommend/feed.py)
        manifest["built_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        write_json_atomic(build / "manifest.json", manifest)
    return IngestReport.of(
        dataset,
        index,
        (root / "current").resolve(),
        "built",
        stages,
        manifest,
        encoded=encoded,
        reused=reused,
        textless=texts.count(""),
    )
