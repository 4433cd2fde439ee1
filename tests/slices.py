"""The real corpora cut to what a test needs, written in each corpus's own layout to a test's folder.

The whole corpora's figures are the commands' (``scix eval``, ``scix eval-recs``), in docs/results.md; the
suite must fit its time budget on the slowest 2-core machine CI gets (docs/tests.md), where encoding a corpus
and fitting a dense item-item model over it were most of the run.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path

from scix_core.data.citeulike import read_adjacency, write_adjacency
from scix_core.data.textio import read_lines

# SciFact's papers in the suite: every judged one (565) and a seeded sample of the rest. The whole corpus
# (5,183) cost a core 18 minutes to encode on a slow AVX2 machine; its figures are `scix eval`'s, in
# docs/results.md. A slice a fifth the size keeps each test's point: real claims, real abstracts, 809 judged
# queries whose relevant papers are all there, each lane and the fusion ranking them among distractors.
SCIFACT_SLICE = 1_000


def scifact_slice(data_dir: Path, folder: Path, size: int = SCIFACT_SLICE) -> Path:
    """SciFact in its own layout under ``folder`` (the queries and judgments linked, the corpus CSV cut to
    ``size`` papers: the judged ones and a seeded sample of the rest, in the file's order)."""
    source = data_dir / "scifact"
    judged = {
        line.split("\t")[1]
        for qrels in (source / "qrels").glob("*.tsv")
        for line in qrels.read_text().splitlines()[1:]
        if line.strip()
    }
    csv.field_size_limit(1 << 30)
    with open(source / "original_csv" / "corpus_train.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    others = sorted(r["doc_id"] for r in rows if r["doc_id"] not in judged)
    keep = judged | set(random.Random(0).sample(others, size - len(judged)))
    (folder / "original_csv").mkdir(parents=True, exist_ok=True)
    with open(folder / "original_csv" / "corpus_train.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(r for r in rows if r["doc_id"] in keep)
    for name in ("queries.jsonl", "qrels"):
        if not (folder / name).exists():
            (folder / name).symlink_to(source / name)
    return folder


# CiteULike-a in the suite: its most-saved papers and the users with ten or more saves among them. The whole
# set (16,980 titles, 5,551 libraries) cost a slow AVX2 machine's core 7 minutes to encode and EASE's fit over
# its items (a 16,980² matrix inverted) a minute a community; a dense core of a third of the papers keeps
# every point the tests make — real titles and libraries, every tier reached by truncating a real library,
# learned peers against popularity, the co-saves lifting Tier 1 — at a twentieth of EASE's cost.
CITEULIKE_PAPERS = 6_000
CITEULIKE_MIN_SAVES = 10
KEPT = "slice-of.txt"  # the slice's papers' ids in the whole set, one a line (paper i of the slice on line i)


def citeulike_slice(
    data_dir: Path, folder: Path, papers: int = CITEULIKE_PAPERS, min_saves: int = CITEULIKE_MIN_SAVES
) -> Path:
    """CiteULike-a in its own layout under ``folder``: the ``papers`` most-saved items (ties by id) renumbered
    in id order, with their titles, tags and the citation links among them; each user's saves of them in the
    file's order, users left with fewer than ``min_saves`` dropped."""
    source = data_dir / "citeulike-a"
    libraries = read_adjacency(source / "users.dat")
    counts = Counter(item for library in libraries for item in library)
    kept = sorted((int(i) for i, _ in sorted(counts.items(), key=lambda c: (-c[1], int(c[0])))[:papers]))
    new = {str(old): str(i) for i, old in enumerate(kept)}

    folder.mkdir(parents=True, exist_ok=True)
    cut = ([new[i] for i in library if i in new] for library in libraries)
    write_adjacency(folder / "users.dat", (row for row in cut if len(row) >= min_saves))
    titles = [line for _, line in read_lines(source / "citeutitles.txt")]
    (folder / "citeutitles.txt").write_text("".join(titles[i] + "\n" for i in kept), encoding="utf-8")
    # the per-item files may end before the last item (CiteULike-a's: 16,979 lines): no line, no tags or links
    item_tags = read_adjacency(source / "item-tag.dat")
    write_adjacency(folder / "item-tag.dat", (item_tags[i] if i < len(item_tags) else [] for i in kept))
    citations = read_adjacency(source / "citations.dat")
    write_adjacency(
        folder / "citations.dat",
        ([new[j] for j in (citations[i] if i < len(citations) else []) if j in new] for i in kept),
    )
    (folder / "tags.dat").symlink_to(source / "tags.dat")
    (folder / KEPT).write_text("".join(f"{i}\n" for i in kept))  # the loader reads only its own files
    return folder


def library_counts(folder: Path) -> tuple[int, int]:
    """(users, saves) of a CiteULike folder's ``users.dat``."""
    libraries = read_adjacency(folder / "users.dat")
    return len(libraries), sum(map(len, libraries))
