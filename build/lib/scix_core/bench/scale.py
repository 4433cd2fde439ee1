"""The vector store past one corpus: qdrant-edge at 10k … 1M points (``python -m scix_core.bench.scale``).

Points are the real corpus vectors of an index (default ``arxiv``: 90,664 arXiv listings, MiniLM 384-d) and,
past that count, seeded perturbed copies: copy ``c`` of paper ``i`` is ``normalise(v_i + σ·g)`` with ``g`` a
standard normal vector drawn from ``numpy.random.default_rng(seed + c)`` and ``σ = noise / √dim`` (default
noise 0.5: a copy's cosine to its original is ≈ 0.89, so copies crowd the neighbourhoods as a larger real
corpus would, without being duplicates). Each point carries its original's year and categories.

For every size and storage (float32; int8 scalar quantization, quantile 0.99, kept in RAM, searched with
rescoring over 2× oversampling) the bench builds a fresh shard (HNSW m 16, ef_construct 100, the build's own
settings) and reports: build seconds (upsert + optimise), resident memory added, shard size on disk, p50/p95
ms of a top-60 query without and with a payload filter (the most common category and the later half of the
years), and recall@10 against exact brute force over the same points (numpy, float32). Queries are real: paper
titles of the index encoded by its own encoder. The last table extrapolates build time, memory and p50 to
``--extrapolate`` points (the seed design's 1.9M) by a log-log fit over the measured sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from scix_core.config import load_config
from scix_core.embeddings import index_embedding, shared_encoder
from scix_core.search import Searcher
from scix_core.vectors.edge import EdgeVectorStore
from scix_core.vectors.local import LocalVectors
from scix_core.workspace import Workspace


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def points(base: np.ndarray, n: int, noise: float, seed: int) -> np.ndarray:
    """``n`` unit vectors: ``base`` first, then perturbed copies (see the module docstring)."""
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    take = min(n, len(base))
    out[:take] = base[:take]
    sigma = noise / math.sqrt(base.shape[1])
    copy, filled = 1, take
    while filled < n:
        m = min(len(base), n - filled)
        rng = np.random.default_rng(seed + copy)
        block = base[:m] + sigma * rng.standard_normal((m, base.shape[1]), dtype=np.float32)
        out[filled : filled + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
        filled += m
        copy += 1
    return out


def exact_top(
    queries: np.ndarray, matrix: np.ndarray, k: int, mask: np.ndarray | None = None, chunk: int = 200_000
) -> np.ndarray:
    """Row ids of the exact top ``k`` by dot product (unit vectors: cosine), optionally among ``mask``
    rows."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(matrix), chunk):
        s = queries @ matrix[start : start + chunk].T
        if mask is not None:
            s[:, ~mask[start : start + chunk]] = -np.inf
        both_s = np.concatenate([best_s, s], axis=1)
        both_i = np.concatenate(
            [best_i, np.arange(start, start + s.shape[1])[None, :].repeat(len(queries), 0)], axis=1
        )
        top = np.argpartition(-both_s, k - 1, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(both_s, top, 1), np.take_along_axis(both_i, top, 1)
    return best_i


def measure(
    matrix: np.ndarray,
    years: np.ndarray,
    cats: list[list[str]],
    queries: np.ndarray,
    quantized: bool,
    flt_cat: str,
    flt_year: int,
    k: int = 60,
    workdir: Path | None = None,
) -> dict:
    import qdrant_edge as qe

    folder = Path(tempfile.mkdtemp(prefix="scix-scale-", dir=workdir))
    try:
        rss0 = _rss_mb()
        t = time.perf_counter()
        quant = (
            qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
            if quantized
            else None
        )
        store = EdgeVectorStore(
            folder / "shard", matrix.shape[1], quantization=quant
        )  # the build's own settings
        store.upsert(
            range(len(matrix)), matrix, [{"year": int(y), "categories": c} for y, c in zip(years, cats)]
        )
        store.finish()
        shard = store.shard
        build = time.perf_counter() - t
        rss = _rss_mb() - rss0
        qflt = qe.Filter(
            must=[
                qe.FieldCondition(key="categories", match=qe.MatchAny([flt_cat])),
                qe.FieldCondition(key="year", range=qe.RangeFloat(gte=float(flt_year))),
            ]
        )
        params = (
            qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0))
            if quantized
            else qe.SearchParams()
        )
        row = {"build_s": build, "rss_added_mb": rss, "disk_mb": _du_mb(folder)}
        mask = np.array([flt_cat in c and y >= flt_year for c, y in zip(cats, years)])
        row["filter_selectivity"] = float(mask.mean())
        for name, f, m in (("unfiltered", None, None), ("filtered", qflt, mask)):
            laps, found = [], []
            for q in queries:
                t = time.perf_counter()
                hits = shard.query(
                    qe.QueryRequest(limit=k, query=qe.Query.Nearest(q.tolist()), filter=f, params=params)
                )
                laps.append((time.perf_counter() - t) * 1000)
                found.append([int(h.id) for h in hits[:10]])
            truth = exact_top(queries, matrix, 10, m)
            row[f"{name}_p50_ms"] = float(np.percentile(laps, 50))
            row[f"{name}_p95_ms"] = float(np.percentile(laps, 95))
            # fewer than 10 papers may pass the filter: recall over those that do
            wanted = [[i for i in t.tolist() if m is None or m[i]] for t in truth]
            row[f"{name}_recall@10"] = float(
                np.mean([len(set(a) & set(w)) / len(w) if w else 1.0 for a, w in zip(found, wanted)])
            )
        shard.close()
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fit(sizes: list[int], values: list[float], target: int) -> float:
    x, y = np.log(sizes), np.log(np.maximum(values, 1e-9))
    slope, icept = np.polyfit(x, y, 1)
    return float(math.exp(icept + slope * math.log(target)))


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default="arxiv")
    ap.add_argument(
        "--points", type=int, default=1_000_000, help="the largest size (the sizes are 10k, 100k, this)"
    )
    ap.add_argument("--sizes", help="comma list of sizes instead (e.g. 10000,100000,1000000)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--noise", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--storage", default="float32,int8", help="float32, int8 or both")
    ap.add_argument("--extrapolate", type=int, default=1_900_000)
    ap.add_argument("--json", type=Path, help="write the rows as JSON")
    args = ap.parse_args()
    cfg = load_config()
    searcher = Searcher(args.index, cfg)
    base = LocalVectors.open(
        searcher.build_dir,
        searcher.manifest,
        Workspace(cfg.home).embedding_cache(searcher.manifest["model_slug"]),
    ).matrix
    base = np.asarray(base, dtype=np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    papers = list(searcher.store.papers())
    years = np.array([p.year or 0 for p in papers])
    cats = [list(p.categories) for p in papers]
    rng = np.random.default_rng(args.seed)
    titles = [papers[i].title for i in rng.choice(len(papers), args.queries, replace=False)]
    encoder = shared_encoder(index_embedding(cfg.embedding, searcher.manifest), cfg.home)
    queries = encoder.encode(titles).astype(np.float32)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else sorted({10_000, 100_000, args.points})
    flt_cat = Counter(c for cs in cats for c in cs).most_common(1)[0][0]
    flt_year = int(np.median(years[years > 0])) if (years > 0).any() else 0
    console = Console(width=160)
    rows = []
    for n in sizes:
        matrix = points(base, n, args.noise, args.seed)
        reps = np.arange(n) % len(base)
        for storage in args.storage.split(","):
            t = time.perf_counter()
            row = measure(
                matrix, years[reps], [cats[i] for i in reps], queries, storage == "int8", flt_cat, flt_year
            )
            rows.append({"points": n, "storage": storage, **row})
            console.print(
                f"{n:,} {storage}: {json.dumps({k: round(v, 3) for k, v in row.items()})} "
                f"({time.perf_counter() - t:.0f} s)",
                highlight=False,
            )
        del matrix
    table = Table(
        title=f"qdrant-edge, {args.index} vectors + perturbed copies, {len(queries)} title queries, top 60; "
        f"filter: category {flt_cat} and year >= {flt_year}"
    )
    cols = {
        "points": "points",
        "storage": "storage",
        "build_s": "build s",
        "rss_added_mb": "RSS+ MB",
        "disk_mb": "disk MB",
        "unfiltered_p50_ms": "p50 ms",
        "unfiltered_p95_ms": "p95 ms",
        "unfiltered_recall@10": "R@10",
        "filtered_p50_ms": "filt. p50",
        "filtered_p95_ms": "filt. p95",
        "filtered_recall@10": "filt. R@10",
        "filter_selectivity": "selectivity",
    }
    for c in cols.values():
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(
            *[f"{r[c]:,}" if c == "points" else str(r[c]) if c == "storage" else f"{r[c]:.3f}" for c in cols]
        )
    console.print(table)
    for storage in args.storage.split(","):
        mine = [r for r in rows if r["storage"] == storage]
        if len(mine) >= 2:
            ns = [r["points"] for r in mine]
            est = {
                m: _fit(ns, [r[m] for r in mine], args.extrapolate)
                for m in ("build_s", "rss_added_mb", "unfiltered_p50_ms", "filtered_p50_ms")
            }
            console.print(
                f"extrapolated to {args.extrapolate:,} points ({storage}, log-log fit over {ns}): "
                + ", ".join(f"{m} {v:,.1f}" for m, v in est.items()),
                highlight=False,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "index": args.index,
                    "noise": args.noise,
                    "seed": args.seed,
                    "filter": {"category": flt_cat, "year_min": flt_year},
                    "rows": rows,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
