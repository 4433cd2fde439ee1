"""What the recommendation views share: a demo user made of real saves, and a save / dismiss button row per
recommended paper."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
