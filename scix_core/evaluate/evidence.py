"""Evidence studies the reference designs relied on, reproduced on our data (docs/design.md#evidence).

Each study is a function returning a JSON-ready dict; :func:`write` puts it
into ``reports/`` as JSON and a markdown table. ``scix evidence NAME`` runs one.

* ``quantization`` — exact float32 kNN against float16, int8 scalar, binary,
  and binary + float32 rescoring at oversampling 1/2/4, computed exactly with
  numpy over the cached corpus vectors (no backend support needed):
  recall@10 against float32 and nDCG@10 on the gold set.
* ``pool`` — the lexical candidate-pool cap: overlap of the capped top 20
  with the uncapped top 20 at caps 1k, 5k, 30k, for held-aside paper titles
  as queries, AND and OR semantics.
* ``rrf-k`` — nDCG@10 for k in {10, 30, 60, 100}, each tested against k=60.
* ``reranker`` — hybrid vs hybrid+rerank through the rollout gate.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from scix_core.config import Config, load_config
from scix_core.embeddings import EmbeddingCache, Encoder, cpu, index_embedding, shared_encoder
from scix_core.embeddings.encoder import BACKENDS
from scix_core.errors import VectorIndexUnavailableError
from scix_core.evaluate import evaluate
from scix_core.evaluate.gold import for_index, from_index
from scix_core.evaluate.metrics import METRICS, means, per_query
from scix_core.evaluate.paths import reports_dir
from scix_core.evaluate.significance import compare, holm
from scix_core.search import Searcher
from scix_core.search.knobs import Knobs
from scix_core.search.lanes import LaneRequest
from scix_core.search.query import prepare
from scix_core.types import Ranking
from scix_core.workspace import Workspace, write_json_atomic


def _searcher(index: str, cfg: Config):
    return Searcher(index, cfg)


def _encoder(searcher):
    """The index's own query encoder (needs no vector store: the study reads the cache)."""

    if not searcher.manifest.get("model"):
        raise VectorIndexUnavailableError(f"index {searcher.index!r} was built without vectors (--no-embed)")
    return shared_encoder(index_embedding(searcher.config.embedding, searcher.manifest), searcher.config.home)


def _corpus_vectors(searcher, encoder) -> tuple[list[str], np.ndarray]:
    """The index's corpus vectors from the embedding cache (never re-encoded here)."""

    papers = list(searcher.store.papers())
    texts = [p.text for p in papers]
    cache = EmbeddingCache(
        Workspace(searcher.config.home).embedding_cache(encoder.slug),
        searcher.manifest["model"],
        encoder.max_length,
    )

    def refuse(batch):
        raise RuntimeError("corpus vectors missing from the cache: re-run `scix ingest` for this index")

    return [p.paper_id for p in papers], cache.vectors(texts, refuse).astype(np.float32)


def _topk(scores: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
    order = np.take_along_axis(scores, part, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(part, order, axis=1)


def quantization(
    index: str,
    config: Config | None = None,
    k: int = 10,
    max_queries: int | None = None,
    split: str | None = None,
) -> dict:
    cfg = config or load_config()
    searcher = _searcher(index, cfg)
    gold = from_index(searcher.store, split)
    qids = gold.judged[:max_queries] if max_queries else gold.judged
    encoder = _encoder(searcher)
    ids, docs = _corpus_vectors(searcher, encoder)
    queries = np.stack([encoder.encode_query(gold.queries[q]) for q in qids]).astype(np.float32)
    exact = _topk(queries @ docs.T, k)

    lo, hi = docs.min(axis=0), docs.max(axis=0)
    scale = np.where(hi > lo, (hi - lo) / 255.0, 1.0)
    int8 = np.round((docs - lo) / scale).astype(np.uint8)  # per-dimension scalar quantization
    bits_d, bits_q = docs > 0, queries > 0
    hamming_sim = bits_q.astype(np.float32) @ bits_d.T.astype(np.float32) + (~bits_q).astype(np.float32) @ (
        ~bits_d
    ).T.astype(np.float32)

    candidates = {
        "float32 (exact)": exact,
        "float16": _topk(
            queries.astype(np.float16).astype(np.float32) @ docs.astype(np.float16).astype(np.float32).T, k
        ),
        "int8 scalar": _topk(queries @ (int8.astype(np.float32) * scale + lo).T, k),
        "binary": _topk(hamming_sim, k),
    }
    for over in (1, 2, 4):
        shortlist = _topk(hamming_sim, k * over)
        rescored = np.einsum("qd,qkd->qk", queries, docs[shortlist])  # float32 scores of the binary shortlist
        order = np.argsort(-rescored, axis=1)[:, :k]
        candidates[f"binary + rescore x{over}"] = np.take_along_axis(shortlist, order, axis=1)
    rows = {}
    for name, top in candidates.items():
        recall = float(np.mean([len(set(top[i]) & set(exact[i])) / k for i in range(len(qids))]))
        rankings = {
            q: Ranking.from_pairs(name, ((ids[j], float(k - r)) for r, j in enumerate(top[i])))
            for i, q in enumerate(qids)
        }
        rows[name] = {
            "recall@10_vs_float32": recall,
            "ndcg@10": float(np.mean(list(per_query(gold, rankings, ("ndcg@10",))["ndcg@10"].values()))),
        }
    return {
        "study": "quantization",
        "index": index,
        "gold": gold.name,
        "queries": len(qids),
        "papers": len(ids),
        "dim": int(docs.shape[1]),
        "k": k,
        "rows": rows,
        "bytes_per_vector": {
            "float32": 4 * docs.shape[1],
            "float16": 2 * docs.shape[1],
            "int8": docs.shape[1],
            "binary": docs.shape[1] // 8,
        },
    }


def pool(
    index: str, config: Config | None = None, n_queries: int = 200, caps=(1000, 5000, 30000), seed: int = 7
) -> dict:
    cfg = config or load_config()
    if (
        cfg.search.lexical_backend == "bm25"
    ):  # it scores every match (no pool): the study is of the pooled FTS5 lane
        cfg = cfg.replace(**{"search.lexical_backend": "sqlite"})
    searcher = _searcher(index, cfg)
    lane = next(ln for ln in searcher.lexical if ln.name == "lexical")
    titles = [r[0] for r in searcher.store.conn.execute("SELECT title FROM papers ORDER BY idx")]
    queries = random.Random(seed).sample(titles, min(n_queries, len(titles)))
    rows = {}
    for mode in ("and", "or"):
        lane.mode = mode
        full = {
            q: lane.search(LaneRequest(prepare(q), knobs=Knobs(None, 32, False)), 20).ids for q in queries
        }
        matched = [q for q in queries if full[q]]
        for cap in caps:
            t = time.perf_counter()
            overlap = [
                len(
                    set(lane.search(LaneRequest(prepare(q), knobs=Knobs(cap, 32, False)), 20).ids)
                    & set(full[q])
                )
                / len(full[q])
                for q in matched
            ]
            rows[f"{mode.upper()} cap {cap:,}"] = {
                "overlap@20": float(np.mean(overlap)) if overlap else None,
                "queries_with_matches": len(matched),
                "ms_per_query": (time.perf_counter() - t) * 1000 / max(1, len(matched)),
            }
        rows[f"{mode.upper()} uncapped"] = {"overlap@20": 1.0, "queries_with_matches": len(matched)}
    lane.mode = cfg.search.lexical_mode
    return {
        "study": "pool",
        "index": index,
        "backend": cfg.search.lexical_backend,
        "papers": len(titles),
        "queries": len(queries),
        "query_source": f"{len(queries)} paper titles sampled with seed {seed}",
        "rows": rows,
    }


def _eval_rows(report) -> dict:
    rows = {r: dict(v) for r, v in report.runs.items()}
    for c in report.comparisons:
        if c.metric == "ndcg@10":
            rows[c.candidate].update(
                delta_vs_baseline=c.delta, p=c.p, p_adj=c.p_adj, significant=c.significant
            )
    return rows


def rrf_k(
    index: str,
    config: Config | None = None,
    permutations: int = 10_000,
    split: str | None = None,
    sample: int | None = None,
) -> dict:
    report = evaluate(
        index,
        for_index(index, config, split),
        runs=("rrf_k10", "rrf_k30", "rrf_k60", "rrf_k100"),
        baseline="rrf_k60",
        config=config,
        permutations=permutations,
        sample=sample,
    )
    return {
        "study": "rrf-k",
        "index": index,
        "gold": report.setup["gold"],
        "queries": report.n_queries,
        "lexical_mode": report.setup["lexical_mode"],
        "dropped_lanes": report.dropped_lanes,
        "baseline": "rrf_k60",
        "rows": _eval_rows(report),
    }


def reranker(
    index: str, name: str, config: Config | None = None, permutations: int = 10_000, split: str | None = None
) -> dict:
    """Evaluate on a split the reranker was NOT trained on (``test`` when the index has one)."""

    report = evaluate(
        index,
        for_index(index, config, split),
        runs=("hybrid", "hybrid+rerank"),
        baseline="hybrid",
        config=config,
        reranker=name,
        permutations=permutations,
    )
    return {
        "study": "reranker",
        "index": index,
        "reranker": name,
        "gold": report.setup["gold"],
        "queries": report.n_queries,
        "baseline": "hybrid",
        "rows": _eval_rows(report),
        "gate": report.gates.get("hybrid+rerank").to_dict() if "hybrid+rerank" in report.gates else None,
        "dropped_lanes": report.dropped_lanes,
        "skipped": report.skipped,
    }


def backends(
    index: str,
    config: Config | None = None,
    sample: int = 512,
    query_sample: int = 100,
    permutations: int = 10_000,
    split: str | None = None,
    max_queries: int | None = None,
) -> dict:
    """Each embedding backend (torch, onnx, onnx-int8, openvino, openvino-int8) on the index's own model, in
    one run: dense-only quality (exact cosine over the whole corpus encoded by that backend — cached per
    backend, so a later ``scix ingest`` with it encodes nothing), recall@10 against torch float32, paired
    tests against torch, and speed (docs/s on the same ``sample`` papers, query p50 ms, encoded fresh).
    ``chosen``: the fastest backend with no significant quality loss (no metric significantly below torch
    after Holm) — the rule for ``embedding.backend``."""
    from dataclasses import replace

    cfg = config or load_config()
    searcher = _searcher(index, cfg)
    if not searcher.manifest.get("model"):
        raise VectorIndexUnavailableError(f"index {searcher.index!r} was built without vectors (--no-embed)")
    gold = from_index(searcher.store, split)
    qids = gold.judged[:max_queries] if max_queries else gold.judged
    papers = list(searcher.store.papers())
    ids, texts = [p.paper_id for p in papers], [p.text for p in papers]
    speed_texts = random.Random(7).sample(texts, min(sample, len(texts)))
    speed_queries = [gold.queries[q] for q in qids[:query_sample]]
    base = index_embedding(cfg.embedding, searcher.manifest)
    tops, values, rows = {}, {}, {}
    for backend in BACKENDS:
        enc = Encoder(replace(base, backend=backend), cfg.home)
        cache = EmbeddingCache(Workspace(cfg.home).embedding_cache(enc.slug), base.model, enc.max_length)
        docs = cache.vectors(texts, enc.encode).astype(np.float32)
        enc.encode(speed_texts[:8])  # load and warm up outside the timings
        t = time.perf_counter()
        enc.encode(speed_texts)
        docs_s = len(speed_texts) / (time.perf_counter() - t)
        laps = []
        for q in speed_queries:
            t = time.perf_counter()
            enc.encode([q])
            laps.append((time.perf_counter() - t) * 1000)
        queries = enc.encode([gold.queries[q] for q in qids])
        tops[backend] = _topk(queries @ docs.T, 100)
        rankings = {
            q: Ranking.from_pairs(backend, ((ids[j], float(100 - r)) for r, j in enumerate(tops[backend][i])))
            for i, q in enumerate(qids)
        }
        values[backend] = per_query(gold, rankings)
        rows[backend] = {
            **means(values[backend]),
            "docs_per_s": docs_s,
            "query_p50_ms": float(np.median(laps)),
        }
    for backend in BACKENDS:
        rows[backend]["recall@10_vs_float32"] = float(
            np.mean(
                [len(set(tops[backend][i, :10]) & set(tops["torch"][i, :10])) / 10 for i in range(len(qids))]
            )
        )
        rows[backend]["speedup_docs"] = rows[backend]["docs_per_s"] / rows["torch"]["docs_per_s"]
    comparisons = holm([c for b in BACKENDS[1:] for c in compare("torch", b, values, METRICS, permutations)])
    for c in comparisons:
        if c.metric == "ndcg@10":
            rows[c.candidate].update(
                delta_vs_baseline=c.delta, p=c.p, p_adj=c.p_adj, significant=c.significant
            )
    lossless = [
        b
        for b in BACKENDS
        if not any(c.candidate == b and c.significant and c.delta < 0 for c in comparisons)
    ]
    chosen = max(lossless, key=lambda b: rows[b]["docs_per_s"])
    return {
        "study": "backends",
        "index": index,
        "model": base.model,
        "gold": gold.name,
        "queries": len(qids),
        "papers": len(ids),
        "speed_sample": len(speed_texts),
        "baseline": "torch",
        "rows": rows,
        "chosen": chosen,
        "cpu": "int8 dot-product (VNNI/AMX)" if cpu.has(cpu.INT8_DOT) else "no int8 dot-product instructions",
        "rule": "fastest backend (docs/s) with no metric significantly below torch "
        "(Holm, randomisation test)",
    }


STUDIES = {
    "quantization": quantization,
    "pool": pool,
    "rrf-k": rrf_k,
    "reranker": reranker,
    "backends": backends,
}


def markdown(result: dict) -> str:
    rows = result["rows"]
    cols = sorted(
        {c for r in rows.values() for c in r}, key=lambda c: (c not in ("ndcg@10", "recall@10_vs_float32"), c)
    )
    head = f"# Evidence: {result['study']} on {result['index']}\n\n"
    meta = ", ".join(
        f"{k}: {v}"
        for k, v in result.items()
        if k not in ("rows", "study", "index") and not isinstance(v, dict)
    )
    lines = [f"| arm | {' | '.join(cols)} |", f"|---|{'---|' * len(cols)}"]
    for arm, values in rows.items():
        cells = [
            f"{values[c]:.4f}" if isinstance(values.get(c), float) else str(values.get(c, "")) for c in cols
        ]
        lines.append(f"| {arm} | {' | '.join(cells)} |")
    extra = f"\n\nGate: {result['gate']}\n" if result.get("gate") else "\n"
    if result.get("dropped_lanes"):
        extra += f"\n**Degraded**: lanes dropped during the runs: {result['dropped_lanes']}\n"
    return head + meta + "\n\n" + "\n".join(lines) + extra


def write(result: dict, folder: Path | None = None) -> tuple[Path, Path]:
    """``evidence-STUDY-INDEX[-MODE].json`` and ``.md`` into ``folder`` (default: the reports folder)."""
    folder = Path(folder or reports_dir())
    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"-{result['lexical_mode']}" if result.get("lexical_mode") else ""
    stem = folder / f"evidence-{result['study']}-{result['index']}{suffix}"
    write_json_atomic(stem.with_suffix(".json"), result)
    stem.with_suffix(".md").write_text(markdown(result))
    return stem.with_suffix(".json"), stem.with_suffix(".md")


__all__ = ["STUDIES", "backends", "markdown", "pool", "quantization", "reranker", "rrf_k", "write"]
