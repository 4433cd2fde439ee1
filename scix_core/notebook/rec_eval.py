"""Recommendation evaluation view: the ``scix eval-recs`` tables and plots.

Per run: recall, nDCG and hit rate at every cutoff, diversity, cluster
and catalogue coverage, Δ recall at the first cutoff against the baseline
with Holm-adjusted p and the gate; the per-tier tables (training saves
truncated to 1, 3, 5, all); the MMR λ sweep as a recall-versus-diversity
curve; each tuned peer's chosen setting and validation table; the co-save
weights chosen for the cascade's tiers on the same kind of split; the LightGBM
feature audit. From a saved ``--json`` report, or evaluated now on a sample
of users (any protocol: hold-out share, ``train_size`` saves a user, or ``new_items``: the cold-item
protocol, papers nobody saved).

    RecEvalView(report="reports/eval-recs-citeulike-a.json")
    RecEvalView(index="citeulike-a", users=200, runs="tier1,content-knn,rp3beta,mmr_0.0,mmr_0.6,mmr_1.0")
    RecEvalView(index="citeulike-a", users=200, runs="tier1,rp3beta", train_size=10, cutoffs="50,100")
    RecEvalView(index="citeulike-a", users=200, runs="tier1,content-knn,svm,cf-from-text", new_items=0.2)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from scix_core.config import Config, load_config
from scix_core.evaluate import rec_runs
from scix_core.evaluate.recs import evaluate_recs, random_line, tested_per_tier, tier_table_title
from scix_core.notebook import charts
from scix_core.notebook.frontend import Rendered, View, banner, heading, table
from scix_core.train.scorer import in_run_scorer


def _load(
    report: str | Path | None,
    index: str | None,
    users: int | None,
    runs,
    min_saves: int,
    config: Config,
    train_size: int | None = None,
    cutoffs: str | Sequence[int] = "10",
    new_items: float | None = None,
) -> dict:
    if report:
        return json.loads(Path(report).read_text())

    names = (
        rec_runs.DEFAULT_RUNS
        if not runs
        else tuple(r.strip() for r in runs.split(","))
        if isinstance(runs, str)
        else tuple(runs)
    )
    cuts = tuple(int(k) for k in cutoffs.split(",")) if isinstance(cutoffs, str) else tuple(cutoffs)
    return evaluate_recs(
        index,
        config,
        users=users,
        runs=names,
        min_saves=min_saves,
        permutations=2000,
        progress=False,
        train_size=train_size,
        cutoffs=cuts,
        scorer_trainer=in_run_scorer,
        new_share=new_items,
    ).to_dict()


def sweep_figure(runs: dict, k: int = 10):
    points = sorted(
        (float(r.split("_")[1]), m[f"recall@{k}"], m[f"ild@{k}"])
        for r, m in runs.items()
        if r.startswith("mmr_")
    )
    fig = charts._figure(6.0, 4.2)
    ax = fig.subplots()
    ax.plot([p[2] for p in points], [p[1] for p in points], marker="o")
    for lam, recall, ild in points:
        ax.annotate(f"λ={lam:.1f}", (ild, recall), fontsize=7, textcoords="offset points", xytext=(4, 2))
    ax.set_xlabel(f"intra-list diversity @{k}")
    ax.set_ylabel(f"recall@{k}")
    ax.set_title("MMR λ sweep: relevance against diversity", fontsize=10)
    return fig


def render_rec_eval(report: dict) -> Rendered:
    setup = report["setup"]
    base = setup.get("baseline")
    k = setup.get("cutoffs", [10])[0]
    primary = f"recall@{k}"
    protocol = (
        f"{setup['train_size']} training saves a user"
        if setup.get("train_size")
        else f"hold-out {setup['holdout']:.0%}"
    )
    if setup.get("protocol") == "cold-item":
        protocol = (
            f"cold items: {setup['new_items']:.0%} of the catalogue new ({setup['new_papers']:,} papers), "
            "ranked among the new only"
        )
    parts = [
        heading(
            f"{report['index']}: {report['n_users']} users, {protocol} ({setup['split']}), "
            f"seed {setup['seed']}, baseline {base}"
        )
    ]
    parts += [
        banner(f"{run}: not applicable under this protocol — {why}", "note")
        for run, why in setup.get("not_applicable", {}).items()
    ]
    by = {
        c["candidate"]: c for c in report["comparisons"] if c["metric"] == primary and c["baseline"] == base
    }
    rows = []
    for run, means in report["runs"].items():
        c, g = by.get(run), report["gates"].get(run)
        rows.append(
            {
                "run": run,
                **means,
                "catalogue": report["catalogue_coverage"][run],
                "Δ recall": c["delta"] if c else None,
                "p_adj": c["p_adj"] if c else None,
                "gate": (g["decision"] if g else "—"),
            }
        )
    parts.append(table(rows, "scix-rec-eval"))
    if random_line(setup):
        parts.append(banner(random_line(setup), "note"))
    for trunc, block in report.get("per_tier", {}).items():
        title = tier_table_title(trunc, block, report["n_users"], report.get("setup", {}))
        parts.append(heading(title[0].upper() + title[1:]))
        tests = {(c["baseline"], c["metric"]): c for c in block.get("comparisons", [])}
        rows = []
        for r, m in block["runs"].items():
            row = {"run": r, **m}
            for metric in tested_per_tier(setup.get("cutoffs", [k])):
                label = "coverage" if metric == "cluster_coverage" else metric
                c = tests.get((r, metric))  # the cascade against this peer, Holm over the table
                row[f"cascade Δ {label}"] = c["delta"] if c else None
                row[f"p_adj {label}"] = c["p_adj"] if c else None
            rows.append(row)
        parts.append(table(rows, "scix-rec-tier"))
    for name, decision in report["gates"].items():
        if " over " in name:
            parts.append(
                banner(
                    f"gate {name}: {decision['decision'].upper()} — {'; '.join(decision['reasons'])}",
                    "ok" if decision["decision"] == "ship" else "note",
                )
            )
    tuned = setup.get("tuned") or {}
    if tuned:
        parts.append(heading(f"Peers tuned on a validation split of the training saves (recall@{k})"))
        parts.append(
            table(
                [
                    {
                        "peer": peer,
                        "chosen": json.dumps(t["params"], sort_keys=True),
                        "validation": max(v["recall"] for v in t["validation"] if v["recall"] is not None),
                        "settings": len(t["validation"]),
                        "past the grid": sum(1 for v in t["validation"] if v.get("beyond_grid")),
                        "still on the edge": ", ".join(t.get("on_edge", ())),
                        "cached": t["cached"],
                    }
                    for peer, t in tuned.items()
                ],
                "scix-rec-tuned",
            )
        )
    chosen = setup.get("tier_weights") or {}
    asked = [(label, chosen[label]) for label in ("1", "3", "all") if isinstance(chosen.get(label), dict)]
    if asked:
        parts.append(
            heading(
                "Co-save weights chosen on a validation split of the training saves "
                f"(recall@{asked[0][1].get('k', 10)})"
            )
        )
        parts.append(
            table(
                [
                    {
                        "kept saves": label,
                        "users × asks": f"{c.get('users')} × {c.get('queries', 1)}",
                        "taken": json.dumps(c.get("taken"), sort_keys=True),
                        "configured": json.dumps(c.get("configured"), sort_keys=True),
                        "configured recall": c.get("configured_recall"),
                        "best": json.dumps(c.get("best"), sort_keys=True),
                        "best recall": c.get("best_recall"),
                        "p": c.get("p"),
                        "why not": c.get("reason", ""),
                    }
                    for label, c in asked
                ],
                "scix-rec-weights",
            )
        )
    audit = setup.get("lgbm_audit")
    if audit:
        parts.append(heading("LightGBM feature audit (tier1-lgbm)"))
        parts.append(table([{"feature": f, **a} for f, a in audit["features"].items()], "scix-audit"))
        parts += [banner(e) for e in audit["errors"]]
    runs = list(report["runs"])
    verdicts = {
        c["candidate"]: ("better" if c["delta"] > 0 else "worse") if c["significant"] else "n.s."
        for c in report["comparisons"]
        if c["metric"] == primary and c["baseline"] == base
    }
    figures = [
        charts.metric_by_run(
            runs,
            [report["runs"][r][primary] for r in runs],
            primary,
            base,
            {**verdicts, **({base: "baseline"} if base else {})},
        )
    ]
    if any(r.startswith("mmr_") for r in runs):
        figures.append(sweep_figure(report["runs"], k))
    return Rendered("".join(parts), tuple(figures))


class RecEvalView(View):
    def __init__(
        self,
        report: str | Path | None = None,
        *,
        index: str | None = None,
        users: int | None = 200,
        runs: str | Sequence[str] | None = None,
        min_saves: int = 5,
        config: Config | None = None,
        train_size: int | None = None,
        cutoffs: str | Sequence[int] = "10",
        new_items: float | None = None,
    ):
        self.report = _load(
            report, index, users, runs, min_saves, config or load_config(), train_size, cutoffs, new_items
        )

    def render(self) -> Rendered:
        return render_rec_eval(self.report)

    def _build_widget(self):
        import ipywidgets as w

        self.output = w.Output()
        return w.VBox([self.output])
