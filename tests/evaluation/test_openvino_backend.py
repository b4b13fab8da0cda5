"""The OpenVINO backends of evaluation against PyTorch, with the real bundled MiniLM.

``openvino`` (fp32) must give torch's vectors and metrics; ``openvino-bf16`` must stay within
issue 27's bound (0.5 points x100 on every metric) on the bundled sets; both run the ``onnx``
backend's fp32 export, and each keeps its own embedding cache.
"""

import numpy as np
import pytest

pytest.importorskip(
    "openvino",
    reason="the OpenVINO backends need openvino: pip install 'ifir-lib[openvino]' (make setup-dev installs it)",
)

from ifir_lib.core.config import EVAL_SETS  # noqa: E402
from ifir_lib.core.errors import ConfigError  # noqa: E402
from ifir_lib.core.models import encode, format_document, model_fingerprint, using_prompts  # noqa: E402
from ifir_lib.evaluation import onnx_backend as O  # noqa: E402
from ifir_lib.evaluation import openvino_backend as OV  # noqa: E402
from ifir_lib.evaluation.backends import backend_label, encoder_for  # noqa: E402
from ifir_lib.evaluation.corpora import load_followir  # noqa: E402
from ifir_lib.evaluation.embed_cache import BATCH_DEPENDENT, EmbeddingCache, cache_fingerprint, text_key  # noqa: E402
from ifir_lib.evaluation.evaluator import evaluate_followir  # noqa: E402


def _has_bf16() -> bool:
    try:
        return OV.openvino_has_bf16()
    except ConfigError:  # the CPU plugin does not load: the fp32 tests fail and say why
        return False


BF16 = pytest.mark.skipif(
    not _has_bf16(),
    reason="openvino-bf16 needs a CPU with bf16 instructions (AVX512-BF16 or AMX); this one has none",
)
OV_BACKENDS = ["openvino", pytest.param("openvino-bf16", marks=BF16)]


@pytest.fixture(scope="module", autouse=True)
def export_cache(module_cache):
    """One cache for the module: the export is made once here."""
    return module_cache


def test_fp32_openvino_vectors_equal_torch(minilm, encoder_texts):
    enc = encoder_for(minilm, "openvino")
    for prompts in (None, {"query": "query: ", "document": "passage: "}):
        with using_prompts(minilm, prompts):
            for kind in ("query", "document"):
                ref, got = encode(minilm, encoder_texts, kind), encode(enc, encoder_texts, kind)
                assert got.shape == ref.shape and got.dtype == np.float32
                assert (got * ref).sum(1).min() > 1 - 1e-6, (prompts, kind)  # bf16 is ~1e-5 off
    assert enc.path == O.export_onnx(minilm, "onnx")  # the onnx backend's file, compiled by OpenVINO


@BF16
def test_bf16_vectors_are_close_but_not_fp32(minilm, encoder_texts):
    ref = encode(minilm, encoder_texts, "document")
    got = encode(encoder_for(minilm, "openvino-bf16"), encoder_texts, "document")
    cos = (got * ref).sum(1)
    assert cos.min() > 1 - 1e-4, cos.min()
    assert cos.max() < 1 - 1e-6  # bf16 arithmetic ran: with the fp32 hint this fails (~1e-7)


@pytest.fixture(scope="module")
def torch_metrics(minilm):
    """PyTorch fp32's metrics on each bundled set, computed once for the module."""
    return {
        name: evaluate_followir(minilm, path, bootstrap=0, cache=False).metrics
        for name, path in EVAL_SETS.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVAL_SETS))
@pytest.mark.parametrize("backend", OV_BACKENDS)
def test_every_metric_on_the_bundled_sets_within_half_a_point(minilm, torch_metrics, name, backend):
    """Issue 27's bound on the sets it names (measured for bf16: at most 0.26, v1 MAP@1000);
    fp32 must leave the metrics as they are."""
    ref = torch_metrics[name]
    got = evaluate_followir(minilm, EVAL_SETS[name], bootstrap=0, cache=False, backend=backend)
    label = backend_label(backend, 32)  # openvino-bf16@32: its numbers move with the batch size
    assert got.backend == label and got.summary()["backend"] == label
    diffs = {m: round(got.metrics[m] - ref[m], 2) for m in ref}
    bound = 0.5 if backend == "openvino-bf16" else 0.0
    assert all(abs(d) <= bound for d in diffs.values()), diffs


@pytest.mark.parametrize("backend", OV_BACKENDS)
def test_each_backend_caches_its_own_vectors(minilm, fir, backend):
    """torch's vectors never stand in for OpenVINO's, nor fp32's for bf16's (or the reverse)."""
    fp = model_fingerprint(minilm)
    for b in ("torch", backend):
        evaluate_followir(minilm, fir, bootstrap=0, backend=b)
    keys = [text_key(format_document(d), "document") for d in load_followir(fir).corpus.values()]
    (ref, miss_ref), (got, miss) = (
        EmbeddingCache(cache_fingerprint(fp, b)).get(keys) for b in ("torch", backend)
    )
    if backend in BATCH_DEPENDENT:  # bf16 vectors depend on their batch: never cached
        assert miss_ref == [] and len(miss) == len(keys)
        return
    assert miss_ref == [] and miss == []  # each stored every document under its own key
    assert not np.array_equal(ref, got)  # and its own vectors, not torch's read back


def test_session_takes_further_cpu_properties(minilm):
    """``extra`` reaches the compiled model beside the precision, threads and latency hint
    (bench/bench_int8.py sets OpenVINO's dynamic int8 this way)."""
    path = str(O.export_onnx(minilm, "onnx"))
    plain = OV.OpenVinoSession(path, 1, "f32")
    tuned = OV.OpenVinoSession(path, 1, "f32", {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 64})
    assert int(tuned.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) == 64
    assert int(plain.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) != 64
    assert int(tuned.compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    assert "float32" in str(tuned.compiled.get_property("INFERENCE_PRECISION_HINT"))
