"""Notebook views over the workbench (issue 6): live ipywidgets in JupyterLab, static tables + figures in
reports.

    from scix_core.notebook import QueryInspector, LaneAttributionView, SweepView, EvidenceView
    from scix_core.notebook import ClusterView, RecEvalView, DigestView, TuneView

Notebooks only call these; every view is an object whose ``render()`` returns
a :class:`Rendered` (testable as plain Python) and which displays itself.
"""

from scix_core.notebook.attribution import LaneAttributionView
from scix_core.notebook.clusters import ClusterView
from scix_core.notebook.digest import DigestView
from scix_core.notebook.frontend import STATIC_ENV, Rendered, is_static
from scix_core.notebook.inspector import QueryInspector, render_result
from scix_core.notebook.rec_eval import RecEvalView
from scix_core.notebook.sweep import EvidenceView, SweepView
from scix_core.notebook.tune_view import TuneView

__all__ = [
    "ClusterView",
    "DigestView",
    "EvidenceView",
    "LaneAttributionView",
    "QueryInspector",
    "RecEvalView",
    "Rendered",
    "STATIC_ENV",
    "SweepView",
    "TuneView",
    "is_static",
    "render_result",
]
