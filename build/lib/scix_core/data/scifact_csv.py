"""SciFact's original release exported as CSV (``corpus_train.csv``, ``claims_*.csv``).

The ``abstract`` column is a numpy printout of a list of sentence strings:
Python string literals separated by whitespace, no commas. Each literal is
parsed with :func:`ast.literal_eval` (never ``eval``) and the BEIR text is
the sentences joined by spaces.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scix_core.data.beir import load_qrels_dir, load_queries
from scix_core.data.dataset import Dataset, PaperCollector
from scix_core.data.textio import read_csv_rows
from scix_core.errors import DataPathError
from scix_core.types import Paper, Query

_LITERAL = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""", re.S)


def parse_sentences(printout: str) -> list[str]:
    """Sentences from a numpy list printout; raises ValueError on leftovers."""
    body = printout.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError("abstract is not a bracketed list")
    body = body[1:-1]
    sentences, pos = [], 0
    for m in _LITERAL.finditer(body):
        if body[pos : m.start()].strip():
            raise ValueError(f"unexpected text between literals: {body[pos : m.start()].strip()[:40]!r}")
        sentences.append(ast.literal_eval(m.group(0)))
        pos = m.end()
    if body[pos:].strip():
        raise ValueError(f"unexpected trailing text: {body[pos:].strip()[:40]!r}")
    return sentences


def _claims(path: Path) -> tuple[tuple[Query, ...], dict[str, dict[str, int]]]:
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    for _, row in read_csv_rows(path):
        qid = row["id"].strip()
        queries.setdefault(qid, Query(qid, row["claim"]))
        for doc in re.findall(r"\d+", row.get("cited_doc_ids") or ""):
            qrels.setdefault(qid, {})[doc] = 1
    return tuple(queries.values()), qrels


def _gold(folder: Path, csv_dir: Path) -> tuple[tuple[Query, ...], dict]:
    """BEIR queries/qrels beside the CSVs win; else the claims CSVs."""
    if (folder / "queries.jsonl").exists():
        return load_queries(folder / "queries.jsonl"), load_qrels_dir(folder / "qrels")
    queries, splits = [], {}
    for claims in sorted(csv_dir.glob("claims_*.csv")):
        qs, qrels = _claims(claims)
        queries.extend(qs)
        if qrels:
            splits[claims.stem.removeprefix("claims_")] = qrels
    return tuple(queries), splits


def load_scifact_csv(path: Path) -> Dataset:
    csv_dir = path / "original_csv" if (path / "original_csv").is_dir() else path
    folder = csv_dir.parent if csv_dir != path else path
    corpus = csv_dir / "corpus_train.csv"
    if not corpus.exists():
        raise DataPathError(f"{path} has no corpus_train.csv (looked in {csv_dir})")
    out = PaperCollector()
    for lineno, row in read_csv_rows(corpus):
        doc_id = (row.get("doc_id") or "").strip()
        if not doc_id or row.get("abstract") is None:
            out.reject(corpus, lineno, "row has no doc_id or abstract column")
            continue
        try:
            sentences = parse_sentences(row["abstract"])
        except (ValueError, SyntaxError) as exc:
            out.reject(corpus, lineno, f"abstract: {exc}")
            continue
        out.add(Paper(doc_id, (row.get("title") or "").strip(), " ".join(s.strip() for s in sentences)))
    queries, qrels = _gold(folder, csv_dir)
    return Dataset(
        name=folder.name,
        format="scifact-csv",
        papers=out.papers,
        queries=queries,
        qrels=qrels,
        rejected=tuple(out.rejected),
        duplicates=out.duplicates,
        sources=(str(corpus),),
    )
