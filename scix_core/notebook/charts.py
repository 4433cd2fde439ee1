"""The matplotlib figures the views show (plain ``Figure`` objects: no pyplot state is kept)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

LANE_COLOURS = {
    "lexical": "#1f77b4",
    "body": "#17becf",
    "dense": "#ff7f0e",
    "sparse": "#9467bd",
    "alias_1": "#8c564b",
    "alias_2": "#bcbd22",
    "alias_3": "#7f7f7f",
}


def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: nothing global, safe in threads and under any backend

    return Figure(figsize=(width, height), layout="constrained")


def timing_bars(timing_ms: Mapping[str, float]):
    """Horizontal bars: milliseconds per stage (``total`` in the title)."""
    stages = [(k, v) for k, v in timing_ms.items() if k != "total"]
    fig = _figure(6.5, 0.35 * max(3, len(stages)) + 0.8)
    ax = fig.subplots()
    ax.barh([k for k, _ in stages][::-1], [v for _, v in stages][::-1], color="#4c72b0")
    for i, (_, v) in enumerate(stages[::-1]):
        ax.text(v, i, f" {v:.2f}", va="center", fontsize=8)
    ax.set_xlabel("ms")
    ax.set_title(
        f"stage timing (total {timing_ms.get('total', sum(v for _, v in stages)):.1f} ms; "
        "lanes run concurrently)",
        fontsize=10,
    )
    return fig


def fused_breakdown(
    labels: Sequence[str], shares: Mapping[str, Sequence[float]], relevant: Sequence[bool] | None = None
):
    """Stacked horizontal bars, one per hit: each lane's 1/(k+rank) share of the fused score."""
    fig = _figure(6.5, 0.3 * max(4, len(labels)) + 1.0)
    ax = fig.subplots()
    left = [0.0] * len(labels)
    ys = list(range(len(labels)))[::-1]
    for lane, values in shares.items():
        ax.barh(ys, values, left=left, label=lane, color=LANE_COLOURS.get(lane))
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(
        ys, [("✓ " if relevant and relevant[i] else "") + lab for i, lab in enumerate(labels)], fontsize=8
    )
    ax.set_xlabel("fused score = Σ 1/(k + rank)")
    ax.set_title("fused score by lane", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def upset(combinations: Mapping[frozenset, int], lanes: Sequence[str], title: str):
    """UpSet-style chart: a bar per exact lane combination, the dot matrix below says which lanes."""
    combos = list(combinations.items())
    rows = list(lanes) + sorted({ln for c, _ in combos for ln in c} - set(lanes))
    fig = _figure(max(4.0, 0.7 * len(combos) + 2), 1.8 + 0.35 * len(rows) + 1.2)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, max(1, 0.5 * len(rows))])
    xs = range(len(combos))
    top.bar(xs, [n for _, n in combos], color="#4c72b0")
    for x, (_, n) in zip(xs, combos):
        top.text(x, n, str(n), ha="center", va="bottom", fontsize=8)
    top.set_ylabel("top-10 hits")
    top.set_title(title, fontsize=10)
    for x, (combo, _) in enumerate(combos):
        member = [i for i, lane in enumerate(rows) if lane in combo]
        bottom.scatter([x] * len(rows), range(len(rows)), color="#dddddd", s=40)
        bottom.scatter([x] * len(member), member, color="#222222", s=40)
        if len(member) > 1:
            bottom.plot([x, x], [min(member), max(member)], color="#222222")
    bottom.set_yticks(range(len(rows)), rows, fontsize=8)
    bottom.set_xticks([])
    bottom.invert_yaxis()
    return fig


def grouped_bars(groups: Sequence[str], series: Mapping[str, Sequence[float]], title: str, ylabel: str):
    """Bars per group (e.g. lanes), one colour per series (e.g. share of top 10 / of relevant top 10)."""
    fig = _figure(max(5.0, 1.1 * len(groups) + 2), 3.2)
    ax = fig.subplots()
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ax.bar([g + i * width for g in range(len(groups))], values, width, label=name)
    ax.set_xticks(
        [g + width * (len(series) - 1) / 2 for g in range(len(groups))], groups, fontsize=8, rotation=20
    )
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return fig


def metric_by_run(
    runs: Sequence[str],
    values: Sequence[float],
    metric: str,
    baseline: str | None,
    verdicts: Mapping[str, str] | None = None,
):
    """One bar per run; the baseline dashed; bars coloured by verdict (significantly better / worse /
    n.s.)."""
    colours = {"better": "#2e7d32", "worse": "#c0392b", "n.s.": "#9e9e9e", "baseline": "#4c72b0"}
    fig = _figure(max(5.0, 0.75 * len(runs) + 2), 3.4)
    ax = fig.subplots()
    verdicts = verdicts or {}
    ax.bar(range(len(runs)), values, color=[colours[verdicts.get(r, "n.s.")] for r in runs])
    for x, v in enumerate(values):
        ax.text(x, v, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    if baseline in runs:
        ax.axhline(values[list(runs).index(baseline)], ls="--", color="#4c72b0", lw=1)
    ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by run (green/red: significantly better/worse than {baseline}, Holm)", fontsize=9)
    return fig


def intervals(
    names: Sequence[str],
    means: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    metric: str,
    marked: Mapping[str, str],
):
    """One row per candidate: its mean and 95% interval, best on top; ``marked`` names -> a colour's meaning
    ("defaults", "winner")."""
    colours = {"defaults": "#4c72b0", "winner": "#2e7d32"}
    fig = _figure(7.0, max(2.5, 0.28 * len(names) + 1))
    ax = fig.subplots()
    ys = list(range(len(names)))[::-1]
    for y, name, mean, lo, hi in zip(ys, names, means, lows, highs):
        colour = colours.get(marked.get(name, ""), "#9e9e9e")
        ax.errorbar(mean, y, xerr=[[mean - lo], [hi - mean]], fmt="o", color=colour, ms=4, capsize=2)
    ax.set_yticks(ys, names, fontsize=7)
    ax.set_xlabel(f"{metric} (cross-validated mean, 95% t interval)")
    ax.set_title("candidates (blue: the defaults, green: the winner)", fontsize=9)
    return fig
