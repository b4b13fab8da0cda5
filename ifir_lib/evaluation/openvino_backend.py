"""OpenVINO as the runtime of the ONNX export: ``ifir evaluate --backend openvino|openvino-bf16``.

OpenVINO reads the fp32 ONNX export that ``onnx_backend.export_onnx`` makes (the same file as the
``onnx`` backend) and compiles it for the CPU:

- ``openvino``: fp32 inference (``INFERENCE_PRECISION_HINT=f32``; OpenVINO would otherwise pick
  bf16 by itself on CPUs that have it). The model's own vectors, to ~1e-7 cosine.
- ``openvino-bf16``: bf16 inference with fp32 accumulation, on CPUs with bf16 instructions
  (OpenVINO's ``OPTIMIZATION_CAPABILITIES`` lists ``BF16``). Within ~2e-5 cosine of fp32, like
  ``torch-bf16``, but faster (docs/method.md §5 gives the measured ratios).

``OnnxEncoder`` (``onnx_backend``) does the rest: the model's own tokenizer before, its own
pooling and normalisation after. This module only opens the compiled model behind the same two
calls ONNX Runtime's session offers (``get_inputs``, ``run``). Example::

    sess = openvino_session("model-abc-v2.onnx", threads=2, precision="f32")
    sess.run(["token_embeddings"], {"input_ids": ids, "attention_mask": mask})[0].shape  -> (n, seq, 384)

Not handled here: OpenVINO's int8 (measured in ``bench/bench_int8.py``: it moves v1's p-MRR by
0.56 to 1.22 points, calibrated or not), GPUs and NPUs (the CPU device only), and the export
itself (``onnx_backend``).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from ..core.errors import ConfigError, require_module

OPENVINO_BACKENDS = ("openvino", "openvino-bf16")
OPENVINO_EXTRA = "pip install 'ifir-lib[openvino]'"  # pyproject's extra
PRECISION = {"openvino": "f32", "openvino-bf16": "bf16"}  # INFERENCE_PRECISION_HINT of each backend


def check_openvino(backend: str) -> None:
    """A ``ConfigError`` for a backend that is not an OpenVINO one, when openvino is not installed,
    or for ``openvino-bf16`` on a CPU without bf16 instructions (OpenVINO would emulate it)."""
    if backend not in OPENVINO_BACKENDS:
        raise ConfigError(
            f"backend: {backend!r} is not an OpenVINO backend; choose from {', '.join(OPENVINO_BACKENDS)}"
        )
    require_module("openvino", f"backend {backend!r}", OPENVINO_EXTRA)
    if backend == "openvino-bf16" and not openvino_has_bf16():
        raise ConfigError(
            "backend 'openvino-bf16' needs a CPU with bf16 instructions (AVX512-BF16 or AMX); this CPU "
            "has none: use openvino (fp32)"
        )


@functools.cache
def openvino_has_bf16() -> bool:
    """Whether OpenVINO's CPU plugin runs bf16 natively here (a ``ConfigError`` if it does not load)."""
    try:
        return "BF16" in _core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except RuntimeError as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"OpenVINO's CPU plugin did not load: {first}") from None


@functools.cache
def _core():
    import openvino

    return openvino.Core()


class OpenVinoSession:
    """A compiled OpenVINO model behind ONNX Runtime's session calls (``get_inputs``, ``run``)."""

    def __init__(self, path: str, threads: int, precision: str, extra: dict | None = None):
        config = {
            "INFERENCE_PRECISION_HINT": precision,
            "PERFORMANCE_HINT": "LATENCY",  # one request at a time, all threads on it
            "INFERENCE_NUM_THREADS": threads,
            **(extra or {}),  # further CPU properties (bench/bench_int8.py's dynamic int8)
        }
        core = _core()
        self.compiled = core.compile_model(core.read_model(path), "CPU", config)
        self.request = self.compiled.create_infer_request()  # one: calls come from one thread

    def get_inputs(self) -> list:
        return [SimpleNamespace(name=i.get_any_name()) for i in self.compiled.inputs]

    def run(self, outputs: list[str], feed: dict) -> list:
        """The named outputs as numpy arrays. Inputs and outputs are shared with the request, not
        copied in; each output is then copied out once, as the request reuses its buffers."""
        result = self.request.infer(feed, share_inputs=True, share_outputs=True)
        return [result[name].copy() for name in outputs]


@functools.lru_cache(maxsize=4)
def openvino_session(path: str, threads: int, precision: str) -> OpenVinoSession:
    """The compiled model of the ONNX file ``path`` (one per file, threads and precision)."""
    return OpenVinoSession(path, threads, precision)
