"""evaluation.explain: p-MRR by hand (notebook 04) equals the library's on random rankings."""

import random

import pytest

from ifir_lib.evaluation import metrics as M
from ifir_lib.evaluation.explain import pmrr_by_hand


@pytest.mark.parametrize("rng_seed", range(20))
def test_hand_computation_equals_the_library(rng_seed):
    rng = random.Random(rng_seed)
    docs = [f"d{i:02d}" for i in range(rng.randint(3, 30))]
    # ties on purpose (scores rounded to one decimal): both must break them by doc id
    og = {d: round(rng.random(), 1) for d in docs}
    new = {d: round(rng.random(), 1) for d in rng.sample(docs, k=len(docs) - rng.randint(0, 2))}
    changed = rng.sample(docs, k=rng.randint(1, len(docs)))
    hand = pmrr_by_hand(og, new, changed, "q")
    library = 100 * M.p_mrr_per_query({"q": og}, {"q": new}, {"q": changed})["q"]
    assert hand.p_mrr == pytest.approx(library, abs=1e-9)
    assert len(hand.table) == len(changed)


def test_the_table_shows_each_case_with_its_arithmetic():
    og = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}
    new = {"a": 0.1, "b": 0.8, "c": 0.95, "d": 0.6}  # a: 1 -> 4 (down), c: 3 -> 1 (up)
    hand = pmrr_by_hand(og, new, ["a", "c"], "q")
    rows = hand.table.set_index("doc_id")
    assert rows.loc["a", "term"] == "moved down: 1 - 1/4" and rows.loc["a", "value x100"] == 75.0
    assert rows.loc["c", "term"] == "up or same: 1/3 - 1" and rows.loc["c", "value x100"] == pytest.approx(
        -66.67
    )
    assert hand.p_mrr == pytest.approx(100 * (0.75 - 2 / 3) / 2)
    assert "2 changed documents, 1 ranked lower" in hand.sentence()
