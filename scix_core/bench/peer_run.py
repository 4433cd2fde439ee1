"""A TREC run of another system on an index's papers and gold queries: bm25s (the ``peers`` extra) —
the peer to put beside the project's runs with ``scix eval --run-file bm25s=PATH``.

    python -m scix_core.bench.peer_run --index scifact --split train --out runs/bm25s.trec

BM25 as bm25s computes it (Lucene's IDF, k1 1.5, b 0.75: its defaults) over
title + abstract, Snowball-stemmed, English stop words removed; the gold
split's judged queries; ``--depth`` papers each.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scix_core.config import Config, load_config
from scix_core.evaluate.gold import for_index
from scix_core.extras import require
from scix_core.stores import PaperStore
from scix_core.workspace import Workspace, write_text_atomic


def bm25s_run(
    index: str, split: str | None, out: Path, depth: int = 100, config: Config | None = None
) -> Path:
    """Write the run to ``out``; returns it."""
    require("bm25s", "peers", "the bm25s peer run")
    import bm25s
    import Stemmer

    cfg = config or load_config()
    store = PaperStore(Workspace(cfg.home).index_dir(index) / "papers.sqlite")
    try:
        papers = [(p.paper_id, f"{p.title} {p.abstract}") for p in store.papers()]
    finally:
        store.close()
    gold = for_index(index, cfg, split)
    queries = gold.judged
    stemmer = Stemmer.Stemmer("english")

    def tokens(texts):
        return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)

    retriever = bm25s.BM25()
    retriever.index(tokens([text for _, text in papers]), show_progress=False)
    hits, scores = retriever.retrieve(
        tokens([gold.queries[q] for q in queries]),
        k=min(depth, len(papers)),
        show_progress=False,
        n_threads=1,
    )
    lines = [
        f"{q} Q0 {papers[int(h)][0]} {rank} {float(s):.6f} bm25s"
        for q, row, values in zip(queries, hits, scores)
        for rank, (h, s) in enumerate(zip(row, values), 1)
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, "".join(line + "\n" for line in lines))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--split", help="the gold split whose judged queries are run (default: the index's)")
    ap.add_argument("--out", type=Path, required=True, help="the TREC run file to write")
    ap.add_argument("--depth", type=int, default=100)
    args = ap.parse_args()
    path = bm25s_run(args.index, args.split, args.out, args.depth)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
