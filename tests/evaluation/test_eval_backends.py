"""The choice of encoder (``evaluation.backends``): bf16 autocast against PyTorch fp32 with the real
bundled MiniLM, the refusals, and every backend's rows kept apart in the results table and in the
experiment's plan. (The ONNX backends: ``test_onnx_backend.py``.)"""

import subprocess
import sys
import types

import numpy as np
import pytest

from ifir_lib.core.config import EVAL_SETS
from ifir_lib.core.errors import ConfigError
from ifir_lib.core.models import encode, model_fingerprint, using_prompts
from ifir_lib.evaluation import backends as B
from ifir_lib.evaluation import openvino_backend as OV
from ifir_lib.evaluation.evaluator import evaluate_followir
from ifir_lib.pipelines import plan as P
from ifir_lib.pipelines.evaluate import evaluate_models
from ifir_lib.pipelines.experiment import ExperimentConfig
from ifir_lib.reporting.results import load_results

BF16 = pytest.mark.skipif(
    not B.cpu_has_bf16(),
    reason="torch-bf16 needs a CPU with bf16 instructions (AVX512-BF16 or AMX); this one has none",
)
TEXTS = ["solar panels on the roof", "a court ruling on fishing quotas in the north sea", "x"]


@BF16
def test_bf16_vectors_are_fp32_float_and_within_1e_4_cosine(minilm):
    enc = B.encoder_for(minilm, "torch-bf16")
    assert enc.backend == "torch-bf16" and model_fingerprint(enc) == model_fingerprint(minilm)
    for prompts in (None, {"query": "query: ", "document": "passage: "}):
        with using_prompts(minilm, prompts):
            ref, got = encode(minilm, TEXTS, "query"), encode(enc, TEXTS, "query")
            assert got.dtype == np.float32 and got.shape == ref.shape
            cos = (got * ref).sum(1)
            assert cos.min() > 1 - 1e-4, (prompts, cos)
            assert cos.max() < 1 - 1e-8  # bf16 arithmetic ran: fp32 would agree to the last bits
    assert next(minilm.parameters()).dtype.is_floating_point and minilm.encode(["x"]).dtype == np.float32


@BF16
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVAL_SETS))
def test_bf16_leaves_every_metric_on_the_bundled_sets_within_half_a_point(minilm, name):
    """Issue 27's bound on the sets it names (measured: at most 0.39, v1 nDCG@5). On a small
    synthetic set (8 queries) one near-tie swap already moves p-MRR by 0.52: bf16 is not exact."""
    folder = EVAL_SETS[name]
    ref, got = (
        evaluate_followir(minilm, folder, bootstrap=0, cache=False, backend=b)
        for b in ("torch", "torch-bf16")
    )
    assert got.backend == "torch-bf16@32" and got.summary()["backend"] == "torch-bf16@32"
    diffs = {m: got.metrics[m] - ref.metrics[m] for m in ref.metrics}
    assert all(abs(d) <= 0.5 for d in diffs.values()), diffs


def test_bf16_is_refused_where_the_cpu_would_emulate_it(minilm, monkeypatch):
    monkeypatch.setattr(B, "cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match="bf16 instructions.*use torch, onnx or openvino"):
        B.encoder_for(minilm, "torch-bf16")
    with pytest.raises(ConfigError, match="unknown choice 'fp8'"):
        B.check_backend("fp8")
    assert B.encoder_for(minilm, "torch") is minilm


@BF16
def test_each_backend_has_its_own_rows_and_a_rerun_adds_none(fir, tmp_path, private_cache):
    csv = tmp_path / "results.csv"
    run = dict(followir=[fir], results_csv=csv, bootstrap=0, skip_done=True, style=None)
    for backend, batch in [
        ("torch", 32),
        ("torch-bf16", 32),
        ("torch-bf16", 32),
        ("torch", 8),
        ("torch-bf16", 8),
    ]:
        evaluate_models({"minilm": "minilm"}, backend=backend, batch_size=batch, **run)
    df = load_results(csv)
    per_backend = df.groupby("backend")["run_id"].nunique().to_dict()
    # one evaluation each: the reruns were skipped, but bf16's numbers move with the batch size, so
    # its run at 8 is another condition (it was skipped as done, or pooled with 32's rows unlabelled)
    assert per_backend == {"torch": 1, "torch-bf16@32": 1, "torch-bf16@8": 1}


def test_the_experiment_plans_its_evaluation_backend():
    default = ExperimentConfig.preset("smoke")
    plan = default.plan()
    assert plan["eval_backend"] is None
    # unset, the field is not in the plan: experiments planned before it keep their hash
    assert P.plan_hash(plan) == P.plan_hash({k: v for k, v in plan.items() if k != "eval_backend"})
    bf16 = ExperimentConfig.preset("smoke", eval_backend="torch-bf16") if B.cpu_has_bf16() else None
    if bf16 is not None:
        assert P.plan_hash(bf16.plan()) != P.plan_hash(plan)
        assert 'eval_backend = "torch-bf16"' in P.to_toml(bf16.plan())
    with pytest.raises(ConfigError, match="unknown choice 'int4'"):
        ExperimentConfig.preset("smoke", eval_backend="int4")


@pytest.mark.parametrize("backend", ["openvino", "openvino-bf16"])
def test_openvino_backends_without_openvino_name_the_extra(minilm, monkeypatch, backend):
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"needs openvino: pip install 'ifir-lib\[openvino\]'"):
        B.encoder_for(minilm, backend)


def test_openvino_bf16_is_refused_where_the_cpu_would_emulate_it(minilm, monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", types.ModuleType("openvino"))  # installed or not
    monkeypatch.setattr(OV, "openvino_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match="bf16 instructions.*use openvino"):
        B.encoder_for(minilm, "openvino-bf16")
    with pytest.raises(ConfigError, match="not an OpenVINO backend"):
        OV.check_openvino("onnx")


def test_the_package_imports_without_the_optional_runtimes():
    """onnxruntime and openvino are extras: importing the workbench must not import them."""
    code = "import sys, ifir_lib.cli, ifir_lib.evaluation.backends; print(sorted({'onnxruntime', 'openvino'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_batch_dependent_backend_is_never_cached(private_cache, monkeypatch):
    """onnx-int8 at batch 8 read batch 32's vectors back (v1 p-MRR -4.42 for a fresh run's -2.49), and
    at one batch size a vector still held the neighbours of the run that cached it."""
    from ifir_lib.evaluation import embed_cache as EC

    asked = []

    def encode(model, texts, kind, batch_size=32):
        asked.append((model.backend, list(texts)))
        return np.ones((len(texts), 3), np.float32) / np.sqrt(3)

    monkeypatch.setattr(EC, "encode_by_length", encode)
    for backend in ("onnx-int8", "torch-bf16", "openvino-bf16", "onnx"):
        for _ in range(2):
            EC.encode_cached(types.SimpleNamespace(backend=backend), ["a", "b"], "query", fingerprint="ab12")
    asked_of = [b for b, _ in asked]
    assert asked_of == ["onnx-int8"] * 2 + ["torch-bf16"] * 2 + ["openvino-bf16"] * 2 + [
        "onnx"
    ]  # fp32: cached


@BF16
def test_an_encoder_given_as_the_model_labels_its_rows_with_its_backend(
    minilm, fir, private_cache, monkeypatch
):
    """evaluate_followir(encoder_for(m, 'torch-bf16'), ...) gave rows labelled torch holding bf16 numbers;
    the encoder given encodes itself (bench_int8's schemes are encoders around their own graphs)."""
    from ifir_lib.evaluation import evaluator

    enc = B.encoder_for(minilm, "torch-bf16")
    monkeypatch.setattr(
        evaluator, "encoder_for", lambda *a, **k: pytest.fail("the given encoder was rebuilt")
    )
    res = evaluate_followir(enc, fir, bootstrap=0, name="minilm")
    assert res.backend == "torch-bf16@32" and res.model == "minilm"
    with pytest.raises(ConfigError, match="backend 'onnx' given for a torch-bf16 encoder"):
        evaluate_followir(enc, fir, bootstrap=0, backend="onnx")
