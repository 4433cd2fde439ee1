"""A gold set: queries and graded judgments, from an index, from files, or from a dataset folder.

Nothing about a particular collection is assumed: any BEIR ``queries.jsonl``
with BEIR or TREC qrels works, and any folder a dataset loader reads.
Negative grades are judged non-relevant, like 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scix_core.config import load_config
from scix_core.data import load_dataset
from scix_core.data.beir import load_qrels, load_queries
from scix_core.errors import ConfigError
from scix_core.stores import PaperStore
from scix_core.workspace import Workspace


@dataclass(frozen=True)
class Gold:
    name: str
    queries: Mapping[str, str]  # query id -> text
    qrels: Mapping[str, Mapping[str, int]]  # query id -> paper id -> grade
    fields: Mapping[str, Mapping[str, str]] = field(
        default_factory=dict
    )  # query id -> extra columns (buckets)

    @property
    def judged(self) -> list[str]:
        """Query ids with text and at least one relevant (grade > 0) paper, in query order."""
        return [q for q in self.queries if any(g > 0 for g in self.qrels.get(q, {}).values())]

    def relevant(self, query_id: str) -> set[str]:
        return {d for d, g in self.qrels.get(query_id, {}).items() if g > 0}


def from_index(store, split: str | None = None) -> Gold:
    """The gold data stored with an index (``split`` None: the only split, else ``train``)."""
    splits = [r[0] for r in store.conn.execute("SELECT DISTINCT split FROM qrels ORDER BY split")]
    if not splits:
        raise ConfigError("this index has no qrels: pass --queries/--qrels or --gold")
    if split is None:
        split = splits[0] if len(splits) == 1 else ("train" if "train" in splits else splits[0])
    if split not in splits:
        raise ConfigError(f"no qrels split {split!r} in this index; it has: {', '.join(splits)}")
    qrels = store.qrels(split)
    queries = store.queries()
    return Gold(
        f"{store.meta().get('dataset', 'index')}:{split}",
        {q.query_id: q.text for q in queries if q.query_id in qrels},
        qrels,
        {q.query_id: dict(q.fields) for q in queries if q.query_id in qrels},
    )


def for_index(index: str, config=None, split: str | None = None) -> Gold:
    """The gold data stored with the built index ``index`` (see :func:`from_index`)."""

    cfg = config or load_config()
    return from_index(PaperStore(Workspace(cfg.home).index_dir(index) / "papers.sqlite"), split)


def from_files(queries: Path, qrels: Path) -> Gold:
    loaded = load_queries(Path(queries))
    judged = load_qrels(Path(qrels))
    return Gold(
        Path(qrels).stem,
        {q.query_id: q.text for q in loaded},
        judged,
        {q.query_id: dict(q.fields) for q in loaded},
    )


def from_dir(folder: Path, fmt: str | None = None, split: str | None = None) -> Gold:
    dataset = load_dataset(Path(folder), fmt)
    if not dataset.qrels:
        raise ConfigError(f"{folder} holds no qrels")
    split = split or (
        "test"
        if "test" in dataset.qrels and len(dataset.qrels) == 1
        else "train"
        if "train" in dataset.qrels
        else sorted(dataset.qrels)[0]
    )
    if split not in dataset.qrels:
        raise ConfigError(f"no qrels split {split!r} in {folder}; it has: {', '.join(sorted(dataset.qrels))}")
    return Gold(
        f"{dataset.name}:{split}",
        {q.query_id: q.text for q in dataset.queries},
        dataset.qrels[split],
        {q.query_id: dict(q.fields) for q in dataset.queries},
    )


def training_queries(model_dir: Path, index: str, corpus_hash: str | None = None) -> set[str] | None:
    """Query ids of ``index`` a workspace model (reranker or encoder) was trained on (None: not trained on
    this index). With ``corpus_hash``, a model trained on another index of the same corpus counts too (the
    same gold queries under another name)."""
    path = Path(model_dir) / "scix_manifest.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("index") != index and (corpus_hash is None or manifest.get("corpus_hash") != corpus_hash):
        return None
    return set(manifest.get("query_ids", ())) or {"*"}  # an older manifest without ids: assume every query
