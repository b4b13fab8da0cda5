"""Documents encoded once per step: time of one training step (forward + backward) of
``RelationInfoNCELoss`` with its deduplicated document forward, against encoding every document
column and deduplicating afterwards (the loss before this change), printed as a ratio.

Run by hand: ``python bench/bench_dedup.py``. Batches are the cpu preset's (16 rows, max length
128) from the bundled seeds, for ``ins-dv`` (co-batched views: each document listed twice) and
``ins-orig`` (one view per seed: little to deduplicate). The two paths alternate, ``--rounds``
times each; medians are compared, because absolute timings on a shared 2-core machine are noise.
Target: ins-dv ratio <= 0.75; ins-orig ratio <= 1.05 (no slower).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def batch(model, mode: str, num_negatives: int, size: int):
    import torch

    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.training.trainsets import build_trainset, encode_ids

    rows = build_trainset(mode, load_seeds(), num_negatives=num_negatives, budget=size).examples[:size]
    labels = torch.tensor(encode_ids(rows))
    texts = [[r["query"] for r in rows], [r["positive"]["text"] for r in rows]]
    texts += [[r["negatives"][j]["text"] for r in rows] for j in range(num_negatives)]
    return [model.preprocess(t) for t in texts], labels


def step(loss, cols, labels, dedup: bool) -> float:
    from sentence_transformers.base.losses.merged_forward import embed_columns

    loss.model.zero_grad()
    t0 = time.perf_counter()
    cols = [dict(c) for c in cols]
    if dedup:
        value = loss(cols, labels)
    else:
        value = loss.calculate_loss([[e] for e in embed_columns(loss.model, cols)], labels)
    value.backward()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--negatives", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    a = ap.parse_args()

    from ifir_lib.core.models import load_model
    from ifir_lib.training.loss import RelationInfoNCELoss

    model = load_model("minilm", device="cpu")
    model.max_seq_length = 128
    model.train()
    loss = RelationInfoNCELoss(model, temperature=0.02)
    targets = {"ins-dv": 0.75, "ins-orig": 1.05}
    ok = True
    for mode, target in targets.items():
        cols, labels = batch(model, mode, a.negatives, a.batch_size)
        unique = len(set(labels[:, 2:].flatten().tolist()))
        step(loss, cols, labels, True)  # warm-up
        every, once = [], []
        for _ in range(a.rounds):
            every.append(step(loss, cols, labels, False))
            once.append(step(loss, cols, labels, True))
        ratio = statistics.median(once) / statistics.median(every)
        ok &= ratio <= target
        print(
            f"{mode}: {labels.shape[0]} rows x {labels.shape[1] - 2} documents, {unique} unique; "
            f"step median {statistics.median(every):.2f}s -> {statistics.median(once):.2f}s; "
            f"once / every = {ratio:.2f} (target <= {target}) {'OK' if ratio <= target else 'MISS'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
