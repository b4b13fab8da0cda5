"""Why ``onnx-int8`` misses issue 27's 0.5-point bound, and what the alternatives cost (run by hand).

    .venv/bin/python bench/bench_int8.py [--docs 400] [--repeat 3] [--groups] [--simulate] [--second-pass]

Each scheme quantizes the same fp32 ONNX export of MiniLM (``onnx_backend.export_onnx``) and is
measured against PyTorch fp32 in the same run:

- ``dynamic``: the shipped ``onnx-int8`` (``quantize_dynamic``: per-channel int8 weights,
  per-*tensor* uint8 activations, every weight MatMul);
- ``dynamic, FFN-down fp32``: the same with each layer's FFN output MatMul left in fp32 (the
  most sensitive group, see ``--groups``);
- ``8-bit blocks``: ``MatMulNBitsQuantizer(bits=8, block_size=32, accuracy_level=4)``, weights in
  blocks of 32 and activations quantized per row and block at run time (needs ``onnx-ir``;
  skipped with a line saying so without it);
- ``openvino-bf16``: the shipped backend (fp32 export, bf16 arithmetic), for reference;
- ``OpenVINO int8, groups of G``: per-channel int8 weights (``DequantizeLinear`` in the graph,
  which OpenVINO compiles to int8-weight matrix products) with OpenVINO's dynamic quantization of
  activations per token and group of ``G`` input channels (``DYNAMIC_QUANTIZATION_GROUP_SIZE``),
  bf16 elsewhere: finer than ``quantize_dynamic``'s one scale per tensor;
- ``OpenVINO int8 calibrated, groups of G``: the same kernels, with the int8 weights calibrated on
  128 bundled seeds (their queries with instructions, positives and first instruction negatives;
  never v1 or v2): each MatMul's input divided per channel by SmoothQuant's scale (alpha 0.5, its
  default) and the weights multiplied by it, then rounded by GPTQ. In a one-off PyTorch
  simulation (256 bundled documents) this cuts the weights' own error from 4.4e-4 to 9e-5
  (1 - cosine) and evens out the activations that each group's scale must cover.
  The OpenVINO rows are skipped, with a line, without openvino or a CPU with bf16.

For each it prints the mean and worst ``1 - cosine`` to PyTorch's document vectors on ``--docs``
bundled v1 + v2 documents, the documents/s ratio to PyTorch on them (alternating rounds, fastest
kept), and every metric's difference on v1 and v2 (points x100). ``--groups`` first prints each
layer's MatMul groups (qkv, attention output, FFN up, FFN down) quantized alone: the errors add
up, and no subset holding enough of the arithmetic for 2x keeps the error under ~1e-4, which
v1's p-MRR needs (8-bit blocks at ~3e-4 still move it by 0.6 to 0.8).

``--simulate`` separates the two halves of int8 in PyTorch (fake quantization: each Linear's
input and weight rounded to int8 and back, the arithmetic in fp32), so the floor of each is seen
apart from ONNX Runtime's kernels: per-channel int8 weights alone, activations alone (per tensor as
``quantize_dynamic``, per token, per token with a zero point, per block of 32), and both.

``--second-pass`` tries the two-pass way out: queries in fp32, every candidate in int8, then the
candidates whose int8 score is within ``eps`` of a neighbour's in any ranking (og or changed
instruction) encoded again in fp32. It runs after the comparison of schemes, on every document of
v1 and v2 (``--docs`` does not apply), and prints for each set how far int8 moves a score
(median) against how far apart neighbouring candidates are, then for each ``eps`` the share of
documents encoded twice and every metric's difference to PyTorch fp32. At int8's ~2.3x, 2x
leaves room to re-encode under 7% of the documents.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from bench_evaluate import METRICS, bundled_documents, time_encoders  # noqa: E402

from ifir_lib.core import config  # noqa: E402


def weight_matmuls(path: Path) -> list[str]:
    """Names of the MatMuls whose second input is a weight (what int8 quantizes)."""
    import onnx

    graph = onnx.load(str(path)).graph
    weights = {i.name for i in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def group_of(name: str) -> str:
    """``L3-qkv``, ``L3-attn-out``, ``L3-ffn-up`` or ``L3-ffn-down`` for a BERT MatMul name."""
    layer = name.split("layer.")[1].split("/")[0]
    part = (
        "qkv"
        if "/self/" in name
        else "attn-out"
        if "attention/output" in name
        else "ffn-up"
        if "intermediate" in name
        else "ffn-down"
    )
    return f"L{layer}-{part}"


def dynamic(src: Path, dst: Path, exclude: list[str]) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=exclude,
    )
    return dst


def blocks8(src: Path, dst: Path) -> Path | None:
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as err:
        print(f"8-bit blocks: skipped ({err}; pip install onnx-ir)")
        return None
    q = MatMulNBitsQuantizer(str(src), bits=8, block_size=32, is_symmetric=True, accuracy_level=4)
    q.process()
    q.model.save_model_to_file(str(dst), False)
    return dst


def dequantized_weights(src, dst: Path, rounded: dict | None = None) -> Path:
    """``src`` (a path, or a loaded ``onnx.ModelProto``, which is changed in place) with each
    weight MatMul's (K, N) weight stored as symmetric per-channel int8, kept
    transposed (N, K) behind ``DequantizeLinear`` and a ``Transpose``: the weight-compression
    pattern OpenVINO's CPU plugin runs as int8-weight matrix products. ``rounded`` maps a weight's
    name to its own (int8 (N, K), scale (N,)) (``calibrated_weights``); the rest are rounded to
    the nearest step of largest |w| / 127."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src)) if isinstance(src, str | Path) else src
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes, done = [], {}  # weight name -> its dequantized output (a weight shared by MatMuls: once)
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in done:
            node.input[1] = done[node.input[1]]
        elif node.op_type == "MatMul" and node.input[1] in inits:
            w = inits.pop(node.input[1])
            graph.initializer.remove(w)
            name = w.name
            q, scale = (rounded or {}).get(name) or _nearest_int8(numpy_helper.to_array(w).T)
            graph.initializer.extend([
                numpy_helper.from_array(q, f"{name}_q"),
                numpy_helper.from_array(scale.astype(np.float32), f"{name}_scale"),
                numpy_helper.from_array(np.zeros_like(scale, np.int8), f"{name}_zero"),
            ])  # fmt: skip
            nodes.append(helper.make_node(
                "DequantizeLinear", [f"{name}_q", f"{name}_scale", f"{name}_zero"], [f"{name}_nk"], axis=0
            ))  # fmt: skip
            nodes.append(helper.make_node("Transpose", [f"{name}_nk"], [f"{name}_kn"], perm=[1, 0]))
            node.input[1] = done[name] = f"{name}_kn"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(dst))
    return dst


def _nearest_int8(wt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) weights -> (int8 (N, K), scale (N,)): each row to the nearest step of its largest |w| / 127."""
    wt = wt.astype(np.float32)
    scale = np.maximum(np.abs(wt).max(1), 1e-12) / 127
    return np.clip(np.round(wt / scale[:, None]), -127, 127).astype(np.int8), scale


def calibration_texts(n: int = 128) -> tuple[list[str], list[str]]:
    """Documents (each seed's positive and first instruction negative) and queries (with their
    instruction) of ``n`` bundled seeds drawn at random: calibration data, never v1 or v2."""
    from ifir_lib.core.models import format_document, format_query
    from ifir_lib.seeds.schema import load_seeds

    seeds = load_seeds()
    pick = [seeds[i] for i in np.random.default_rng(1).permutation(len(seeds))[:n]]
    docs = [format_document(d) for s in pick for d in (s["positive"], s["instruction_negatives"][0])]
    return docs, [format_query(s["query"], s["instruction"]) for s in pick]


def encoder_linears(model) -> list:
    """The Linear layers of the model's transformer layers (what int8 rounds)."""
    import torch

    return [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "encoder" in n]


def linear_stats(model, docs: list[str], queries: list[str]) -> dict:
    """Each encoder Linear -> (sum of x x^T over its inputs' real tokens (float64), each input
    channel's largest |x|), from encoding ``docs`` and ``queries`` with ``model``."""
    import torch

    from ifir_lib.core.models import encode

    f64 = torch.float64
    stats = {
        m: [torch.zeros(m.in_features, m.in_features, dtype=f64), torch.zeros(m.in_features, dtype=f64)]
        for m in encoder_linears(model)
    }
    mask = {}

    def keep_mask(module, args):  # the Transformer module's features: padding is not calibrated
        mask["real"] = args[0]["attention_mask"].bool()

    def add(module, args):
        x = args[0][mask["real"]].double()
        s = stats[module]
        s[0], s[1] = s[0] + x.T @ x, torch.maximum(s[1], x.abs().amax(0))

    hooks = [model[0].register_forward_pre_hook(keep_mask)]
    hooks += [m.register_forward_pre_hook(add) for m in stats]
    try:
        encode(model, docs, "document", batch_size=32)
        encode(model, queries, "query", batch_size=32)
    finally:
        for h in hooks:
            h.remove()
    return {m: tuple(s) for m, s in stats.items()}


def gptq(w, h, scale, damp: float = 0.01, block: int = 128):
    """GPTQ's rounding (Frantar et al., 2022, with its column order by decreasing ``h`` diagonal)
    of ``w`` (N, K) to multiples of ``scale`` (N,) within +-127, which keeps ``(w - q) x`` small
    for inputs with second moments ``h`` (K, K): int8 (N, K) as a float64 tensor."""
    import torch

    w, h = w.double().clone(), h.double().clone()
    dead = torch.diag(h) == 0
    h[dead, dead], w[:, dead] = 1, 0
    perm = torch.argsort(torch.diag(h), descending=True)
    w, h = w[:, perm], h[perm][:, perm]
    h += damp * torch.diag(h).mean() * torch.eye(len(h), dtype=h.dtype)
    u = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    s, q = scale.double(), torch.zeros_like(w)
    for i1 in range(0, w.shape[1], block):
        i2 = min(i1 + block, w.shape[1])
        wb, ub, err = w[:, i1:i2].clone(), u[i1:i2, i1:i2], torch.zeros(len(w), i2 - i1, dtype=w.dtype)
        for i in range(i2 - i1):
            q[:, i1 + i] = (wb[:, i] / s).round().clamp(-127, 127)
            err[:, i] = (wb[:, i] - q[:, i1 + i] * s) / ub[i, i]
            wb[:, i:] -= err[:, i : i + 1] @ ub[i : i + 1, i:]
        w[:, i2:] -= err @ u[i1:i2, i2:]
    return q[:, torch.argsort(perm)]


def calibrated_weights(src: Path, dst: Path, stats: dict, alpha: float = 0.5) -> Path:
    """``dequantized_weights`` with calibrated rounding: each MatMul input is divided per channel
    by SmoothQuant's s = max|x|^alpha / max|w|^(1 - alpha) (Xiao et al., 2023; a ``Mul`` before
    the MatMuls that share the input; alpha 0.5, its default, not tuned here), each weight
    multiplied by s and rounded by ``gptq`` on ``stats`` (``linear_stats``)."""
    import onnx
    import torch
    from onnx import helper, numpy_helper

    graph_model = onnx.load(str(src))
    graph = graph_model.graph
    by_input, rounded = _weights_by_input(graph, stats), {}
    for x, pairs in by_input.items():
        wmax = torch.stack([lin.weight.detach().abs().amax(0) for _, lin in pairs]).amax(0).double()
        h, xmax = stats[pairs[0][1]]
        s = xmax.clamp_min(1e-5) ** alpha / wmax.clamp_min(1e-5) ** (1 - alpha)
        graph.initializer.append(numpy_helper.from_array((1 / s).numpy().astype(np.float32), f"{x}_inv_s"))
        for name, lin in pairs:
            w = lin.weight.detach().double() * s
            scale = w.abs().amax(1).clamp_min(1e-12) / 127
            q = gptq(w, h / s[:, None] / s[None, :], scale)
            rounded[name] = (q.numpy().astype(np.int8), scale.numpy())
    nodes, placed = [], set()
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in rounded:  # weight MatMuls only
            x = node.input[0]
            if x not in placed:  # one Mul per input, before its first MatMul
                nodes.append(helper.make_node("Mul", [x, f"{x}_inv_s"], [f"{x}_smoothed"]))
                placed.add(x)
            node.input[0] = f"{x}_smoothed"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return dequantized_weights(graph_model, dst, rounded)


def _weights_by_input(graph, stats: dict) -> dict[str, list]:
    """Each weight MatMul's input -> [(weight name, the torch Linear in ``stats`` holding that
    weight)], each weight once; a ``ValueError`` for a weight no single Linear holds, or one that
    two inputs share (a single s could not serve both)."""
    from onnx import numpy_helper

    inits = {i.name: i for i in graph.initializer}
    by_input: dict[str, list] = {}
    seen: dict[str, str] = {}  # weight name -> its input
    for node in graph.node:
        name = node.input[1] if node.op_type == "MatMul" and len(node.input) > 1 else None
        if name not in inits or seen.get(name) == node.input[0]:
            continue
        if name in seen:
            raise ValueError(f"weight {name!r} is multiplied with two inputs; calibration needs one")
        seen[name] = node.input[0]
        wt = numpy_helper.to_array(inits[name]).T
        lins = [m for m in stats if np.array_equal(m.weight.detach().numpy(), wt)]
        if len(lins) != 1:
            raise ValueError(f"weight {name!r}: {len(lins)} calibrated Linears hold it, not one")
        by_input.setdefault(node.input[0], []).append((name, lins[0]))
    return by_input


def openvino_encoders(model, fp32: Path, tmp: Path, groups=(128, 32)) -> dict:
    """The shipped ``openvino-bf16`` and OpenVINO's dynamic int8 per group, with nearest and with
    calibrated rounding (module docstring); {} with a line saying why where OpenVINO or bf16 is
    missing."""
    from ifir_lib.core.errors import ConfigError
    from ifir_lib.evaluation import onnx_backend as O
    from ifir_lib.evaluation.openvino_backend import OpenVinoSession

    try:
        out = {"openvino-bf16": O.OnnxEncoder(model, "openvino-bf16").load()}
    except ConfigError as err:
        print(f"OpenVINO schemes: skipped ({err})")
        return {}
    stats = linear_stats(model, *calibration_texts())
    graphs = {
        "OpenVINO int8": dequantized_weights(fp32, tmp / "ov-int8.onnx"),
        "OpenVINO int8 calibrated": calibrated_weights(fp32, tmp / "ov-int8-cal.onnx", stats),
    }
    for g in groups:
        for label, path in graphs.items():
            extra = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": g}
            session = OpenVinoSession(str(path), O.cpu_threads(), "bf16", extra)
            out[f"{label}, groups of {g}"] = encoder(model, path, session, "openvino-bf16")
    return out


def encoder(model, path: Path, session=None, backend: str = "onnx-int8"):
    """An ``OnnxEncoder`` on a given ONNX file (the evaluator's code path, another graph), run by
    ``session`` (default: ONNX Runtime's, cached by path, so one file name per graph)."""
    from ifir_lib.evaluation import onnx_backend as O

    return O.OnnxEncoder.on_graph(model, path, backend, session=session)


def cosine_error(model, enc, docs: list[str]) -> tuple[float, float]:
    from ifir_lib.core.models import encode

    cos = (encode(model, docs, "document") * encode(enc, docs, "document")).sum(1)
    return float(1 - cos.mean()), float(1 - cos.min())


def set_metrics(enc) -> dict[str, dict[str, float]]:
    """Every metric (points x100) of ``enc`` on v1 and v2 (no cache, no bootstrap), by set name."""
    from ifir_lib.evaluation import evaluator as E

    return {
        name: E.evaluate_followir(enc, path, bootstrap=0, cache=False).metrics
        for name, path in config.EVAL_SETS.items()
    }


def metric_diffs(ref: dict, enc) -> dict[str, float]:
    """``enc``'s metrics minus ``ref`` (torch's ``set_metrics``), points x100, on v1 and v2."""
    got = set_metrics(enc)
    return {f"{name} {m}": got[name][m] - ref[name][m] for name in ref for m in METRICS}


def _weights_int8(w):
    """Symmetric int8 per output channel (``quantize_dynamic``'s ``per_channel``; ``_nearest_int8``),
    as a float tensor like ``w`` (N, K)."""
    import torch

    q, scale = _nearest_int8(w.detach().cpu().numpy())
    return torch.from_numpy(q.astype(np.float32) * scale[:, None]).to(w.dtype)


def _rows(x, lo, hi, levels):
    s = ((hi - lo) / levels).clamp_min(1e-12)
    z = (-lo / s).round()
    return ((x / s + z).round().clamp(0, levels) - z) * s


ACTIVATIONS = {  # activation rounding schemes: x -> x rounded to 8 bits and back
    "fp32": lambda x: x,
    "per tensor (dynamic)": lambda x: _rows(x, x.min().clamp(max=0), x.max().clamp(min=0), 255),
    "per token": lambda x: _rows(x, -x.abs().amax(-1, keepdim=True), x.abs().amax(-1, keepdim=True), 254),
    "per token, zero point": lambda x: _rows(
        x, x.amin(-1, keepdim=True).clamp(max=0), x.amax(-1, keepdim=True).clamp(min=0), 255
    ),
    "per block of 32": lambda x: _rows(
        x.unflatten(-1, (-1, 32)), -x.unflatten(-1, (-1, 32)).abs().amax(-1, keepdim=True),
        x.unflatten(-1, (-1, 32)).abs().amax(-1, keepdim=True), 254,
    ).flatten(-2),
}  # fmt: skip


def simulate(model, docs: list[str]) -> None:
    """``--simulate``: 1 - cosine to fp32 for weight and activation rounding, apart and together."""
    from ifir_lib.core.models import encode

    ref = encode(model, docs, "document")
    linears = encoder_linears(model)
    kept = {m: m.weight.data.clone() for m in linears}
    print("simulated int8 (PyTorch fake quantization), 1 - cosine to fp32: mean, worst")
    for weights in (False, True):
        for name, act in ACTIVATIONS.items():
            if not weights and name == "fp32":
                continue
            hooks = [m.register_forward_pre_hook(lambda mod, inp, f=act: (f(inp[0]),)) for m in linears]
            for m in linears:
                m.weight.data = _weights_int8(kept[m]) if weights else kept[m].clone()
            try:
                cos = (ref * encode(model, docs, "document")).sum(1)
            finally:
                for h in hooks:
                    h.remove()
                for m in linears:
                    m.weight.data = kept[m].clone()
            label = f"weights {'int8' if weights else 'fp32'}, activations {name}"
            print(f"  {label:48s} {1 - cos.mean():.1e}  {1 - cos.min():.1e}", flush=True)


def _metrics(data, qv, dv, pos) -> dict[str, float]:
    """Every metric (x100) of one FollowIR set from query vectors (og then changed) and document vectors."""
    from ifir_lib.evaluation import metrics as M
    from ifir_lib.evaluation.evaluator import followir_per_query, score_followir

    pq = followir_per_query(*score_followir(data, qv, dv, pos), data.qrels_og, data.qrel_diff)
    return {m: M.mean(pq[m]) for m in METRICS}


def _rankings(data, qids, qv, pos):
    """(candidate rows, query vector) of every ranking: each query with its og, then its changed instruction."""
    for i, q in enumerate(qids):
        cand = np.array([pos[d] for d in data.top_ranked[q]])
        yield cand, qv[i]
        yield cand, qv[len(qids) + i]


def _near_ties(rankings, dv, n: int, eps: float) -> np.ndarray:
    """(n,) bool: documents whose score is within ``eps`` of a neighbour's in some ranking."""
    near = np.zeros(n, bool)
    for cand, v in rankings:
        scores = dv[cand] @ v
        order = np.argsort(scores)
        close = np.diff(scores[order]) < eps
        near[cand[order[np.r_[close, False] | np.r_[False, close]]]] = True
    return near


def second_pass(model, enc, epsilons=(0.0, 0.002, 0.005, 0.01, 0.02)) -> None:
    """``--second-pass``: int8 candidates, fp32 queries, the near-tied candidates again in fp32."""
    from ifir_lib.core.models import encode, format_document, format_query
    from ifir_lib.evaluation.corpora import load_followir

    print("second pass: fp32 queries, int8 documents, near-tied documents again in fp32")
    for name, path in config.EVAL_SETS.items():
        data = load_followir(path)
        qids = list(data.queries)
        qv = encode(model, [format_query(data.queries[q]["text"], data.queries[q][f"instruction_{k}"])
                            for k in ("og", "changed") for q in qids], "query")  # fmt: skip
        ids = list(dict.fromkeys(d for q in qids for d in data.top_ranked[q]))
        pos = {d: i for i, d in enumerate(ids)}
        texts = [format_document(data.corpus[d]) for d in ids]
        d32, d8 = encode(model, texts, "document"), encode(enc, texts, "document")
        rankings = list(_rankings(data, qids, qv, pos))
        err = np.concatenate([np.abs((d8[c] - d32[c]) @ v) for c, v in rankings])
        gap = np.concatenate([np.diff(np.sort(d8[c] @ v)) for c, v in rankings])
        print(f"  {name}: int8 moves a score by a median {np.median(err):.4f}; "
              f"neighbours in a ranking are a median {np.median(gap):.4f} apart")  # fmt: skip
        ref = _metrics(data, qv, d32, pos)
        for eps in epsilons:
            again = _near_ties(rankings, d8, len(ids), eps)
            got = _metrics(data, qv, np.where(again[:, None], d32, d8), pos)
            print(f"  {name} eps {eps:<6} encoded twice {again.mean():6.1%}; "
                  + ", ".join(f"{m} {got[m] - ref[m]:+.2f}" for m in METRICS), flush=True)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=400, help="bundled documents for the cosine and the speed")
    ap.add_argument("--repeat", type=int, default=3, help="timing rounds (fastest kept)")
    ap.add_argument("--groups", action="store_true", help="first, each MatMul group quantized alone")
    ap.add_argument(
        "--simulate", action="store_true", help="first, int8's weight and activation halves apart"
    )
    ap.add_argument(
        "--second-pass", action="store_true", help="then, int8 with near-tied documents re-encoded in fp32"
    )
    a = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    from ifir_lib.core.models import load_model
    from ifir_lib.evaluation.onnx_backend import export_onnx

    docs = bundled_documents()
    docs = [docs[i] for i in np.random.default_rng(0).permutation(len(docs))[: a.docs]]
    model = load_model("minilm")
    if a.simulate:
        simulate(model, docs)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["IFIR_CACHE"] = tmp
        fp32, tmp = export_onnx(model, "onnx"), Path(tmp)
        names = weight_matmuls(fp32)
        if a.groups:
            print("each group quantized alone (dynamic), 1 - cosine to torch: mean, worst")
            for g in dict.fromkeys(map(group_of, names)):
                path = dynamic(fp32, tmp / f"{g}.onnx", [n for n in names if group_of(n) != g])
                mean, worst = cosine_error(model, encoder(model, path), docs)
                print(f"  {g:12s} {mean:.1e}  {worst:.1e}", flush=True)
        schemes = {
            "dynamic (onnx-int8)": dynamic(fp32, tmp / "dyn.onnx", []),
            "dynamic, FFN-down fp32": dynamic(
                fp32, tmp / "dyn-nodown.onnx", [n for n in names if group_of(n).endswith("ffn-down")]
            ),
            "8-bit blocks": blocks8(fp32, tmp / "blocks8.onnx"),
        }
        encs = {k: encoder(model, p) for k, p in schemes.items() if p is not None}
        encs.update(openvino_encoders(model, fp32, tmp))
        secs = time_encoders({"torch": model, **encs}, docs, 32, a.repeat)
        print(f"{'scheme':40s} {'1-cos mean':>10} {'worst':>8} {'docs/s x':>9}  largest metric diff (points)")
        ref = set_metrics(model)
        for key, enc in encs.items():
            mean, worst = cosine_error(model, enc, docs)
            diffs = metric_diffs(ref, enc)
            big = max(diffs, key=lambda k: abs(diffs[k]))
            print(
                f"{key:40s} {mean:10.1e} {worst:8.1e} {secs['torch'] / secs[key]:8.2f}x  "
                f"{diffs[big]:+.2f} ({big}); " + ", ".join(f"{k} {v:+.2f}" for k, v in diffs.items()),
                flush=True,
            )
        if a.second_pass:
            second_pass(model, encs["dynamic (onnx-int8)"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
