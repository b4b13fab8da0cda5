"""The encoder of evaluation, chosen by name: ``ifir evaluate --backend B`` (and ``backend=`` in
the Python API and the experiment's ``eval_backend``).

- ``torch`` (default): the model itself, PyTorch fp32.
- ``torch-bf16``: the same model under ``torch.autocast`` with bfloat16 (``Bf16Encoder``): matrix
  products in bf16 with fp32 accumulation, on CPUs with bf16 instructions (AVX512-BF16 or AMX)
  or a GPU. Vectors within ~2e-5 cosine of fp32; not exact: on the bundled sets every metric
  moved by 0.39 points or less, on a small set one near-tie swap can move p-MRR by ~0.5
  (docs/method.md §5).
- ``onnx`` / ``onnx-int8``: the transformer in ONNX Runtime, fp32 or int8 weights
  (``onnx_backend``; ``pip install 'ifir-lib[onnx]'``).
- ``openvino`` / ``openvino-bf16``: the same fp32 export compiled by OpenVINO, fp32 or bf16
  arithmetic (``openvino_backend``; ``pip install 'ifir-lib[openvino]'``). bf16 is as close as
  ``torch-bf16`` and faster.

Each backend's vectors are cached under their own key (``embed_cache.cache_fingerprint``), but for
the batch-dependent ones (``BATCH_DEPENDENT``): never cached, their rows record the batch size
(``backend_label``: ``onnx-int8@32``).
Example::

    enc = encoder_for(load_model("minilm"), "torch-bf16")
    enc.encode(["solar panels"], normalize_embeddings=True).shape  -> (1, 384)

Not handled here: the ONNX export and the runtimes' sessions (``onnx_backend``,
``openvino_backend``), mteb's engine (which encodes with torch).
"""

from __future__ import annotations

import functools
import logging

import numpy as np

from ..core.errors import ConfigError
from .embed_cache import BATCH_DEPENDENT
from .onnx_backend import ONNX_BACKENDS, OnnxEncoder, check_exported
from .openvino_backend import OPENVINO_BACKENDS

log = logging.getLogger(__name__)

BACKENDS = ("torch", "torch-bf16", *ONNX_BACKENDS, *OPENVINO_BACKENDS)


def check_backend(backend: str, model=None) -> None:
    """A ``ConfigError`` for an unknown backend, an ONNX or OpenVINO one whose runtime is not
    installed (or ``openvino-bf16`` on a CPU without bf16), or ``torch-bf16``
    where the model's device has no bf16 arithmetic (``model=None``: where models load here, the GPU
    if there is one, else the CPU)."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend: unknown choice {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend in (*ONNX_BACKENDS, *OPENVINO_BACKENDS):
        check_exported(backend)
    if backend == "torch-bf16" and _device_type(model) == "cpu" and not cpu_has_bf16():
        raise ConfigError(
            "backend 'torch-bf16' needs a CPU with bf16 instructions (AVX512-BF16 or AMX) or a GPU; "
            "this CPU has none, where bf16 would be emulated and slower than fp32: use torch, onnx or openvino"
        )


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether PyTorch's CPU kernels run bf16 natively here (oneDNN's check)."""
    import torch

    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(torch.backends.mkldnn.is_available() and check is not None and check())


def _device_type(model) -> str:
    """``'cuda'``, ``'cpu'``, ...: the model's device; for ``None``, where ``load_model`` puts one."""
    if model is None:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return next(model.parameters()).device.type
    except (AttributeError, StopIteration):
        return "cpu"


class Bf16Encoder:
    """The model, encoding under ``torch.autocast(dtype=torch.bfloat16)``; returns float32.

    Reads of anything else (``prompts``, ``tokenizer``, ``max_seq_length``, ``state_dict``) go to
    the model, so ``models.model_fingerprint(enc)`` equals the model's and ``models.using_prompts``
    on the model applies here. ``backend`` names it for the embedding cache."""

    backend = "torch-bf16"

    def __init__(self, model):
        check_backend(self.backend, model)
        self.model = model

    def __getattr__(self, name):  # only for what the instance and class lack
        return getattr(self.__dict__["model"], name)

    def encode(self, texts, **kw) -> np.ndarray:
        """``SentenceTransformer.encode`` under bf16 autocast: ``encode(['a'], normalize_embeddings=True)``."""
        import torch

        with torch.autocast(_device_type(self.model), dtype=torch.bfloat16):
            out = self.model.encode(texts, **kw)
        return out.astype(np.float32) if isinstance(out, np.ndarray) else out.float()


def backend_label(backend: str, batch_size: int) -> str:
    """The results' ``backend`` for rows ``backend`` encoded at ``batch_size``: its name, with
    ``@<batch size>`` for a batch-dependent one (``backend_label('onnx-int8', 32) -> 'onnx-int8@32'``),
    whose numbers move with the batch size: rows at 8 and at 32 are two conditions, not one."""
    return f"{backend}@{batch_size}" if backend in BATCH_DEPENDENT else backend


def unwrap_encoder(model, backend: str = "torch") -> tuple:
    """``(model, backend)`` for the evaluator: an encoder of ``encoder_for`` given as the model
    labels its rows with its own backend (they said ``torch`` over int8 or bf16 numbers), and still
    encodes itself (its own export: ``bench_int8``'s schemes); a ``backend`` other than ``'torch'``
    (the default) or the encoder's is a ``ConfigError``."""
    if not is_encoder(model):
        return model, backend
    if backend not in ("torch", model.backend):
        raise ConfigError(
            f"backend {backend!r} given for a {model.backend} encoder; give its model, or no backend"
        )
    return model.model, model.backend


def is_encoder(model) -> bool:
    """Whether ``model`` is an encoder of ``encoder_for`` (it encodes itself: its own export or
    graph), not a model, nor a model's name or path (which the evaluator loads first)."""
    return isinstance(model, (Bf16Encoder, OnnxEncoder))


def encoder_for(model, backend: str = "torch", *, source=None):
    """``model`` itself for ``'torch'``, a ``Bf16Encoder`` for ``'torch-bf16'``, else an
    ``OnnxEncoder`` around it, run by ONNX Runtime or OpenVINO (``source``: the run folder its
    export is kept beside)."""
    check_backend(backend, model)
    if backend == "torch":
        return model
    if backend in BATCH_DEPENDENT:
        _warn_batch_dependent(backend)
    if backend == "torch-bf16":
        return Bf16Encoder(model)
    return OnnxEncoder(model, backend, source=source)


@functools.cache
def _warn_batch_dependent(backend: str) -> None:
    """Once per process and backend: its numbers move with ``--batch-size`` (module docstring)."""
    log.warning(
        "%s: a text's vector depends on the texts batched with it (%s), so its metrics move with "
        "--batch-size (onnx-int8 on v1: p-MRR -4.42 at 32, -2.49 at 8) and its vectors are not cached; "
        "its rows record the batch size (backend %s@<batch size>): compare them at one",
        backend,
        "one int8 activation scale per batch"
        if backend == "onnx-int8"
        else "bf16 kernels blocked by batch shape",
        backend,
    )
