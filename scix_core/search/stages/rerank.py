"""Cross-encoder rerank of the fused top window (docs/design.md#rerank), off by default.

Re-scores the top ``window`` (50) fused papers on (original query, title +
full abstract) with any sentence-transformers ``CrossEncoder``, capped at 512
tokens, sigmoid -> [0, 1]. The window must exceed the requested count — a
window no larger than the limit could only reshuffle what is returned
anyway — so such a call is refused. Bypassed (and said so) when the limit is
over 20. Only the window is returned: the limit is always inside it.

``backend`` "onnx" / "onnx-int8" runs the same model on ONNX Runtime (exported once into the user's cache,
``~/.cache/scix_core/onnx/``; :mod:`scix_core.embeddings.onnx`) — no torch at query time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from scix_core.embeddings.encoder import model_slug, no_loading_bar
from scix_core.embeddings.loading import user_cache
from scix_core.embeddings.onnx import BACKENDS, OnnxCrossEncoder, export
from scix_core.errors import ConfigError, ModelUnavailableError, UnknownNameError
from scix_core.search.stages.base import StageBypassed, StageContext
from scix_core.types import Ranking, ScoredPaper
from scix_core.workspace import Workspace

WINDOW = 50
MAX_LIMIT = 20  # the reference design's _RERANK_TOP_K_CAP
MAX_LENGTH = 512


def reranker_path(spec: str, home) -> Path:
    """Where the cross-encoder ``spec`` lives: a path as given, else a reranker trained into the workspace
    by that name (not a valid name either: the path as given, which the reranker reports missing)."""
    path = Path(spec).expanduser()
    if not path.exists():
        try:
            path = Workspace(home).model_dir("rerankers", spec)
        except ConfigError:
            pass
    return path


def passage(title: str, abstract: str) -> str:
    return f"{title}. {abstract}".strip() if abstract else title


class CrossEncoderReranker:
    name = "rerank"

    def __init__(
        self,
        model: str | Path,
        window: int = WINDOW,
        max_limit: int = MAX_LIMIT,
        max_length: int = MAX_LENGTH,
        batch_size: int = 32,
        device: str = "cpu",
        backend: str = "torch",
    ):
        if window < 1:
            raise ConfigError(f"rerank window must be >= 1, got {window}")
        if backend not in BACKENDS:
            raise UnknownNameError("rerank backend", backend, BACKENDS)
        self.backend = backend
        self.model_path, self.window, self.max_limit = str(model), window, max_limit
        self.max_length, self.batch_size, self.device = max_length, batch_size, device
        self._model = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model has loaded (it loads on first use)."""
        return self._model is not None

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import CrossEncoder

                if not Path(self.model_path).expanduser().exists():
                    raise ModelUnavailableError(
                        f"cross-encoder {self.model_path!r} not found; build one with `scix train-reranker` "
                        "(models are never downloaded at run time)"
                    )
                if self.backend != "torch":
                    self._model = self._load_onnx()
                    return self._model
                try:
                    with no_loading_bar():
                        self._model = CrossEncoder(
                            str(Path(self.model_path).expanduser()),
                            max_length=self.max_length,
                            device=self.device,
                        )
                except Exception as exc:  # noqa: BLE001 — the library raises OSError, ValueError, HF errors
                    raise ModelUnavailableError(
                        f"cannot load cross-encoder {self.model_path!r}: {exc}"
                    ) from exc
        return self._model

    def _load_onnx(self):
        path = Path(self.model_path).expanduser()
        folder = export(path, user_cache() / "onnx" / f"rerank-{model_slug(str(path))}", kind="cross-encoder")
        return OnnxCrossEncoder(folder, self.backend, self.max_length)

    def check(self, limit: int) -> str | None:
        """Why this call bypasses the reranker (``None``: it runs); a window <= limit is refused."""
        if limit > self.max_limit:
            return f"bypassed: limit {limit} > {self.max_limit}"
        if self.window <= limit:
            raise ConfigError(
                f"rerank window {self.window} must exceed the result count {limit}: "
                "it could only reshuffle the papers already returned"
            )
        return None

    def scores(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        if self.backend != "torch":
            import numpy as np

            logits = self.model.predict([(query, p) for p in passages], self.batch_size)
            return [float(s) for s in 1 / (1 + np.exp(-logits))]
        import torch

        out = self.model.predict(
            [(query, p) for p in passages],
            batch_size=self.batch_size,
            activation_fn=torch.nn.Sigmoid(),
            show_progress_bar=False,
        )
        return [float(s) for s in out]

    def run(self, ranking: Ranking, context: StageContext) -> Ranking:
        why = self.check(context.limit)
        if why:
            raise StageBypassed(why)
        head = ranking.items[: self.window]
        papers = context.papers.get(i.paper_id for i in head)
        kept = [i for i in head if i.paper_id in papers]
        texts = [passage(papers[i.paper_id].title, papers[i.paper_id].abstract) for i in kept]
        scored = self.scores(context.query.original, texts)
        order = sorted(range(len(kept)), key=lambda j: (-scored[j], j))
        return Ranking(self.name, tuple(ScoredPaper(kept[j].paper_id, scored[j]) for j in order))
