"""Batch samplers for dual-view training (arXiv 2604.18845; docs/method.md §3).

A batch must hold both views of a seed (the original ``(q+I, P+)`` and the reversed
``(q+I', N*)``), so the loss sees the same two documents with opposite labels side by side, and
must never hold one query text twice (its rows would contradict each other in the relation
matrix). Rows are identified by the integer ``label`` column that ``trainsets.encode_ids`` writes:
``label[0]`` is the group (seed), ``label[1]`` the query. Not handled here: the loss
(``relation_loss``), building rows (``trainsets``, ``train``). ``ShuffledBatchSampler`` is the
``mnrl`` baseline's plain shuffle, on the same per-epoch seeds.
"""

from __future__ import annotations

import hashlib
import random

from sentence_transformers.base.sampler import DefaultBatchSampler

# The scheme that turns (seed, epoch) into an epoch's order, recorded with each run
# (``trainer``): 1 seeded ``seed + epoch``, so rng_seed k+1's epoch 0 replayed rng_seed k's epoch
# 1 on a built set; 2 (``epoch_rng``) keeps epoch 0 and draws later epochs from a hash (the
# ``mnrl`` loss's shuffle too: ``ShuffledBatchSampler``).
BATCH_ORDER = 2


def epoch_rng(seed: int, epoch: int) -> random.Random:
    """The random order of ``epoch`` under ``seed``: ``Random(seed)`` for epoch 0 (as before, so
    one-epoch runs keep their batches), a hash of ``"seed:epoch"`` for the others, so no
    (seed, epoch) pair replays another's (``seed + epoch`` made 1:0 equal 0:1)."""
    if epoch == 0 and seed >= 0:  # Random(-k) is Random(k): a negative seed hashes too
        return random.Random(seed)
    return random.Random(f"{seed}:{epoch}")


class DualViewBatchSampler(DefaultBatchSampler):
    """Batches that keep each seed's views together and never repeat a query.

    Reads ``label[0]`` (group) and ``label[1]`` (query) of each row. Each epoch shuffles the
    groups with ``epoch_rng(seed, epoch)`` and packs them whole (``co_batch=True``) or shuffles single
    examples (``co_batch=False``). An item whose query is already in the open batch waits for
    the next one, so no batch holds a query twice.
    """

    co_batch = True

    def __init__(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
        super().__init__(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
        )
        labels = dataset["label"]
        self.groups: dict[int, list[int]] = {}
        for i, lab in enumerate(labels):
            self.groups.setdefault(int(lab[0]), []).append(i)
        self.query_of = [int(lab[1]) for lab in labels]
        too_big = [g for g, idx in self.groups.items() if len(idx) > batch_size]
        if self.co_batch and too_big:
            raise ValueError(
                f"a seed has {max(len(self.groups[g]) for g in too_big)} views but batch_size is {batch_size}"
            )

    def batches(self, epoch: int) -> list[list[int]]:
        rng = epoch_rng(self.seed, epoch)
        units = (
            list(self.groups.values())
            if self.co_batch
            else [[i] for idx in self.groups.values() for i in idx]
        )
        units = [list(u) for u in units]
        rng.shuffle(units)
        out, pending = [], units
        while pending:
            batch, queries, deferred = [], set(), []
            for u in pending:
                qs = {self.query_of[i] for i in u}
                if len(batch) + len(u) <= self.batch_size and not (qs & queries) and len(qs) == len(u):
                    batch.extend(u)
                    queries |= qs
                elif len(qs) < len(u):  # a unit repeating its own query: split it
                    deferred.extend([[i] for i in u])
                else:
                    deferred.append(u)
            if not batch:  # cannot happen with batch_size >= largest unit, but never loop forever
                raise RuntimeError("batch sampler made no progress")
            out.append(batch)
            pending = deferred
        if self.drop_last and out and len(out[-1]) < self.batch_size:
            out.pop()
        return out

    def __iter__(self):
        yield from self.batches(self.epoch)

    def __len__(self) -> int:
        return len(self.batches(self.epoch))


class SingleViewBatchSampler(DualViewBatchSampler):
    """Same as ``DualViewBatchSampler`` but views of a seed are shuffled independently."""

    co_batch = False


def epoch_seed(seed: int, epoch: int) -> int:
    """A torch seed for ``epoch`` under ``seed``, as ``epoch_rng`` draws: ``seed`` for epoch 0,
    a hash of ``"seed:epoch"`` for the others."""
    if epoch == 0 and seed >= 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{epoch}".encode()).digest()[:8], "big") >> 1


class ShuffledBatchSampler(DefaultBatchSampler):
    """The ``mnrl`` baseline's batches: a random permutation of the rows cut into batches, as
    sentence-transformers' default sampler does, but drawn from ``epoch_seed(seed, epoch)``. The
    default (accelerate's seedable sampler) seeds ``seed + epoch``, so on one row order (a built
    set) rng_seed k+1's epoch 0 replayed rng_seed k's epoch 1; epoch 0 is the default's order."""

    def __iter__(self):
        import torch

        g = torch.Generator()
        g.manual_seed(epoch_seed(self.seed, self.epoch))
        order = torch.randperm(len(self.sampler), generator=g).tolist()
        for i in range(len(self)):
            yield order[i * self.batch_size : (i + 1) * self.batch_size]


def sampler_epoch_callback():
    """A ``TrainerCallback`` that sets each epoch on the run's batch sampler however deep accelerate
    wrapped it. A DDP run resumed inside epoch 1 or later trained epoch 0's order: its loader is
    ``SkipBatchSampler(BatchSamplerShard(sampler))`` there, which neither accelerate's ``set_epoch``
    nor transformers' reach (one wrapper deep) gets through, so the fresh process's sampler stayed
    at epoch 0, training some seeds twice in that epoch and others never. The epoch is
    ``global_step // len(loader)``, as transformers counts the epochs a resume has done."""
    from transformers import TrainerCallback

    class SamplerEpoch(TrainerCallback):
        def on_epoch_begin(self, args, state, control, train_dataloader=None, **kw):
            steps = len(train_dataloader) if train_dataloader is not None else 0
            if not steps:
                return
            inner, epoch = train_dataloader, state.global_step // steps
            while (inner := getattr(inner, "batch_sampler", None)) is not None:
                if isinstance(inner, DefaultBatchSampler):
                    inner.set_epoch(epoch)

    return SamplerEpoch()
