"""Runs from other systems (Pyserini, PyTerrier, Anserini, trec_eval's own files): a TREC run file read into
the same comparison as the project's runs.

A line is ``qid Q0 docno rank score tag`` (six fields, whitespace separated;
the rank and the tag are not used). Each query's papers are ordered as
trec_eval orders them — by score, a tie by paper id descending — so every
metric is trec_eval's on the file. A malformed line is a
:class:`~scix_core.errors.DataFormatError` naming the file and the line; a
paper id the index does not hold is kept (it is not relevant to any query)
and counted, as are the gold queries the run has no line for (they score 0,
as trec_eval's ``-c`` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scix_core.errors import ConfigError, DataFormatError, DataPathError
from scix_core.types import Ranking


@dataclass(frozen=True)
class ExternalRun:
    name: str
    path: Path
    rankings: dict[str, Ranking]  # query id -> papers in trec_eval's order
    unknown_ids: int  # lines whose paper the index does not hold
    lines: int

    def summary(self, judged: Iterable[str]) -> dict:
        judged = list(judged)
        missing = sum(1 for q in judged if q not in self.rankings)
        depth = max((len(r) for r in self.rankings.values()), default=0)
        return {
            "path": str(self.path),
            "lines": self.lines,
            "queries": len(self.rankings),
            "gold_queries_without_a_line": missing,
            "unknown_paper_ids": self.unknown_ids,
            "depth": depth,
        }


def parse_spec(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` -> (name, path)."""
    name, eq, path = spec.partition("=")
    if not eq or not name.strip() or not path.strip():
        raise ConfigError(f"--run-file takes NAME=PATH, not {spec!r}")
    return name.strip(), Path(path.strip()).expanduser()


def read_trec_run(name: str, path: Path, known) -> ExternalRun:
    """The run in ``path``; ``known(ids) -> set`` says which paper ids the index holds."""
    if not path.is_file():
        raise DataPathError(f"run file {path} (--run-file {name}) does not exist")
    scores: dict[str, dict[str, float]] = {}
    lines = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 6:
                raise DataFormatError(
                    path,
                    number,
                    f"a TREC run line has 6 fields (qid Q0 docno rank score tag), this one {len(fields)}: "
                    f"{line.strip()[:120]!r}",
                )
            qid, _, doc, _, score, _ = fields
            try:
                value = float(score)
            except ValueError:
                raise DataFormatError(path, number, f"the score {score!r} is not a number") from None
            if value != value:  # NaN
                raise DataFormatError(path, number, "the score is NaN")
            per_query = scores.setdefault(qid, {})
            per_query[doc] = max(value, per_query.get(doc, value))
            lines += 1
    if not scores:
        raise DataFormatError(path, None, "no run lines")
    every = {doc for per_query in scores.values() for doc in per_query}
    unknown = every - set(known(every))
    rankings = {}
    for qid, per_query in scores.items():
        ordered = sorted(per_query.items(), key=lambda x: x[0], reverse=True)  # trec_eval: ties by docno desc
        ordered.sort(key=lambda x: -x[1])  # stable: by score, the ties keep that order
        rankings[qid] = Ranking.from_pairs(name, ordered)
    unknown_lines = sum(1 for per_query in scores.values() for doc in per_query if doc in unknown)
    return ExternalRun(name, path, rankings, unknown_lines, lines)
