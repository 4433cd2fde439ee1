"""Cluster view: what one user's recommendations are made of.

The saved papers projected to 2-D (PCA, scikit-learn, fitted on the saved
papers and the candidates together), coloured by their Hungarian-stable
cluster id with the medoids marked; the candidates of the per-cluster kNN and
the supplement, those the index's other users co-saved (and over a pool those
near their interests); what MMR kept (numbered by pick); the exploration
picks; the quotas, suppressed codes, the tier, its reason and the next-tier message.
Widgets: user picker, λ slider, scorer switch, and a save / dismiss button
per item that writes a real interaction and re-runs.

    ClusterView("citeulike-a", user="42")
    ClusterView("scifact", user="demo", demo_queries=["vitamin D and bone health", "gene expression in
    cancer"])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scix_core.config import Config, load_config
from scix_core.notebook import charts
from scix_core.notebook.actions import ActingView, demo_user
from scix_core.notebook.frontend import Rendered, banner, heading, table
from scix_core.recommend import Recommender

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


#: how the map marks each candidate source (marker, shade, size, label); any other source (cluster-knn,
#: supplement) is a plain candidate, the first row
MARKS = {
    "": ("o", "#cccccc", 8, "candidates"),
    "co-saved": ("D", "#9ecae1", 14, "co-saved by other users"),
    "neighbour-interest": ("s", "#fdae6b", 14, "near those users' interests (a pool)"),
}


def projection(result, side):
    """The 2-D map of a Tier-1 result: saved papers by cluster, medoids, candidates, MMR picks,
    exploration."""
    from sklearn.decomposition import PCA

    clusters = result.stage("quota").output
    candidates = result.stage("neighbour-interest").output  # the last candidate stage's: every candidate
    saved = [p for c in clusters for p in c.members]
    rows = side.rows(saved + [c.paper_id for c in candidates])
    vecs = side.vectors.get(rows)
    xy = (
        PCA(n_components=2, random_state=0).fit_transform(vecs)
        if len(vecs) >= 2
        else np.zeros((len(vecs), 2))
    )
    at = dict(zip(saved + [c.paper_id for c in candidates], xy))
    colour = {c.cluster_id: PALETTE[i % len(PALETTE)] for i, c in enumerate(clusters)}
    fig = charts._figure(7.5, 6.0)
    ax = fig.subplots()
    for kind, (marker, shade, size, label) in MARKS.items():
        group = [c for c in candidates if (c.source if c.source in MARKS else "") == kind]
        pts = np.array([at[c.paper_id] for c in group]) if group else np.zeros((0, 2))
        if not kind or group:
            ax.scatter(pts[:, 0], pts[:, 1], s=size, c=shade, marker=marker, label=f"{label} ({len(group)})")
    for c in clusters:
        pts = np.array([at[p] for p in c.members])
        ax.scatter(
            pts[:, 0],
            pts[:, 1],
            s=30,
            c=colour[c.cluster_id],
            label=f"cluster {c.cluster_id}: {len(c.members)} saved, quota {c.quota}",
        )
        ax.scatter(
            *at[c.medoid], s=220, marker="*", c=colour[c.cluster_id], edgecolors="black", linewidths=1.0
        )
    for item in result.items:
        if item.paper_id not in at:
            continue
        x, y = at[item.paper_id]
        if item.exploration:
            ax.scatter(x, y, s=90, marker="X", c="#d62728", edgecolors="black")
        else:
            ax.scatter(
                x, y, s=110, facecolors="none", edgecolors=colour.get(item.cluster_id, "black"), linewidths=2
            )
            ax.annotate(str(item.mmr_position), (x, y), fontsize=8, ha="center", va="center")
    ax.set_title(
        "saved (•), medoids (★), candidates (grey; co-saved ◆ blue; near neighbours' interests ■ orange), "
        "MMR picks (numbered ○), exploration (✕)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="best")
    ax.set_xticks([])
    ax.set_yticks([])
    return fig


def render_recommendations(result, rec) -> Rendered:
    side = rec.side
    parts = [heading(f"{result.user} on {result.index}: {result.reason}")]
    if result.next_tier:
        parts.append(banner(result.next_tier, "note"))
    parts += [banner(n, "note") for n in result.notes]
    titles = rec.titles(c.medoid for c in result.stage("quota").output) if result.tier == 1 else {}
    figures = []
    if result.tier == 1:
        clusters = result.stage("quota").output
        parts.append(
            heading("Clusters (ids stable across reclusters: Hungarian matching to the persisted medoids)")
        )
        parts.append(
            table(
                [
                    {
                        "cluster": c.cluster_id,
                        "saved": len(c.members),
                        "importance": c.importance,
                        "quota": c.quota,
                        "kept id from": "new" if c.matched_from is None else c.matched_from,
                        "medoid": c.medoid,
                        "medoid title": titles.get(c.medoid, "")[:80],
                    }
                    for c in clusters
                ],
                "scix-clusters",
            )
        )
        suppressed = dict(result.stage("suppress").output)
        parts.append(
            banner(f"suppressed codes: {suppressed}" if suppressed else "no suppressed codes", "note")
        )
        figures.append(projection(result, side))
    parts.append(heading(f"Recommendations ({len(result.items)}; exploration marked)"))
    parts.append(
        table(
            [
                {
                    "#": i.rank,
                    "paper": i.paper_id,
                    "title": i.title[:90],
                    "source": i.source,
                    "cluster": i.cluster_id,
                    "MMR pick": i.mmr_position,
                    "score": i.score,
                    "codes": ", ".join(i.codes[:3]),
                }
                for i in result.items
            ],
            "scix-recs",
            [i.exploration for i in result.items],
        )
    )
    parts.append(heading("Stages"))
    parts.append(
        table(
            [{"stage": s.name, "ms": s.ms, "what it did": str(dict(s.summary))[:160]} for s in result.stages],
            "scix-stages",
        )
    )
    figures.append(
        charts.timing_bars({s.name: s.ms for s in result.stages} | {"total": result.timing_ms["total"]})
    )
    return Rendered("".join(parts), tuple(figures))


class ClusterView(ActingView):
    def __init__(
        self,
        index: str,
        user: str | None = None,
        config: Config | None = None,
        *,
        limit: int = 10,
        mmr_lambda: float | None = None,
        scorer: str | None = None,
        demo_queries: Sequence[str] = (),
        demo_saves: int = 3,
    ):
        self.index, self.limit, self.base = index, limit, config or load_config()
        self.mmr_lambda = self.base.recommend.mmr_lambda if mmr_lambda is None else mmr_lambda
        self.scorer = scorer or self.base.recommend.scorer
        self.rec = self._recommender()
        user = None if user is None else str(user)  # a papermill parameter `11` arrives as an int
        users = self.rec.state.users(index)
        if user is None and users:
            user = max(users, key=lambda u: u["saves"])["user"]
        if user is None:
            user = "demo"
        if demo_queries and user not in {u["user"] for u in users}:
            demo_user(self.rec, user, demo_queries, demo_saves)
        self.user = user
        self.result = None

    def _recommender(self):
        cfg = self.base.replace(**{"recommend.mmr_lambda": self.mmr_lambda, "recommend.scorer": self.scorer})
        return Recommender(self.index, cfg)

    def render(self) -> Rendered:
        self.result = self.rec.recommend(self.user, self.limit)
        return render_recommendations(self.result, self.rec)

    def shown(self):
        return self.result.items

    def _build_widget(self):
        import ipywidgets as w

        users = sorted(self.rec.state.users(self.index), key=lambda u: -u["saves"])[:500]
        options = [(f"{u['user']} ({u['saves']} saves)", u["user"]) for u in users] or [
            (self.user, self.user)
        ]
        self.user_control = w.Dropdown(options=options, value=self.user, description="user")
        self.lambda_control = w.FloatSlider(
            value=self.mmr_lambda, min=0.0, max=1.0, step=0.1, description="MMR λ", continuous_update=False
        )
        self.scorer_control = w.ToggleButtons(
            options=["heuristic", "lightgbm"], value=self.scorer, description="scorer"
        )
        self.output, self.buttons = w.Output(), w.VBox()
        self.user_control.observe(self._pick, names="value")
        self.lambda_control.observe(self._pick, names="value")
        self.scorer_control.observe(self._pick, names="value")
        return w.VBox(
            [w.HBox([self.user_control, self.lambda_control, self.scorer_control]), self.buttons, self.output]
        )

    def _pick(self, *_) -> None:
        changed = (self.lambda_control.value, self.scorer_control.value) != (self.mmr_lambda, self.scorer)
        self.user = self.user_control.value
        self.mmr_lambda, self.scorer = self.lambda_control.value, self.scorer_control.value
        if changed:
            self.rec = self._recommender()
        self.refresh()
