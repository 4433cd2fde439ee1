"""Passage vectors: a paper as overlapping windows of its abstract's sentences, for the dense lane's MaxP.

MiniLM reads 256 word pieces of a paper (title + abstract); most SciFact abstracts are longer (median 317, 72%
cut), and a claim is often supported by one sentence near the end. ``scix ingest --passages`` also encodes each
paper as passages — its title, then ``WINDOW`` consecutive sentences of its abstract, a new window every
``STRIDE`` sentences — and the dense lane scores a paper by its best vector, whole or passage (MaxP). A paper
whose abstract has ``WINDOW`` sentences or fewer gets no passage: its own vector already reads all of it.
Encoding at 512 tokens instead does not help (the model was trained on short texts: dense nDCG@10 0.6577 vs
0.6595 at 256 on SciFact train); passages lift it to 0.6838.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scix_core.types import Paper

WINDOW = 3  # sentences per passage
STRIDE = 2  # sentences between passage starts (windows overlap by one)
FANOUT = 4  # passages fetched per paper wanted: papers have ~4 passages, the best one counts
# a sentence ends at . ! ? followed by space and a capital, digit or bracket ("e.g. the", "3.5 mm" do not end one)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


def passages(paper: Paper, window: int = WINDOW, stride: int = STRIDE) -> list[str]:
    """The passages of one paper (none for a short abstract)."""
    sents = sentences(paper.abstract)
    if len(sents) <= window:
        return []
    out = []
    for start in range(0, len(sents), stride):
        out.append(". ".join(t for t in (paper.title, " ".join(sents[start:start + window])) if t))
        if start + window >= len(sents):
            break
    return out


def corpus_passages(papers: Sequence[Paper], window: int = WINDOW, stride: int = STRIDE
                    ) -> tuple[list[int], list[str]]:
    """(position of the owning paper, passage text) for every passage of ``papers``, in paper order."""
    owners, texts = [], []
    for i, paper in enumerate(papers):
        for text in passages(paper, window, stride):
            owners.append(i)
            texts.append(text)
    return owners, texts
