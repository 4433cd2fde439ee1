"""Dataset loaders: every real format the workbench reads, behind one registry."""

from scix_core.data.dataset import Dataset
from scix_core.data.formats import LOADERS, data_dir, detect_format, load_dataset, resolve_dataset

__all__ = ["Dataset", "LOADERS", "data_dir", "detect_format", "load_dataset", "resolve_dataset"]
