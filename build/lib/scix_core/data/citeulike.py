"""CiteULike user libraries (citeulike-a layout; ids are 0-based line numbers).

``users.dat`` line *u*: ``N item ...`` (user *u*'s saved items);
``citations.dat`` line *i*: ``N item ...`` (undirected links of item *i*);
``item-tag.dat`` line *i*: ``N tag ...`` — or ``tag-item.dat`` line *t*:
``N item ...`` (the items carrying tag *t*); ``tags.dat`` line *t*: tag text;
a titles file (``citeutitles.txt`` or ``titles.txt``) line *i*: item title;
``raw-data.csv`` (the full release: header ``doc.id,title,citeulike.id,raw.title,raw.abstract``, ``doc.id`` =
*i* + 1): each item's title and abstract as written (LaTeX case braces dropped; a byte that is not UTF-8 read
  as
U+FFFD), over the titles file and the bag of words.
The standard release variant without titles has ``mult.dat`` (LDA-C bag of
words, line *i*: ``N word_id:count ...``) and ``vocabulary.dat`` (line *w*:
the word): the paper's abstract is then its words, each once, most frequent
first — an encoder reads only its first 256 tokens, so the salient words go
first (repeating words by count would spend that window on repetitions).
Measured by ``python -m scix_core.bench.bags`` on SciFact made into bags:
dense nDCG@10 once 0.501 vs repeated 0.479 (significant), BM25 0.501 vs
0.548 (significant the other way), hybrid 0.564 vs 0.571 (no difference).
An item with neither title nor abstract (a release without text files: ``users.dat`` and the tag files only)
takes its tag names as its abstract (``small-world`` read as ``small world``) — the only words there are about
it; otherwise every such item would embed as the same empty text. Items that have text never get tags added.
The last line may lack a newline. The count prefix of each line is checked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from scix_core.data.dataset import Dataset, PaperCollector
from scix_core.data.textio import one_line, read_csv_rows, read_lines
from scix_core.errors import DataFormatError, DataPathError
from scix_core.types import CitationLink, Interaction, Paper

TITLE_FILES = ("citeutitles.txt", "titles.txt", "title.txt")
WORD = re.compile(r"[a-z]{2,}")


def read_adjacency(path: Path) -> list[list[str]]:
    """One list of ids per line; the ``N`` prefix must equal the count that follows."""
    rows = []
    for lineno, line in read_lines(path):
        parts = line.split()
        if not parts:
            rows.append([])
            continue
        if not parts[0].isdigit() or int(parts[0]) != len(parts) - 1:
            raise DataFormatError(
                path, lineno, f"count prefix {parts[0]!r} does not match {len(parts) - 1} ids"
            )
        rows.append(parts[1:])
    return rows


def write_adjacency(path: Path, rows: Iterable[Sequence[str]]) -> None:
    """One ``N id ...`` line per row (the layout :func:`read_adjacency` reads back; no newline after the
    last, which it reads as well)."""
    path.write_text("\n".join(" ".join([str(len(row)), *row]) for row in rows))


def make_bags(texts: list[str], vocabulary_size: int) -> tuple[list[str], list[Counter]]:
    """(vocabulary, one bag a text) the way the CiteULike release made its bags: lower-cased alphabetic
    words, English stop words dropped, the ``vocabulary_size`` words in most texts kept (in two or more;
    ties in word order, so the same texts give the same files in every run)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # sklearn off the loader's import path

    tokens = [[w for w in WORD.findall(t.lower()) if w not in ENGLISH_STOP_WORDS] for t in texts]
    df = Counter(w for doc in tokens for w in set(doc))
    # ties by the word: Counter.most_common keeps first-seen order, which a set's hash order made vary by run
    ranked = sorted(df.items(), key=lambda wn: (-wn[1], wn[0]))[:vocabulary_size]
    vocabulary = [w for w, n in ranked if n >= 2]
    keep = set(vocabulary)
    return vocabulary, [Counter(w for w in doc if w in keep) for doc in tokens]


def write_lda_c(folder: Path, vocabulary: list[str], bags: list[Counter]) -> None:
    """``folder/mult.dat`` (LDA-C: ``N word_id:count ...``, word ids ascending) and ``vocabulary.dat``."""
    ids = {w: i for i, w in enumerate(vocabulary)}
    (folder / "vocabulary.dat").write_text("\n".join(vocabulary) + "\n")
    lines = [
        " ".join([str(len(b))] + [f"{ids[w]}:{n}" for w, n in sorted(b.items(), key=lambda x: ids[x[0]])])
        for b in bags
    ]
    (folder / "mult.dat").write_text("\n".join(lines) + "\n")


def read_bags(path: Path, vocabulary: list[str], repeat: bool = False) -> list[str]:
    """LDA-C lines -> one text per line: the words, each once, by count (descending), then word id
    (``repeat``: each word ``count`` times, in the same order — measured against in ``bench.bags``)."""
    texts = []
    for lineno, line in read_lines(path):
        parts = line.split()
        if not parts:
            texts.append("")
            continue
        if not parts[0].isdigit() or int(parts[0]) != len(parts) - 1:
            raise DataFormatError(
                path, lineno, f"count prefix {parts[0]!r} does not match {len(parts) - 1} terms"
            )
        bag = []
        for term in parts[1:]:
            word, _, count = term.partition(":")
            if not (word.isdigit() and count.isdigit()) or int(word) >= len(vocabulary) or int(count) < 1:
                raise DataFormatError(
                    path, lineno, f"term {term!r} is not word_id:count with a known word id"
                )
            bag.append((-int(count), int(word)))
        texts.append(" ".join(" ".join([vocabulary[w]] * (-c if repeat else 1)) for c, w in sorted(bag)))
    return texts


def read_raw(path: Path) -> dict[int, tuple[str, str]]:
    """``raw-data.csv``: item position -> (title, abstract); ``doc.id`` (1-based) places a row, else row
    order."""
    out: dict[int, tuple[str, str]] = {}
    for n, (lineno, row) in enumerate(read_csv_rows(path, errors="replace")):  # a stray byte costs a letter
        if n == 0 and not {"raw.title", "title", "raw.abstract", "abstract"} & set(row):
            raise DataFormatError(path, 1, f"no title or abstract column in the header {sorted(row)}")
        doc = (row.get("doc.id") or "").strip()
        if doc and not (doc.isdigit() and int(doc) >= 1):
            raise DataFormatError(path, lineno, f"doc.id {doc!r} is not a positive integer")
        title, abstract = (
            one_line((row.get(f"raw.{col}") or row.get(col) or "").replace("{", "").replace("}", ""))
            for col in ("title", "abstract")
        )
        out[int(doc) - 1 if doc else n] = (title, abstract)
    return out


def tag_text(tags: tuple[str, ...]) -> str:
    """Tag names as an abstract: ``("small-world", "gene_expression")`` -> ``"small world, gene
    expression"``."""
    return ", ".join(one_line(t.replace("-", " ").replace("_", " ")) for t in tags)


def _item_tags(path: Path) -> list[list[str]]:
    """``item-tag.dat`` as is, or ``tag-item.dat`` turned around (item -> tag ids)."""
    if (path / "item-tag.dat").exists():
        return read_adjacency(path / "item-tag.dat")
    if not (path / "tag-item.dat").exists():
        return []
    by_item: dict[int, list[str]] = {}
    for tag, items in enumerate(read_adjacency(path / "tag-item.dat")):
        for item in items:
            by_item.setdefault(int(item), []).append(str(tag))
    return [by_item.get(i, []) for i in range(1 + max(by_item, default=-1))]


def load_citeulike(path: Path) -> Dataset:
    users_file = path / "users.dat"
    if not users_file.exists():
        raise DataPathError(f"{path} is not a CiteULike folder: users.dat is missing")
    title_file = next((path / n for n in TITLE_FILES if (path / n).exists()), None)
    titles = [line.strip() for _, line in read_lines(title_file)] if title_file else []
    tag_names = (
        [line.strip() for _, line in read_lines(path / "tags.dat")] if (path / "tags.dat").exists() else []
    )
    item_tags = _item_tags(path)
    bags: list[str] = []
    if (path / "mult.dat").exists():
        if not (path / "vocabulary.dat").exists():
            raise DataPathError(f"{path} has mult.dat but no vocabulary.dat to read its word ids")
        bags = read_bags(path / "mult.dat", [line.strip() for _, line in read_lines(path / "vocabulary.dat")])
    raw = read_raw(path / "raw-data.csv") if (path / "raw-data.csv").exists() else {}
    adjacency = read_adjacency(path / "citations.dat") if (path / "citations.dat").exists() else []
    libraries = read_adjacency(users_file)

    n_items = max(
        len(titles),
        len(bags),
        len(item_tags),
        len(adjacency),
        1 + max(raw, default=-1),
        1 + max((int(i) for lib in libraries for i in lib), default=-1),
    )
    links = sorted(
        {(min(int(i), int(j)), max(int(i), int(j))) for i, row in enumerate(adjacency) for j in row}
    )
    degree = [len(set(row) - {str(i)}) for i, row in enumerate(adjacency)]
    tags = {
        str(i): tuple(tag_names[int(t)] if int(t) < len(tag_names) else t for t in row)
        for i, row in enumerate(item_tags)
        if row
    }
    out = PaperCollector()
    for i in range(n_items):
        title, abstract = raw.get(i, ("", ""))
        title = title or (titles[i] if i < len(titles) else "")
        abstract = abstract or (bags[i] if i < len(bags) else "")
        if not (title or abstract):
            abstract = tag_text(tags.get(str(i), ()))
        out.add(Paper(str(i), title, abstract, citation_count=degree[i] if i < len(degree) else 0))
    interactions = tuple(
        Interaction(str(u), item, "save", pos)
        for u, lib in enumerate(libraries)
        for pos, item in enumerate(lib)
    )
    return Dataset(
        name=path.name,
        format="citeulike",
        papers=out.papers,
        interactions=interactions,
        citations=tuple(CitationLink(str(a), str(b)) for a, b in links),
        tags=tags,
        rejected=tuple(out.rejected),
        duplicates=out.duplicates,
        sources=tuple(
            str(p)
            for p in (
                users_file,
                path / "raw-data.csv" if raw else None,
                title_file,
                path / "mult.dat" if bags else None,
            )
            if p
        ),
    )
