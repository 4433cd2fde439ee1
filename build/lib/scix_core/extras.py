"""Optional parts and the packages they need: ``pip install 'scix_core[EXTRA]'``.

* ``notebooks`` — JupyterLab, ipywidgets, papermill, nbconvert, matplotlib: the notebooks, their views and
  ``scix report``;
* ``fast`` — ONNX Runtime, ONNX, OpenVINO, NNCF: the fast embedding backends (``embedding.backend = "auto"``
  falls back to torch without them);
* ``peers`` — bm25s and rank_bm25 (the search benches; implicit, for iALS, ALS and BPR, is a core dependency
  since iALS is a part of the default co-save model);
* ``serve`` — FastAPI, uvicorn, prometheus-client: ``scix serve``;
* ``test`` — everything above and the test tools; ``all`` — everything above but the test tools.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from scix_core.errors import MissingExtraError


def require(module: str, extra: str | None, what: str) -> ModuleType:
    """Import ``module`` or raise a typed error naming ``extra`` (None: a core dependency left out)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        fix = f"pip install 'scix_core[{extra}]'" if extra else "pip install scix_core (a core dependency)"
        raise MissingExtraError(
            f"{what} needs the {module.split('.')[0]} package, which this install left out: {fix} ({exc})"
        ) from None
