"""SMART tagged collections (Cranfield, CACM and others in that layout).

A folder holds a document file, a query file and a qrels file. Files are
recognised by content, not name: the SMART record file with the most
records is the corpus, another one the queries, and a file of numeric
columns the qrels.

Qrels variants handled (format rules, not per-collection rules):

* ``qid docid code`` with codes in {1..4, -1}: the Cranfield relevance
  scale, 1 = most relevant; gain = 5 - code, -1 is kept as a negative
  (judged non-relevant) grade.
* ``qid docid 0 0``: binary, every listed pair relevant (CACM).
* ``qid 0 docid grade``: TREC layout.
* Query numbers that are ordinal positions in the query file rather than
  its ``.I`` numbers are detected (Cranfield) and mapped back.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from scix_core.data.dataset import Dataset, PaperCollector
from scix_core.data.textio import read_lines
from scix_core.errors import DataFormatError, DataPathError
from scix_core.types import CitationLink, Paper, Query, Rejection

_TAG = re.compile(r"^\.([A-Z])\s*$")
_ID = re.compile(r"^\.I\s+(\S+)\s*$")
_MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(), 1
    )
}
_DATE = re.compile(r"(?:([A-Za-z]+)\.?,?\s+)?\b(1[89]\d\d|20\d\d)\b")
LINK_KINDS = {"4": "coupling", "5": "direct", "6": "cocitation"}


@dataclass
class _Record:
    ident: str
    line: int
    fields: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def text(self, tag: str) -> str:
        return " ".join(" ".join(self.fields.get(tag, ())).split())


def read_records(path: Path) -> list[_Record]:
    records: list[_Record] = []
    tag = None
    for lineno, line in read_lines(path):
        if m := _ID.match(line):
            records.append(_Record(m.group(1), lineno))
            tag = None
        elif m := _TAG.match(line):
            if not records:
                raise DataFormatError(path, lineno, "field tag before the first .I record")
            tag = m.group(1)
            records[-1].fields[tag]  # an empty field still exists
        elif records and tag:
            records[-1].fields[tag].append(line.strip())
        elif line.strip():
            raise DataFormatError(path, lineno, "text outside a field (not a SMART file?)")
    return records


def _norm_id(raw: str) -> str:
    return str(int(raw)) if raw.isdigit() else raw


def _title(text: str) -> str:
    return text[:-2] if text.endswith(" .") else text


def parse_date(text: str) -> dt.date | None:
    """``CACM December, 1958`` -> 1958-12-01; ``j. ae. scs. 25, 1958, 324.`` -> 1958-01-01."""
    for m in _DATE.finditer(text):
        month = _MONTHS.get((m.group(1) or "").lower(), 1)
        return dt.date(int(m.group(2)), month, 1)
    return None


def _sniff(path: Path) -> str:
    for _, line in read_lines(path):
        if line.strip():
            if _ID.match(line):
                return "records"
            return (
                "qrels" if all(p.lstrip("-").replace(".", "", 1).isdigit() for p in line.split()) else "other"
            )
    return "other"


def _papers(path: Path, records: list[_Record]) -> tuple[PaperCollector, list[CitationLink]]:
    out = PaperCollector()
    links: set[tuple[str, str, str]] = set()
    for rec in records:
        pid = _norm_id(rec.ident)
        for raw in rec.fields.get("X", ()):
            parts = raw.split()
            if len(parts) == 3 and parts[1] in LINK_KINDS and parts[0] != parts[2]:
                links.add((_norm_id(parts[2]), _norm_id(parts[0]), LINK_KINDS[parts[1]]))
        title = _title(rec.text("T"))
        abstract = _title(rec.text("W"))
        authors = tuple(a for line in rec.fields.get("A", ()) for a in [line.strip()] if a)
        out.add(Paper(pid, title, abstract, authors=authors, published=parse_date(rec.text("B"))))
    order = lambda link: (link[2], int(link[0]) if link[0].isdigit() else 0, link[0], link[1])  # noqa: E731
    return out, [CitationLink(a, b, kind) for a, b, kind in sorted(links, key=order)]


def _qrels(path: Path, queries: list[Query]) -> dict[str, dict[str, int]]:
    rows: list[tuple[int, list[str]]] = [(n, line.split()) for n, line in read_lines(path) if line.strip()]
    widths = {len(p) for _, p in rows}
    if not rows or not widths <= {3, 4}:
        raise DataFormatError(
            path, rows[0][0] if rows else 1, f"qrels lines must have 3 or 4 columns, saw {sorted(widths)}"
        )
    trec = widths == {4} and all(p[1] == "0" for _, p in rows)
    triples = []
    for n, p in rows:
        try:
            if trec:
                triples.append((p[0], p[2], int(float(p[3]))))
            elif len(p) == 4:
                triples.append((p[0], p[1], 1))
            else:
                triples.append((p[0], p[1], int(float(p[2]))))
        except ValueError:
            raise DataFormatError(path, n, "non-numeric grade") from None
    codes = {g for *_, g in triples}
    if not trec and widths == {3} and codes <= {-1, 1, 2, 3, 4}:
        triples = [(q, d, 5 - g if g > 0 else g) for q, d, g in triples]
    ids = [q.query_id for q in queries]
    known = set(ids)
    qids = {_norm_id(q) for q, _, _ in triples}
    positional = (
        bool(ids) and not qids <= known and all(q.isdigit() and 1 <= int(q) <= len(ids) for q in qids)
    )
    if ids and not positional and not qids <= known:
        missing = sorted(qids - known, key=lambda s: (len(s), s))[:5]
        raise DataFormatError(path, None, f"qrels name queries not in the query file: {missing}")
    qrels: dict[str, dict[str, int]] = {}
    for q, d, g in triples:
        qid = ids[int(q) - 1] if positional else _norm_id(q)
        qrels.setdefault(qid, {})[_norm_id(d)] = g
    return qrels


def load_smart(path: Path) -> Dataset:
    if not path.is_dir():
        raise DataPathError(f"a SMART collection is a folder; {path} is not one")
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    kinds = {p: _sniff(p) for p in files}
    record_files = sorted((p for p, k in kinds.items() if k == "records"), key=lambda p: -p.stat().st_size)
    if not record_files:
        raise DataPathError(f"{path} holds no SMART record file (lines starting '.I n')")
    parsed = {p: read_records(p) for p in record_files}
    corpus = max(record_files, key=lambda p: len(parsed[p]))
    out, links = _papers(corpus, parsed[corpus])
    queries: list[Query] = []
    rejected: list[Rejection] = []
    qfiles = [p for p in record_files if p != corpus]
    for rec in parsed[qfiles[0]] if qfiles else ():
        text = rec.text("W") or rec.text("T")
        if text:
            queries.append(Query(_norm_id(rec.ident), _title(text)))
        else:
            rejected.append(Rejection(str(qfiles[0]), rec.line, f"query {rec.ident} has no text"))
    qrel_files = [p for p, k in kinds.items() if k == "qrels"]
    qrels = {"test": _qrels(qrel_files[0], queries)} if qrel_files else {}
    papers = _with_citation_counts(out.papers, links)
    return Dataset(
        name=path.name,
        format="smart",
        papers=papers,
        queries=tuple(queries),
        qrels=qrels,
        citations=tuple(links),
        rejected=tuple(out.rejected + rejected),
        duplicates=out.duplicates,
        sources=tuple(str(p) for p in [corpus, *qfiles[:1], *qrel_files[:1]]),
    )


def _with_citation_counts(papers: tuple[Paper, ...], links: list[CitationLink]) -> tuple[Paper, ...]:
    """citation_count = number of distinct direct links pointing at the paper."""
    degree: dict[str, int] = defaultdict(int)
    for link in links:
        if link.kind == "direct":
            degree[link.target] += 1
    if not degree:
        return papers
    return tuple(replace(p, citation_count=degree.get(p.paper_id, 0)) for p in papers)
