"""Append: a day's new and changed papers folded into an index without rebuilding it.

``scix ingest --append`` reads the records, compares each with the paper the index holds under its id and
sorts them: a new id is **added** (the next row, so every older paper keeps its row, its vector id and its
place in ties), an id whose content changed — a new arXiv version — is **replaced** in its row (it keeps
its first listing day), an identical one is skipped and counted **unchanged**. Only the added and replaced
papers are analysed, encoded and written.

The mechanism is the rebuild's own, so are its promises: a new build folder, filled from the current one,
swapped in by :meth:`Workspace.new_build` (readers see the whole old or the whole new corpus; a SIGKILL at
any point leaves the old one, and the next append redoes the work — its vectors from the embedding cache),
under the index's writer lock (a second writer gets ``index_busy``). What each store costs:

* papers + FTS5 — a page copy of the store (SQLite's backup), then one transaction: a replaced row's FTS5
  entries deleted with its old text, the rows written, their FTS5 entries inserted. FTS5's counts (rows,
  tokens) are kept exactly, so bm25() scores as after a full ingest; its segments are merged as they come
  (automerge), and the whole index is optimised once their count passes ``FTS_SEGMENTS``.
* the term matrix — rewritten from the old arrays and the changed rows (:func:`extend_terms`): a vectorised
  pass over the postings, no text re-analysed.
* dense vectors — the shard folder copied, the changed points upserted (ids = rows), qdrant-edge's
  optimizer run (new points go to an appendable segment it indexes and merges by its own thresholds); the
  float16 copy rewritten with the new rows; passages of replaced papers deleted and the new ones added.
* sparse vectors (``--sparse`` builds) — the changed papers' upserted; the document vectors keep the
  average length the build was made with (a full ingest re-weighs all of them).

The recommender follows from the build: its catalogue is the store's rows (new ones at the end), and the
co-save models' cached fits of the smaller catalogue stay valid (new papers have no saves), so nothing is
refitted for an append. A remote Qdrant server's collection is one per index, not per build, so it cannot
be swapped atomically: an append there is refused (run a full ingest).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from scix_core.config import Config, load_config
from scix_core.data import Dataset, load_dataset
from scix_core.data.dataset import newer_version
from scix_core.embeddings import EmbeddingCache, Encoder
from scix_core.embeddings.passages import corpus_passages
from scix_core.errors import ConfigError, DataFormatError
from scix_core.ingest import IngestReport, StageTiming
from scix_core.stores.papers import PaperStore, append_papers, copy_store
from scix_core.stores.terms import extend_terms
from scix_core.types import Paper
from scix_core.vectors import open_store, payload, store_folder
from scix_core.vectors.local import FILE as LOCAL_FILE
from scix_core.vectors.replica import copy_shard
from scix_core.vectors.sparse import SparseStore
from scix_core.workspace import Workspace, read_json, write_json_atomic

FTS_SEGMENTS = 16  # an FTS5 index of more segments than this is optimised to one after an append
APPENDS_KEPT = 30  # the newest appends a build's manifest lists


@dataclasses.dataclass(frozen=True)
class Changes:
    """What an append writes: row -> paper (rows past ``first_new`` are new), and what it skipped."""

    rows: dict[int, Paper]
    first_new: int
    unchanged: int

    @property
    def added(self) -> int:
        return sum(1 for r in self.rows if r >= self.first_new)

    @property
    def replaced(self) -> int:
        return len(self.rows) - self.added

    @property
    def total(self) -> int:
        """Papers in the index after the append."""
        return self.first_new + self.added

    @property
    def papers(self) -> list[Paper]:
        return list(self.rows.values())


def sort_records(store: PaperStore, papers: tuple[Paper, ...]) -> Changes:
    """Each record against the paper the store holds under its id (see the module docstring)."""
    held = store.rows(p.paper_id for p in papers)
    first_new = next_row = len(store)
    rows: dict[int, Paper] = {}
    unchanged = 0
    for paper in papers:
        if paper.paper_id not in held:
            rows[next_row], next_row = paper, next_row + 1
            continue
        row, before = held[paper.paper_id]
        merged = newer_version(before, paper)
        if merged == before:
            unchanged += 1
        else:
            rows[row] = merged
    return Changes(rows, first_new, unchanged)


def _papers_only(dataset: Dataset, source: object) -> None:
    extra = [
        name
        for name, value in (
            ("queries", dataset.queries),
            ("judgments", dataset.qrels),
            ("interactions", dataset.interactions),
            ("citations", dataset.citations),
            ("tags", dataset.tags),
        )
        if value
    ]
    if extra:
        raise ConfigError(
            f"{source} carries {', '.join(extra)} besides papers; an append adds papers only — "
            "build the index from it with a full `scix ingest` instead"
        )


def _extend_local(old: Path, new: Path, rows: list[int], vectors: np.ndarray, total: int) -> None:
    """The float16 vector copy with ``rows`` set to ``vectors`` and grown to ``total`` rows."""
    before = np.load(old / LOCAL_FILE, mmap_mode="r")
    out = np.lib.format.open_memmap(
        new / LOCAL_FILE, mode="w+", dtype=np.float16, shape=(total, before.shape[1])
    )
    for start in range(0, len(before), 65536):
        stop = min(start + 65536, len(before))
        out[start:stop] = before[start:stop]
    out[np.asarray(rows, dtype=np.int64)] = vectors.astype(np.float16)
    out.flush()
    del out


def _key(manifest: dict, changes: Changes) -> str:
    h = hashlib.sha256(str(manifest.get("build_key", "")).encode())
    for row, paper in changes.rows.items():
        h.update(json.dumps([row, *dataclasses.astuple(paper)], default=str).encode())
    return h.hexdigest()[:16]


def _corpus_hash(manifest: dict, changes: Changes) -> str:
    """The appended corpus's identity (what models trained on it record), chained from the old one's."""
    h = hashlib.sha256(str(manifest.get("corpus_hash", "")).encode())
    for row, paper in changes.rows.items():
        h.update(f"{row}\x00{paper.text}\x00".encode())
    return h.hexdigest()


def append(
    source: Path | str | Dataset,
    index: str,
    fmt: str | None = None,
    *,
    config: Config | None = None,
    progress: bool = True,
    encoder: Encoder | None = None,
) -> IngestReport:
    """Fold ``source``'s papers into the index ``index`` (module docstring); status ``appended`` or
    ``unchanged`` (nothing new: no build is made). ``fmt`` defaults to the index's own format. (``progress``:
    accepted as :func:`~scix_core.ingest.ingest` does; a day's papers are one embedding chunk, shown as
    the ``embed`` stage's time.)"""
    cfg = config or load_config()
    ws = Workspace(cfg.home)
    stages: list[StageTiming] = []
    ws.index_dir(index)  # IndexNotFoundError before any folder of the name is made
    with ws.writing(index):
        old = ws.index_dir(index)
        manifest = read_json(old / "manifest.json")
        t = time.perf_counter()
        dataset = (
            source if isinstance(source, Dataset) else load_dataset(source, fmt or manifest.get("format"))
        )
        stages.append(StageTiming("parse", time.perf_counter() - t, len(dataset.papers)))
        _papers_only(dataset, source if not isinstance(source, Dataset) else dataset.name)
        if not dataset.papers and not dataset.rejected:
            raise DataFormatError(
                source if not isinstance(source, Dataset) else dataset.name, None, "no records"
            )
        store = PaperStore(old / "papers.sqlite")
        try:
            changes = sort_records(store, dataset.papers)
        finally:
            store.close()

        def report(status: str, path: Path, built: dict, encoded: int = 0, reused: int = 0) -> IngestReport:
            return IngestReport.of(
                dataset,
                index,
                path,
                status,
                stages,
                built,
                encoded=encoded,
                reused=reused,
                textless=sum(1 for p in changes.papers if not p.text),
                added=changes.added,
                replaced=changes.replaced,
                unchanged=changes.unchanged,
            )

        if not changes.rows:
            return report("unchanged", old, manifest)
        if (
            manifest.get("vectors")
            and manifest.get("vector_backend") == "qdrant"
            and manifest.get("vector_url")
        ):
            raise ConfigError(
                f"index {index!r} keeps its vectors on the Qdrant server {manifest['vector_url']}, one "
                "collection for every build, which an append cannot swap atomically; run a full `scix ingest`"
            )
        new = _manifest(manifest, changes, dataset)
        with ws.new_build(index, new["build_key"], locked=True) as build:
            meta = {k: str(new[k]) for k in ("papers", "build_key", "corpus_hash")}
            encoded, reused, extra = _write(old, build, manifest, meta, changes, cfg, encoder, stages)
            new.update(extra, stages={s.stage: round(s.seconds, 3) for s in stages})
            write_json_atomic(build / "manifest.json", new)
        return report("appended", (ws.index_root(index) / "current").resolve(), new, encoded, reused)


def _write(
    old: Path,
    build: Path,
    manifest: dict,
    meta: dict[str, str],
    changes: Changes,
    cfg: Config,
    encoder,
    stages: list,
) -> tuple[int, int, dict]:
    """Every store of ``old`` (its manifest ``manifest``) into ``build`` with ``changes``, the store's meta
    entries set to ``meta``; returns (vectors encoded, reused, manifest entries the stores report)."""
    total = changes.total
    t = time.perf_counter()
    copy_store(old / "papers.sqlite", build / "papers.sqlite")
    append_papers(build / "papers.sqlite", changes.rows, meta, max_segments=FTS_SEGMENTS)
    stages.append(StageTiming("store+fts", time.perf_counter() - t, len(changes.rows)))
    if (old / "terms").is_dir():  # (a build from before the term matrix has none: FTS5 ranks it)
        t = time.perf_counter()
        extend_terms(old / "terms", build / "terms", {r: p.text for r, p in changes.rows.items()})
        stages.append(StageTiming("terms", time.perf_counter() - t, len(changes.rows)))
    encoded = reused = 0
    extra: dict = {}  # manifest entries the stores report
    if manifest.get("vectors"):
        embedding = dataclasses.replace(
            cfg.embedding,
            model=manifest["model"],
            backend=manifest.get("embedding_backend") or cfg.embedding.backend,
            max_length=manifest.get("max_length") or cfg.embedding.max_length,
        )
        encoder = encoder or Encoder(embedding, cfg.home)
        cache = EmbeddingCache(
            Workspace(cfg.home).embedding_cache(encoder.slug), embedding.model, encoder.max_length
        )
        vectors_cfg = dataclasses.replace(
            cfg.vectors, backend=manifest.get("vector_backend") or cfg.vectors.backend
        )
        t = time.perf_counter()
        rows, papers = list(changes.rows), changes.papers
        vectors = cache.vectors([p.text for p in papers], encoder.encode)
        stages.append(StageTiming("embed", time.perf_counter() - t, cache.misses))
        t = time.perf_counter()
        copy_shard(store_folder(vectors_cfg, old), store_folder(vectors_cfg, build))
        store = open_store(vectors_cfg, build, manifest["index"])
        try:
            store.upsert(rows, vectors, [payload(p) for p in papers])
            store.finish()
        finally:
            store.close()
        _extend_local(old, build, rows, vectors, total)
        stages.append(StageTiming("vectors+index", time.perf_counter() - t, len(rows)))
        if "passage_window" in manifest:  # built with --passages (perhaps none yet: short abstracts)
            t = time.perf_counter()
            count, points = _append_passages(old, build, manifest, changes, vectors_cfg, cache, encoder)
            stages.append(StageTiming("passages", time.perf_counter() - t, count))
            extra["passages"] = points
        encoded, reused = cache.misses, cache.hits
    if manifest.get("sparse"):
        t = time.perf_counter()
        copy_shard(old / "sparse", build / "sparse")
        sparse = SparseStore(build / "sparse", avg_len=manifest.get("sparse_avg_len"))
        try:
            sparse.upsert(
                list(changes.rows), [p.text for p in changes.papers], [payload(p) for p in changes.papers]
            )
            sparse.finish()
        finally:
            sparse.close()
        stages.append(StageTiming("sparse", time.perf_counter() - t, len(changes.rows)))
    return encoded, reused, extra


def _append_passages(
    old: Path, build: Path, manifest: dict, changes: Changes, vectors_cfg, cache, encoder
) -> tuple[int, int]:
    """The replaced papers' passages deleted, the changed papers' passages added after the last point id
    (``passage_next`` of the manifest); returns how many were added and how many the store holds."""
    owners, texts = corpus_passages(changes.papers)
    held = store_folder(vectors_cfg, old, "passages")
    if not held.exists() and not texts:  # no passage yet, none now
        return 0, 0
    if held.exists():
        copy_shard(held, store_folder(vectors_cfg, build, "passages"))
    store = open_store(
        vectors_cfg,
        build,
        manifest["index"],
        dim=None if held.exists() else int(manifest["dim"]),
        part="passages",
    )
    try:
        store.delete_papers([p.paper_id for r, p in changes.rows.items() if r < changes.first_new])
        if texts:
            vectors = cache.vectors(texts, encoder.encode)
            first = int(manifest.get("passage_next", manifest.get("passages", 0)))
            store.upsert(
                range(first, first + len(texts)), vectors, [payload(changes.papers[o]) for o in owners]
            )
        store.finish()
        total = store.count()
    finally:
        store.close()
    return len(texts), total


def _manifest(manifest: dict, changes: Changes, dataset: Dataset) -> dict:
    """The appended build's manifest (its stages and store figures are added once written)."""
    total = changes.total
    new = dict(manifest)
    new.update(
        build_key=_key(manifest, changes),
        corpus_hash=_corpus_hash(manifest, changes),
        papers=total,
        rejected=len(dataset.rejected),
        duplicates=dataset.duplicates,
    )
    if manifest.get("vectors"):
        new["vectors"] = total
    if "passage_window" in manifest:
        _, texts = corpus_passages(changes.papers)
        first = int(manifest.get("passage_next", manifest.get("passages", 0)))
        new["passage_next"] = first + len(texts)
    entry = {
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "sources": list(dataset.sources),
        "added": changes.added,
        "replaced": changes.replaced,
        "unchanged": changes.unchanged,
        "rejected": len(dataset.rejected),
        # what the PostgreSQL mirror of the previous build needs to follow (stores.postgres.sync_append)
        "previous_key": manifest.get("build_key"),
        "first_new": changes.first_new,
        "rows": sorted(changes.rows),
    }
    earlier = [{k: v for k, v in e.items() if k != "rows"} for e in manifest.get("appends", [])]
    new["appends"] = [*earlier, entry][-APPENDS_KEPT:]
    new["appended"] = int(manifest.get("appended", 0)) + 1
    return new
