"""What the recommendation views share: a demo user made of real saves, and a save / dismiss button row per
recommended paper that writes a real interaction and renders the view again (:class:`ActingView`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scix_core.notebook.frontend import Rendered, View
from scix_core.search import Searcher


def demo_user(rec, user: str, queries: Sequence[str], per_query: int) -> None:
    """A user whose saves are the top keyword hits of each query (real interactions in the workspace)."""
    searcher = Searcher(rec.index, rec.config)
    try:
        rec.create_user(user, [])
        for query in queries:
            for hit in searcher.search(query, "keyword", limit=per_query).hits:
                rec.interact(user, hit.paper_id, "save")
    finally:
        searcher.close()


def item_buttons(items, act: Callable[[str, str], object]) -> list:
    """One row per item: save, dismiss (each calls ``act(paper_id, kind)``) and the item's title."""
    import ipywidgets as w

    rows = []
    for item in items:
        save = w.Button(description="save", icon="bookmark", layout=w.Layout(width="80px"))
        dismiss = w.Button(description="dismiss", icon="times", layout=w.Layout(width="90px"))
        save.on_click(lambda _, p=item.paper_id: act(p, "save"))
        dismiss.on_click(lambda _, p=item.paper_id: act(p, "dismiss"))
        rows.append(w.HBox([save, dismiss, w.Label(f"{item.rank}. {item.paper_id} {item.title[:80]}")]))
    return rows


class ActingView(View):
    """A view of one user's recommended papers (``self.rec``, ``self.user``) with a save / dismiss row per
    paper under its widget (``self.buttons``); :meth:`shown` says which papers."""

    buttons = None

    def shown(self):
        raise NotImplementedError

    def act(self, paper_id: str, kind: str) -> Rendered:
        """Record a save or dismissal of ``paper_id`` for the current user (a write fits nothing: instant)
        and render again."""
        self.rec.interact(self.user, paper_id, kind)
        return self.refresh()

    def refresh(self, *_) -> Rendered:
        rendered = super().refresh()
        if self._widget is not None:
            self.buttons.children = item_buttons(self.shown(), self.act)
        return rendered
