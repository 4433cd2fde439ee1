"""The `scix tune` report: the CV table of every candidate with its interval, tuning itself and each
choice against the defaults with their paired tests, each fold's choice, and the gate's decision.

    TuneView("reports/tune/scifact.json")                 # a saved run (`scix tune` writes it there)
    TuneView(index="scifact", space={"query_epochs": []})  # tune now (nothing written)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scix_core.config import Config, load_config
from scix_core.evaluate.paths import tune_path
from scix_core.notebook import charts
from scix_core.notebook.frontend import Rendered, View, banner, heading, table
from scix_core.tune import load_space, tune
from scix_core.tune.space import space_from


def _load(report: Any, index: str | None, space: Any, folds: int, config: Config | None) -> dict:
    if isinstance(report, Mapping):
        return dict(report)
    if report:
        return json.loads(Path(report).read_text())
    if index and tune_path(index).exists():
        return json.loads(tune_path(index).read_text())
    chosen = space_from(space) if isinstance(space, Mapping) else load_space(space)
    return tune(
        index,
        config=config or load_config(),
        space=chosen,
        folds=folds,
        permutations=2000,
        progress=False,
        write=False,
    ).to_dict()


def render_tune(report: Mapping, top: int = 25) -> Rendered:
    primary, metrics = report["primary"], report["metrics"]
    parts = [
        heading(
            f"scix tune {report['index']}: {report['gold']}, {report['n_queries']} queries, "
            f"{report['folds']}-fold cross-validation, {len(report['table'])} candidates, "
            f"{report['seconds']:.0f} s"
        )
    ]
    decision = report["decision"]
    verdict = decision["decision"].upper()
    parts.append(
        banner(
            f"gate (tuning itself, nested, against the defaults): {verdict} — "
            + "; ".join(decision["reasons"])
            + (f"; preset written: {report['preset']}" if report.get("preset") else ""),
            "ok" if decision["decision"] == "ship" else "note",
        )
    )
    for note in report.get("notes", []):
        parts.append(banner(note, "note"))
    comps = {(c["candidate"], c["metric"]): c for c in report["comparisons"]}
    rows = []
    for run, means in report["runs"].items():
        c = comps.get((run, primary))
        rows.append(
            {
                "run": run,
                **{m: means[m] for m in metrics},
                f"Δ {primary}": c["delta"] if c else None,
                "p": c["p"] if c else None,
                "p_adj (Holm)": c["p_adj"] if c else None,
                "significant": ("yes" if c["significant"] else "no") if c else "",
            }
        )
    parts.append(heading("Against the defaults: tuning itself (nested), the winner, each choice alone"))
    parts.append(table(rows, "scix-tune-runs"))
    parts.append(
        heading("Each outer fold's choice (made on the other folds only)")
        + table(
            [{"fold": i, "chose": name} for i, name in enumerate(report["fold_choices"])], "scix-tune-folds"
        )
    )
    shown = report["table"][:top]
    marked = {report["defaults"]: "defaults", report["winner"]: "winner"}
    for row in report["table"][top:]:
        if row["name"] in marked:
            shown = [*shown, row]
    parts.append(heading(f"CV table: the best {len(shown)} of {len(report['table'])} candidates"))
    parts.append(
        table(
            [
                {
                    "candidate": r["name"] + (f" ({marked[r['name']]})" if r["name"] in marked else ""),
                    **{m: r["means"][m] for m in metrics},
                    f"{primary} 95% CI": f"{r['ci95'][0]:.4f}–{r['ci95'][1]:.4f}",
                }
                for r in shown
            ],
            "scix-tune-table",
        )
    )
    covered = report.get("covered", {})
    parts.append(
        banner(
            f"pieces built {covered.get('pieces_built')} of {covered.get('pieces_planned')}; encoder epochs "
            f"covered {covered.get('encoder_epochs')}, query side {covered.get('query_epochs')}; rerankers "
            f"tried {covered.get('rerankers', [])}; folds "
            f"{'grouped by relevant paper' if covered.get('folds_grouped') else 'at random'}; space "
            f"{report.get('setup', {}).get('space')}",
            "note",
        )
    )
    figure = charts.intervals(
        [r["name"] for r in shown],
        [r["means"][primary] for r in shown],
        [r["ci95"][0] for r in shown],
        [r["ci95"][1] for r in shown],
        primary,
        marked,
    )
    return Rendered("".join(parts), (figure,))


class TuneView(View):
    def __init__(
        self,
        report: Any = None,
        *,
        index: str | None = None,
        space: Any = "fusion",
        folds: int = 5,
        top: int = 25,
        config: Config | None = None,
    ):
        """``report``: a saved `scix tune` JSON (default: the one saved for ``index``, else tune ``index``
        now over ``space`` — a shipped space's name, a TOML path or a dict of its fields — writing
        nothing)."""
        self.report = _load(report, index, space, folds, config)
        self.top = top

    def render(self) -> Rendered:
        return render_tune(self.report, self.top)

    def _build_widget(self):
        import ipywidgets as w

        self.output = w.Output()
        return w.VBox([self.output])
