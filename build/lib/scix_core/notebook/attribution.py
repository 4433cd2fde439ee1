"""Lane attribution view: which lane put the papers in the top 10, per query, in aggregate and per bucket.

Pick a bucket to re-aggregate; pick a query and open it in the
:class:`~scix_core.notebook.inspector.QueryInspector`.

    LaneAttributionView("scifact", gold="train", run="hybrid", sample=50)
"""

from __future__ import annotations

from scix_core.config import Config, load_config
from scix_core.evaluate.attribution import Attribution, attribute
from scix_core.evaluate.gold import Gold, for_index
from scix_core.notebook import charts
from scix_core.notebook.frontend import Rendered, View, banner, heading, table
from scix_core.notebook.inspector import QueryInspector

WORST = 30  # per-query rows shown, worst nDCG@10 first


def render_attribution(att: Attribution, bucket: str | None = None) -> Rendered:
    agg = att.aggregate(bucket)
    scope = f"bucket {bucket}" if bucket else "all queries"
    n = sum(1 for q in att.queries if bucket is None or bucket in q.buckets)
    parts = [
        heading(f"Lane attribution — run {att.run} on {att.gold} ({n} queries, {scope}), index {att.index}"),
        banner(
            "a lane 'had' a top-10 hit when the paper was in that lane's own top 10; unique = only that lane "
            "had it; (deeper) = no lane had it in its top 10, fusion lifted it",
            "note",
        ),
    ]
    frame = [
        {
            "lane": lane,
            "share of top 10": s["share_top10"],
            "share of relevant top 10": s["share_relevant_top10"],
            "unique top 10": s["unique_top10"],
            "unique relevant top 10": s["unique_relevant_top10"],
        }
        for lane, s in agg.items()
    ]
    parts.append(table(frame, "scix-attribution"))
    overlap, relevant = att.overlap(bucket=bucket), att.overlap(True, bucket)
    parts.append(heading("Overlap between lanes (top-10 hits by exact lane combination)"))
    parts.append(
        table(
            [
                {"lanes": " + ".join(sorted(k)), "top-10 hits": v, "relevant": relevant.get(k, 0)}
                for k, v in overlap.items()
            ],
            "scix-overlap",
        )
    )
    parts.append(heading("Per bucket (query length; every query field)"))
    parts.append(
        table(
            [
                {
                    "bucket": b,
                    "queries": v["n"],
                    "nDCG@10": v["ndcg@10"],
                    **{f"{lane} rel share": s["share_relevant_top10"] for lane, s in v["lanes"].items()},
                }
                for b, v in att.by_bucket().items()
            ],
            "scix-buckets",
        )
    )
    per_query = att.frame()
    if bucket:
        keep = {q.query_id for q in att.queries if bucket in q.buckets}
        per_query = per_query[per_query["query_id"].isin(keep)]
    per_query = per_query.sort_values("ndcg@10").head(WORST)
    per_query["query"] = per_query["query"].str.slice(0, 70)
    parts.append(heading(f"Per query (worst {min(WORST, len(per_query))} by nDCG@10)"))
    parts.append(table(per_query, "scix-per-query"))
    lanes = list(agg)
    figures = (
        charts.grouped_bars(
            lanes,
            {
                "share of top 10": [agg[ln]["share_top10"] for ln in lanes],
                "share of relevant top 10": [agg[ln]["share_relevant_top10"] for ln in lanes],
                "unique relevant": [agg[ln]["unique_relevant_top10"] for ln in lanes],
            },
            f"lane contribution ({scope})",
            "share",
        ),
        charts.upset(overlap, lanes, f"top-10 hits by lane combination ({scope})"),
        charts.upset(relevant, lanes, f"relevant top-10 hits by lane combination ({scope})"),
    )
    return Rendered("".join(parts), figures)


def render_query(att: Attribution, query_id: str) -> Rendered:
    q = att.for_query(query_id)
    rows = [
        {
            "#": i,
            "paper": h.paper_id,
            "relevant": "✓" if h.relevant else "",
            "lanes in top 10": " + ".join(sorted(h.lanes)) or "(deeper)",
            **{f"{lane} rank": h.ranks.get(lane) for lane in att.lanes},
        }
        for i, h in enumerate(q.hits, start=1)
    ]
    return Rendered(
        heading(f"{q.query_id}: {q.text} — nDCG@10 {q.ndcg:.4f}, {q.n_relevant} judged relevant")
        + table(rows, "scix-query-attribution", [h.relevant for h in q.hits])
    )


class LaneAttributionView(View):
    def __init__(
        self,
        index: str,
        config: Config | None = None,
        *,
        gold: Gold | str | None = None,
        run: str = "hybrid",
        sample: int | None = 50,
        seed: int = 13,
        lexical_mode: str | None = None,
        query_id: str | None = None,
        attribution: Attribution | None = None,
    ):
        cfg = config or load_config()
        self.config = cfg.replace(**{"search.lexical_mode": lexical_mode}) if lexical_mode else cfg
        self.index = index
        if not isinstance(gold, Gold):
            gold = for_index(index, self.config, gold or None)
        self.gold = gold
        self.attribution = attribution or attribute(index, gold, run, self.config, sample, seed)
        self.bucket: str | None = None
        self.query_id = query_id

    def render(self) -> Rendered:
        main = render_attribution(self.attribution, self.bucket)
        if not self.query_id:
            return main
        return Rendered.concat([render_query(self.attribution, self.query_id), main])

    def inspector(self, query_id: str):
        return QueryInspector(self.index, self.config, gold=self.gold, query_id=query_id)

    def _build_widget(self):
        import ipywidgets as w

        worst_first = sorted(self.attribution.queries, key=lambda q: q.ndcg)
        self.bucket_control = w.Dropdown(
            options=[("all queries", "")]
            + [(f"{b} ({n})", b) for b, n in self.attribution.buckets().items()],
            description="bucket",
        )
        self.query_control = w.Select(
            options=[(f"{q.ndcg:.3f} · {q.query_id}: {q.text[:70]}", q.query_id) for q in worst_first],
            rows=8,
            description="query",
            layout=w.Layout(width="90%"),
        )
        self.open_button = w.Button(description="Open in inspector", icon="search")
        self.output, self.inspector_output = w.Output(), w.Output()
        self.bucket_control.observe(self._pick_bucket, names="value")
        self.query_control.observe(self._pick_query, names="value")
        self.open_button.on_click(self._open)
        return w.VBox(
            [self.bucket_control, self.output, self.query_control, self.open_button, self.inspector_output]
        )

    def _pick_bucket(self, change) -> None:
        self.bucket = change["new"] or None
        self.refresh()

    def _pick_query(self, change) -> None:
        self.query_id = change["new"]
        self.refresh()

    def _open(self, *_) -> None:
        from IPython.display import clear_output, display

        if self.query_control.value:
            with self.inspector_output:
                clear_output(wait=True)
                display(self.inspector(self.query_control.value))
