"""Summaries of the results table and paired comparisons."""

import numpy as np
import pandas as pd
import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.reporting import summaries as S
from support.fakes import fake_result, results_frame


def test_compare_results_marks_significance():
    base = [float(i % 7) for i in range(30)]
    better = [v + 5 + (i % 3) for i, v in enumerate(base)]
    t = S.compare_results(
        {"base": fake_result("d", base), "dv": fake_result("d", better)}, baseline="base", n=2000
    )
    row = t.set_index("run_id").loc["dv"]
    assert row["significant"] and row["delta"] == pytest.approx(sum(better) / 30 - sum(base) / 30)


def test_compare_results_corrects_over_every_set_it_is_given():
    """One call per set, joined, was Holm within each set only: the table shown was under-corrected."""
    base = [float(i % 7) for i in range(30)]
    near = [v + (0.6 if i % 2 else -0.1) for i, v in enumerate(base)]  # a small gain, p near 0.01-0.05
    one = S.compare_results({"base": fake_result("v1", base), "dv": fake_result("v1", near)}, baseline="base")
    both = S.compare_results(
        {
            "base": [fake_result(d, base) for d in ("v1", "v2")],
            "dv": [fake_result(d, near) for d in ("v1", "v2")],
        },
        baseline="base",
    )
    tested = both[both["run_id"] == "dv"].set_index("dataset")
    assert sorted(tested.index) == ["v1", "v2"]
    p1 = one.set_index("run_id").loc["dv", "p_adjusted"]
    assert tested.loc["v1", "p_adjusted"] == pytest.approx(min(1.0, 2 * p1))  # Holm over two tests
    for bad in ({"adjust": "Holm"}, {"adjust": "bonferroni"}, {"test": "perm"}):
        with pytest.raises(ValueError, match="choose one of"):
            S.compare_results(
                {"base": fake_result("v1", base), "dv": fake_result("v1", near)}, baseline="base", **bad
            )


def test_summarize_spread_over_seeds_and_ci_for_one_run():
    res = results_frame(
        [
            {"run_id": "a0", "mode": "ins-dv", "rng_seed": 0, "metric": "p_mrr", "value": 4.0},
            {"run_id": "a1", "mode": "ins-dv", "rng_seed": 1, "metric": "p_mrr", "value": 6.0},
            {
                "run_id": "b0",
                "mode": "ins-orig",
                "metric": "p_mrr",
                "value": 2.0,
                "ci_low": 1.0,
                "ci_high": 3.5,
            },
        ]
    )
    s = S.summarize(res, "p_mrr").set_index("mode")
    assert list(s.index) == ["ins-orig", "ins-dv"]  # paper order, not file order
    assert (s.loc["ins-dv", "mean"], s.loc["ins-dv", "err_minus"], s.loc["ins-dv", "err_plus"]) == (
        5.0,
        1.0,
        1.0,
    )
    assert s.loc["ins-dv", "error"] == "spread" and s.loc["ins-dv", "n_runs"] == 2
    assert (s.loc["ins-orig", "err_minus"], s.loc["ins-orig", "err_plus"]) == (2.0 - 1.0, 3.5 - 2.0)
    assert s.loc["ins-orig", "error"] == "ci"
    assert np.isnan(
        S.summarize(res, "p_mrr", error="ci").set_index("mode").loc["ins-dv", "err_plus"]
    )  # no CI given


def test_per_run_prefers_an_aggregate_dataset_else_averages():
    rows = [
        {"run_id": "r", "mode": "base", "metric": "p_mrr", "dataset": d, "value": v}
        for d, v in (("robust04", 3.0), ("news21", 6.0), ("core17", 9.0))
    ]
    assert S.per_run(results_frame(rows), "p_mrr")["value"].tolist() == [(3.0 + 6.0 + 9.0) / 3]
    rows.append({"run_id": "r", "mode": "base", "metric": "p_mrr", "dataset": "all", "value": 5.5})
    assert S.per_run(results_frame(rows), "p_mrr")["value"].tolist() == [5.5]
    assert S.per_run(results_frame(rows), "p_mrr", dataset="core17")["value"].tolist() == [9.0]


def test_per_query_summary_averages_seeds_then_datasets():
    # per-query scores are joined to their run on (run_id, dataset): each has its results row
    res = results_frame(
        [
            {"run_id": r, "mode": "ins-dv", "rng_seed": i, "metric": "p_mrr", "value": 0.0, "dataset": d}
            for i, r, sets in ((0, "a", ("big", "small")), (1, "b", ("big",)))
            for d in sets
        ]
    )
    pq = pd.DataFrame(
        [
            {"run_id": "a", "dataset": "big", "metric": "p_mrr", "query_id": "q1", "value": 10.0},
            {"run_id": "b", "dataset": "big", "metric": "p_mrr", "query_id": "q1", "value": 20.0},
            {"run_id": "a", "dataset": "big", "metric": "p_mrr", "query_id": "q2", "value": 30.0},
            {"run_id": "b", "dataset": "big", "metric": "p_mrr", "query_id": "q2", "value": 30.0},
            {"run_id": "a", "dataset": "small", "metric": "p_mrr", "query_id": "q1", "value": -40.0},
            {"run_id": "a", "dataset": "other", "metric": "map_at_1000", "query_id": "q9", "value": 99.0},
            {
                "run_id": "zz",
                "dataset": "big",
                "metric": "p_mrr",
                "query_id": "q1",
                "value": 99.0,
            },  # not in results
        ]
    )
    points, cis = S.per_query_summary(pq, res, n_boot=200)
    assert sorted(points["value"]) == [-40.0, (10 + 20) / 2, 30.0]
    row = cis.iloc[0]
    assert row["n"] == 3 and row["mean"] == ((15 + 30) / 2 + -40) / 2  # mean of per-dataset means
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]


def test_synthesis_summary_counts_rates_and_lengths():
    rows = [
        {
            "key": "a",
            "seed_id": "a",
            "backend": "x",
            "status": "accepted",
            "reversal": "one two three",
            "instruction_type": "t",
            "verify_flip": True,
        },
        {
            "key": "b",
            "seed_id": "b",
            "backend": "x",
            "status": "accepted",
            "reversal": "one two",
            "instruction_type": "t",
            "verify_flip": False,
        },
        {
            "key": "c",
            "seed_id": "c",
            "backend": "x",
            "status": "declined",
            "reversal": None,
            "instruction_type": "u",
        },
        {
            "key": "d",
            "seed_id": "d",
            "backend": "y",
            "status": "rejected",
            "reversal": "bad",
            "instruction_type": "u",
        },
    ]
    t = S.synthesis_summary(rows)
    share = t["by_backend"].set_index(["backend", "status"])["share"]
    assert share["x", "declined"] == 1 / 3 and share["y", "rejected"] == 1.0
    assert sorted(t["lengths"]["words"]) == [1, 2, 3]
    assert t["verify"].set_index("backend").loc["x", "rate"] == 1 / 2 and "y" not in set(
        t["verify"]["backend"]
    )


def test_smoothing_window_is_odd_about_a_fifth_at_least_three_and_never_longer_than_the_curve():
    assert [S.smoothing_window(n) for n in (1, 2, 3, 4, 10, 20, 40, 1000)] == [1, 1, 3, 3, 3, 5, 9, 201]


def test_smoothed_losses_average_the_runs_of_a_mode_then_a_centred_rolling_mean():
    logs = pd.DataFrame(
        {
            "run": ["a", "a", "a", "b", "b", "b", "c"],
            "mode": ["ins-dv"] * 6 + ["ins-orig"],
            "step": [1, 2, 3, 1, 2, 3, 1],
            "loss": [0.0, 4.0, 2.0, 2.0, 2.0, 2.0, 5.0],
        }
    )
    s = S.smoothed_losses(logs, window=3)
    assert list(s["mode"]) == ["ins-orig", "ins-dv", "ins-dv", "ins-dv"]  # paper order
    dv = s[s["mode"] == "ins-dv"]
    assert list(dv["loss"]) == [1.0, 3.0, 2.0] and list(dv["n_runs"]) == [2, 2, 2]
    # centred, ends use the points there are: (1+3)/2, (1+3+2)/3, (3+2)/2
    assert list(dv["smoothed"]) == pytest.approx([2.0, 2.0, 2.5])


def test_per_run_averages_the_datasets_of_one_model_evaluated_one_set_at_a_time():
    """``evaluate`` stamps each dataset's rows with their own run_id; they are still one run."""
    rows = [
        {"run_id": f"dv-s{s}-{d}", "model": f"runs/s{s}/ins-dv", "mode": "ins-dv", "rng_seed": s}
        | {"metric": "p_mrr", "dataset": d, "value": v + s}
        for s in (0, 1)
        for d, v in (("followir_mini", 2.0), ("followir_v2", 6.0))
    ]
    res = results_frame(rows).assign(backbone="minilm")  # as ifir_run.json would name it
    runs = S.per_run(res, "p_mrr")
    assert runs["value"].tolist() == [(2.0 + 6.0) / 2, (3.0 + 7.0) / 2]
    assert runs["rng_seed"].astype(int).tolist() == [0, 1]
    table = S.headline_table(res, metrics=("p_mrr", "score"))
    assert table.index.tolist() == [
        ("all-MiniLM-L6-v2", "ins-dv")
    ]  # the backbone in words, as figures name it
    assert table["p_mrr"].tolist() == [(4.0 + 5.0) / 2]
    assert table["runs"].tolist() == [2] and list(table.columns) == ["p_mrr", "runs"]  # no score rows


def test_headline_runs_are_per_metric_when_they_differ():
    """A run without a Score row: the Score mean is over 2 runs, and one ``runs`` column said 3."""
    rows = [
        {"run_id": f"dv-s{s}", "model": f"runs/s{s}/ins-dv", "mode": "ins-dv", "rng_seed": s}
        | {"metric": m, "dataset": "followir_mini", "value": 5.0 + s}
        for s in (0, 1, 2)
        for m in ("p_mrr", "score")
        if (s, m) != (2, "score")
    ]
    table = S.headline_table(results_frame(rows).assign(backbone="minilm"), metrics=("p_mrr", "score"))
    assert list(table.columns) == ["p_mrr", "score", "runs p_mrr", "runs score"]
    assert table.iloc[0].tolist() == [6.0, 5.5, 3, 2]


def test_rows_sort_by_backbone_then_mode_in_paper_order():
    df = pd.DataFrame(
        {"backbone": ["b", "a", "a", "a", "b"], "mode": ["base", "zz-custom", "ins-dv", "base", "all-dv"]}
    )
    got = S._by_backbone_and_mode(df)
    assert list(zip(got["backbone"], got["mode"])) == [
        ("a", "base"),
        ("a", "ins-dv"),
        ("a", "zz-custom"),  # a mode outside the paper's comes after them
        ("b", "base"),
        ("b", "all-dv"),
    ]


def test_summarize_with_per_query_scores_draws_the_two_stage_interval_only_for_complete_modes():
    """Two runs of ins-dv with per-query scores: the 95% two-stage interval around their mean; ins-orig
    lacks one run's scores, so it keeps the min-max over runs (``interval_phrase`` tells them apart)."""
    rows, pq = [], []
    for mode, seed, scores in (
        ("ins-dv", 0, [1, 3, 5]),
        ("ins-dv", 1, [3, 5, 7]),
        ("ins-orig", 0, [0, 2, 4]),
    ):
        rid = f"{mode}-s{seed}"
        rows.append({"run_id": rid, "model": rid, "mode": mode, "rng_seed": seed, "metric": "p_mrr"})
        rows[-1]["value"] = float(np.mean(scores))
        pq += [
            {"run_id": rid, "dataset": "d", "metric": "p_mrr", "query_id": f"q{i}", "value": v}
            for i, v in enumerate(scores)
        ]
    rows.append(
        {"run_id": "o1", "model": "o1", "mode": "ins-orig", "rng_seed": 1, "metric": "p_mrr", "value": 4.0}
    )
    res = results_frame([{**r, "dataset": "d"} for r in rows]).assign(backbone="minilm")
    s = S.summarize(res, "p_mrr", per_query=pd.DataFrame(pq), n_boot=500).set_index("mode")
    dv = s.loc["ins-dv"]
    assert dv["error"] == "two-stage" and dv["mean"] == (3.0 + 5.0) / 2
    assert 0 < dv["err_minus"] and 0 < dv["err_plus"] and dv["mean"] + dv["err_plus"] <= 7.0
    assert s.loc["ins-orig", "error"] == "spread" and s.loc["ins-orig", "err_plus"] == 4.0 - (2.0 + 4.0) / 2
    assert S.interval_phrase("two-stage", 2) == S.TWO_STAGE and S.interval_phrase("ci", 1) == S.QUERY_CI
    assert "not a 95% interval" in S.interval_phrase("spread", 2)


def _runs_on(sets_of: dict[tuple[str, int], dict[str, float]], extra=()) -> pd.DataFrame:
    """Results rows of p-MRR: ``{(mode, rng_seed): {dataset: value}}``, one model per run."""
    rows = [
        {"run_id": f"{m}-s{s}-{d}", "model": f"runs/{m}-s{s}", "mode": m, "rng_seed": s}
        | {"metric": "p_mrr", "dataset": d, "value": v}
        for (m, s), sets in sets_of.items()
        for d, v in sets.items()
    ]
    return results_frame([*rows, *extra]).assign(backbone="minilm")


def test_figure_c_averages_every_query_over_the_same_runs(caplog):
    """Ins-DV's third run had no per-query rows (or 1 of 3 queries): its diamond came from 2 of 3
    runs and each dot averaged other runs, without a word."""
    res = _runs_on({("ins-dv", s): {"core17": 2.0 * s} for s in (0, 1, 2)})
    pq = pd.DataFrame(
        [
            {
                "run_id": f"ins-dv-s{s}-core17",
                "dataset": "core17",
                "metric": "p_mrr",
                "query_id": q,
                "value": 2.0 * s,
            }
            for s in (0, 1, 2)
            for q in ("q0", "q1", "q2")
            if s < 2 or q == "q0"
        ]
    )
    points, cis = S.per_query_summary(pq, res, n_boot=50)
    assert points["query_id"].tolist() == ["q0"] and points["value"].tolist() == [2.0]
    assert "2 query(ies) not scored by every run of their mode left out" in caplog.text
    points, cis = S.per_query_summary(pq[pq["run_id"] != "ins-dv-s2-core17"], res, n_boot=50)
    assert len(points) == 3 and "1 run(s) without per-query rows left out (ins-dv-s2-core17)" in caplog.text
    assert cis[["runs", "runs_in_table"]].values.tolist() == [[2, 3]]
    from ifir_lib.reporting.figures import caption_for, fig_per_query

    fig = fig_per_query(pq[pq["run_id"] != "ins-dv-s2-core17"], res, n_boot=50)
    assert "averaged over the mode's runs with per-query scores (Ins-DV: 2 of its 3)" in caption_for(fig)


def test_a_run_lacking_a_set_the_others_average_is_left_out_and_named(caplog):
    """rng_seed 1 was not evaluated on the hard collection: averaged over the two it has it would
    look 10 points better than rng_seed 0, whose per-set scores are the same."""
    full = {"robust04": 10.0, "news21": 10.0, "core17": -20.0}
    res = _runs_on({("ins-dv", 0): full, ("ins-dv", 1): {k: full[k] for k in ("robust04", "news21")}})
    runs = S.per_run(res, "p_mrr")
    assert runs["rng_seed"].tolist() == ["0"] and runs["value"].tolist() == [0.0]
    assert (
        "p_mrr: 1 run(s) left out of the summary, lacking a value on set(s) the others are averaged "
        "over: runs/ins-dv-s1 (ins-dv, rng_seed 1) lacks core17" in caplog.text
    )
    caplog.clear()
    s = S.summarize(res, "p_mrr").set_index("mode")
    assert s.loc["ins-dv", "n_runs"] == 1 and caplog.text.count("left out of the summary") == 1  # said once
    # an empty value is no value: the run is left out too, and named
    res.loc[res["dataset"] == "core17", "value"] = float("nan")
    assert S.per_run(res, "p_mrr").empty and "rng_seed 0) lacks core17" in caplog.text


def test_runs_without_the_aggregate_row_are_named_not_dropped_in_silence(caplog):
    """base has the FollowIR aggregate row; the ins-dv runs only the collections."""
    cols = {"robust04": 5.0, "news21": 5.0, "core17": 5.0}
    res = _runs_on({("base", 0): {**cols, "followir": 1.0}, ("ins-dv", 0): cols, ("ins-dv", 1): cols})
    assert S.headline_table(res, metrics=("p_mrr",)).index.tolist() == [("all-MiniLM-L6-v2", "base")]
    assert "2 run(s) left out of the summary" in caplog.text
    assert (
        "runs/ins-dv-s0 (ins-dv, rng_seed 0) lacks followir; runs/ins-dv-s1 (ins-dv, rng_seed 1) lacks followir"
        in caplog.text
    )


def test_summaries_count_a_re_evaluation_once_the_latest_and_flag_mixed_conditions(caplog):
    """ins-orig rng_seed 0 evaluated twice (torch at 0, onnx-int8 at 8 later), rng_seed 1 at 6: bar,
    whisker and per-query points all come from the latest evaluation of each run."""
    rows, pq = [], []
    for rid, seed, v, stamp, backend in (
        ("o0", 0, 0.0, "2026-01-01", "torch"),
        ("o0-int8", 0, 8.0, "2026-01-02", "onnx-int8"),
        ("o1", 1, 6.0, "2026-01-01", "torch"),
    ):
        rows.append(
            {"run_id": rid, "model": f"runs/o{seed}", "mode": "ins-orig", "rng_seed": seed, "metric": "p_mrr"}
            | {"value": v, "timestamp": stamp, "backend": backend}
        )
        pq += [
            {"run_id": rid, "dataset": "d", "metric": "p_mrr", "query_id": f"q{i}", "value": v}
            for i in range(3)
        ]
    res, pq = results_frame(rows).assign(backbone="minilm"), pd.DataFrame(pq)
    s = S.summarize(res, "p_mrr", per_query=pq, n_boot=200).iloc[0]
    assert (s["mean"], s["n_runs"], s["error"]) == (7.0, 2, "two-stage")
    assert 6.0 <= s["mean"] - s["err_minus"] and s["mean"] + s["err_plus"] <= 8.0  # not reaching 0
    points, cis = S.per_query_summary(pq, res, n_boot=200)
    assert points["value"].tolist() == [7.0] * 3 and cis["mean"].tolist() == [7.0]
    assert "mixes backend values ('torch', 'onnx-int8')" in caplog.text
    assert "repeated evaluation(s) of one model on one set left out (run ids o0)" in caplog.text


def test_a_run_id_shared_by_two_runs_stops_the_summary():
    res = results_frame(
        [
            {"run_id": "trial1", "model": "minilm", "mode": "base", "metric": "p_mrr", "value": 0.0},
            {"run_id": "trial1", "model": "runs/dv", "mode": "ins-dv", "metric": "p_mrr", "value": 9.0},
        ]
    ).assign(backbone="minilm")
    res.attrs["path"] = "out/results.csv"
    pq = pd.DataFrame(
        [{"run_id": "trial1", "dataset": "d", "metric": "p_mrr", "query_id": "q", "value": 1.0}]
    )
    with pytest.raises(DataError, match=r"out/results\.csv.*run id 'trial1' labels 2 different runs"):
        S.summarize(res, "p_mrr", per_query=pq)
    with pytest.raises(DataError, match="run id 'trial1'"):
        S.per_query_summary(pq, res)
