"""Live widgets or static reports: one rendering, two ways to show it.

Every view renders to a :class:`Rendered` (HTML tables + matplotlib
figures). In JupyterLab the widget shows it inside an ``Output``; without a
live frontend — papermill and nbmake, which ``scix report`` and the test
command mark with ``SCIX_NOTEBOOK_STATIC=1`` — the same rendering is written
straight into the cell's output, so the executed notebook and its HTML are a
readable report.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field

STATIC_ENV = "SCIX_NOTEBOOK_STATIC"

STYLE = """<style>
.scix table{border-collapse:collapse;font-size:12px;margin:4px 0 10px}
.scix th,.scix td{border:1px solid #ddd;padding:2px 6px;text-align:left !important;vertical-align:top}
.scix th{background:#f4f4f4}
.scix tr.relevant td{background:#e8f6e8}
.scix .banner{padding:8px 12px;margin:6px 0;border-left:6px solid #c0392b;background:#fdecea;font-weight:600}
.scix .note{padding:6px 12px;margin:6px 0;border-left:6px solid #d4a017;background:#fff8e1}
.scix .ok{padding:6px 12px;margin:6px 0;border-left:6px solid #2e7d32;background:#edf7ed}
.scix h4{margin:10px 0 4px}
</style>"""


def is_static() -> bool:
    """True when no live widget frontend is expected (``SCIX_NOTEBOOK_STATIC=1``)."""
    return os.environ.get(STATIC_ENV, "").strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Rendered:
    """What a view shows: an HTML body (tables, banners) and matplotlib figures, in order."""

    html: str
    figures: tuple = field(default_factory=tuple)
    sections: tuple[Rendered, ...] = ()  # set by concat(): shown one after another, each with its figures

    @classmethod
    def concat(cls, parts: list[Rendered]) -> Rendered:
        return cls("".join(p.html for p in parts), tuple(f for p in parts for f in p.figures), tuple(parts))

    def show(self) -> None:
        """Write into the current output (a cell, or a widget's ``Output`` inside ``with``)."""
        from IPython.display import HTML, Image, display

        for part in self.sections or (self,):
            display(HTML(f'{STYLE}<div class="scix">{part.html}</div>'))
            for fig in part.figures:
                display(Image(data=png(fig)))


def png(fig) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def banner(text: str, kind: str = "banner") -> str:
    return f'<div class="{kind}">{html.escape(text)}</div>'


def heading(text: str) -> str:
    return f"<h4>{html.escape(text)}</h4>"


def table(rows, css: str = "", highlight: list[bool] | None = None, float_format: str = "{:.4f}") -> str:
    """Rows (dicts, or a pandas frame) as an escaped HTML table; ``highlight`` marks rows (class
    ``relevant``). Values keep their types: ranks stay integers, a missing value shows as —."""
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(f"<td>{html.escape(_cell(row.get(c), float_format))}</td>" for c in columns)
        mark = ' class="relevant"' if highlight and highlight[i] else ""
        body.append(f"<tr{mark}>{cells}</tr>")
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _cell(value, float_format: str) -> str:
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return float_format.format(value)
    return str(value)


class View:
    """A live widget over a rendering. Subclasses implement ``render()`` and ``_build_widget()`` (an
    ipywidgets box containing ``self.output``); the widget is only built when a live frontend shows it."""

    output = None
    last: Rendered | None = None
    _widget = None

    def render(self) -> Rendered:
        raise NotImplementedError

    def _build_widget(self):
        raise NotImplementedError

    @property
    def widget(self):
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    def refresh(self, *_) -> Rendered:
        """Render again from the controls; shown in the widget's output."""
        self.last = self.render()
        if self.output is not None:
            from IPython.display import clear_output

            with self.output:
                clear_output(wait=True)
                self.last.show()
        return self.last

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if is_static():
            self.last = self.last or self.render()
            self.last.show()
        else:
            widget = self.widget
            if self.last is None:
                self.refresh()
            display(widget)
