"""training.explain: notebook 03's tiny batch shows the label swap and its loss is the library's."""

import pytest

from ifir_lib.training.explain import tiny_batch


def test_relation_matrix_swaps_the_labels_and_the_loss_adds_up(bundled_seeds):
    batch = tiny_batch(bundled_seeds, model="minilm")
    rel = batch.relations
    assert rel.shape == (4, 6)  # 2 seeds x 2 views; P+, N*, one hard negative per seed, deduplicated
    for seed in {r.split(" · ")[0] for r in rel.index}:
        i, rev = rel.loc[f"{seed} · q + I"], rel.loc[f"{seed} · q + I'"]
        assert (i[f"{seed} P+"], i[f"{seed} N*"]) == ("+1", "-1")
        assert (rev[f"{seed} P+"], rev[f"{seed} N*"]) == ("-1", "+1")
        others = [c for c in rel.columns if not c.startswith(seed)]
        assert set(i[others]) == {"·"}  # no in-batch negatives: other seeds' documents are no candidates
    assert batch.row_loss.mean() == pytest.approx(batch.loss, abs=1e-3)
    assert batch.scores.shape == rel.shape
