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
    """The bench as a module, leaving the environment, sys.path and sys.modules as they were."""
    env, path, modules = dict(os.environ), sys.path[:], set(sys.modules)
    sys.path.insert(0, str(BENCH))  # it imports bench_evaluate from beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_int8", BENCH / "bench_int8.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        if "bench_evaluate" not in modules:
            sys.modules.pop("bench_evaluate", None)
    return mod


@pytest.fixture
def layer():
    """A (32, 64) weight with inputs whose 64 channels mix 16 sources (correlated, as a model's
    are), the weight's per-row int8 step, and the inputs."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    x = randn(512, 16) @ randn(16, 64) + 0.1 * randn(512, 64)
    w = randn(32, 64)
    return w, w.abs().amax(1) / 127, x


def test_gptq_rounds_to_int8_and_keeps_the_output_closer(b8, layer):
    w, scale, x = layer
    q = b8.gptq(w, x.T @ x, scale, block=16)

    assert torch.equal(q, q.round()) and q.abs().max() <= 127

    def output_error(steps):
        return float(((x @ (w - steps * scale[:, None]).T) ** 2).sum())

    assert output_error(q) < 0.2 * output_error((w / scale[:, None]).round())


def test_gptq_blocks_order_and_dead_channels(b8, layer):
    """Blocks only batch the updates; the result follows the columns when they are permuted; a
    channel that never carries input gets a zero weight."""
    w, scale, x = layer
    h = x.T @ x
    q = b8.gptq(w, h, scale, block=16)
    assert torch.equal(q, b8.gptq(w, h, scale, block=64))
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(1))
    assert torch.equal(b8.gptq(w[:, perm], h[perm][:, perm], scale, block=16), q[:, perm])
    x[:, 5] = 0
    assert torch.equal(b8.gptq(w, x.T @ x, scale)[:, 5], torch.zeros(32, dtype=q.dtype))


@pytest.mark.slow
def test_calibrated_graph_is_the_model_up_to_rounding(b8, minilm, module_cache, tmp_path, encoder_texts):
    pytest.importorskip(
        "onnxruntime", reason="the ONNX backends need onnxruntime: pip install 'ifir-lib[onnx]'"
    )
    fp32 = O.export_onnx(minilm, "onnx")
    stats = b8.linear_stats(minilm, *b8.calibration_texts(16))
    graphs = {
        "nearest": b8.dequantized_weights(fp32, tmp_path / "nearest.onnx"),
        "calibrated": b8.calibrated_weights(fp32, tmp_path / "calibrated.onnx", stats),
    }
    # ONNX Runtime runs both graphs in fp32: only the weights are rounded
    encoders = {k: b8.encoder(minilm, p, backend="onnx") for k, p in graphs.items()}
    err = {k: b8.cosine_error(minilm, enc, encoder_texts)[0] for k, enc in encoders.items()}

    assert err["calibrated"] < 3e-4
    assert err["calibrated"] < err["nearest"] / 2


def test_calibration_refuses_a_weight_it_cannot_serve(b8):
    """A weight multiplied with one input is calibrated once however many MatMuls use it; one
    multiplied with two inputs, or held by no calibrated Linear, is refused by name."""
    from onnx import helper, numpy_helper

    lin = torch.nn.Linear(4, 3, bias=False)
    weight = numpy_helper.from_array(lin.weight.detach().numpy().T.copy(), "W")

    def graph(*inputs):
        nodes = [helper.make_node("MatMul", [x, "W"], [f"y{i}"]) for i, x in enumerate(inputs)]
        return helper.make_graph(nodes, "g", [], [], [weight])

    once = b8._weights_by_input(graph("a", "a"), {lin: ()})
    assert {x: [name for name, _ in pairs] for x, pairs in once.items()} == {"a": ["W"]}
    with pytest.raises(ValueError, match="'W' is multiplied with two inputs"):
        b8._weights_by_input(graph("a", "b"), {lin: ()})
    with pytest.raises(ValueError, match="'W': 0 calibrated Linears"):
        b8._weights_by_input(graph("a"), {})
