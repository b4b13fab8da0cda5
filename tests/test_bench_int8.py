"""bench/bench_int8.py's calibrated int8 (the closest int8 scheme it measures, docs/method.md §5):
GPTQ's rounding keeps a layer's output closer than rounding each weight to its nearest step, and
the calibrated graph (SmoothQuant's division before the MatMuls, the weights multiplied back)
computes the model's own vectors up to the weights' rounding."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

from ifir_lib.evaluation import onnx_backend as O

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def b8():
    saved = dict(os.environ)  # the bench sets offline and progress defaults for its own process
    sys.path.insert(0, str(BENCH))  # it imports bench_evaluate from beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_int8", BENCH / "bench_int8.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
        os.environ.clear()
        os.environ.update(saved)
    return mod


def test_gptq_rounds_to_int8_and_keeps_the_output_closer(b8):
    g = torch.Generator().manual_seed(0)
    mix = torch.randn(64, 64, generator=g, dtype=torch.float64)
    x = torch.randn(512, 64, generator=g, dtype=torch.float64) @ mix  # correlated input channels
    w = torch.randn(32, 64, generator=g, dtype=torch.float64)
    scale = w.abs().amax(1) / 127
    q = b8.gptq(w, x.T @ x, scale, block=16)  # blocks narrower than the row: the update between them runs

    assert torch.equal(q, q.round()) and q.abs().max() <= 127

    def output_error(steps):
        return float(((x @ (w - steps * scale[:, None]).T) ** 2).sum())

    nearest = (w / scale[:, None]).round()
    assert output_error(q) < 0.5 * output_error(nearest)


def test_calibrated_graph_is_the_model_up_to_rounding(b8, minilm, module_cache, tmp_path, encoder_texts):
    pytest.importorskip(
        "onnxruntime", reason="the ONNX backends need onnxruntime: pip install 'ifir-lib[onnx]'"
    )
    fp32 = O.export_onnx(minilm, "onnx")
    stats = b8.linear_stats(minilm, *b8.calibration_texts(16))
    graphs = {
        "nearest": b8.dequantized_weights(fp32, tmp_path / "nearest.onnx"),
        "calibrated": b8.calibrated_weights(fp32, tmp_path / "calibrated.onnx", minilm, stats),
    }
    # ONNX Runtime runs both graphs in fp32: only the weights are rounded
    encoders = {k: b8.encoder(minilm, p, backend="onnx") for k, p in graphs.items()}
    err = {k: b8.cosine_error(minilm, enc, encoder_texts)[0] for k, enc in encoders.items()}

    assert err["calibrated"] < 3e-4
    assert err["calibrated"] < err["nearest"] / 2
