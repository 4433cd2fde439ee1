"""ONNX Runtime encoding: ``embedding.backend = "onnx"`` (float32) or ``"onnx-int8"`` (dynamic int8
quantization), and the same for the cross-encoder reranker (``search.rerank_backend``,
:class:`OnnxCrossEncoder`).

The graph is exported here, from the local checkpoint, the first time a backend is asked for — nothing is
downloaded — into the workspace (``models/onnx/<model slug>/``), atomically, with a small manifest. The export
holds the whole sentence-transformers pipeline (transformer, mean or CLS pooling, L2 normalisation), so
encoding needs only ``onnxruntime`` and ``tokenizers``: no torch import, which is what makes a cold ``scix
search`` fast. Models whose pipeline has other modules (dense projections, prompts) are refused with a typed
error; use ``embedding.backend = "torch"`` for them.

The traced graph is then fused by ONNX Runtime's transformer optimizer (BERT-family models: one ``Attention``
op per layer, ``SkipLayerNormalization``, ``BiasGelu``, ``EmbedLayerNormalization``): the model is traced with
eager attention, whose pattern the optimizer recognises (the SDPA trace is not fused). MiniLM: 1.27× the
docs/s of the unfused graph in int8, 1.24× in float32, same vectors to 1e-6 in float32. A model the optimizer
does not know keeps the traced graph (``fused: false`` in the export's manifest).

int8 is ``onnxruntime.quantization.quantize_dynamic`` (weights int8 per channel, activations quantised at run
time). Its vectors are not the float32 vectors: the backend is part of the embedding cache's key and of the
index manifest, so vectors from different backends never mix, and queries are always encoded by the backend
that encoded the index.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scix_core.embeddings.loading import no_loading_bar
from scix_core.errors import ConfigError, ModelUnavailableError
from scix_core.locks import exclusive

BACKENDS = ("torch", "onnx", "onnx-int8")
FILES = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}
OPSET = 17
FORMAT = 2  # bump to re-export every cached graph (2: fused graph); part of the embedding cache key
FUSABLE = {
    "bert": "bert",
    "roberta": "bert",
    "xlm-roberta": "bert",
    "electra": "bert",
}  # config model_type -> optimizer


# the OpenVINO conversion and its calibration (scix_core.embeddings.openvino); bump to redo
OPENVINO_FORMAT = 1


def onnx_variant(backend: str) -> str:
    """``backend`` with the export format its graphs have (format 1 graphs were unfused; OpenVINO models also
    carry their conversion's format): the embedding cache folder and the build key carry it, so vectors from
    another export never mix with these."""
    variant = backend if FORMAT == 1 else f"{backend}.f{FORMAT}"
    return f"{variant}.o{OPENVINO_FORMAT}" if backend.startswith("openvino") else variant


def pipeline(model_dir: Path) -> dict:
    """The sentence-transformers pipeline of a local checkpoint, if this module can export it."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file() or not (model_dir / "tokenizer.json").is_file():
        raise ModelUnavailableError(
            f"{model_dir} is not a local sentence-transformers checkpoint with a "
            "tokenizer.json; use embedding.backend = 'torch'"
        )
    modules = json.loads(modules_file.read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ModelUnavailableError(
            f"the ONNX backend exports Transformer + Pooling [+ Normalize]; {model_dir.name} "
            f"has {' + '.join(kinds)}: use embedding.backend = 'torch'"
        )
    pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    modes = _pooling_modes(pooling)
    if modes not in (["cls"], ["mean"]):
        raise ModelUnavailableError(
            f"the ONNX backend exports mean or CLS pooling; {model_dir.name} pools "
            f"{modes}: use embedding.backend = 'torch'"
        )
    bert = model_dir / "sentence_bert_config.json"
    settings = json.loads(bert.read_text()) if bert.is_file() else {}
    tokenizer = model_dir / "tokenizer_config.json"
    # sentence-transformers 6 saves the length cap as the tokenizer's model_max_length, not in
    # sentence_bert_config
    cap = settings.get("max_seq_length") or (
        json.loads(tokenizer.read_text()).get("model_max_length") if tokenizer.is_file() else None
    )
    dim = pooling.get("embedding_dimension", pooling.get("word_embedding_dimension"))
    return {
        "pooling": modes[0],
        "normalize": kinds[-1] == "Normalize",
        "max_seq_length": int(cap) if cap and int(cap) < 100_000 else 512,
        "do_lower_case": bool(settings.get("do_lower_case", False)),
        "dim": int(dim),
    }


def _pooling_modes(pooling: dict) -> list[str]:
    """The pooling modes of a Pooling module's config, in sentence-transformers 6's form (``pooling_mode``: a
    name or a list) or the earlier one (``pooling_mode_cls_token``, ``pooling_mode_mean_tokens``, …
    booleans)."""
    if "pooling_mode" in pooling:
        mode = pooling["pooling_mode"]
        return [mode] if isinstance(mode, str) else list(mode)
    legacy = {
        "cls_token": "cls",
        "mean_tokens": "mean",
        "max_tokens": "max",
        "mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
        "weightedmean_tokens": "weightedmean",
        "lasttoken": "lasttoken",
    }
    return [name for key, name in legacy.items() if pooling.get(f"pooling_mode_{key}")] or ["mean"]


def _stamp(model_dir: Path) -> str:
    weights = [f for f in ("model.safetensors", "pytorch_model.bin") if (model_dir / f).exists()]
    return f"{(model_dir / weights[0]).stat().st_mtime_ns}" if weights else ""


def cross_pipeline(model_dir: Path) -> dict:
    """A local cross-encoder checkpoint (a one-logit sequence classifier with a tokenizer.json), if
    exportable."""
    config_file, tok = model_dir / "config.json", model_dir / "tokenizer.json"
    if not config_file.is_file() or not tok.is_file():
        raise ModelUnavailableError(
            f"{model_dir} is not a local cross-encoder with a config.json and tokenizer.json; "
            "use search.rerank_backend = 'torch'"
        )
    config = json.loads(config_file.read_text())
    archs = config.get("architectures") or []
    if (
        not any(a.endswith("ForSequenceClassification") for a in archs)
        or len(config.get("id2label", {0: 0})) != 1
    ):
        raise ModelUnavailableError(
            f"the ONNX reranker exports one-logit sequence classifiers; {model_dir.name} is "
            f"{archs or 'unknown'}: use search.rerank_backend = 'torch'"
        )
    return {"kind": "cross-encoder", "max_seq_length": int(config.get("max_position_embeddings") or 512)}


def exported(model_dir: Path, out: Path) -> bool:
    """Whether ``out`` holds a current export of ``model_dir`` (same path, weights' mtime and format)."""
    manifest_file = out / "scix_onnx.json"
    if not manifest_file.is_file():
        return False
    try:
        done = json.loads(manifest_file.read_text())
    except (OSError, ValueError):
        return False
    return (
        done.get("source") == str(model_dir.resolve())
        and done.get("stamp") == _stamp(model_dir)
        and done.get("format") == FORMAT
    )


def export(model_dir: Path, out: Path, kind: str = "encoder") -> Path:
    """Export ``model_dir`` (``kind`` "encoder": a sentence-transformers bi-encoder; "cross-encoder") to
    ``out`` (float32 graph, int8 graph, tokenizer, manifest); returns ``out``. An export of the same
    checkpoint (path and weights' mtime) in ``out`` is reused."""
    if exported(model_dir, out):
        return out
    with exclusive(out):  # processes started together (test workers, server workers): one exports
        if not exported(model_dir, out):
            _write(model_dir, out, kind)
    return out


def _write(model_dir: Path, out: Path, kind: str) -> None:
    """The export, built in a temporary folder beside ``out`` and renamed over it."""
    info = pipeline(model_dir) if kind == "encoder" else cross_pipeline(model_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        with _quiet():
            (_export_graph if kind == "encoder" else _export_cross)(model_dir, tmp / FILES["onnx"], info)
            info["fused"] = _fuse(model_dir, tmp / FILES["onnx"])
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic

            # fused ops (from the com.microsoft domain) have no inferred output type: declare float
            quantize_dynamic(
                tmp / FILES["onnx"],
                tmp / FILES["onnx-int8"],
                weight_type=QuantType.QInt8,
                per_channel=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        shutil.copy2(model_dir / "tokenizer.json", tmp / "tokenizer.json")
        (tmp / "scix_onnx.json").write_text(
            json.dumps(
                {
                    **info,
                    "source": str(model_dir.resolve()),
                    "stamp": _stamp(model_dir),
                    "format": FORMAT,
                    "opset": OPSET,
                    "files": FILES,
                },
                indent=1,
            )
        )
        old = out.with_name(f".{out.name}.old")
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _quiet():
    """The exporter's tracer warnings (about code paths the trace fixes, e.g. ``is_causal``: this encoder-only
    graph never takes them) and the quantizer's pre-processing advice, which it logs on the root logger."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx|transformers")
            warnings.filterwarnings("ignore", message=r".*[Tt]race", category=Warning)
            yield
    finally:
        root.setLevel(level)


def _export_graph(model_dir: Path, path: Path, info: dict) -> None:
    """The bi-encoder: transformer, then mean or CLS pooling and (if the model has it) L2 normalisation."""
    import torch
    from transformers import AutoModel

    def pooled(out, attention_mask):
        hidden = out.last_hidden_state
        if info["pooling"] == "cls":
            vec = hidden[:, 0]
        else:
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(vec, p=2, dim=1) if info["normalize"] else vec

    _trace(_load(AutoModel, model_dir), pooled, path, "embedding")


def _export_cross(model_dir: Path, path: Path, info: dict) -> None:
    """The cross-encoder: its single relevance logit."""
    from transformers import AutoModelForSequenceClassification

    _trace(
        _load(AutoModelForSequenceClassification, model_dir),
        lambda out, attention_mask: out.logits[:, 0],
        path,
        "logit",
    )


def _load(auto, model_dir: Path):
    """The checkpoint with eager attention (the pattern the optimizer fuses), else as it comes."""

    with no_loading_bar():
        try:
            return auto.from_pretrained(str(model_dir), attn_implementation="eager").eval()
        except (ValueError, TypeError):  # a model class without the eager switch
            return auto.from_pretrained(str(model_dir)).eval()


def _fuse(model_dir: Path, path: Path) -> bool:
    """Rewrite the float32 graph at ``path`` with ONNX Runtime's transformer fusions, in place; whether it
    was."""
    config = (
        json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").is_file() else {}
    )
    family = FUSABLE.get(config.get("model_type", ""))
    if not family:
        return False
    from onnxruntime.transformers.optimizer import optimize_model

    try:
        model = optimize_model(
            str(path),
            model_type=family,
            num_heads=int(config.get("num_attention_heads", 0)),
            hidden_size=int(config.get("hidden_size", 0)),
            opt_level=1,
        )
    except Exception:  # noqa: BLE001 — the optimizer raises whatever its pattern matchers hit; the traced graph stays
        return False
    if not model.get_fused_operator_statistics().get("Attention"):
        return False
    model.save_model_to_file(str(path))
    return True


def _trace(model, head, path: Path, output: str) -> None:
    """Export ``head(model(...), attention_mask)`` with dynamic batch and token axes."""
    import inspect

    import torch

    typed = "token_type_ids" in inspect.signature(model.forward).parameters

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            extra = {"token_type_ids": token_type_ids} if typed else {}
            return head(
                self.model(input_ids=input_ids, attention_mask=attention_mask, **extra), attention_mask
            )

    names = ["input_ids", "attention_mask", *(["token_type_ids"] if typed else [])]
    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {output: {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(
            Wrapped(),
            dummy,
            str(path),
            input_names=names,
            output_names=[output],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _session(folder: Path, backend: str, threads: int | None = None):
    """``threads``: intra-op threads (None: ONNX Runtime's default, one per core); ``SCIX_ONNX_THREADS``
    wins."""
    import onnxruntime as ort

    if backend not in FILES:
        raise ConfigError(f"not an ONNX backend: {backend!r} (one of {', '.join(FILES)})")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    threads = int(os.environ["SCIX_ONNX_THREADS"]) if os.environ.get("SCIX_ONNX_THREADS") else threads
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(folder / FILES[backend]), options, providers=["CPUExecutionProvider"])


def token_arrays(encodings) -> dict[str, np.ndarray]:
    """Right-padded int64 input arrays from ``tokenizers`` encodings."""
    width = max(len(e.ids) for e in encodings)
    arrays = {
        n: np.zeros((len(encodings), width), np.int64)
        for n in ("input_ids", "attention_mask", "token_type_ids")
    }
    for row, e in enumerate(encodings):
        n = len(e.ids)
        arrays["input_ids"][row, :n] = e.ids
        arrays["attention_mask"][row, :n] = e.attention_mask
        arrays["token_type_ids"][row, :n] = e.type_ids
    return arrays


class OnnxCrossEncoder:
    """An exported cross-encoder on ONNX Runtime: ``predict`` returns the raw logits, as CrossEncoder does."""

    def __init__(self, folder: Path, backend: str, max_length: int = 512):
        from tokenizers import Tokenizer

        self.info = json.loads((folder / "scix_onnx.json").read_text())
        self.session = _session(folder, backend)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(
            min(max_length, self.info["max_seq_length"]), strategy="longest_first"
        )
        self.tokenizer.no_padding()

    def predict(self, pairs, batch_size: int = 32) -> np.ndarray:
        """Logits in input order; pairs batched by token length (little padding)."""
        encodings = self.tokenizer.encode_batch([tuple(p) for p in pairs])
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.zeros(len(pairs), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            arrays = token_arrays([encodings[i] for i in rows])
            out[rows] = self.session.run(["logit"], {n: arrays[n] for n in self.inputs})[0].reshape(-1)
        return out


class OnnxModel:
    """An exported pipeline on ONNX Runtime: ``encode`` returns what the sentence-transformers model would."""

    def __init__(self, folder: Path, backend: str, max_length: int | None = None):
        from tokenizers import Tokenizer

        self.info = json.loads((folder / "scix_onnx.json").read_text())
        self.folder, self.backend = folder, backend
        self._sessions: dict[str, object] = {}
        self._sessions_lock = threading.Lock()
        self.max_seq_length = min(max_length or self.info["max_seq_length"], self.info["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()

    @property
    def dim(self) -> int:
        return int(self.info["dim"])

    def _open(self, threads: int | None = None):
        session = _session(self.folder, self.backend, threads)
        return session, [i.name for i in session.get_inputs()]

    def _infer(self, session, arrays: dict[str, np.ndarray]) -> np.ndarray:
        session, inputs = session
        return session.run(["embedding"], {n: arrays[n] for n in inputs})[0]

    def _session_for(self, kind: str):
        """Corpus batches use every core; queries (one, or the few a server's searches encode together) run
        on one thread, so the lexical lanes run beside them instead of waiting for a core (hybrid p50 at 91k
        papers: 7.5 ms against 10.6 ms). Each is opened when first needed: a process that only answers
        queries never opens the other."""
        with self._sessions_lock:
            if kind not in self._sessions:
                self._sessions[kind] = self._open(threads=None if kind == "corpus" else 1)
            return self._sessions[kind]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries, on the one-thread query session, in one batch (L2-normalised rows in input order)."""
        return self._batch(texts, "query")

    def _batch(self, texts: Sequence[str], kind: str | None = None) -> np.ndarray:
        texts = [t.lower() for t in texts] if self.info.get("do_lower_case") else list(texts)
        arrays = token_arrays(self.tokenizer.encode_batch(texts))
        vecs = self._infer(self._session_for(kind or ("corpus" if len(texts) > 1 else "query")), arrays)
        # L2-normalised like the torch backend's normalize_embeddings=True, whether or not the model
        # normalises
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """float32 rows in input order; batches of similar length (sorted), as sentence-transformers does."""
        from tqdm.auto import tqdm

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in tqdm(range(0, len(order), batch_size), disable=not progress, desc="encode", leave=False):
            rows = order[start : start + batch_size]
            out[rows] = self._batch([texts[i] for i in rows])
        return out
