"""The tuned pipeline as a config preset beside its index, and the index built to match.

``indexes/NAME/tuned.toml`` holds the ``[search]`` settings of the chosen candidate (and ``[embedding]
model`` when its encoder is fine-tuned, ``query_model`` when its query side is), with a header saying which
run chose it on what evidence.
``--config tuned`` with ``--index NAME`` reads it over the user's own configuration file
(:func:`scix_core.config.load_config`). The chosen encoder is trained on every judged query of the split
and the index re-ingested with it (and with passage vectors when the candidate reads them) from the
sources its manifest names.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from scix_core.data import load_dataset
from scix_core.embeddings import corpus_hash
from scix_core.errors import ScixError
from scix_core.tune.space import Candidate
from scix_core.workspace import Workspace, write_text_atomic


def preset_path(home: Path, index: str) -> Path:
    return Workspace(home).tuned_preset(index)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def render(
    candidate: Candidate, encoder: str | None, evidence: Mapping[str, object], query_model: str | None = None
) -> str:
    """The preset's text: a provenance header, then ``[search]`` (and ``[embedding]``) tables."""
    lines = [f"# written by `scix tune` on {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {candidate.name}"]
    lines += [f"# {key}: {value}" for key, value in evidence.items()]
    lines += ["", "[search]"]
    lines += [
        f"{key.split('.', 1)[1]} = {_toml_value(value)}"
        for key, value in sorted(candidate.overrides().items())
    ]
    if encoder:  # the papers re-encoded by it: a query side configured for the old vectors no longer fits
        lines += ["", "[embedding]", f"model = {_toml_value(encoder)}", 'query_model = ""']
    elif query_model:
        lines += ["", "[embedding]", f"query_model = {_toml_value(query_model)}"]
    return "\n".join(lines) + "\n"


def write(home: Path, index: str, text: str) -> Path:
    path = preset_path(home, index)
    write_text_atomic(path, text)
    return path


def dataset_source(manifest: Mapping) -> Path | None:
    """The folder or file the index was ingested from, if it still loads to the same corpus (its corpus
    hash): the path ingest recorded, else (an index built before it was recorded) the folder holding the
    files its loader read or one of that folder's parents."""
    candidates = [Path(manifest["source"])] if manifest.get("source") else []
    sources = [Path(s) for s in manifest.get("sources") or ()]
    if sources:
        common = Path(os.path.commonpath([str(s) for s in sources]))
        candidates += [common, *list(common.parents)[:2]]
    for path in candidates:
        if not path.exists():
            continue
        try:
            dataset = load_dataset(path, manifest.get("format"))
        except ScixError:
            continue
        papers = dataset.papers[: manifest["limit"]] if manifest.get("limit") else dataset.papers
        if corpus_hash([p.text for p in papers]) == manifest.get("corpus_hash"):
            return path
    return None
