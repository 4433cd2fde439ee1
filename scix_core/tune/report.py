"""What a tuning run found: the CV table, the nested estimate, each choice's worth, the tests and the gate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scix_core.evaluate.significance import Comparison, GateDecision
from scix_core.tune.select import DEFAULTS, TUNED, CvRow
from scix_core.tune.space import Candidate
from scix_core.workspace import write_json_atomic


@dataclass(frozen=True)
class TuneReport:
    index: str
    gold: str
    primary: str
    metrics: tuple[str, ...]
    n_queries: int
    folds: int
    table: tuple[CvRow, ...]  # best primary mean first
    defaults: Candidate
    winner: Candidate
    fold_choices: tuple[Candidate, ...]  # each outer fold's choice (the nested estimate)
    runs: Mapping[str, Mapping[str, float]]  # defaults, tuned (nested), winner, each choice alone -> means
    worth: Mapping[str, Candidate]  # choice -> the best candidate changing only it
    comparisons: tuple[Comparison, ...]
    decision: GateDecision
    covered: Mapping[str, object]  # pieces built / planned, candidates left out and why
    notes: tuple[str, ...]
    seconds: float
    ledger: Mapping[str, object] = field(default_factory=dict)  # which queries reached what (honesty)
    preset: str | None = None  # the preset written, if the gate shipped
    setup: Mapping[str, object] = field(default_factory=dict)

    def row(self, candidate: Candidate) -> CvRow | None:
        return next((r for r in self.table if r.candidate == candidate), None)

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "gold": self.gold,
            "primary": self.primary,
            "metrics": list(self.metrics),
            "n_queries": self.n_queries,
            "folds": self.folds,
            "defaults": self.defaults.name,
            "winner": self.winner.name,
            "winner_settings": self.winner.overrides()
            | {"encoder_epochs": self.winner.epochs, "query_epochs": self.winner.query_epochs},
            "fold_choices": [c.name for c in self.fold_choices],
            "runs": {k: dict(v) for k, v in self.runs.items()},
            "worth": {k: c.name for k, c in self.worth.items()},
            "comparisons": [c.to_dict() for c in self.comparisons],
            "decision": self.decision.to_dict(),
            "covered": dict(self.covered),
            "notes": list(self.notes),
            "seconds": round(self.seconds, 1),
            "table": [r.to_dict() for r in self.table],
            "ledger": dict(self.ledger),
            "preset": self.preset,
            "setup": dict(self.setup),
        }

    def write_json(self, path: Path) -> None:
        write_json_atomic(Path(path), self.to_dict())

    def print(self, console, top: int = 15) -> None:
        from rich.table import Table

        p = self.primary
        table = Table(
            title=f"scix tune {self.index} — {self.gold}, {self.n_queries} queries, {self.folds}-fold CV"
        )
        table.add_column("candidate")
        for m in self.metrics:
            table.add_column(m, justify="right")
        table.add_column(f"{p} 95% CI", justify="right")
        shown = list(self.table[:top])
        for extra in (self.row(self.defaults), self.row(self.winner)):
            if extra is not None and extra not in shown:
                shown.append(extra)
        for r in shown:
            mark = " (defaults)" if r.candidate == self.defaults else ""
            table.add_row(
                r.candidate.name + mark,
                *(f"{r.means[m]:.4f}" for m in self.metrics),
                f"{r.ci[0]:.4f}–{r.ci[1]:.4f}",
            )
        console.print(table)
        if len(self.table) > len(shown):
            console.print(f"{len(self.table) - len(shown)} more candidates in the JSON", highlight=False)
        runs = Table(
            title="against the defaults (paired randomisation tests; Holm over the metrics of tuning itself, "
            "and over the candidates compared)"
        )
        runs.add_column("run")
        for m in self.metrics:
            runs.add_column(m, justify="right")
        for name, means in self.runs.items():
            cells = []
            for m in self.metrics:
                c = next((c for c in self.comparisons if c.candidate == name and c.metric == m), None)
                cell = f"{means[m]:.4f}"
                if c is not None:
                    cell += f" ({c.delta:+.4f}{'*' if c.significant else ''}, p_adj {c.p_adj:.3g})"
                cells.append(cell)
            runs.add_row(name, *cells)
        console.print(runs)
        console.print(
            f"each outer fold chose: {', '.join(c.name for c in self.fold_choices)}",
            highlight=False,
            markup=False,
        )
        for note in self.notes:
            console.print(f"note: {note}", highlight=False, markup=False)
        verdict = "SHIP" if self.decision.ship else "NO-SHIP"
        console.print(
            f"gate ({TUNED} vs {DEFAULTS}): {verdict}: {'; '.join(self.decision.reasons)}",
            highlight=False,
            markup=False,
        )
        if self.preset:
            console.print(
                f"wrote {self.preset} (use it: --config tuned --index {self.index})", highlight=False
            )
        elif not self.decision.ship:
            console.print("nothing beats the defaults significantly: no preset written", highlight=False)
