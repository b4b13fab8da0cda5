"""The two-stage (runs x queries) bootstrap and the exact run-level permutation test."""

import time

import numpy as np
import pytest

from ifir_lib.evaluation import stats


def _runs(query_means, offsets, noise=0.0, rng_seed=0, prefix="r"):
    """``{run_id: {qid: value}}``: run k scores query q as ``query_means[q] + offsets[k]`` (+ noise)."""
    rng = np.random.default_rng(rng_seed)
    return {
        f"{prefix}{k}": {f"q{i}": float(m + off + rng.normal(0, noise)) for i, m in enumerate(query_means)}
        for k, off in enumerate(offsets)
    }


def _width(ci):
    return ci.ci_high - ci.ci_low


def test_estimate_and_run_sd_are_means_over_runs_of_means_over_queries():
    ci = stats.two_stage_bootstrap({"r0": {"q1": 1, "q2": 3}, "r1": {"q1": 3, "q2": 5}}, n_boot=200)
    assert ci.estimate == (2 + 4) / 2 and ci.run_means_a == (2.0, 4.0)
    assert ci.run_sd_a == pytest.approx(np.std([2, 4], ddof=1)) and ci.runs_a == 2 and ci.runs_b == 0
    assert ci.ci_low <= ci.estimate <= ci.ci_high and ci.note == ""


def test_runs_that_disagree_widen_the_interval():
    q = np.random.default_rng(0).normal(30, 10, 60)
    agree, disagree = _runs(q, [0, 0, 0]), _runs(q, [-6, 0, 6])
    # the per-query means over runs are the same, so a bootstrap over queries alone cannot tell them apart
    same = [[np.mean([r[f"q{i}"] for r in runs.values()]) for i in range(60)] for runs in (agree, disagree)]
    assert np.allclose(same[0], same[1])
    assert stats.bootstrap_ci(same[0]) == stats.bootstrap_ci(same[1])
    a, d = (stats.two_stage_bootstrap(r, n_boot=2000, rng_seed=1) for r in (agree, disagree))
    assert a.estimate == pytest.approx(d.estimate)
    assert _width(d) > 1.5 * _width(a)
    assert a.run_sd_a == pytest.approx(0.0, abs=1e-9) and d.run_sd_a == pytest.approx(6.0)


def test_a_single_run_enters_once_and_the_note_says_what_is_missing():
    q = np.random.default_rng(1).normal(30, 10, 40)
    trained, base = _runs(q, [1, 3, 5], noise=2), _runs(q, [0], prefix="base")
    ci = stats.two_stage_bootstrap(trained, base, n_boot=500, names=("ins-dv", "base"))
    assert (ci.runs_a, ci.runs_b, ci.n_queries) == (3, 1, 40) and np.isnan(ci.run_sd_b)
    assert ci.note.startswith("1 run of base") and "base's run-to-run variation unknown" in ci.note
    one = stats.two_stage_bootstrap(_runs(q, [0]), n_boot=200, names=("ins-dv", "x"))
    assert one.note == "1 run of ins-dv: interval over queries only; run-to-run variation unknown"
    both = stats.two_stage_bootstrap(_runs(q, [1]), base, n_boot=200, names=("all-dv", "base"))
    assert both.note.startswith("1 run of all-dv and of base: interval over queries only")


def test_one_shared_query_draw_keeps_the_comparison_paired():
    # b is a plus 2 on every query: whichever queries are drawn, a - b is -2 exactly
    q = np.random.default_rng(2).normal(30, 10, 50)
    a = _runs(q, [0])
    b = {"b0": {k: v + 2 for k, v in a["r0"].items()}}
    ci = stats.two_stage_bootstrap(a, b, n_boot=1000)
    assert (ci.estimate, ci.ci_low, ci.ci_high) == pytest.approx((-2, -2, -2))


def test_strata_give_the_mean_of_stratum_means_and_resample_within_them():
    runs = {"r0": {"x/1": 1.0, "x/2": 1.0, "y/1": 10.0}}
    ci = stats.two_stage_bootstrap(runs, n_boot=300, strata=stats.strata_of(list(runs["r0"])))
    assert (ci.estimate, ci.ci_low, ci.ci_high) == ((1 + 10) / 2, (1 + 10) / 2, (1 + 10) / 2)


def test_queries_not_scored_by_every_run_are_left_out(caplog):
    ci = stats.two_stage_bootstrap({"r0": {"q1": 1.0, "q2": 2.0}, "r1": {"q1": 3.0}}, n_boot=10)
    assert ci.n_queries == 1 and ci.estimate == 2.0 and "1 queries are not scored by every run" in caplog.text


def test_seeded_and_fast_enough_for_five_modes():
    rng = np.random.default_rng(3)
    q = rng.normal(30, 10, 200)
    modes = [_runs(q, rng.normal(0, 2, 3), noise=3, rng_seed=k) for k in range(5)]
    assert stats.two_stage_bootstrap(modes[0], modes[1]) == stats.two_stage_bootstrap(modes[0], modes[1])
    start = time.perf_counter()
    for other in modes[1:]:
        stats.two_stage_bootstrap(modes[0], other, n_boot=2000)
    stats.two_stage_bootstrap(modes[0], n_boot=2000)
    assert time.perf_counter() - start < 1.0


def test_three_paired_runs_cannot_go_below_a_quarter():
    seeds = {"a0": 0, "a1": 1, "a2": 2, "b0": 0, "b1": 1, "b2": 2}
    t = stats.run_level_test({"a0": 9, "a1": 10, "a2": 11}, {"b0": 1, "b1": 2, "b2": 3}, paired_by=seeds)
    assert t.method == "paired sign-flip" and t.min_p == 2 / 2**3 == 0.25
    assert t.p == 0.25 and t.diff == 8  # the strongest possible evidence from three runs


def test_paired_sign_flip_exact_small_case():
    # differences 1, 2, -0.5 (sum 2.5); the 8 sign patterns' |sums| are 2.5, 3.5, 1.5, 0.5, 0.5, 1.5,
    # 3.5, 2.5: four reach 2.5
    seeds = {"a0": 0, "a1": 1, "a2": 2, "b0": 0, "b1": 1, "b2": 2}
    t = stats.run_level_test({"a0": 1, "a1": 2, "a2": -0.5}, {"b0": 0, "b1": 0, "b2": 0}, paired_by=seeds)
    assert t.p == 4 / 8 and t.exact


def test_pairing_follows_the_rng_seed_not_the_order():
    seeds = {"a0": 0, "a1": 1, "b0": 1, "b1": 0}  # b's runs listed in the other order
    a, b = {"a0": 5.0, "a1": 1.0}, {"b0": 0.0, "b1": 4.0}  # pairs: (5, 4) and (1, 0): differences +1, +1
    t = stats.run_level_test(a, b, paired_by=seeds)
    assert t.method == "paired sign-flip" and t.p == 2 / 4


def test_unpaired_label_permutation_exact_small_case():
    # a = {3, 4}, b = {1, 2}: of the 6 ways to pick a's two runs from {1, 2, 3, 4}, the mean
    # differences are 2, -2, -1, 1, 0, 0; two reach |2|
    t = stats.run_level_test([3, 4], [1, 2])
    assert t.method == "label permutation" and t.p == 2 / 6 and t.min_p == 2 / 6
    assert stats.run_level_test([3, 4, 5], [1, 2]).min_p == 1 / 10  # unequal sizes: no mirror split


def test_against_a_single_run_the_other_modes_runs_are_sign_flipped():
    t = stats.run_level_test({"a0": 5, "a1": 6, "a2": 7}, {"base": 4})
    assert t.method == "one-sample sign-flip" and t.p == 2 / 8 and t.min_p == 0.25 and t.runs_b == 1
    s = stats.run_level_test({"base": 4}, {"a0": 5, "a1": 3, "a2": 7})  # differences -1, 1, -3
    assert s.diff == 4 - 5 and s.p == 6 / 8  # |sums| 3, 3, 5, 1, 1, 5, 3, 3: six reach |-3|


def test_one_run_each_allows_no_test():
    t = stats.run_level_test([5.0], [1.0])
    assert np.isnan(t.p) and t.min_p == 1.0 and "no run-level test possible" in t.reason
    paired = stats.run_level_test({"a": 5.0}, {"b": 1.0}, paired_by={"a": 0, "b": 0})
    assert np.isnan(paired.p) and paired.reason == t.reason


def test_identical_modes_give_p_one_and_random_permutations_approach_the_exact_p():
    assert stats.run_level_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], paired_by=None).p == 1.0
    a, b = [0.3, 1.2, 2.5, 0.9, 1.7], [0.1, 0.4, 1.1, 0.2]
    exact = stats.run_level_test(a, b)
    sampled = stats.run_level_test(a, b, max_exact=1, n_perm=20000, rng_seed=1)
    assert exact.exact and not sampled.exact and sampled.p == pytest.approx(exact.p, abs=0.015)
