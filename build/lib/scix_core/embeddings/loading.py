"""Where local model exports are kept and how quietly a model loads: shared by every encoding backend."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def no_loading_bar():
    """transformers' sub-second "Loading weights" bar is noise in logs and reports: off while a model
    loads."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def user_cache() -> Path:
    """The user's cache folder for exports made outside a workspace (``$XDG_CACHE_HOME/scix_core``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scix_core"
