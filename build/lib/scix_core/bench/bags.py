"""Bag-of-words paper text: each word once, or repeated by its count? (``python -m scix_core.bench.bags``)

The CiteULike release variant without titles gives each paper only as an
LDA-C bag of words (``mult.dat`` + ``vocabulary.dat``); the loader turns a
bag into text (``scix_core.data.citeulike.read_bags``). No such bag comes
with a gold set here, so this bench makes bags from a judged corpus
(default SciFact: title + abstract), the way the CiteULike vocabulary was
made — lower-cased alphabetic words, English stop words dropped, the
``--vocabulary`` words of highest document frequency kept (CiteULike: 8,000
by tf-idf) — writes them as real ``mult.dat``/``vocabulary.dat`` files, reads
them back through the loader both ways, and scores the dense lane (MiniLM,
exact cosine), BM25 (bm25s, Snowball, English stop words) and their RRF
(k = 60, the hybrid) on the gold queries: nDCG@10 per variant, the original text as the ceiling, and a paired
randomisation test of *once* against *repeated*.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from scix_core.config import load_config
from scix_core.data.citeulike import make_bags, read_bags, write_lda_c
from scix_core.data.formats import load_dataset, resolve_dataset
from scix_core.embeddings.encoder import shared_encoder
from scix_core.evaluate.gold import from_dir
from scix_core.evaluate.metrics import means, per_query
from scix_core.evaluate.significance import compare, holm
from scix_core.fusion import rrf
from scix_core.types import Ranking


def rankings(ids: list[str], scores: np.ndarray, queries: list[str], name: str) -> dict:
    out = {}
    for q, row in zip(queries, scores):
        top = [i for i in np.argsort(-row)[:100] if np.isfinite(row[i])]
        out[q] = Ranking.from_pairs(name, [(ids[i], float(row[i])) for i in top])
    return out


def ndcg(gold, ranked: dict) -> dict[str, dict[str, float]]:
    return per_query(gold, ranked, ("ndcg@10",))


def main() -> None:
    import bm25s
    import Stemmer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--vocabulary", type=int, default=8000)
    ap.add_argument("--permutations", type=int, default=10_000)
    args = ap.parse_args()
    folder = resolve_dataset(args.dataset)
    ds = load_dataset(folder)
    papers = list(ds.papers)
    ids = [p.paper_id for p in papers]
    original = [p.text for p in papers]
    vocabulary, bags = make_bags(original, args.vocabulary)
    with tempfile.TemporaryDirectory() as tmp:
        write_lda_c(Path(tmp), vocabulary, bags)
        texts = {
            "original": original,
            "once": read_bags(Path(tmp) / "mult.dat", vocabulary),
            "repeated": read_bags(Path(tmp) / "mult.dat", vocabulary, repeat=True),
        }
    gold = from_dir(folder, split=args.split)
    queries = gold.judged
    qtext = [gold.queries[q] for q in queries]
    cfg = load_config()
    encoder = shared_encoder(cfg.embedding, cfg.home)
    qvec = encoder.encode(qtext)
    stemmer = Stemmer.Stemmer("english")
    qtok = bm25s.tokenize(qtext, stopwords="en", stemmer=stemmer, show_progress=False)
    values: dict[str, dict] = {}
    for name, docs in texts.items():
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
        )
        hits, scores = retriever.retrieve(qtok, k=100, show_progress=False, n_threads=1)
        lex = np.full((len(queries), len(ids)), -np.inf)
        for i in range(len(queries)):
            lex[i, hits[i]] = scores[i]
        lexical = rankings(ids, lex, queries, "lexical")
        dvec = encoder.encode(docs, progress=False)
        dense = rankings(ids, qvec @ dvec.T, queries, "dense")
        values[f"bm25 {name}"] = ndcg(gold, lexical)
        values[f"dense {name}"] = ndcg(gold, dense)
        values[f"hybrid {name}"] = ndcg(
            gold, {q: rrf([lexical[q], dense[q]], k=60).top(100) for q in queries}
        )
        print(
            name,
            {k: round(means(v)["ndcg@10"], 4) for k, v in values.items() if k.endswith(name)},
            flush=True,
        )
    tests = holm(
        [
            c
            for lane in ("bm25", "dense", "hybrid")
            for c in compare(f"{lane} repeated", f"{lane} once", values, ("ndcg@10",), args.permutations)
        ]
    )
    print(
        f"{args.dataset} {args.split}: {len(queries)} queries, {len(ids)} papers, vocabulary "
        f"{len(vocabulary)}; "
        f"mean words per bag {np.mean([len(b) for b in bags]):.0f} distinct, "
        f"{np.mean([sum(b.values()) for b in bags]):.0f} total"
    )
    for run, v in values.items():
        print(f"  {run:16s} nDCG@10 {means(v)['ndcg@10']:.4f}")
    for c in tests:
        print(f"  once vs repeated ({c.baseline.split()[0]}): {c.delta:+.4f}, p_adj {c.p_adj:.4f}")


if __name__ == "__main__":
    main()
