"""Training throughput and memory, printed as ratios (run by hand: `python bench/bench_train.py`).

1. Examples/s of our trainer (RelationInfoNCELoss + DualViewBatchSampler, via ``ifir_lib.training.trainer``)
   against a plain ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` on the same
   examples, model (PyPI MiniLM), batch size and max length, on the CPU. Target: ratio >= 0.9.
   The two are run alternately, ``--rounds`` times each, and the medians are compared, because
   absolute timings on a shared 2-core machine are noise.
2. Peak resident memory of a ``smoke`` run (``ifir train --preset smoke``) in a fresh
   process. Target: <= 4 GB.
3. ``--split`` (instead of 1 and 2): where one training step of the ``cpu`` preset goes. One real
   batch (16 rows of ``ins-dv``, 1 negative, max length 128: the trainer's dataset, first
   ``DualViewBatchSampler`` batch and data collator) is stepped with the phases timed apart:
   data (tokenizing the batch's texts), query forward, document forward (dedup + encode of the
   unique documents), loss + backward, optimizer step (AdamW lr 3e-5, with the trainer's gradient
   clipping). Variants: (a) the whole model trained (today's method); (b) ``train_top_layers=2``
   (``FrozenBottom(model, top=2)`` as ``loss.doc_encoder``) with a warm document cache (each
   document cached after its first epoch), and (b) cold: the same step with the cache emptied
   first, as on a document's first epoch. Each variant takes one untimed warm-up step, then they
   alternate ``--rounds`` times; each phase is a median over rounds, the total is the median of
   step totals, and "share" is each phase's part of (a)'s summed phase medians. Read the ratio
   (a)/(b) as "b is X.XXx faster per step"; absolute milliseconds are noise on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def plain_st_mnrl(examples, cfg, out: Path) -> float:
    """The baseline: a plain SentenceTransformerTrainer + MNRL, nothing of ours in the loop."""
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from ifir_lib.core.models import resolve_model
    from ifir_lib.training.trainsets import to_dataset

    model = SentenceTransformer(resolve_model("minilm"), device="cpu")
    model.max_seq_length = cfg.max_seq_length
    ds = to_dataset(examples, cfg.num_negatives, with_labels=False)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=cfg.rng_seed,
        disable_tqdm=True,
        dataloader_pin_memory=False,
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        loss=MultipleNegativesRankingLoss(model, scale=1 / cfg.temperature),
    )
    res = trainer.train()
    return res.metrics["train_samples_per_second"]


def ours(examples, cfg, out: Path) -> float:
    from ifir_lib.training.trainer import train

    return train(examples, out, cfg.replace(save_steps=10_000), mode="ins-dv", device="cpu").examples_per_s


SPLIT_PHASES = ("data", "query forward", "doc forward", "loss + backward", "optimizer step")


def split_batch(model, cfg):
    """The trainer's first batch of ``ins-dv`` rows and the collator that tokenizes it."""
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator

    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.training.samplers import DualViewBatchSampler
    from ifir_lib.training.trainsets import as_train_dataset, build_trainset

    examples = build_trainset(
        "ins-dv", load_seeds(), budget=4 * cfg.batch_size, num_negatives=cfg.num_negatives
    ).examples
    ds = as_train_dataset(examples, cfg.num_negatives, with_labels=True)  # labels via ``encode_ids``
    sampler = DualViewBatchSampler(ds, batch_size=cfg.batch_size, drop_last=False, seed=cfg.rng_seed)
    rows = [ds[i] for i in sampler.batches(0)[0]]
    prompts = {
        c: cfg.query_prompt if c == "query" else cfg.document_prompt for c in ds.column_names if c != "label"
    }
    return rows, SentenceTransformerDataCollator(preprocess_fn=model.preprocess, prompts=prompts)


def split_variant(cfg, top: int | None):
    """Model, loss and AdamW for (a) ``top=None`` (every layer trains) or (b) the top ``top`` layers."""
    import torch

    from ifir_lib.core.models import build_model
    from ifir_lib.training.frozen import FrozenBottom
    from ifir_lib.training.loss import RelationInfoNCELoss

    model = build_model("minilm", max_seq_length=cfg.max_seq_length, pooling="mean", device="cpu")
    model.train()
    loss = RelationInfoNCELoss(model, temperature=cfg.temperature, mini_batch_size=cfg.mini_batch_size)
    if top is not None:
        loss.doc_encoder = FrozenBottom(model, top=top)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-5, weight_decay=cfg.weight_decay)
    return loss, opt, params


def split_step(loss, opt, params, collate, rows, max_grad_norm: float, cold: bool = False) -> dict:
    """One training step of ``RelationInfoNCELoss.forward``'s plain path, in timed phases (seconds)."""
    import torch

    from ifir_lib.training.loss import unique_rows

    if cold:
        loss.doc_encoder.cache.clear()
    t = [time.perf_counter()]
    batch = collate(rows)
    cols = [
        {k[len(c) + 1 :]: v for k, v in batch.items() if k.startswith(c + "_")}
        for c in rows[0]
        if c != "label"
    ]
    labels = batch["label"]
    t.append(time.perf_counter())
    queries = loss.model(cols[0])["sentence_embedding"]
    t.append(time.perf_counter())
    first, rel = loss.relation_matrix(labels[:, 2:])
    unique = unique_rows(cols[1:], first)
    enc = loss.doc_encoder
    docs = enc.encode(unique) if enc is not None else loss.model(unique)["sentence_embedding"]
    t.append(time.perf_counter())
    loss.info_nce(queries, docs, rel, labels).backward()
    t.append(time.perf_counter())
    torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)
    t.append(time.perf_counter())
    out = {name: t[i + 1] - t[i] for i, name in enumerate(SPLIT_PHASES)}
    out["total"] = t[-1] - t[0]
    return out


def split_report(runs: dict[str, list[dict]], head: str) -> None:
    """The phase table: medians in ms per variant, (a)'s shares, and the (a)/(b) ratios."""
    med = {
        v: {k: statistics.median(r[k] for r in rs) for k in (*SPLIT_PHASES, "total")}
        for v, rs in runs.items()
    }
    a, warm, cold = med["a"], med["b"], med["b cold"]
    summed = sum(a[k] for k in SPLIT_PHASES)
    print(head)
    print(f"{'phase':<18}{'(a) full ms':>13}{'(b) top-2 ms':>14}{'(b) cold ms':>13}{'share of (a)':>14}")
    for k in SPLIT_PHASES:
        print(f"{k:<18}{a[k] * 1e3:>13.1f}{warm[k] * 1e3:>14.1f}{cold[k] * 1e3:>13.1f}{a[k] / summed:>14.1%}")
    print(
        f"{'step total':<18}{a['total'] * 1e3:>13.1f}{warm['total'] * 1e3:>14.1f}{cold['total'] * 1e3:>13.1f}"
    )
    print(
        f"(a)/(b): b is {a['total'] / warm['total']:.2f}x faster per step with a warm cache; "
        f"{a['total'] / cold['total']:.2f}x on a cold first step"
    )


def split_main(rounds: int) -> int:
    """Section 3: one ``cpu``-preset step split into phases, (a) full model vs (b) top 2 layers."""
    from ifir_lib.training.trainer import TrainConfig

    cfg = TrainConfig.preset("cpu", num_negatives=1)
    full, top2 = split_variant(cfg, None), split_variant(cfg, 2)
    rows, collate = split_batch(full[0].model, cfg)

    def step(variant, cold: bool = False) -> dict:
        return split_step(*variant, collate, rows, cfg.max_grad_norm, cold=cold)

    step(full), step(top2)  # warm-up: allocations, AdamW state, and (b)'s document cache
    runs: dict[str, list[dict]] = {"a": [], "b": [], "b cold": []}
    for _ in range(rounds):
        runs["a"].append(step(full))
        runs["b cold"].append(step(top2, cold=True))
        runs["b"].append(step(top2))
    labels = [r["label"] for r in rows]
    n_docs = len({d for lab in labels for d in lab[2:]})
    trainable = [sum(p.numel() for p in v[2]) / 1e6 for v in (full, top2)]
    split_report(
        runs,
        f"3. one cpu-preset step (ins-dv, {len(rows)} rows, {n_docs} unique of {len(rows) * (len(labels[0]) - 2)} "
        f"documents, max len {cfg.max_seq_length}; trainable {trainable[0]:.1f}M (a) vs {trainable[1]:.1f}M (b)), "
        f"medians of {rounds} rounds:",
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument(
        "--split", action="store_true", help="section 3 only: one step's phases, full vs top-2 layers"
    )
    a = ap.parse_args()
    if a.split:
        return split_main(a.rounds)
    tmp = Path(tempfile.mkdtemp())

    # Memory first, while this process is still small: a forked child's peak RSS counts the
    # parent's pages until exec, so measuring after loading models here would overstate it.
    out = tmp / "smoke"
    t0 = time.time()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ifir_lib",
            "train",
            "--preset",
            "smoke",
            "--mode",
            "ins-dv",
            "--out",
            str(out),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux
    mem_line = (
        f"2. smoke run: peak RSS {peak_gb:.2f} GB in {time.time() - t0:.0f}s (target <= 4 GB) "
        f"{'OK' if peak_gb <= 4 else 'MISS'}"
    )

    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.training.trainer import TrainConfig
    from ifir_lib.training.trainsets import build_trainset

    cfg = TrainConfig.preset(
        "cpu", max_steps=a.steps, batch_size=a.batch_size, warmup_steps=0, logging_steps=1000
    )
    examples = build_trainset("ins-dv", load_seeds(), num_negatives=cfg.num_negatives).examples
    base, mine = [], []
    for r in range(a.rounds):
        base.append(plain_st_mnrl(examples, cfg, tmp / f"st{r}"))
        shutil.rmtree(tmp / f"ours{r}", ignore_errors=True)
        mine.append(ours(examples, cfg, tmp / f"ours{r}"))
        print(f"round {r + 1}: plain ST+MNRL {base[-1]:.2f} ex/s, ours {mine[-1]:.2f} ex/s")
    ratio = statistics.median(mine) / statistics.median(base)
    print(
        f"1. throughput (batch {cfg.batch_size}, {cfg.num_negatives} negatives, max len {cfg.max_seq_length}, "
        f"{a.steps} steps x {a.rounds} rounds): ours / plain = {ratio:.2f} (target >= 0.90) {'OK' if ratio >= 0.9 else 'MISS'}"
    )
    print(mem_line)

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
