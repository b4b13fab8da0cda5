"""p-MRR against hand-computed cases and mteb's own implementation; pytrec_eval wrappers."""

import logging
import random

import pytest

from ifir_lib.evaluation import metrics as M


def run_from_order(order):
    """A run whose ranking is ``order`` (first = best)."""
    return {d: float(len(order) - i) for i, d in enumerate(order)}


DOCS = ["a", "b", "c", "d", "e"]


# ---- ranks ---------------------------------------------------------------------------------


def test_ranks_break_ties_by_doc_id_descending():
    assert M.ranks({"a": 0.5, "b": 0.9, "c": 0.5}) == {"b": 1, "c": 2, "a": 3}


# ---- p-MRR: mteb's unit cases --------------------------------------------------------------


def test_identical_runs_give_zero():
    run = {"q1": run_from_order(DOCS)}
    assert M.p_mrr(run, run, {"q1": ["a", "c"]}) == 0.0


def test_changed_doc_moving_up_from_rank_4_to_1():
    og = {"q1": run_from_order(["a", "b", "c", "x", "e"])}  # x at rank 4
    ch = {"q1": run_from_order(["x", "a", "b", "c", "e"])}  # x at rank 1
    assert M.p_mrr(og, ch, {"q1": ["x"]}) == pytest.approx((1 / 4) / (1 / 1) - 1)  # -0.75


def test_changed_doc_moving_down_from_rank_1_to_4():
    og = {"q1": run_from_order(["x", "a", "b", "c", "e"])}
    ch = {"q1": run_from_order(["a", "b", "c", "x", "e"])}
    assert M.p_mrr(og, ch, {"q1": ["x"]}) == pytest.approx(1 - (1 / 4) / (1 / 1))  # +0.75


def test_mean_over_docs_then_over_queries():
    og = {"q1": run_from_order(["x", "y", "a"]), "q2": run_from_order(["z", "a", "b"])}
    ch = {"q1": run_from_order(["a", "y", "x"]), "q2": run_from_order(["z", "a", "b"])}
    # q1: x 1 -> 3 gives 1 - 1/3, y stays at 2 gives 0; q2: z stays, 0
    q1 = ((1 - 1 / 3) + 0) / 2
    assert M.p_mrr_per_query(og, ch, {"q1": ["x", "y"], "q2": ["z"]}) == pytest.approx({"q1": q1, "q2": 0.0})
    assert M.p_mrr(og, ch, {"q1": ["x", "y"], "q2": ["z"]}) == pytest.approx((q1 + 0) / 2)


def test_doc_missing_from_a_run_gets_rank_len_plus_one():
    og = {"q1": run_from_order(["x", "a", "b"])}  # x rank 1
    ch = {"q1": run_from_order(["a", "b"])}  # x missing -> rank 2 + 1
    assert M.p_mrr(og, ch, {"q1": ["x"]}) == pytest.approx(1 - (1 / 3) / (1 / 1))


def test_query_missing_from_a_run_is_skipped_with_a_warning(caplog):
    og = {"q1": run_from_order(["x", "a"]), "q2": run_from_order(["y", "a"])}
    ch = {"q1": run_from_order(["a", "x"])}
    with caplog.at_level(logging.WARNING):
        per_q = M.p_mrr_per_query(og, ch, {"q1": ["x"], "q2": ["y"]})
    assert per_q == pytest.approx({"q1": 1 - (1 / 2) / (1 / 1)})
    assert "1 of 2 queries" in caplog.text and "q2" in caplog.text


def test_no_changed_documents_is_an_error_not_zero():
    run = {"q1": run_from_order(DOCS)}
    with pytest.raises(ValueError, match="undefined"):
        M.p_mrr(run, run, {"q1": []})


def test_ties_use_doc_id_order():
    # x and a tie in the og run: x > a by id, so x is rank 1; in the changed run x is alone at rank 2
    og = {"q1": {"x": 1.0, "a": 1.0}}
    ch = {"q1": {"a": 1.0, "x": 0.5}}
    assert M.p_mrr(og, ch, {"q1": ["x"]}) == pytest.approx(1 - (1 / 2) / (1 / 1))


def test_agrees_with_mteb_calculate_pmrr_on_random_runs():
    from mteb._evaluators.retrieval_metrics import calculate_pmrr

    rng = random.Random(0)
    docs = [f"d{i}" for i in range(40)]
    og, ch, diff = {}, {}, {}
    for q in range(25):
        qid = f"q{q}"
        # coarse scores make ties common; some docs missing from one run
        og[qid] = {d: rng.randint(0, 9) / 10 for d in rng.sample(docs, 30)}
        ch[qid] = {d: rng.randint(0, 9) / 10 for d in rng.sample(docs, 30)}
        diff[qid] = rng.sample(docs, rng.randint(1, 6))
    diff["q_missing"] = ["d1"]  # in neither run: skipped by both
    ours = M.p_mrr(og, ch, diff)
    theirs = calculate_pmrr(
        {q + "-og": r for q, r in og.items()}, {q + "-changed": r for q, r in ch.items()}, diff
    )
    assert ours == pytest.approx(theirs, abs=1e-12)


# ---- pytrec_eval wrappers ------------------------------------------------------------------


def test_map_counts_grade_1_and_2_as_relevant():
    qrels = {"q1": {"a": 2, "c": 1, "z": 1, "b": 0}}  # 3 relevant, z never retrieved
    run = {"q1": run_from_order(["a", "b", "c", "d"])}  # relevant at ranks 1 and 3
    got = M.trec_per_query(run, qrels, ["map_at_1000"])["map_at_1000"]["q1"]
    assert got == pytest.approx((1 / 1 + 2 / 3) / 3)


def test_ndcg_at_5_uses_graded_gains():
    import math

    qrels = {"q1": {"a": 2, "c": 1}}
    run = {"q1": run_from_order(["b", "a", "c"])}
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert M.trec_per_query(run, qrels, ["ndcg_at_5"])["ndcg_at_5"]["q1"] == pytest.approx(dcg / idcg)


def test_judged_query_missing_from_run_is_warned_and_skipped(caplog):
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    with caplog.at_level(logging.WARNING):
        got = M.trec_per_query({"q1": {"a": 1.0}}, qrels, ["map_at_1000"])
    assert got == {"map_at_1000": {"q1": 1.0}}
    assert "1 of 2 judged queries" in caplog.text


def test_mean_of_nothing_is_nan_not_zero():
    assert M.mean({}) != M.mean({})
