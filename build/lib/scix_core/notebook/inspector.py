"""The query inspector: why a query ranks what it ranks.

A query box and the pipeline's switches (mode, optional lanes, RRF k,
rerank, boosts, rewrite, filters); the hits with every lane's rank and
score, each lane's 1/(k+rank) share of the fused score, the boosts, a
stage-timing chart, and a banner whenever a lane was dropped or the search
degraded. For a gold-set query, relevant papers are marked and the relevant
papers the results missed are listed with the rank each lane gave them.

    QueryInspector("scifact", gold="train")             # live in JupyterLab, static in a report
    QueryInspector("scifact", query="graph neural networks", rrf_k=30).render()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scix_core.config import Config, load_config
from scix_core.errors import ConfigError, ScixError
from scix_core.evaluate.gold import Gold, from_index
from scix_core.evaluate.metrics import per_query
from scix_core.notebook import charts
from scix_core.notebook.frontend import Rendered, View, banner, heading, table
from scix_core.search import Searcher
from scix_core.search.fusion import from_metadata
from scix_core.search.options import OPTIONAL_LANES
from scix_core.search.result import SearchResult

TITLE_CHARS = 90
GOLD_CHOICES = 500  # gold queries offered in the picker


def _short(text: str, n: int = TITLE_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def contributions(result: SearchResult) -> dict[str, list[float]]:
    """lane -> per hit its term of the fused score (0 where the lane missed the hit): 1/(k + rank) under RRF,
    weight × min-max normalised score under convex fusion."""
    lanes = {lane: result.rankings[lane] for lane in result.metadata["lanes_run"]}
    terms = from_metadata(result.metadata).terms(lanes)
    return {
        lane: [terms[lane].get(h.paper_id, 0.0) if lane in h.lanes else 0.0 for h in result.hits]
        for lane in lanes
    }


def _status(result: SearchResult) -> str:
    meta, out = result.metadata, []
    for lane, why in meta["dropped_lanes"].items():
        out.append(banner(f"DEGRADED — lane {lane!r} was dropped: {why}"))
    for lane, why in meta.get("lanes_skipped", {}).items():
        out.append(banner(f"lane {lane!r} not run: {why}", "note"))
    for note in meta.get("notes", ()):
        out.append(banner(f"query note: {note}", "note"))
    rewrite = meta.get("rewrite", {})
    if rewrite.get("mode", "off") != "off":
        out.append(
            banner(
                f"rewrite ({rewrite.get('mode')}): {rewrite.get('status')}"
                + (f" → {rewrite.get('text')!r}" if rewrite.get("text") else ""),
                "note",
            )
        )
    for stage, status in meta.get("stages", {}).items():
        if status not in ("off", "ran"):
            out.append(banner(f"{stage} bypassed: {status}", "note"))
    if not meta["dropped_lanes"]:
        out.append(
            banner(
                f"{meta['mode']} · lanes {', '.join(meta['lanes_run'])} · {from_metadata(meta).describe()} · "
                f"lexical {meta.get('lexical_backend') or '-'} {meta.get('lexical_mode')} · {result.total} "
                "candidates · "
                f"{result.timing_ms['total']:.1f} ms",
                "ok",
            )
        )
    return "".join(out)


def render_result(
    result: SearchResult, relevant: Mapping[str, int] | None = None, store=None, query_id: str | None = None
) -> Rendered:
    """The static rendering of one result (``relevant``: paper id -> grade for a gold query)."""
    relevant = {p: g for p, g in (relevant or {}).items() if g > 0}
    lanes = list(result.metadata["lanes_run"])
    parts = [heading(f'Results for "{_short(result.query, 200)}"'), _status(result)]
    if query_id is not None:
        parts.append(_gold_line(result, query_id, relevant))
    shares = contributions(result)
    stages = [s for s in ("rerank", "boosts") if s in result.rankings]
    stages = (
        ["fused", *stages] if stages else []
    )  # each stage's rank, when any stage reordered the fused list
    stage_ranks = {stage: result.rankings[stage].ranks() for stage in stages}
    rows = []
    for i, h in enumerate(result.hits, start=1):
        row: dict[str, Any] = {
            "#": i,
            "rel": relevant.get(h.paper_id, "") if relevant else "",
            "paper": h.paper_id,
            "title": _short(h.title),
            "score": h.score,
            "fused": h.fused_score,
        }
        for lane in lanes:
            hit = h.lanes.get(lane)
            row[f"{lane} rank"] = hit.rank if hit else None
            row[f"{lane} score"] = hit.score if hit else None
            row[f"{lane} 1/(k+r)"] = shares[lane][i - 1]
        for stage in stages:
            row[f"{stage}#"] = stage_ranks[stage].get(h.paper_id)  # where each stage put it
        row["boosts"] = ", ".join(f"{b} {v:+.3f}" for b, v in h.boosts.items()) or ""
        rows.append(row)
    if rows:
        if not relevant:
            rows = [{k: v for k, v in row.items() if k != "rel"} for row in rows]
        parts.append(table(rows, "scix-hits", [h.paper_id in relevant for h in result.hits]))
    else:
        parts.append(banner("no hits", "note"))
    if relevant:
        parts.append(_missed(result, relevant, store, lanes))
    figures = [charts.timing_bars(dict(result.timing_ms))]
    if result.hits and lanes:
        labels = [f"{i}. {_short(h.title, 40)}" for i, h in enumerate(result.hits, start=1)]
        figures.insert(
            0, charts.fused_breakdown(labels, shares, [h.paper_id in relevant for h in result.hits])
        )
    return Rendered("".join(parts), tuple(figures))


def _gold_line(result: SearchResult, query_id: str, relevant: Mapping[str, int]) -> str:
    gold = Gold("query", {query_id: result.query}, {query_id: dict(relevant)})
    ndcg = (
        per_query(gold, {query_id: result.ranking()}, ("ndcg@10",))["ndcg@10"][query_id] if relevant else 0.0
    )
    found = sum(p in relevant for p in result.ids)
    return banner(
        f"gold query {query_id}: {len(relevant)} relevant judged, {found} in these {len(result.hits)} hits "
        f"(rows in green) · nDCG@10 {ndcg:.4f}",
        "ok" if found else "note",
    )


def _missed(result: SearchResult, relevant: Mapping[str, int], store, lanes: list[str]) -> str:
    missed = [p for p in relevant if p not in set(result.ids)]
    if not missed:
        return heading("Missed relevant papers") + banner("none: every relevant paper is in the hits", "ok")
    titles = store.titles(missed) if store is not None else {}
    depth = result.metadata.get("depth")
    ranks = {name: result.rankings[name].ranks() for name in ("fused", *lanes) if name in result.rankings}
    rows = []
    for p in missed:
        row = {
            "paper": p,
            "grade": relevant[p],
            "title": _short(titles.get(p, ("(not in this index)", 0))[0]),
            "fused rank": ranks.get("fused", {}).get(p),
        }
        for lane in lanes:
            row[f"{lane} rank"] = ranks.get(lane, {}).get(p)
        rows.append(row)
    return heading(f"Missed relevant papers ({len(missed)}; — = not in that lane's top {depth})") + table(
        rows, "scix-missed"
    )


def _gold(store, gold) -> Gold | None:
    if gold is False or isinstance(gold, Gold):
        return gold or None
    try:
        return from_index(store, gold or None)
    except ConfigError:
        if gold:  # a split was asked for and is not there: say so
            raise
        return None


class QueryInspector(View):
    """Live: controls + results in JupyterLab. Static (reports): the rendering of the initial query."""

    def __init__(
        self,
        index: str,
        config: Config | None = None,
        *,
        gold: Gold | str | bool | None = None,
        query: str | None = None,
        query_id: str | None = None,
        mode: str = "hybrid",
        limit: int = 10,
        rrf_k: int | None = None,
        lanes: str = "",
        rerank: str = "off",
        boosts: bool = False,
        rewrite: str = "off",
        filters: Mapping | None = None,
        lexical_mode: str | None = None,
        backend: str | None = None,
    ):
        overrides = {"search.lexical_mode": lexical_mode, "search.lexical_backend": backend}
        self.config = (config or load_config()).replace(**{k: v for k, v in overrides.items() if v})
        self.index = index
        self._searchers: dict[int, Any] = {}
        searcher = self.searcher(rrf_k or self.config.search.rrf_k)
        searcher.warm()  # the model loads now, not inside the first query's timing
        self.gold = _gold(searcher.store, gold)
        judged = self.gold.judged if self.gold else []
        if query_id is None and not query and judged:
            query_id = judged[0]  # nothing asked: the first gold query, so relevance shows
        if query_id is not None:
            if not self.gold or query_id not in self.gold.queries:
                raise ConfigError(
                    f"query id {query_id!r} is not in the gold set{' ' + self.gold.name if self.gold else ''}"
                )
            query = self.gold.queries[query_id]
        self._by_text = {self.gold.queries[q]: q for q in judged} if self.gold else {}
        self.result: SearchResult | None = None
        self.state = {
            "query": query or "",
            "mode": mode,
            "limit": limit,
            "rrf_k": rrf_k or self.config.search.rrf_k,
            "lanes": lanes,
            "rerank": rerank,
            "boosts": boosts,
            "rewrite": rewrite,
            "filters": dict(filters or {}),
        }
        self._judged, self._query_id = judged, query_id

    def searcher(self, rrf_k: int):
        if rrf_k not in self._searchers:
            self._searchers[rrf_k] = Searcher(self.index, self.config.replace(**{"search.rrf_k": int(rrf_k)}))
        return self._searchers[rrf_k]

    def search(self, **changes) -> SearchResult:
        """Search with the current state updated by ``changes`` (the same keys as the constructor)."""
        self.state.update(changes)
        s = self.state
        self.result = self.searcher(s["rrf_k"]).search(
            s["query"],
            s["mode"],
            s["filters"] or None,
            s["limit"],
            rerank=s["rerank"],
            boosts=s["boosts"],
            rewrite=s["rewrite"],
            lanes=s["lanes"],
        )
        return self.result

    def render(self) -> Rendered:
        self._read_controls()
        try:
            result = self.search()
        except ScixError as exc:
            self.result = None
            return Rendered(
                heading(f'Results for "{_short(str(self.state["query"]), 200)}"')
                + banner(f"error — {exc.describe()}")
            )
        qid = self._by_text.get(result.query.strip())
        relevant = self.gold.qrels.get(qid, {}) if qid else None
        return render_result(result, relevant, self.searcher(self.state["rrf_k"]).store, qid)

    # --- the live widget -------------------------------------------------------------------------
    def _build_widget(self):
        import ipywidgets as w

        s, judged, query_id = self.state, self._judged, self._query_id
        self.controls = c = {
            "query": w.Text(
                value=s["query"],
                placeholder="type a query and press Enter",
                description="query",
                continuous_update=False,
                layout=w.Layout(width="70%"),
            ),
            "gold": w.Dropdown(
                options=[("— type your own —", "")]
                + [(f"{q}: {_short(self.gold.queries[q], 80)}", q) for q in judged[:GOLD_CHOICES]],
                value=query_id if query_id in judged[:GOLD_CHOICES] else "",
                description="gold query",
                layout=w.Layout(width="70%"),
            ),
            "mode": w.ToggleButtons(
                options=["hybrid", "keyword", "semantic"], value=s["mode"], description="mode"
            ),
            "rrf_k": w.BoundedIntText(
                value=s["rrf_k"], min=1, max=10_000, description="RRF k", layout=w.Layout(width="160px")
            ),
            "limit": w.BoundedIntText(
                value=s["limit"], min=1, max=100, description="limit", layout=w.Layout(width="160px")
            ),
            "rerank": w.Dropdown(
                options=_rerankers(self.config, s["rerank"]), value=s["rerank"], description="rerank"
            ),
            "boosts": w.Checkbox(value=bool(s["boosts"]), description="boosts"),
            "rewrite": w.Dropdown(
                options=sorted({"off", "local", s["rewrite"]}), value=s["rewrite"], description="rewrite"
            ),
            **{
                f"lane_{name}": w.Checkbox(
                    value=name in str(s["lanes"]).split(","),
                    description=f"{name} lane",
                    indent=False,
                    layout=w.Layout(width="130px"),
                )
                for name in OPTIONAL_LANES
            },
            "year": w.Text(
                value=str(s["filters"].get("year", "")), placeholder="2019-2021", description="years"
            ),
            "categories": w.Text(
                value=",".join(s["filters"].get("categories", ())),
                placeholder="cs.IR,cs.CL",
                description="categories",
            ),
            "authors": w.Text(
                value=",".join(s["filters"].get("authors", ())), placeholder="surname", description="authors"
            ),
        }
        self.button = w.Button(description="Search", button_style="primary", icon="search")
        self.output = w.Output()
        self.button.on_click(self.refresh)
        c["gold"].observe(self._pick_gold, names="value")
        for name, control in c.items():
            if name != "gold":
                control.observe(self.refresh, names="value")
        return w.VBox(
            [
                w.HBox([c["query"], self.button]),
                c["gold"],
                c["mode"],
                w.HBox([c["rrf_k"], c["limit"], c["rerank"], c["boosts"], c["rewrite"]]),
                w.HBox([c[f"lane_{n}"] for n in OPTIONAL_LANES]),
                w.HBox([c["year"], c["categories"], c["authors"]]),
                self.output,
            ],
            layout=w.Layout(width="100%"),
        )

    def _pick_gold(self, change) -> None:
        if change["new"]:
            self.controls["query"].value = self.gold.queries[change["new"]]  # fires refresh

    def _read_controls(self) -> None:
        c = getattr(self, "controls", None)
        if not c:
            return
        filters = {
            k: v for k, v in self.state["filters"].items() if k not in ("year", "categories", "authors")
        }
        if c["gold"].value and self.gold.queries.get(c["gold"].value) != c["query"].value:
            c["gold"].value = ""  # a typed query is no longer the picked gold query
        if c["year"].value.strip():
            filters["year"] = c["year"].value.strip()
        for name in ("categories", "authors"):
            values = [v.strip() for v in c[name].value.split(",") if v.strip()]
            if values:
                filters[name] = values
        self.state.update(
            query=c["query"].value,
            mode=c["mode"].value,
            rrf_k=c["rrf_k"].value,
            limit=c["limit"].value,
            rerank=c["rerank"].value,
            boosts=c["boosts"].value,
            rewrite=c["rewrite"].value,
            filters=filters,
            lanes=",".join(n for n in OPTIONAL_LANES if c[f"lane_{n}"].value),
        )


def _rerankers(config: Config, current: str) -> list[str]:
    root = config.home / "models" / "rerankers"
    found = (
        sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if root.exists()
        else []
    )
    return ["off", *found, *([current] if current not in ("off", *found) else [])]
