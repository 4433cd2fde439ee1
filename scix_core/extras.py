"""Optional parts and the packages they need: ``pip install 'scix_core[EXTRA]'``.

* ``notebooks`` — JupyterLab, ipywidgets, papermill, nbconvert, matplotlib: the notebooks, their views and
  ``scix report``;
* ``fast`` — ONNX Runtime, ONNX, OpenVINO, NNCF: the fast embedding backends (``embedding.backend = "auto"``
  falls back to torch without them);
* ``peers`` — implicit (ALS, BPR, iALS in ``scix eval-recs``), bm25s and rank_bm25 (the search benches);
* ``serve`` — FastAPI, uvicorn, prometheus-client: ``scix serve``;
* ``test`` — everything above and the test tools; ``all`` — everything above but the test tools.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from scix_core.errors import MissingExtraError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise a typed error naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{what} needs the {module.split('.')[0]} package, which this install left out: "
            f"pip install 'scix_core[{extra}]' ({exc})"
        ) from None
