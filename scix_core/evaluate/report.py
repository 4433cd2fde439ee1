"""The evaluation report: one JSON object, and the same as console tables."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scix_core.evaluate.metrics import METRICS
from scix_core.evaluate.significance import Comparison, GateDecision
from scix_core.types import Ranking
from scix_core.version import code_version
from scix_core.workspace import Workspace, read_json, write_json_atomic, write_text_atomic


@dataclass(frozen=True)
class EvalReport:
    n_queries: int
    runs: dict[str, dict[str, float]]  # run -> metric -> mean
    per_query: dict[str, dict[str, dict[str, float]]]  # run -> metric -> query id -> value
    comparisons: tuple[Comparison, ...]
    provenance: dict[str, dict]
    dropped_lanes: dict[str, dict[str, int]]
    buckets: dict[str, dict]
    seconds: dict[str, float]
    skipped: dict[str, str] = field(default_factory=dict)
    gates: dict[str, GateDecision] = field(default_factory=dict)
    setup: dict = field(default_factory=dict)

    def to_dict(self, per_query: bool = False) -> dict:
        out = {
            "n_queries": self.n_queries,
            "runs": self.runs,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "provenance": {
                r: {k: v for k, v in p.items() if k != "per_query"} for r, p in self.provenance.items()
            },
            "dropped_lanes": self.dropped_lanes,
            "buckets": self.buckets,
            "seconds": self.seconds,
            "skipped": self.skipped,
            "gates": {c: g.to_dict() for c, g in self.gates.items()},
            "setup": self.setup,
        }
        if per_query:
            out["per_query"] = self.per_query
        return out

    def write_json(self, path: Path | str, reuse_key: str | None = None) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(path), {**self.to_dict(), **({"reuse_key": reuse_key} if reuse_key else {})})

    def print(self, console) -> None:
        from rich.table import Table

        table = Table(
            title=f"{self.setup.get('gold', 'gold set')}: {self.n_queries} queries, "
            f"index {self.setup.get('index')}"
        )
        metrics = self.metrics
        for col in ("run", *metrics, "seconds", "dropped lanes"):
            table.add_column(col, no_wrap=True)
        external = self.setup.get("external_runs", {})
        for run, values in self.runs.items():
            dropped = ", ".join(f"{lane}×{n}" for lane, n in self.dropped_lanes.get(run, {}).items()) or "-"
            seconds = "external" if run in external else f"{self.seconds.get(run, 0):.1f}"
            table.add_row(run, *(f"{values[m]:.4f}" for m in metrics), seconds, dropped)
        console.print(table)
        for run, about in external.items():
            console.print(
                f"{run}: TREC run {about['path']}, {about['queries']} queries, depth {about['depth']}; "
                f"{about['unknown_paper_ids']} lines name a paper the index does not hold; "
                f"{about['gold_queries_without_a_line']} gold queries have no line (scored 0)",
                highlight=False,
            )
        for run, why in self.skipped.items():
            console.print(f"[yellow]{run} not run:[/] {why}", highlight=False)
        for run, alphas in self.setup.get("score_fusion_alpha", {}).items():
            console.print(
                f"{run}: dense weight α by fold (chosen on the other folds) "
                f"{', '.join(f'{a:g}' for a in alphas)}",
                highlight=False,
            )
        for run, weights in self.setup.get("score_fusion_weights", {}).items():
            console.print(
                f"{run}: lane weights by fold (chosen on the other folds) "
                + "; ".join(" ".join(f"{lane} {w:g}" for lane, w in each.items()) for each in weights),
                highlight=False,
            )
        if self.comparisons:
            comp = Table(
                title="paired comparisons (randomisation test, Holm-adjusted over this table; "
                "t-test p beside)"
            )
            for col in ("baseline", "candidate", "metric", "Δ", "p", "p_adj", "p (t)", "significant"):
                comp.add_column(col, no_wrap=True)
            for c in self.comparisons:
                comp.add_row(
                    c.baseline,
                    c.candidate,
                    c.metric,
                    f"{c.delta:+.4f}",
                    f"{c.p:.4f}",
                    f"{c.p_adj:.4f}",
                    f"{c.p_t:.4f}",
                    "yes" if c.significant else "no",
                )
            console.print(comp)
        prov = Table(title="lane provenance of relevant top-10 hits (share had / share only)")
        lanes = sorted({lane for p in self.provenance.values() for lane in p["share"]})
        for col in ("run", "relevant in top 10", *lanes):
            prov.add_column(col, no_wrap=True)
        for run, p in self.provenance.items():
            prov.add_row(
                run,
                str(p["relevant_in_top10"]),
                *(f"{p['share'].get(ln, 0):.2f} / {p['only'].get(ln, 0):.2f}" for ln in lanes),
            )
        console.print(prov)
        for candidate, decision in self.gates.items():
            colour = "green" if decision.ship else "red"
            console.print(
                f"gate {self.setup.get('baseline')} -> {candidate}: [{colour}]"
                f"{'SHIP' if decision.ship else 'NO-SHIP'}[/] — {'; '.join(decision.reasons)}",
                highlight=False,
            )

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self.setup.get("metrics") or METRICS)

    def table(self, fmt: str = "md") -> str:
        """The runs × metrics table as a paper shows it (``md`` or ``latex``): :func:`paper_table`."""
        return paper_table(self.runs, self.comparisons, self.metrics, self.setup.get("baseline"), fmt)

    @staticmethod
    def load(path: Path | str) -> dict:
        return json.loads(Path(path).read_text())


TABLE_FORMATS = ("md", "latex")


def paper_table(
    runs: Mapping[str, Mapping[str, float]],
    comparisons,
    metrics: tuple[str, ...],
    baseline: str | None,
    fmt: str = "md",
) -> str:
    """Each run's mean of each metric, the best of a column in bold, † where a run is significantly better
    than ``baseline`` and ‡ where significantly worse (the paired randomisation test, Holm-adjusted over
    the comparison table, p < 0.05)."""
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"table format {fmt!r}: one of {', '.join(TABLE_FORMATS)}")
    marks = {(c.candidate, c.metric): ("†" if c.delta > 0 else "‡") for c in comparisons if c.significant}
    best = {m: max(values[m] for values in runs.values()) for m in metrics} if runs else {}
    latex = fmt == "latex"

    def cell(run: str, metric: str) -> str:
        value = f"{runs[run][metric]:.4f}"
        if runs[run][metric] == best[metric]:
            value = rf"\textbf{{{value}}}" if latex else f"**{value}**"
        mark = marks.get((run, metric), "")
        if latex and mark:
            mark = r"$^{\dagger}$" if mark == "†" else r"$^{\ddagger}$"
        return value + mark

    def name(run: str) -> str:
        text = run.replace("_", r"\_") if latex else run
        return f"{text} (baseline)" if run == baseline else text

    note = (
        f"† / ‡: significantly better / worse than {baseline} (paired randomisation test, Holm-adjusted "
        "p < 0.05); best of each column in bold."
        if baseline
        else "Best of each column in bold."
    )
    if latex:
        head = " & ".join(["run", *(m.replace("_", r"\_") for m in metrics)])
        rows = [" & ".join([name(r), *(cell(r, m) for m in metrics)]) + r" \\" for r in runs]
        return "\n".join(
            [
                r"\begin{tabular}{l" + "r" * len(metrics) + "}",
                r"\toprule",
                head + r" \\",
                r"\midrule",
                *rows,
                r"\bottomrule",
                r"\end{tabular}",
                "% " + note.replace("† / ‡", "dagger / double dagger"),
            ]
        )
    lines = ["| " + " | ".join(["run", *metrics]) + " |", "|---" + "|---:" * len(metrics) + "|"]
    lines += ["| " + " | ".join([name(r), *(cell(r, m) for m in metrics)]) + " |" for r in runs]
    return "\n".join([*lines, "", note])


def reuse_key(config, index: str, gold, runs, baseline, reranker, permutations, sample) -> str | None:
    """What a saved report depends on, hashed: the index build, the gold set, the runs and settings, the code
    commit. None (never reuse) when the working tree has uncommitted changes or is not a git checkout."""
    import dataclasses
    import hashlib

    code = code_version()
    if not code["git_commit"] or code["git_dirty"]:
        return None
    manifest = read_json(Workspace(config.home).index_dir(index) / "manifest.json")
    payload = {
        "build": manifest.get("build_key"),
        "corpus": manifest.get("corpus_hash"),
        "gold": gold.name,
        "queries": dict(gold.queries),
        "qrels": {q: dict(v) for q, v in gold.qrels.items()},
        "runs": list(runs),
        "baseline": baseline,
        "reranker": reranker,
        "permutations": permutations,
        "sample": sample,
        "search": dataclasses.asdict(config.search),
        "code": code,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def saved_key(path: Path | str) -> str | None:
    try:
        return json.loads(Path(path).read_text()).get("reuse_key")
    except (OSError, ValueError, AttributeError):
        return None


def _strictly_decreasing(scores: Mapping[str, float]) -> dict[str, float]:
    """Each score in single precision, at most the one just below the score before it: trec_eval (through
    pytrec_eval) tells scores apart only in single precision, and orders a tie by paper id, not by rank."""
    out, last = {}, np.float32(np.inf)
    for paper, score in scores.items():
        last = min(np.float32(score), np.nextafter(last, np.float32(-np.inf)))
        out[paper] = float(last)
    return out


def write_trec_runs(rankings: Mapping[str, Mapping[str, Ranking]], folder: Path | str) -> list[Path]:
    """Every run as a TREC run file ``FOLDER/RUN.trec`` (``qid Q0 paper rank score run``), for trec_eval, ranx
    or a fusion tried later without searching again. trec_eval orders by score and a tie by paper id, not by
    rank: a score tied with the one above is written a single-precision step below it, so the file scores
    exactly what the report says."""

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for run, per_query in rankings.items():
        lines = [
            f"{q} Q0 {paper} {rank} {score:.9g} {run}"
            for q, ranking in per_query.items()
            for rank, (paper, score) in enumerate(_strictly_decreasing(ranking.scores()).items(), 1)
        ]
        path = folder / f"{run}.trec"
        write_text_atomic(path, "".join(line + "\n" for line in lines))
        paths.append(path)
    return paths
