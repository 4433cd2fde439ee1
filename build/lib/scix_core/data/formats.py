"""The registry of dataset formats and the detection of obvious ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scix_core.config import load_config
from scix_core.data.arxiv import load_arxiv_jsonl, load_arxiv_kaggle
from scix_core.data.beir import load_beir
from scix_core.data.citeulike import load_citeulike
from scix_core.data.dataset import Dataset
from scix_core.data.scifact_csv import load_scifact_csv
from scix_core.data.smart import load_smart
from scix_core.errors import DataPathError, UnknownNameError

LOADERS: dict[str, Callable[[Path], Dataset]] = {
    "beir": load_beir,
    "scifact-csv": load_scifact_csv,
    "smart": load_smart,
    "arxiv-jsonl": load_arxiv_jsonl,
    "arxiv-kaggle": load_arxiv_kaggle,
    "citeulike": load_citeulike,
}

#: default data directory names for ``--dataset NAME`` (folder under the data dir)
DATASETS = {
    "scifact": "scifact",
    "cranfield": "cranfield",
    "cacm": "cacm",
    "citeulike-a": "citeulike-a",
    "arxiv-daily": "arxiv-daily",
    "arxiv-kaggle-sample": "arxiv-kaggle-sample",
}


def data_dir() -> Path:
    """``SCIX_DATA_DIR`` if set, else the project's ``data/`` folder."""

    return load_config().data_dir.resolve()


def detect_format(path: Path) -> str:
    """Name the format of an obvious path; raise a DataPathError listing the formats otherwise."""
    if not path.exists():
        raise DataPathError(f"no such file or folder: {path}")
    if path.is_file():
        if path.name.endswith((".jsonl", ".jsonl.gz")):
            return "arxiv-jsonl"
        if path.suffix == ".csv" and "corpus" not in path.name:
            return "arxiv-kaggle"
    else:
        names = {p.name for p in path.iterdir()}
        if "corpus.jsonl" in names:
            return "beir"
        if "corpus_train.csv" in names or (path / "original_csv" / "corpus_train.csv").exists():
            return "scifact-csv"
        if "users.dat" in names:
            return "citeulike"
        if any(n.endswith((".jsonl.gz", ".jsonl")) for n in names):
            return "arxiv-jsonl"
        if any(n.endswith(".csv") for n in names):
            return "arxiv-kaggle"
        if any(_starts_with_record(path / n) for n in sorted(names)):
            return "smart"
    raise DataPathError(
        f"cannot tell the format of {path}; pass --format, one of: {', '.join(sorted(LOADERS))}"
    )


def _starts_with_record(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as fh:
        return fh.read(16).lstrip().startswith(b".I ")


def resolve_dataset(name: str) -> Path:
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, list(DATASETS))
    path = data_dir() / DATASETS[name]
    if not path.exists():
        raise DataPathError(
            f"dataset {name!r} not found at {path}; set SCIX_DATA_DIR or run `scix data fetch {name}`"
        )
    return path


def load_dataset(path: Path | str, fmt: str | None = None) -> Dataset:
    """Load any supported dataset from a path; ``fmt=None`` detects obvious formats."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataPathError(f"no such file or folder: {path}")
    fmt = fmt or detect_format(path)
    if fmt not in LOADERS:
        raise UnknownNameError("format", fmt, list(LOADERS))
    return LOADERS[fmt](path)
