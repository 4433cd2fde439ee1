"""Reproducible reports: a notebook executed by papermill into ``reports/NAME/``.

Each report folder holds the executed notebook, its HTML (nbconvert), every
figure as PNG, and ``run.json`` (the parameters actually used, the overrides
given, the code version, timings). Notebooks run with
``SCIX_NOTEBOOK_STATIC=1``, so every view writes static tables and figures.
A report is built in a scratch folder and swapped in only when it
succeeded: a failure leaves the previous report intact and the failed
notebook at ``reports/NAME.failed.ipynb``.

    run_report("query-inspector", {"query": "graph neural networks"})
    scix report all
"""

from __future__ import annotations

import base64
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scix_core import paths
from scix_core.errors import ConfigError, ReportError, UnknownNameError
from scix_core.evaluate.paths import eval_path, reports_dir
from scix_core.extras import require
from scix_core.notebook.frontend import STATIC_ENV
from scix_core.version import code_version

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {
    "query-inspector": "01_query_inspector.ipynb",
    "lane-attribution": "02_lane_attribution.ipynb",
    "fusion-sweep": "03_fusion_sweep.ipynb",
    "evidence": "04_evidence_studies.ipynb",
    "cluster-view": "05_cluster_view.ipynb",
    "recommendation-eval": "06_recommendation_eval.ipynb",
    "digest": "07_daily_digest.ipynb",
    "tune": "08_tune_report.ipynb",
}
STANDARD = tuple(NOTEBOOKS)
KERNEL_ENV = {STATIC_ENV: "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


def notebooks_dir() -> Path:
    return paths.notebooks_dir()


def notebook_path(name: str) -> Path:
    if name not in NOTEBOOKS:
        raise UnknownNameError("report", name, [*NOTEBOOKS, "all"])
    path = notebooks_dir() / NOTEBOOKS[name]
    if not path.exists():
        raise ConfigError(
            f"notebook {path} not found (set SCIX_NOTEBOOKS_DIR to the folder holding {NOTEBOOKS[name]})"
        )
    return path


def parameters(name: str) -> dict[str, Any]:
    """The notebook's ``parameters`` cell: name -> default value (the source text when it is not a
    literal)."""
    import ast

    papermill = require("papermill", "notebooks", "scix report")

    out = {}
    for key, spec in papermill.inspect_notebook(str(notebook_path(name))).items():
        try:
            out[key] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            out[key] = spec["default"]
    return out


def parse_value(text: str) -> Any:
    """A ``-p`` value: JSON (numbers, true/false/null, lists, objects), Python's True/False/None, else the
    string."""
    try:
        return json.loads(text)
    except ValueError:
        return {"True": True, "False": False, "None": None}.get(text, text)


@dataclass(frozen=True)
class Report:
    name: str
    folder: Path
    notebook: Path
    html: Path
    figures: tuple[Path, ...]
    seconds: float
    parameters: Mapping[str, Any]


def _ipc_kernel_manager(runtime: Path):
    """A kernel manager whose kernel talks over Unix sockets in ``runtime`` (a private folder), not
    unencrypted local TCP — which ipykernel warns about on every run: the warning's cause is removed, not the
    warning hidden."""
    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = str(runtime / "kernel")

    return IpcKernelManager


def run_report(
    name: str, overrides: Mapping[str, Any] | None = None, out: Path | None = None, timeout_s: int = 1800
) -> Report:
    """Execute notebook ``name`` with ``overrides`` into ``out/NAME/`` (default :func:`reports_dir`)."""
    papermill = require("papermill", "notebooks", "scix report")
    from papermill.exceptions import PapermillExecutionError

    source = notebook_path(name)
    overrides = dict(overrides or {})
    known = parameters(name)
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ConfigError(
            f"report {name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"its parameters: {', '.join(known)}"
        )
    root = Path(out or reports_dir())
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    executed = scratch / f"{name}.ipynb"
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.perf_counter()
    os.chmod(scratch, 0o755)
    runtime = Path(tempfile.mkdtemp(prefix="scix-kernel-"))
    saved = {k: os.environ.get(k) for k in KERNEL_ENV}
    os.environ.update(
        KERNEL_ENV
    )  # the kernel inherits it: views render static tables + figures, no progress bars
    try:
        papermill.execute_notebook(
            str(source),
            str(executed),
            parameters=overrides,
            progress_bar=False,
            kernel_name="python3",
            cwd=str(Path.cwd()),
            execution_timeout=timeout_s,
            kernel_manager_class=_ipc_kernel_manager(runtime),
        )
    except PapermillExecutionError as exc:
        failed = root / f"{name}.failed.ipynb"
        if executed.exists():
            shutil.move(str(executed), failed)
        shutil.rmtree(scratch, ignore_errors=True)
        raise ReportError(
            f"report {name!r} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
            f"(executed notebook kept at {failed})"
        ) from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    figures = _extract(executed, scratch)
    seconds = time.perf_counter() - t0
    meta = {
        "report": name,
        "notebook": str(source.relative_to(ROOT) if source.is_relative_to(ROOT) else source),
        "parameters": {**known, **overrides},
        "overrides": overrides,
        "code_version": code_version(),
        "started": started,
        "seconds": round(seconds, 2),
        "python": platform.python_version(),
        "papermill": papermill.__version__,
        "figures": [p.name for p in figures],
    }
    (scratch / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    target = root / name
    old = root / f".{name}-old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(scratch, target)
    shutil.rmtree(old, ignore_errors=True)
    (root / f"{name}.failed.ipynb").unlink(missing_ok=True)
    return Report(
        name,
        target,
        target / executed.name,
        target / f"{name}.html",
        tuple(target / "figures" / p.name for p in figures),
        seconds,
        meta["parameters"],
    )


def _extract(executed: Path, folder: Path) -> list[Path]:
    """Write the HTML next to the notebook and every PNG output into ``figures/``."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(executed, as_version=4)
    nb.metadata.pop("widgets", None)  # no widget state: the HTML must not need a widget manager from a CDN
    nbformat.write(nb, executed)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    executed.with_suffix(".html").write_text(body)
    figures = []
    for cell_no, cell in enumerate(nb.cells, start=1):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                path = folder / "figures" / f"cell{cell_no:02d}-{len(figures) + 1:02d}.png"
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(base64.b64decode(data["image/png"]))
                figures.append(path)
    return figures


def standard_overrides(name: str, index: str = "scifact") -> dict[str, Any]:
    """What ``scix report all`` passes: the sweeps the main job saved for ``index``, when there are any."""
    if name == "fusion-sweep":
        paths = [
            eval_path(index, split, mode) for split in ("train", "test") for mode in ("auto", "and", "or")
        ]
        saved = [str(p) for p in paths if p.exists()]
        return {"sweep_json": saved} if saved else {}
    if name == "recommendation-eval":
        saved = sorted(reports_dir().glob("eval-recs-*.json"))
        return {"report": str(saved[-1])} if saved else {}
    return {}
