"""The term–document matrix: the ``bm25`` lexical backend's index (``terms/`` in a build).

Each paper's title and abstract are analysed as a query is (case-folded runs of letters and digits,
PostgreSQL's English stopwords dropped — :mod:`scix_core.search.query`), stripped of diacritics and
Snowball-stemmed (PyStemmer, the stemmer ``bm25s`` uses), then counted into a term-major CSC matrix of raw
term frequencies beside each paper's length in terms. Nothing of BM25 is baked in: k1, b and the IDF are
applied at query time, so they stay configuration (``search.bm25_k1``, ``search.bm25_b``) that a sweep can
vary without rebuilding. Arrays are memory-mapped.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np

from scix_core.errors import BackendUnavailableError
from scix_core.stores import npy
from scix_core.stores.analysis import lexical_words

STEMMER = "english"  # Snowball English (Porter 2)
FILES = ("indptr.npy", "docs.npy", "tf.npy", "lengths.npy", "vocab.json")


@cache
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer(STEMMER)


def _fold(word: str) -> str:
    """Diacritics removed (``café`` -> ``cafe``), as FTS5's unicode61 tokenizer does."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def stem(words: Iterable[str]) -> list[str]:
    """Query tokens or text words (case-folded, stopwords out) -> the matrix's terms."""
    return _stemmer().stemWords([_fold(w) for w in words])


def analyse(text: str) -> list[str]:
    """The stemmed terms of ``text``, in order, repeats kept."""
    return stem(lexical_words(text))


def _counted(texts: Iterable[str], vocab: dict[str, int], first_row: int = 0):
    """The (rows, term ids, counts) triplets and lengths of ``texts`` as rows ``first_row`` on, adding their
    new terms to ``vocab``."""
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    lengths: list[int] = []
    for i, text in enumerate(texts, start=first_row):
        terms = analyse(text)
        lengths.append(len(terms))
        tf = Counter(terms)
        cols.append(np.fromiter((vocab.setdefault(t, len(vocab)) for t in tf), np.int32, len(tf)))
        counts.append(np.fromiter(tf.values(), np.int32, len(tf)))
        rows.append(np.full(len(tf), i, np.int32))
    empty = np.zeros(0, np.int32)
    join = lambda parts: np.concatenate(parts) if parts else empty  # noqa: E731
    return join(rows), join(cols), join(counts), np.asarray(lengths, np.int32)


def _write(path: Path, rows, cols, counts, lengths: np.ndarray, vocab: dict[str, int]) -> dict:
    """The matrix of the triplets (term-major: one column per term, its papers ascending, canonical CSC)
    into the new folder ``path``; returns its figures."""
    from scipy.sparse import coo_matrix

    matrix = coo_matrix((counts, (rows, cols)), shape=(len(lengths), len(vocab))).tocsc()
    matrix.sort_indices()
    path.mkdir(parents=True)
    for name, array in (
        ("indptr", matrix.indptr),
        ("docs", matrix.indices),
        ("tf", matrix.data),
        ("lengths", np.asarray(lengths, np.int32)),
    ):
        np.save(path / f"{name}.npy", array)
    (path / "vocab.json").write_text(json.dumps(vocab))
    return {
        "papers": len(lengths),
        "vocabulary": len(vocab),
        "postings": int(matrix.nnz),
        "avg_len": round(float(np.mean(lengths)) if len(lengths) else 0.0, 3),
        "stemmer": STEMMER,
    }


def build_terms(path: Path, texts: Iterable[str]) -> dict:
    """Write the matrix for ``texts`` (paper ``i`` = row ``i``) into the new folder ``path``; returns its
    figures."""
    vocab: dict[str, int] = {}
    return _write(path, *_counted(texts, vocab), vocab)


def extend_terms(old: Path, path: Path, texts: dict[int, str]) -> dict:
    """The matrix at ``old`` with rows ``texts`` (row -> text) written anew — a replaced paper's row or a new
    one past the last — into the new folder ``path``; returns its figures. The counts are those
    :func:`build_terms` gives the same texts, so BM25 scores are too: only the ids of terms differ (new
    ones are numbered after the old ones), and a term whose papers were all replaced keeps an empty
    column."""
    before = TermIndex(old)
    vocab = dict(before.vocab)
    n = max([before.n - 1, *texts]) + 1
    if n - before.n != sum(1 for r in texts if r >= before.n):
        raise ValueError(f"new rows of a term matrix of {before.n} must follow it without a gap")
    rows = np.repeat(np.arange(len(before.indptr) - 1, dtype=np.int32), np.diff(before.indptr))  # term ids
    docs, tf = np.asarray(before.docs), np.asarray(before.tf)
    keep = ~np.isin(docs, np.fromiter(texts, np.int64, len(texts)))
    new_rows, new_cols, new_counts, new_lengths = _counted(texts.values(), vocab)
    order = np.fromiter(texts, np.int32, len(texts))
    lengths = np.concatenate([np.asarray(before.lengths), np.zeros(n - before.n, np.int32)])
    lengths[order] = new_lengths
    return _write(
        path,
        np.concatenate([docs[keep], order[new_rows]]),
        np.concatenate([rows[keep], new_cols]),
        np.concatenate([tf[keep], new_counts]),
        lengths,
        vocab,
    )


class TermIndex:
    """A built matrix, read-only and memory-mapped."""

    def __init__(self, path: Path):
        try:
            self.indptr, self.docs, self.tf, self.lengths = (
                npy.load(path / f, mmap_mode="r") for f in FILES[:4]
            )
            self.vocab: dict[str, int] = json.loads((path / "vocab.json").read_text())
        except (OSError, ValueError) as exc:
            raise BackendUnavailableError(f"cannot open the term matrix at {path}: {exc}") from exc
        self.n = len(self.lengths)
        self.avg_len = float(np.mean(self.lengths)) if self.n else 0.0
        self.relative_len = (
            (self.lengths / self.avg_len).astype(np.float32) if self.avg_len else np.ones(self.n, np.float32)
        )

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(papers, term frequencies) of a stemmed ``term``; None when no paper has it."""
        t = self.vocab.get(term)
        if t is None:
            return None
        start, end = self.indptr[t], self.indptr[t + 1]
        return self.docs[start:end], self.tf[start:end]
