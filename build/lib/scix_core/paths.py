"""Where the workbench keeps things, and why there.

In a source checkout (``pyproject.toml`` beside the package: a clone, with
or without ``pip install -e``) everything stays in the repository, as the
two set-up commands expect: ``.scix/`` (indexes, models, caches, user
state), ``data/``, ``reports/``, ``notebooks/``. An installed package (a
wheel in site-packages) writes nothing beside its code: the workspace
defaults to the platform's user data directory (platformdirs:
``~/.local/share/scix`` on Linux), the data directory and the reports to
folders in it, and the notebooks are wherever ``SCIX_NOTEBOOKS_DIR`` says
(they ship with the repository, not the wheel).

``scix.toml`` is the file ``SCIX_CONFIG`` names — an explicit choice, and
how ``scix serve`` hands its workers their settings — else ``scix.toml`` in
the working directory, else the checkout's, else the one in the user config
directory (``~/.config/scix/scix.toml``). Every path's origin is what
:func:`origins` reports (``scix info``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

APP = "scix"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
CONFIG_NAME = "scix.toml"


@functools.cache
def checkout() -> bool:
    """The package runs from a source tree, not from an installation's site-packages."""
    installed = any(part in ("site-packages", "dist-packages") for part in PACKAGE_ROOT.parts)
    return not installed and (PACKAGE_ROOT / "pyproject.toml").is_file()


def user_data() -> Path:
    import platformdirs  # lazy: only an installed package needs it

    return platformdirs.user_data_path(APP)


def user_config() -> Path:
    import platformdirs  # lazy: only where no nearer scix.toml exists

    return platformdirs.user_config_path(APP) / CONFIG_NAME


def default_home() -> Path:
    return PACKAGE_ROOT / ".scix" if checkout() else user_data()


def default_data_dir() -> Path:
    return PACKAGE_ROOT / "data" if checkout() else user_data() / "data"


@dataclass(frozen=True)
class Found:
    """A path and where it came from (an environment variable, a file, a default and why)."""

    path: Path | None
    origin: str


def config_file() -> Found:
    """The ``scix.toml`` to read (``path`` None: none exists; the defaults and the environment apply)."""
    if os.environ.get("SCIX_CONFIG"):
        return Found(Path(os.environ["SCIX_CONFIG"]).expanduser(), "SCIX_CONFIG")
    candidates = [(Path.cwd() / CONFIG_NAME, "the working directory")]
    if checkout() and PACKAGE_ROOT != Path.cwd():
        candidates.append((PACKAGE_ROOT / CONFIG_NAME, "the source checkout"))
    candidates.append((user_config(), "the user config directory"))
    for path, origin in candidates:
        if path.is_file():
            return Found(path, origin)
    return Found(None, "none found (looked in " + ", ".join(str(p) for p, _ in candidates) + ")")


def reports_dir(home: Path | None = None) -> Path:
    """``$SCIX_REPORTS_DIR``; else the checkout's ``reports/``, or ``reports/`` in the workspace ``home``."""
    if os.environ.get("SCIX_REPORTS_DIR"):
        return Path(os.environ["SCIX_REPORTS_DIR"])
    if checkout():
        return PACKAGE_ROOT / "reports"
    return (home or default_home()) / "reports"


def notebooks_dir() -> Path:
    """``$SCIX_NOTEBOOKS_DIR``, else the checkout's ``notebooks/`` (an installed package has none of its own)."""
    if os.environ.get("SCIX_NOTEBOOKS_DIR"):
        return Path(os.environ["SCIX_NOTEBOOKS_DIR"])
    return PACKAGE_ROOT / "notebooks" if checkout() else user_data() / "notebooks"


def _default_origin() -> str:
    return "default: the source checkout" if checkout() else "default: the user data directory (platformdirs)"


def origins(home: Path, data_dir: Path, cfg: Found, from_file: set[str]) -> dict[str, Found]:
    """Each path the workbench reads or writes, with where it came from. ``cfg``: the config file read;
    ``from_file``: the top-level keys it set."""

    def origin(name: str, var: str) -> str:
        if os.environ.get(var):
            return var
        if name in from_file:
            return f"{CONFIG_NAME} ({cfg.path})"
        return _default_origin()

    return {
        "config": cfg,
        "home": Found(home, origin("home", "SCIX_HOME")),
        "data_dir": Found(data_dir, origin("data_dir", "SCIX_DATA_DIR")),
        "reports": Found(
            reports_dir(home),
            "SCIX_REPORTS_DIR"
            if os.environ.get("SCIX_REPORTS_DIR")
            else ("default: the source checkout" if checkout() else "default: reports/ in the workspace"),
        ),
        "notebooks": Found(
            notebooks_dir(), "SCIX_NOTEBOOKS_DIR" if os.environ.get("SCIX_NOTEBOOKS_DIR") else _default_origin()
        ),
    }
