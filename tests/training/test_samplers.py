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
