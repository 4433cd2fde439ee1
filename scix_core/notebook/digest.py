"""Daily digest: one user's feed for a day, as a reader wants it.

Each paper of the window the feed ranked (:meth:`Recommender.feed
<scix_core.recommend.recommender.Recommender.feed>`): title, authors,
categories, the listing day, the abstract's first lines, and why it is
there — the interest cluster that found it (and that cluster's medoid), the
saved paper nearest to it, the parts of its score. In JupyterLab a save /
dismiss button per paper writes a real interaction (instant: a write fits
nothing) and the digest is ranked again; in a report the same page is static
HTML. Reading the digest is not a feed visit: it never moves the window of
``scix feed --since last-visit``.

    DigestView("arxiv", user="ada", since="2026-07-01")
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from scix_core.config import Config, load_config
from scix_core.notebook.actions import ActingView, demo_user
from scix_core.notebook.frontend import Rendered, banner, heading
from scix_core.recommend import Recommender
from scix_core.recommend.feed import reasons

ABSTRACT_CHARS = 320  # the abstract's first lines
AUTHORS_SHOWN = 6
STYLE = """<style>
.scix .paper{border:1px solid #ddd;border-radius:4px;padding:8px 12px;margin:8px 0;max-width:60em}
.scix .paper .title{font-weight:600;font-size:14px}
.scix .paper .meta{color:#555;font-size:12px;margin:2px 0}
.scix .paper .abstract{font-size:13px;margin:4px 0}
.scix .paper .why{font-size:12px;background:#f6f8fa;padding:4px 8px;margin-top:4px}
.scix .paper.explore{border-style:dashed}
</style>"""


def _authors(authors: Sequence[str]) -> str:
    shown = ", ".join(authors[:AUTHORS_SHOWN])
    return shown + (f" and {len(authors) - AUTHORS_SHOWN} more" if len(authors) > AUTHORS_SHOWN else "")


def _abstract(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ABSTRACT_CHARS else text[:ABSTRACT_CHARS].rsplit(" ", 1)[0] + " …"


def render_digest(feed, rec, saved: Sequence[str]) -> Rendered:
    """The digest page of ``feed`` (a :class:`~scix_core.recommend.feed.Feed`) for a user who saved
    ``saved``."""
    result = feed.recommendations
    parts = [
        STYLE,
        heading(f"{result.user}'s digest on {result.index}: {feed.window.described}"),
        banner(result.reason, "ok"),
    ]
    if feed.empty:
        parts.append(banner(feed.empty, "note"))
    parts += [banner(n, "note") for n in result.notes]
    papers = rec.papers(result.ids)
    why = reasons(feed, rec.side, saved)
    titles = rec.titles(
        {w.medoid for w in why.values() if w.medoid}
        | {w.nearest_saved for w in why.values() if w.nearest_saved}
    )
    for item in result.items:
        paper, w = papers.get(item.paper_id), why[item.paper_id]
        if paper is None:
            continue
        meta = [_authors(paper.authors), ", ".join(paper.categories)]
        if paper.listed:
            meta.append(f"listed {paper.listed.isoformat()}")
        lines = [f"{'exploration: outside your interests' if item.exploration else 'found by ' + w.source}"]
        if w.spread:
            lines.append("picked to spread the page: your library shows few interests so far")
        if w.cluster is not None and not item.exploration:
            medoid = titles.get(w.medoid, w.medoid or "")
            lines.append(f"interest cluster {w.cluster} (around “{medoid[:90]}”)")
        if w.nearest_saved:
            lines.append(
                f"nearest saved paper: “{titles.get(w.nearest_saved, w.nearest_saved)[:90]}” "
                f"(cosine {w.similarity:.2f})"
            )
        if w.parts:
            lines.append("score: " + ", ".join(f"{n} {v:.3f}" for n, v in w.parts))
        css = "paper explore" if item.exploration else "paper"
        head = " · ".join(m for m in meta if m)
        parts.append(
            f'<div class="{css}" data-paper="{html.escape(item.paper_id)}">'
            f'<div class="title">{item.rank}. {html.escape(paper.title)}</div>'
            f'<div class="meta">{html.escape(item.paper_id)} · {html.escape(head)}</div>'
            f'<div class="abstract">{html.escape(_abstract(paper.abstract))}</div>'
            f'<div class="why">{"<br>".join(html.escape(x) for x in lines)}</div></div>'
        )
    return Rendered("".join(parts))


class DigestView(ActingView):
    def __init__(
        self,
        index: str,
        user: str | None = None,
        since: str | None = None,
        config: Config | None = None,
        *,
        limit: int = 10,
        demo_queries: Sequence[str] = (),
        demo_saves: int = 3,
    ):
        self.index, self.since, self.limit = index, since, limit
        self.rec = Recommender(index, config or load_config())
        user = None if user is None else str(user)
        users = self.rec.state.users(index)
        if user is None and users:
            user = max(users, key=lambda u: u["saves"])["user"]
        self.user = user or "demo"
        if demo_queries and self.user not in {u["user"] for u in users}:
            demo_user(self.rec, self.user, demo_queries, demo_saves)
        self.feed = None

    def render(self) -> Rendered:
        self.feed = self.rec.feed(self.user, self.since, self.limit, visit=False)
        return render_digest(self.feed, self.rec, self.rec.stored(self.user).saved)

    def shown(self):
        return self.feed.items

    def _build_widget(self):
        import ipywidgets as w

        self.since_control = w.Text(
            value=self.since or "", placeholder="YYYY-MM-DD (empty: the newest day)", description="since"
        )
        self.output, self.buttons = w.Output(), w.VBox()
        self.since_control.on_submit(self._pick)
        return w.VBox([self.since_control, self.buttons, self.output])

    def _pick(self, *_) -> None:
        self.since = self.since_control.value.strip() or None
        self.refresh()
