"""Fusion sweep and evidence views: the ``scix eval --sweep`` table with Δ, p, adjusted p and
ship/no-ship verdicts, metric-by-run plots, per-bucket tables; the evidence studies' tables and plots.

    SweepView(report="reports/eval-scifact-train-and.json")      # a saved sweep
    SweepView(index="scifact", gold="train", sample=40)           # run one now
    EvidenceView(index="scifact", studies="quantization,rrf-k")
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scix_core.config import Config, load_config
from scix_core.errors import ConfigError, UnknownNameError
from scix_core.evaluate import ALL_RUNS, EvalReport, config_runs, evaluate, evidence
from scix_core.evaluate.evidence import markdown
from scix_core.evaluate.gold import for_index
from scix_core.evaluate.metrics import METRICS, PRIMARY, parse_metric, parse_metrics
from scix_core.evaluate.paths import reports_dir
from scix_core.notebook import charts
from scix_core.notebook.frontend import Rendered, View, banner, heading, table


def _verdicts(report: dict, metric: str) -> dict[str, str]:
    out = {report["setup"].get("baseline"): "baseline"}
    for c in report["comparisons"]:
        if c["metric"] == metric:
            out[c["candidate"]] = ("better" if c["delta"] > 0 else "worse") if c["significant"] else "n.s."
    return out


def report_metrics(report: dict) -> tuple[str, ...]:
    """The metrics a saved report holds (``--metrics``; older reports: the defaults)."""
    return tuple(report.get("setup", {}).get("metrics") or METRICS)


def render_sweep(report: dict, metric: str | None = None) -> Rendered:
    setup, runs = report.get("setup", {}), report["runs"]
    metrics = report_metrics(report)
    metric = metric if metric in metrics else setup.get("primary", metrics[0])
    base = setup.get("baseline")
    parts = [
        heading(
            f"Sweep on {setup.get('gold')} ({report['n_queries']} queries), index {setup.get('index')}, "
            f"baseline {base}"
        ),
        banner(
            f"lexical {setup.get('lexical_backend')} {setup.get('lexical_mode')}, depth "
            f"{setup.get('depth')}, "
            f"pool {setup.get('lexical_pool')}, model {setup.get('model')}, "
            f"{setup.get('permutations')} permutations (paired randomisation test), Holm over the table"
            + (
                f", sample {setup['sample']} (seed {setup.get('sample_seed')})" if setup.get("sample") else ""
            ),
            "note",
        ),
    ]
    dropped = {r: d for r, d in report.get("dropped_lanes", {}).items() if d}
    if dropped:
        parts.append(
            banner(
                "DEGRADED — lanes dropped during the runs: "
                + "; ".join(
                    f"{r}: {', '.join(f'{ln}×{n}' for ln, n in d.items())}" for r, d in dropped.items()
                )
            )
        )
    comps = {(c["candidate"], c["metric"]): c for c in report["comparisons"]}
    gates = report.get("gates", {})
    rows = []
    for run, values in runs.items():
        c = comps.get((run, metric))
        gate = gates.get(run)
        rows.append(
            {
                "run": run,
                **{m: values[m] for m in metrics},
                f"Δ {metric}": c["delta"] if c else None,
                "p": c["p"] if c else None,
                "p_adj": c["p_adj"] if c else None,
                "p (t-test)": c["p_t"] if c else None,
                "significant": ("yes" if c["significant"] else "no") if c else "",
                "verdict": (gate["decision"].upper() if gate else ("baseline" if run == base else "")),
                "seconds": report.get("seconds", {}).get(run),
            }
        )
    parts.append(table(rows, "scix-sweep"))
    reasons = [
        f"{run}: {gate['decision'].upper()} — {'; '.join(gate['reasons'])}" for run, gate in gates.items()
    ]
    if reasons:
        parts.append(
            heading(
                "Rollout gate (ship only on a significant primary-metric win with no significant regression)"
            )
        )
        parts.append(
            "".join(banner(r, "ok" if r.split(": ", 1)[1].startswith("SHIP") else "note") for r in reasons)
        )
    for run, why in report.get("skipped", {}).items():
        parts.append(banner(f"{run} not run: {why}", "note"))
    for run, about in setup.get("external_runs", {}).items():
        parts.append(
            banner(
                f"{run}: an external TREC run ({about['path']}), {about['queries']} queries, depth "
                f"{about['depth']}; {about['unknown_paper_ids']} lines name a paper the index does not hold; "
                f"{about['gold_queries_without_a_line']} gold queries have no line (scored 0)",
                "note",
            )
        )
    prov = report.get("provenance", {})
    if prov:
        lanes = sorted({lane for p in prov.values() for lane in p.get("share", {})})
        parts.append(heading("Lane provenance of relevant top-10 hits (share had / share only)"))
        parts.append(
            table(
                [
                    {
                        "run": r,
                        "relevant in top 10": p["relevant_in_top10"],
                        **{
                            lane: f"{p['share'].get(lane, 0):.2f} / {p['only'].get(lane, 0):.2f}"
                            for lane in lanes
                        },
                    }
                    for r, p in prov.items()
                ],
                "scix-provenance",
            )
        )
    buckets = report.get("buckets", {})
    if buckets:
        names = sorted({b for per in buckets.values() for b in per})
        parts.append(heading(f"{metric} per bucket"))
        parts.append(
            table(
                [
                    {
                        "bucket": b,
                        "queries": next(iter(buckets.values()))[b]["n"],
                        **{r: buckets[r][b][metric] for r in runs if b in buckets.get(r, {})},
                    }
                    for b in names
                ],
                "scix-sweep-buckets",
            )
        )
    figure = charts.metric_by_run(
        list(runs), [runs[r][metric] for r in runs], metric, base, _verdicts(report, metric)
    )
    return Rendered("".join(parts), (figure,))


class SweepView(View):
    def __init__(
        self,
        report: Any = None,
        *,
        index: str | None = None,
        gold: str | None = None,
        runs: str | Sequence[str] = "sweep",
        baseline: str = "hybrid",
        sample: int | None = 40,
        lexical_mode: str | None = None,
        permutations: int = 2_000,
        config: Config | None = None,
        metric: str | None = None,
        config_runs: Sequence[str] = (),
        metrics: str | Sequence[str] | None = None,
        run_files: dict[str, str] | None = None,
    ):
        """When evaluating: ``config_runs`` (``scix eval --run`` specs, ``NAME:KEY=VALUE[,KEY=VALUE]``),
        ``metrics`` (``--metrics``: the project's or any ir-measures measure, the first primary) and
        ``run_files`` (``--run-file``: name -> a TREC run from another system). ``metric``: the one plotted
        (default: the report's primary)."""
        many = isinstance(report, (list, tuple))
        chosen = (
            None if not metrics else parse_metrics(metrics if isinstance(metrics, str) else ",".join(metrics))
        )
        self.reports = [
            self._load(
                r,
                index,
                gold,
                runs,
                baseline,
                sample,
                lexical_mode,
                permutations,
                config,
                tuple(config_runs),
                chosen,
                dict(run_files or {}),
            )
            for r in (report if many else [report])
        ]
        self.metrics = tuple(dict.fromkeys(m for r in self.reports for m in report_metrics(r)))
        metric = parse_metric(metric) if metric else self.reports[0].get("setup", {}).get("primary", PRIMARY)
        if metric not in self.metrics:
            raise UnknownNameError("metric", metric, self.metrics)
        self.metric = metric

    def _build_widget(self):
        import ipywidgets as w

        control = w.Dropdown(options=list(self.metrics), value=self.metric, description="metric")
        control.observe(self._pick, names="value")
        self.output = w.Output()
        return w.VBox([control, self.output])

    @staticmethod
    def _load(
        report, index, gold, runs, baseline, sample, lexical_mode, permutations, config, specs, metrics, files
    ) -> dict:
        if isinstance(report, EvalReport):
            return report.to_dict()
        if isinstance(report, dict):
            return report
        if report:
            path = Path(report)
            if not path.exists():
                raise ConfigError(
                    f"no sweep report at {path}: run `scix eval ... --json {path}` or `make run`"
                )
            return json.loads(path.read_text())
        if not index:
            raise ConfigError("SweepView needs a saved report or an index to evaluate")
        cfg = config or load_config()
        cfg = cfg.replace(**{"search.lexical_mode": lexical_mode}) if lexical_mode else cfg
        names = (
            ALL_RUNS
            if runs == "sweep"
            else tuple(r.strip() for r in (runs.split(",") if isinstance(runs, str) else runs))
        )
        g = for_index(index, cfg, gold or None)
        configured = config_runs(specs, config=cfg, named=ALL_RUNS)
        return evaluate(
            index,
            g,
            names,
            baseline,
            cfg,
            sample=sample or None,
            permutations=permutations,
            configured=configured,
            metrics=metrics or METRICS,
            run_files={name: Path(path) for name, path in files.items()},
        ).to_dict()

    def _pick(self, change) -> None:
        self.metric = change["new"]
        self.refresh()

    def render(self) -> Rendered:
        return Rendered.concat([render_sweep(r, self.metric) for r in self.reports])


# --- evidence ----------------------------------------------------------------------------------------
PRIMARY_COLUMNS = ("ndcg@10", "overlap@20", "recall@10_vs_float32")


def render_evidence(result: dict) -> Rendered:
    rows = result["rows"]
    meta = {
        k: v for k, v in result.items() if k not in ("rows", "study", "index") and not isinstance(v, dict)
    }
    parts = [
        heading(f"Evidence: {result['study']} on {result['index']}"),
        banner(", ".join(f"{k}: {v}" for k, v in meta.items()), "note"),
    ]
    if result.get("dropped_lanes") and any(result["dropped_lanes"].values()):
        parts.append(banner(f"DEGRADED — lanes dropped during the runs: {result['dropped_lanes']}"))
    parts.append(table([{"arm": arm, **values} for arm, values in rows.items()], "scix-evidence"))
    if result.get("gate"):
        parts.append(
            banner(
                f"gate: {result['gate']['decision'].upper()} — {'; '.join(result['gate']['reasons'])}",
                "ok" if result["gate"]["decision"] == "ship" else "note",
            )
        )
    column = next(
        (c for c in PRIMARY_COLUMNS if any(isinstance(v.get(c), (int, float)) for v in rows.values())), None
    )
    figures = ()
    if column:
        arms = [a for a, v in rows.items() if isinstance(v.get(column), (int, float))]
        figures = (
            charts.grouped_bars(
                arms,
                {column: [rows[a][column] for a in arms]},
                f"{result['study']} on {result['index']}: {column}",
                column,
            ),
        )
    return Rendered(
        "".join(parts)
        + f"<details><summary>markdown</summary><pre>{_escape(markdown(result))}</pre></details>",
        figures,
    )


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def evidence_results(
    index: str,
    studies: str | Sequence[str],
    folder: Path | str | None = None,
    *,
    run_missing: bool = True,
    config: Config | None = None,
    max_queries: int | None = 100,
    reranker: str | None = None,
    lexical_mode: str | None = None,
) -> list[dict]:
    """Saved results of each study for ``index`` (``folder/evidence-STUDY-INDEX*.json``); a study with none
    saved is run now with small parameters when ``run_missing``."""

    folder = Path(folder or reports_dir())
    names = [s.strip() for s in studies.split(",")] if isinstance(studies, str) else list(studies)
    cfg = config or load_config()
    cfg = cfg.replace(**{"search.lexical_mode": lexical_mode}) if lexical_mode else cfg
    runners = {
        "quantization": lambda: evidence.quantization(index, cfg, max_queries=max_queries),
        "pool": lambda: evidence.pool(index, cfg, n_queries=max_queries or 200),
        "rrf-k": lambda: evidence.rrf_k(index, cfg, permutations=2_000, sample=max_queries),
        "reranker": lambda: evidence.reranker(index, reranker, cfg) if reranker else None,
    }
    out = []
    for name in [n for n in names if n]:
        if name not in evidence.STUDIES:
            raise UnknownNameError("evidence study", name, list(evidence.STUDIES))
        suffix = (
            f"-{lexical_mode}" if lexical_mode and name == "rrf-k" else ""
        )  # only rrf-k depends on the mode
        saved = sorted(folder.glob(f"evidence-{name}-{index}{suffix}.json"))
        if not suffix:
            saved += sorted(folder.glob(f"evidence-{name}-{index}-*.json"))
        if saved:
            out += [json.loads(p.read_text()) for p in saved]
        elif run_missing:
            result = runners[name]()
            if result is None:
                raise ConfigError("the reranker study needs a reranker name (see `scix train-reranker`)")
            out.append(result)
    return out


class EvidenceView(View):
    def __init__(
        self,
        results: Sequence[dict] | None = None,
        *,
        index: str | None = None,
        studies: str | Sequence[str] = "quantization,rrf-k",
        folder: Path | str | None = None,
        run_missing: bool = True,
        config: Config | None = None,
        max_queries: int | None = 100,
        reranker: str | None = None,
        lexical_mode: str | None = None,
    ):
        if results is None:
            if not index:
                raise ConfigError("EvidenceView needs results or an index")
            results = evidence_results(
                index,
                studies,
                folder,
                run_missing=run_missing,
                config=config,
                max_queries=max_queries,
                reranker=reranker,
                lexical_mode=lexical_mode,
            )
        self.results = list(results)
        self.choice = -1  # every study

    def _build_widget(self):
        import ipywidgets as w

        labels = [
            f"{r['study']} on {r['index']}" + (f" ({r['lexical_mode']})" if r.get("lexical_mode") else "")
            for r in self.results
        ]
        control = w.Dropdown(
            options=[("every study", -1)] + [(ln, i) for i, ln in enumerate(labels)], description="study"
        )
        control.observe(self._pick, names="value")
        self.output = w.Output()
        return w.VBox([control, self.output])

    def _pick(self, change) -> None:
        self.choice = change["new"]
        self.refresh()

    def render(self) -> Rendered:
        chosen = self.results if self.choice < 0 else [self.results[self.choice]]
        if not chosen:
            return Rendered(banner("no evidence results: run `scix evidence STUDY --index NAME`", "note"))
        return Rendered.concat([render_evidence(r) for r in chosen])
