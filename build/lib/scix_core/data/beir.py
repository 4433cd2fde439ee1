"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/*.tsv``."""

from __future__ import annotations

from pathlib import Path

from scix_core.data.dataset import Dataset, PaperCollector
from scix_core.data.textio import read_jsonl, read_lines
from scix_core.errors import DataFormatError, DataPathError
from scix_core.types import Paper, Qrels, Query


def load_queries(path: Path) -> tuple[Query, ...]:
    """Queries from a BEIR ``queries.jsonl``; string-valued metadata becomes ``fields``."""
    queries: dict[str, Query] = {}
    for lineno, rec in read_jsonl(path):
        if isinstance(rec, Exception) or not isinstance(rec, dict) or "_id" not in rec:
            raise DataFormatError(path, lineno, f"not a BEIR query record ({rec})")
        meta = rec.get("metadata") or {}
        fields = (
            {k: str(v) for k, v in meta.items() if isinstance(v, (str, int, float))}
            if isinstance(meta, dict)
            else {}
        )
        qid = str(rec["_id"])
        queries.setdefault(qid, Query(qid, str(rec.get("text", "")), fields))
    return tuple(queries.values())


def load_qrels(path: Path) -> Qrels:
    """Qrels from a BEIR TSV (header, CRLF tolerated) or a TREC qrels file.

    TREC lines are ``qid iter docid grade``; BEIR lines ``qid docid grade``.
    """
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in read_lines(path):
        parts = line.split()
        if not parts or (lineno == 1 and not parts[-1].lstrip("-").isdigit()):
            continue  # blank or header
        if len(parts) == 4:
            qid, _, docid, grade = parts
        elif len(parts) == 3:
            qid, docid, grade = parts
        else:
            raise DataFormatError(path, lineno, f"expected 3 (BEIR) or 4 (TREC) columns, got {len(parts)}")
        try:
            qrels.setdefault(qid, {})[docid] = int(float(grade))
        except ValueError:
            raise DataFormatError(path, lineno, f"grade {grade!r} is not a number") from None
    return qrels


def load_qrels_dir(folder: Path) -> dict[str, Qrels]:
    return {p.stem: load_qrels(p) for p in sorted(folder.glob("*.tsv"))} if folder.is_dir() else {}


def load_beir(path: Path) -> Dataset:
    corpus = path / "corpus.jsonl"
    if not corpus.exists():
        raise DataPathError(f"{path} is not a BEIR folder: corpus.jsonl is missing")
    out = PaperCollector()
    for lineno, rec in read_jsonl(corpus):
        if isinstance(rec, Exception):
            out.reject(corpus, lineno, str(rec))
        elif not isinstance(rec, dict) or not str(rec.get("_id", "")).strip():
            out.reject(corpus, lineno, "record has no _id")
        else:
            out.add(Paper(str(rec["_id"]).strip(), str(rec.get("title") or ""), str(rec.get("text") or "")))
    queries = path / "queries.jsonl"
    return Dataset(
        name=path.name,
        format="beir",
        papers=out.papers,
        queries=load_queries(queries) if queries.exists() else (),
        qrels=load_qrels_dir(path / "qrels"),
        rejected=tuple(out.rejected),
        duplicates=out.duplicates,
        sources=(str(corpus),),
    )
