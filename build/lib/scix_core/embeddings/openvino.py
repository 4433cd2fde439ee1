"""OpenVINO encoding: ``embedding.backend = "openvino"`` (float32 weights, bfloat16 arithmetic where the CPU
has it) or ``"openvino-int8"`` (NNCF post-training int8 quantization of weights *and* activations; the rest
float32).

Both are converted, the first time they are asked for, from the float32 ONNX export of the same checkpoint
(:mod:`scix_core.embeddings.onnx`) into the same export folder — nothing is downloaded. ONNX Runtime's int8 is
dynamic (activations quantised at run time; attention stays float32); OpenVINO's is static: activation ranges
are calibrated once (NNCF, transformer preset with SmoothQuant), so the attention matmuls run in int8 too.

Calibration data is part of the model, so it must not depend on whichever corpus is being encoded (vectors of
two indexes would then live in different spaces): it is :data:`CALIBRATION` — 40 sentences of generic
scientific prose written for this package — joined into ``PASSAGES`` seeded passages of 1–16 sentences (about
20–300 tokens, the range abstracts have) and a quarter as many of 1–8 words (queries). Changing them changes
the vectors: bump ``OPENVINO_FORMAT`` (in :mod:`~scix_core.embeddings.onnx`), which is part of the converted
files' names and of the embedding cache key.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import tempfile
import threading
from pathlib import Path

import numpy as np

from scix_core.embeddings import cpu
from scix_core.embeddings.onnx import FILES as ONNX_FILES
from scix_core.embeddings.onnx import OPENVINO_FORMAT as FORMAT
from scix_core.embeddings.onnx import OnnxModel, token_arrays
from scix_core.errors import ModelUnavailableError
from scix_core.locks import exclusive

FILES = {"openvino": f"model-ov.o{FORMAT}.xml", "openvino-int8": f"model-ov-int8.o{FORMAT}.xml"}
CALIBRATION = Path(__file__).with_name("calibration.txt")
PASSAGES = 256
SEED = 0
log = logging.getLogger(__name__)


def calibration_passages(n: int = PASSAGES, seed: int = SEED) -> list[str]:
    """``n`` passages of 1–16 sentences (abstract-sized), then ``n // 4`` of 1–8 words (query-sized: a short
    input's activations are not a long one's)."""
    sentences = [s.strip() for s in CALIBRATION.read_text().splitlines() if s.strip()]
    rng = random.Random(seed)
    long = [" ".join(rng.sample(sentences, rng.randint(1, min(16, len(sentences))))) for _ in range(n)]
    short = [" ".join(rng.choice(sentences).split()[: rng.randint(1, 8)]) for _ in range(n // 4)]
    return long + short


def _openvino():
    try:
        import openvino
    except ImportError as exc:  # an optional install trimmed away: say which package
        raise ModelUnavailableError(
            f"embedding backend openvino needs the openvino package ({exc}); "
            "pip install openvino nncf, or use embedding.backend = 'onnx-int8'"
        ) from exc
    return openvino


def converted(folder: Path, backend: str) -> Path:
    """``folder``'s OpenVINO model for ``backend`` (an IR ``.xml`` + ``.bin``), converted from its ONNX
    float32 graph if not there yet; written under temporary names and renamed, the ``.xml`` last, so a reader
    never sees half a model."""
    target = folder / FILES[backend]
    if not _saved(target):
        with exclusive(target):  # processes started together: one converts (and calibrates), the others wait
            if not _saved(target):
                _convert(folder, backend, target)
    return target


def _saved(target: Path) -> bool:
    return target.is_file() and target.with_suffix(".bin").is_file()


def _convert(folder: Path, backend: str, target: Path) -> None:
    ov = _openvino()
    model = ov.Core().read_model(str(folder / ONNX_FILES["onnx"]))
    if backend == "openvino-int8":
        model = _quantize(model, folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".xml", dir=folder)
    os.close(fd)
    tmp = Path(tmp)
    try:
        ov.save_model(model, str(tmp), compress_to_fp16=False)
        os.replace(tmp.with_suffix(".bin"), target.with_suffix(".bin"))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_suffix(".bin").unlink(missing_ok=True)


def _quantize(model, folder: Path):
    try:
        import nncf
    except ImportError as exc:
        raise ModelUnavailableError(
            f"embedding backend openvino-int8 needs the nncf package ({exc}); "
            "pip install nncf, or use embedding.backend = 'openvino'"
        ) from exc
    from tokenizers import Tokenizer

    logging.getLogger("nncf").setLevel(logging.ERROR)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.no_padding()
    names = [i.get_any_name() for i in model.inputs]
    samples = [
        {n: a[n] for n in names}
        for a in (token_arrays(tokenizer.encode_batch([p])) for p in calibration_passages(PASSAGES))
    ]
    log.info("openvino-int8: calibrating %s on %d passages (once per model)", folder.name, len(samples))
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):  # NNCF's progress bars
        return nncf.quantize(
            model, nncf.Dataset(samples), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(samples)
        )


class OpenVinoModel(OnnxModel):
    """The exported pipeline on OpenVINO: ``encode`` as :class:`~scix_core.embeddings.onnx.OnnxModel`'s."""

    def _open(self, threads: int | None = None):
        ov = _openvino()
        # bfloat16 arithmetic doubles the float32 model's speed; the int8 model is as fast without it, and
        # float32 keeps its corpus and query vectors (and its first-seen query shapes: p50 3.7 against 4.1 ms)
        # tighter
        config = {
            "INFERENCE_PRECISION_HINT": "bf16" if self.backend == "openvino" and cpu.has(cpu.BF16) else "f32"
        }
        threads = int(os.environ["SCIX_ONNX_THREADS"]) if os.environ.get("SCIX_ONNX_THREADS") else threads
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        if (
            threads == 1
        ):  # the query session, unpinned: pinned, its thread shares a core with the lexical lane
            config["ENABLE_CPU_PINNING"] = (
                False  # running beside it (hybrid p50 at 91k papers 8.7 against 11.7 ms)
            )
        core = ov.Core()
        cache = self.folder / "openvino-cache"
        core.set_property({"CACHE_DIR": str(cache)})  # a later process loads, not compiles
        model = str(converted(self.folder, self.backend))
        with exclusive(cache):  # one process writes a compiled blob while the others wait, then load it
            compiled = core.compile_model(model, "CPU", config)
        return compiled.create_infer_request(), [i.get_any_name() for i in compiled.inputs], threading.Lock()

    def _infer(self, session, arrays: dict[str, np.ndarray]) -> np.ndarray:
        request, inputs, lock = session
        with lock:  # an infer request is one call at a time; query threads share the query session's
            return np.array(request.infer({n: arrays[n] for n in inputs})[0], dtype=np.float32, copy=True)
