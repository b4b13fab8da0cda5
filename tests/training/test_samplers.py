"""Batches keep a seed's views together and never repeat a query."""

from datasets import Dataset

from ifir_lib.training.samplers import DualViewBatchSampler, SingleViewBatchSampler


def test_sampler_keeps_views_together_and_never_repeats_a_query():
    # groups of two views; queries 0 and 5 share a text (label[1]) to force a deferral
    labels = [[g, q, 0] for g, q in [(0, 0), (0, 1), (1, 2), (1, 3), (2, 5), (2, 0), (3, 6), (3, 7), (4, 8)]]
    ds = Dataset.from_dict({"label": labels})
    s = DualViewBatchSampler(ds, batch_size=4, drop_last=False, seed=3)
    for epoch in range(5):
        s.set_epoch(epoch)
        batches = list(s)
        assert sorted(i for b in batches for i in b) == list(range(9))
        for b in batches:
            queries = [labels[i][1] for i in b]
            assert len(queries) == len(set(queries))
            groups = [labels[i][0] for i in b]
            for g in set(groups):
                # co-batched: every view of a group sits in the same batch (group 2 only if not split by its own clash)
                assert groups.count(g) == sum(1 for lab in labels if lab[0] == g)
    single = SingleViewBatchSampler(ds, batch_size=4, drop_last=False, seed=3)
    assert sorted(i for b in single for i in b) == list(range(9))


def test_no_rng_seed_replays_another_s_epoch_and_epoch_0_keeps_its_order():
    """A built set has one row order for every rng_seed: seeded ``seed + epoch``, rng_seed 1's
    epoch 0 was rng_seed 0's epoch 1, so replicates shared half their batches at 2 epochs."""
    import random

    labels = [[g, 2 * g + v, 0] for g in range(12) for v in (0, 1)]
    ds = Dataset.from_dict({"label": labels})
    orders = {}
    for seed in range(4):
        s = DualViewBatchSampler(ds, batch_size=4, drop_last=False, seed=seed)
        for epoch in range(4):
            s.set_epoch(epoch)
            orders[(seed, epoch)] = tuple(tuple(b) for b in s)
        units = [[2 * g, 2 * g + 1] for g in range(12)]
        random.Random(seed).shuffle(units)  # epoch 0 as before the fix: one-epoch runs unchanged
        assert orders[(seed, 0)] == tuple(tuple(units[i] + units[i + 1]) for i in range(0, 12, 2))
    assert len(set(orders.values())) == len(orders)


def test_a_checkpoint_past_epoch_1_under_the_old_batch_order_is_not_resumed(tmp_path):
    """Resumed under another order, the rest of the epoch replays its first steps' batches newly
    shuffled: some seeds twice, others never. Within epoch 0 both orders agree, and a checkpoint
    at an exact epoch boundary (2.0) skips no batch, so it was refused for nothing: it resumes."""
    import json

    import pytest

    from ifir_lib.core.run_folder import RunFolder
    from ifir_lib.training.samplers import BATCH_ORDER
    from ifir_lib.training.trainer import _check_resume_order

    run = RunFolder(tmp_path / "run")
    ckpt = run.checkpoints_dir / "checkpoint-6"
    ckpt.mkdir(parents=True)
    run.start({"mode": "ins-dv"}, "abc")  # recorded before runs kept their batch order
    for epoch, refused in ((0.5, False), (1.0, False), (1.5, True), (2.0, False), (2.5, True)):
        (ckpt / "trainer_state.json").write_text(json.dumps({"epoch": epoch, "global_step": 6}))
        if refused:
            with pytest.raises(
                ValueError, match=rf"epoch {epoch:.2f} under batch order 1 .* mix the two orders"
            ):
                _check_resume_order(run)
        else:
            _check_resume_order(run)
    run.start({"mode": "ins-dv", "batch_order": BATCH_ORDER}, "abc", resuming=True)
    _check_resume_order(run)


def test_co_batched_seeds_sharing_a_query_are_counted_when_in_batch_negatives_are_on(caplog):
    """With in-batch negatives, seed A's positive and instruction negatives became negatives of a
    seed B with A's query (they may answer it) without a word; the loss masks a row's own seed only."""
    from ifir_lib.testing.inputs import make_seed
    from ifir_lib.training.trainer import TrainConfig, same_query_in_batch
    from ifir_lib.training.trainsets import as_train_dataset, build_trainset

    seeds = [make_seed(i) for i in range(6)]
    seeds[1] = {**seeds[1], "query": "  " + seeds[0]["query"].upper()}  # one query, normalized
    examples = build_trainset("ins-dv", seeds, budget=12, num_negatives=2, negative_audit=None).examples
    ds = as_train_dataset(examples, 2)
    cfg = TrainConfig.preset(
        "smoke", batch_size=16, max_steps=3, num_negatives=2
    )  # 12 rows: one batch a step
    with caplog.at_level("WARNING"):
        assert same_query_in_batch(examples, ds, DualViewBatchSampler, cfg) == 0  # off: nothing to say
        assert not caplog.records
        on = cfg.replace(in_batch_negatives=True)
        assert same_query_in_batch(examples, ds, DualViewBatchSampler, on) == 3
        keep = [i for i, e in enumerate(examples) if e["group"] != seeds[1]["id"]]
        rest = [examples[i] for i in keep]
        assert same_query_in_batch(rest, ds.select(keep), DualViewBatchSampler, on) == 0
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith("in-batch negatives: 3 times over 3 steps a batch holds two seeds with one query")


def test_the_same_query_count_replays_no_batches_when_no_query_is_asked_by_two_seeds():
    """The count replayed the quadratic sampler over every epoch of the run (minutes at 480k rows)
    even where no two seeds share a query, so no batch could hold such a pair; it returns 0 first."""
    from ifir_lib.testing.inputs import make_seed
    from ifir_lib.training.trainer import TrainConfig, same_query_in_batch
    from ifir_lib.training.trainsets import as_train_dataset, build_trainset

    replayed = []

    class Counted(DualViewBatchSampler):
        def batches(self, epoch):
            replayed.append(epoch)
            return super().batches(epoch)

    seeds = [make_seed(i) for i in range(6)]
    examples = build_trainset("ins-dv", seeds, budget=12, num_negatives=2, negative_audit=None).examples
    ds = as_train_dataset(examples, 2)
    on = TrainConfig.preset("smoke", batch_size=16, max_steps=3, num_negatives=2, in_batch_negatives=True)
    assert same_query_in_batch(examples, ds, Counted, on) == 0 and replayed == []
    seeds[1] = {**seeds[1], "query": seeds[0]["query"]}  # now one query is two seeds': replayed
    examples = build_trainset("ins-dv", seeds, budget=12, num_negatives=2, negative_audit=None).examples
    assert same_query_in_batch(examples, as_train_dataset(examples, 2), Counted, on) == 3 and replayed


def test_mnrl_batches_of_one_replicate_do_not_replay_another_s_epoch(tmp_path, bundled_seeds):
    """``--loss mnrl`` took sentence-transformers' shuffle, which accelerate seeds ``seed + epoch``:
    on a built set rng_seed 1's epoch 0 was rng_seed 0's epoch 1. It is seeded per epoch as the
    relation loss's batches now, and its epoch 0 is the library's own order (runs keep it)."""
    from sentence_transformers import SentenceTransformerTrainer

    from ifir_lib.core.run_folder import RunFolder
    from ifir_lib.training.trainer import TrainConfig, _model_and_data, _training_args, as_mnrl
    from ifir_lib.training.trainsets import build_trainset

    def orders(cfg, examples, library_sampler=False):
        model, ds, loss_fn, sampler, prompts = _model_and_data(cfg, examples, "mnrl", "cpu", 1)
        sampler = "batch_sampler" if library_sampler else sampler
        args = _training_args(cfg, RunFolder(tmp_path / f"r{cfg.rng_seed}"), sampler, prompts, {}, "cpu")
        dl = SentenceTransformerTrainer(
            model=model, args=args, train_dataset=ds, loss=loss_fn
        ).get_train_dataloader()
        out = []
        for epoch in (0, 1):
            dl.set_epoch(epoch)
            out.append([tuple(map(tuple, b["query_input_ids"].tolist())) for b in dl])
        return out

    cfg = as_mnrl(TrainConfig.preset("smoke", batch_size=4))
    examples = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives).examples
    (a0, a1), (b0, b1) = orders(cfg, examples), orders(cfg.replace(rng_seed=1), examples)
    assert a0 != a1 and b0 != a1 and b1 != a1 and len(a0) == len(b0) == 4
    assert orders(cfg, examples, library_sampler=True)[0] == a0  # epoch 0: the library's order
