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


def build_terms(path: Path, texts: Iterable[str]) -> dict:
    """Write the matrix for ``texts`` (paper ``i`` = row ``i``) into the new folder ``path``; returns its
    figures."""
    vocab: dict[str, int] = {}
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    lengths: list[int] = []
    for i, text in enumerate(texts):
        terms = analyse(text)
        lengths.append(len(terms))
        tf = Counter(terms)
        cols.append(np.fromiter((vocab.setdefault(t, len(vocab)) for t in tf), np.int32, len(tf)))
        counts.append(np.fromiter(tf.values(), np.int32, len(tf)))
        rows.append(np.full(len(tf), i, np.int32))
    from scipy.sparse import coo_matrix

    empty = np.zeros(0, np.int32)
    join = lambda parts: np.concatenate(parts) if parts else empty  # noqa: E731
    # term-major: one column per term, its papers ascending (canonical CSC)
    matrix = coo_matrix((join(counts), (join(rows), join(cols))), shape=(len(lengths), len(vocab))).tocsc()
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
        "avg_len": round(float(np.mean(lengths)) if lengths else 0.0, 3),
        "stemmer": STEMMER,
    }


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
