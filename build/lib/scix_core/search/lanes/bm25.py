"""The lexical lane on the term matrix (``search.lexical_backend = "bm25"``): Lucene BM25 in numpy.

score(d) = Σ over the query's distinct stems t of  qtf(t) · idf(t) · tf(t,d) / (tf(t,d) + k1·(1 − b +
b·|d|/avgdl)) with idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)) — the formula of Lucene (which dropped
the classic constant factor k1 + 1) and of ``bm25s``'s default, with the query's term frequency as in the
classic model (FTS5's bm25() differs in its IDF, which is ~0 for a term in half the papers, and in fixing k1
and b). Every paper matching any stem is scored (no pool): one ``bincount`` over the postings. Modes as the
other lexical lanes: ``and`` keeps the papers matching every stem, ``or`` all, ``auto`` the first then the
second (:func:`~scix_core.search.lanes.base.and_then_or`). Filters become a mask of the papers the SQLite
store selects. Ties go to the earlier paper.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import numpy as np

from scix_core.errors import UnknownNameError
from scix_core.search.lanes.base import LEXICAL_MODES, LaneRequest, and_then_or
from scix_core.search.query import PreparedQuery
from scix_core.search.where import sqlite_where
from scix_core.stores.terms import TermIndex, stem
from scix_core.types import Ranking


def check_bm25(k1: float, b: float) -> None:
    if k1 < 0 or not 0 <= b <= 1:
        raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")


def stem_weights(query: PreparedQuery) -> Counter[str]:
    """The query's distinct stems, each weighted by how often the query says it (BM25's qtf)."""
    weights: Counter[str] = Counter()
    for i, s in enumerate(stem(query.tokens)):
        weights[s] += query.frequency(i)
    return weights


class Bm25Lane:
    def __init__(
        self,
        terms: TermIndex,
        conn: sqlite3.Connection,
        name: str = "lexical",
        mode: str = "auto",
        k1: float = 1.2,
        b: float = 0.75,
    ):
        if mode not in LEXICAL_MODES:
            raise UnknownNameError("lexical mode", mode, LEXICAL_MODES)
        check_bm25(k1, b)
        self.terms, self.conn, self.name, self.mode, self.k1, self.b = terms, conn, name, mode, k1, b

    def scores(self, request: LaneRequest) -> tuple[np.ndarray, np.ndarray, int]:
        """Per paper: BM25 score, number of the query's stems it contains; and the number of distinct
        stems."""
        weights = stem_weights(request.query)
        n, idx = self.terms.n, self.terms
        score, matched = np.zeros(n, np.float32), np.zeros(n, np.int32)
        for term, qtf in weights.items():
            hit = idx.postings(term)
            if hit is None:
                continue
            docs, tf = hit
            idf = np.log1p((n - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = self.k1 * (1 - self.b + self.b * idx.relative_len[docs])
            score[docs] += (qtf * idf) * tf / (tf + norm)
            matched[docs] += 1
        return score, matched, len(weights)

    def search(self, request: LaneRequest, k: int) -> Ranking:
        if not request.query.tokens or k <= 0:
            return Ranking(self.name)
        score, matched, stems = self.scores(request)
        hits = matched > 0
        where, params = sqlite_where(request.filters)
        if where != "1":
            allowed = np.zeros(len(hits), bool)
            allowed[
                [r[0] for r in self.conn.execute(f"SELECT p.idx FROM papers p WHERE {where}", params)]
            ] = True
            hits &= allowed
        every = hits & (matched == stems)
        if self.mode == "and":
            rows = self._top(score, every, k)
        elif self.mode == "or":
            rows = self._top(score, hits, k)
        else:
            rows = self._top(score, every, k)
            if len(rows) < k:
                rows = and_then_or(rows, self._top(score, hits, k + len(rows)), k)
        ids = dict(
            self.conn.execute(
                "SELECT idx, paper_id FROM papers WHERE idx IN (SELECT value FROM json_each(?))",
                [f"[{','.join(str(i) for i, _ in rows)}]"],
            )
        )
        return Ranking.from_pairs(self.name, [(ids[i], s) for i, s in rows])

    @staticmethod
    def _top(score: np.ndarray, keep: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` best kept papers as (position, score), best first, ties to the earlier paper."""
        pos = np.flatnonzero(keep)
        if len(pos) > k:
            pos = pos[
                np.argpartition(-score[pos], k - 1)[:k]
            ]  # the k best (a tie at the edge is settled below)
            cut = score[pos].min()
            pos = np.flatnonzero(keep & (score >= cut))
        pos = pos[np.lexsort((pos, -score[pos]))][:k]
        return [(int(i), float(score[i])) for i in pos]
