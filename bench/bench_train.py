"""Training throughput and memory, printed as ratios (run by hand: `python bench/bench_train.py`).

1. Examples/s of our trainer (RelationInfoNCELoss + DualViewBatchSampler, via ``ifir_lib.training.trainer``)
   against a plain ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` on the same
   examples, model (PyPI MiniLM), batch size and max length, on the CPU. Target: ratio >= 0.9.
   The two are run alternately, ``--rounds`` times each, and the medians are compared, because
   absolute timings on a shared 2-core machine are noise.
2. Peak resident memory of a ``smoke`` run (``ifir train --preset smoke``) in a fresh
   process. Target: <= 4 GB.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    a = ap.parse_args()
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
