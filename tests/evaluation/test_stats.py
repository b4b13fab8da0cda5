"""Bootstrap intervals, paired tests and the comparison table."""

import numpy as np
import pandas as pd
import pytest

from ifir_lib.evaluation import stats


def test_constant_scores_give_zero_width_interval():
    assert stats.bootstrap_ci([2.0] * 5) == (2.0, 2.0)


def test_interval_is_seeded_and_contains_the_mean():
    v = np.random.default_rng(1).normal(5, 2, size=40)
    a = stats.bootstrap_ci(v, rng_seed=3)
    assert a == stats.bootstrap_ci(v, rng_seed=3)
    assert a[0] < v.mean() < a[1]
    # the normal-theory interval is close for 40 queries: mean +- 1.96 sd/sqrt(n)
    half = 1.96 * v.std(ddof=1) / np.sqrt(len(v))
    assert (a[1] - a[0]) == pytest.approx(2 * half, rel=0.25)


def test_empty_gives_nan():
    lo, hi = stats.bootstrap_ci([])
    assert lo != lo and hi != hi


def test_stratified_mean_is_the_mean_of_group_means():
    assert stats.stratified_mean([1, 3, 10], ["a", "a", "b"]) == (2 + 10) / 2


def test_stratified_interval_of_constant_groups_is_exact():
    assert stats.bootstrap_ci([1, 1, 10], strata=["a", "a", "b"]) == ((1 + 10) / 2, (1 + 10) / 2)


def test_identical_runs_are_not_different():
    a = {f"q{i}": float(i) for i in range(20)}
    t = stats.compare(a, dict(a), n=2000)
    assert t.diff == 0 and t.p_permutation == 1.0 and not t.significant()


def test_a_consistent_improvement_is_significant():
    rng = np.random.default_rng(0)
    b = {f"q{i}": float(x) for i, x in enumerate(rng.normal(20, 5, 30))}
    a = {q: v + 3 + rng.normal(0, 1) for q, v in b.items()}
    t = stats.compare(a, b, n=2000)
    assert t.diff == pytest.approx(np.mean([a[q] - b[q] for q in b]))
    assert t.ci_low > 0 and t.p_permutation < 0.01 and t.p_bootstrap < 0.01 and t.significant()


def test_permutation_p_value_exact_small_case():
    # 3 queries, differences +1, +1, +1: of the 8 sign patterns only 2 reach |mean| = 1
    a, b = {"q1": 1.0, "q2": 1.0, "q3": 1.0}, {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    assert stats.permutation_test(a, b, n_perm=20000, rng_seed=0) == pytest.approx(2 / 8, abs=0.01)


def test_queries_in_only_one_run_are_left_out(caplog):
    t = stats.compare({"q1": 1.0, "q2": 2.0, "q3": 5.0}, {"q1": 1.0, "q2": 2.0}, n=100)
    assert t.n == 2 and "1 queries are scored in only one run" in caplog.text


def test_holm():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([3 * 0.01, 2 * 0.03, 2 * 0.03])


def test_results_table_marks_significant_differences_vs_baseline():
    rng = np.random.default_rng(0)
    base = rng.normal(10, 3, 30)
    runs = {"base": base, "better": base + 4 + rng.normal(0, 1, 30), "same": base + rng.normal(0, 0.01, 30)}
    summary = pd.DataFrame(
        [
            {
                "run_id": r,
                "model": r,
                "config": r,
                "seed": 0,
                "dataset": "d",
                "metric": "p_mrr",
                "value": v.mean(),
                "ci_low": v.mean() - 1,
                "ci_high": v.mean() + 1,
                "n_queries": 30,
                "git_commit": "-",
                "timestamp": "-",
            }
            for r, v in runs.items()
        ]
    )
    pq = pd.DataFrame(
        [
            {"run_id": r, "dataset": "d", "metric": "p_mrr", "query_id": f"q{i}", "value": x}
            for r, v in runs.items()
            for i, x in enumerate(v)
        ]
    )
    t = stats.results_table(summary, pq, baseline="base", n=2000).set_index("run_id")
    assert t.loc["base", "delta"] == 0 and not t.loc["base", "significant"]
    assert t.loc["better", "significant"] and t.loc["better", "display"].endswith("*")
    assert not t.loc["same", "significant"]
    assert t.loc["better", "delta"] == pytest.approx((runs["better"] - base).mean())
