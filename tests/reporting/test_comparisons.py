"""Mode tables and comparisons over runs x queries, read from a results table, and ``ifir compare``."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import DataError
from ifir_lib.evaluation import metrics as M
from ifir_lib.evaluation import stats
from ifir_lib.evaluation.evaluator import EvalResult
from ifir_lib.evaluation.mteb_glue import aggregate_followir
from ifir_lib.reporting.comparisons import (
    COMPARISON_COLUMNS,
    compare_modes,
    comparison_table,
    load_tables,
    mode_table,
)
from ifir_lib.reporting.results import (
    RESULT_COLUMNS,
    append_results,
    per_query_path,
    save_result,
    warnings_once,
)
from ifir_lib.reporting.summaries import summarize

N_Q = 40
OFFSETS = {"ins-dv": (-4.0, 0.0, 4.0), "ins-orig": (-1.0, 0.5, 1.0)}  # per rng_seed 0, 1, 2
LIFT = {"ins-dv": 3.0, "ins-orig": 1.0}


def _scores(dataset: str, mode: str, seed: int) -> dict[str, float]:
    """A run's per-query p-MRR on ``dataset``: the base model's, plus the mode's lift, plus the run's
    offset, plus query noise; everything seeded, so a test can rebuild it."""
    ds = sum(map(ord, dataset))
    base = np.random.default_rng(ds).normal(30, 10, N_Q)
    if mode == "base":
        return {f"q{i}": float(v) for i, v in enumerate(base)}
    noise = np.random.default_rng([ds, seed, len(mode)]).normal(0, 3, N_Q)
    if mode in OFFSETS:
        values = base + LIFT[mode] + OFFSETS[mode][seed] + noise
    else:  # all-orig / all-dv: one run each, 10 points apart
        values = base + (10.0 if mode == "all-dv" else 0.0) + noise
    return {f"q{i}": float(v) for i, v in enumerate(values)}


def _write(path, runs, sets=("v1", "v2"), timestamp="2026-01-01T00:00:00+00:00"):
    """Append ``runs`` ((run_id, model, mode, rng_seed)) on ``sets`` to the results table at ``path``."""
    rows, per_query = [], []
    for run_id, model, mode, seed in runs:
        for ds in sets:
            s = _scores(ds, mode, seed)
            rows.append(
                dict.fromkeys(RESULT_COLUMNS)  # columns this test does not use stay empty
                | dict(run_id=run_id, model=model, mode=mode, rng_seed=seed, dataset=ds, metric="p_mrr")
                | dict(value=float(np.mean(list(s.values()))), ci_low=None, ci_high=None, n_queries=N_Q)
                | dict(git_commit="test", timestamp=timestamp)
            )
            per_query += [
                dict(run_id=run_id, dataset=ds, metric="p_mrr", query_id=q, value=v) for q, v in s.items()
            ]
    append_results(path, rows, per_query)
    return path


EXPERIMENT = [
    ("base-0", "minilm", "base", 0),
    *[(f"{m}-s{s}", f"runs/rng{s}/{m}", m, s) for m in ("ins-dv", "ins-orig") for s in (0, 1, 2)],
    ("all-orig-s0", "runs/rng0/all-orig", "all-orig", 0),
    ("all-dv-s0", "runs/rng0/all-dv", "all-dv", 0),
]


@pytest.fixture()
def results_csv(tmp_path):
    return _write(tmp_path / "results.csv", EXPERIMENT)


def test_mode_table_counts_runs_and_gives_run_sd(results_csv):
    t = mode_table(*load_tables(results_csv), metrics=["p_mrr"], n_boot=300)
    v1 = t[t["dataset"] == "v1"].set_index("mode")
    assert list(v1.index) == ["base", "ins-orig", "ins-dv", "all-orig", "all-dv"]  # the paper's order
    assert v1.loc["base", "runs"] == 1 and v1.loc["ins-dv", "runs"] == 3
    dv = [np.mean(list(_scores("v1", "ins-dv", s).values())) for s in (0, 1, 2)]
    assert v1.loc["ins-dv", "mean"] == pytest.approx(np.mean(dv))
    assert v1.loc["ins-dv", "sd"] == pytest.approx(np.std(dv, ddof=1))
    assert np.isnan(v1.loc["base", "sd"]) and v1.loc["base", "note"].startswith("1 run of base")
    assert (t["ci_low"] <= t["mean"]).all() and (t["mean"] <= t["ci_high"]).all()


def test_one_run_per_mode_is_reported_as_such(results_csv):
    results, per_query = load_tables(results_csv)
    row = compare_modes(results, per_query, "all-dv", "all-orig", metric="p_mrr", dataset="v1", n_boot=500)
    assert (row["runs_a"], row["runs_b"]) == (1, 1)
    assert row["ci_low"] > 0  # queries alone say 10 points, clearly ...
    assert np.isnan(row["p_run"]) and row["min_p"] == 1.0  # ... but one run each allows no claim
    assert "1 run of all-dv and of all-orig: interval over queries only" in row["note"]
    assert "no run-level test possible" in row["note"]
    t = comparison_table(results, per_query, [("all-dv", "all-orig")], metrics=["p_mrr"], n_boot=200)
    assert not t["significant"].any() and t["p_holm"].isna().all()


def _by_hand(a_runs: np.ndarray, base: np.ndarray, n_boot: int, rng_seed: int) -> tuple[float, float]:
    """The design's interval written as a loop: draw 3 of a's runs and N_Q queries, subtract the
    one base run's mean over the same queries."""
    rng = np.random.default_rng(rng_seed)
    reps = []
    for _ in range(n_boot):
        runs, queries = rng.integers(0, len(a_runs), len(a_runs)), rng.integers(0, N_Q, N_Q)
        reps.append(a_runs[runs][:, queries].mean() - base[queries].mean())
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return float(lo), float(hi)


def test_base_enters_once_and_the_interval_is_the_designs(results_csv):
    results, per_query = load_tables(results_csv)
    row = compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v2", n_boot=20000)
    assert (row["runs_a"], row["runs_b"], row["n_queries"]) == (3, 1, N_Q)
    assert row["min_p"] == 0.25 and row["p_run"] >= 0.25  # 3 runs against one: a 3-run sign-flip
    queries = [f"q{i}" for i in range(N_Q)]
    a = np.array([[_scores("v2", "ins-dv", s)[q] for q in queries] for s in (0, 1, 2)])  # (3, N_Q)
    base = np.array([_scores("v2", "base", 0)[q] for q in queries])
    assert row["diff"] == pytest.approx(a.mean() - base.mean())
    lo, hi = _by_hand(a, base, 20000, rng_seed=7)
    width = hi - lo
    assert row["ci_low"] == pytest.approx(lo, abs=0.05 * width)
    assert row["ci_high"] == pytest.approx(hi, abs=0.05 * width)
    # the old pairing copied base once per rng_seed and resampled (rng_seed, query) pairs: far too narrow
    keys = [(s, q) for s in range(3) for q in range(N_Q)]
    pseudo = stats.paired_bootstrap(
        {f"{s}-{q}": a[s, q] for s, q in keys}, {f"{s}-{q}": base[q] for s, q in keys}, n_boot=2000
    )
    assert pseudo[2] - pseudo[1] < 0.5 * width


def test_paired_runs_and_holm_over_the_rows_with_a_p_value(results_csv):
    results, per_query = load_tables(results_csv)
    pairs = [("ins-dv", "ins-orig"), ("all-dv", "all-orig")]
    t = comparison_table(results, per_query, pairs, metrics=["p_mrr"], n_boot=200)
    assert list(t.columns) == [*COMPARISON_COLUMNS, "p_holm", "significant"]
    assert len(t) == 4 and set(t["dataset"]) == {"v1", "v2"}
    tested = t[t["p_run"].notna()]
    assert list(tested["a"]) == ["ins-dv", "ins-dv"] and (tested["min_p"] == 0.25).all()
    assert list(tested["p_holm"]) == pytest.approx(stats.holm(list(tested["p_run"])))  # a family of 2
    assert not t["significant"].any()  # 3 runs cannot reach 0.05


def test_a_repeated_evaluation_is_one_run(tmp_path, caplog):
    path = _write(tmp_path / "results.csv", EXPERIMENT)
    _write(path, [("base-again", "minilm", "base", 0)], timestamp="2026-02-01T00:00:00+00:00")
    t = mode_table(*load_tables(path), metrics=["p_mrr"], datasets=["v1"], n_boot=50)
    assert t.set_index("mode").loc["base", "runs"] == 1
    assert "repeated evaluation" in caplog.text and "base-0" in caplog.text  # the earlier one left out


def test_unknown_names_are_errors_naming_the_file(results_csv):
    results, per_query = load_tables(results_csv)
    with pytest.raises(Exception, match=r"results\.csv.*'ins-xx' not in the table"):
        compare_modes(results, per_query, "ins-xx", "base", metric="p_mrr", dataset="v1")
    with pytest.raises(Exception, match=r"field 'dataset'.*'v9'"):
        comparison_table(results, per_query, [("ins-dv", "base")], metrics=["p_mrr"], datasets=["v9"])


def test_ifir_compare_prints_the_rows(results_csv, capsys):
    assert main(["compare", str(results_csv), "--a", "ins-dv", "--b", "base", "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("| v")]
    assert [ln.split("|")[1].strip() for ln in lines] == ["v1", "v2"]
    assert all("ins-dv - base" in ln and "3 / 1" in ln and "0.250" in ln for ln in lines)
    assert "note (v1, p_mrr): 1 run of base" in out
    assert (
        main(["compare", str(results_csv), "--a", "ins-dv", "--b", "ins-orig", "--set", "v2", "--json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["dataset"] == "v2" and rows[0]["runs_b"] == 3
    direct = compare_modes(*load_tables(results_csv), "ins-dv", "ins-orig", metric="p_mrr", dataset="v2")
    assert rows[0]["diff"] == pytest.approx(direct["diff"]) and rows[0]["ci_low"] == pytest.approx(
        direct["ci_low"]
    )


@pytest.mark.parametrize(
    "args, bad",
    [
        (["--a", "ins-xx", "--b", "base"], "ins-xx"),
        (["--a", "ins-dv", "--b", "base", "--set", "v9"], "v9"),
        (["--a", "ins-dv", "--b", "base", "--metric", "ndcg_at_99"], "ndcg_at_99"),
    ],
)
def test_ifir_compare_refuses_unknown_names(results_csv, capsys, args, bad):
    assert main(["compare", str(results_csv), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(results_csv) in err and repr(bad) in err


def test_ifir_compare_needs_the_per_query_file(results_csv, capsys):
    per_query_path(results_csv).unlink()
    assert main(["compare", str(results_csv), "--a", "ins-dv", "--b", "base"]) == 2
    err = capsys.readouterr().err
    assert "results_per_query.csv" in err and "not found" in err


def test_a_frame_built_by_hand_works_too():
    rows = [
        dict(
            run_id=f"r{s}",
            model=f"m{s}",
            mode="ins-dv",
            rng_seed=s,
            dataset="v1",
            metric="p_mrr",
            value=3.0 + 2 * s,
        )
        for s in range(2)
    ] + [dict(run_id="b", model="minilm", mode="base", rng_seed=0, dataset="v1", metric="p_mrr", value=1.0)]
    pq = pd.DataFrame(
        [("r0", "v1", "p_mrr", "q1", 2.0), ("r0", "v1", "p_mrr", "q2", 4.0)]
        + [("r1", "v1", "p_mrr", "q1", 4.0), ("r1", "v1", "p_mrr", "q2", 6.0)]
        + [("b", "v1", "p_mrr", "q1", 1.0), ("b", "v1", "p_mrr", "q2", 1.0)],
        columns=["run_id", "dataset", "metric", "query_id", "value"],
    )
    row = compare_modes(pd.DataFrame(rows), pq, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=100)
    assert row["mean_a"] == (3 + 5) / 2 and row["mean_b"] == 1 and row["diff"] == 3
    assert row["sd_a"] == pytest.approx(np.std([3, 5], ddof=1)) and row["min_p"] == 0.5


def test_a_table_mixing_evaluation_conditions_is_flagged(results_csv, caplog):
    results, per_query = load_tables(results_csv)
    results["prompts"] = np.where(results["mode"] == "base", "benchmark", "model")
    row = compare_modes(results, per_query, "Ins-DV", "base", metric="p_mrr", dataset="v1", n_boot=50)
    assert row["a"] == "ins-dv" and "mixes prompts values ('benchmark', 'model')" in caplog.text


def test_a_run_id_shared_by_two_models_is_refused_not_joined(tmp_path, capsys):
    """base and ins-dv rng_seed 0 evaluated under one --run-id: joined on (run_id, set), each mode
    would get the other's per-query scores."""
    path = _write(
        tmp_path / "results.csv", [("trial1", "minilm", "base", 0), ("trial1", "runs/dv0", "ins-dv", 0)]
    )
    _write(path, [("trial2", "runs/dv1", "ins-dv", 1)])
    assert main(["compare", str(path), "--a", "ins-dv", "--b", "base"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and f"{path}: field 'run_id': run id 'trial1' labels 2 different runs" in err
    )
    assert "minilm (base, rng_seed 0); runs/dv0 (ins-dv, rng_seed 0)" in err


def test_one_set_name_for_two_different_sets_is_refused(results_csv):
    results, per_query = load_tables(results_csv)
    results["data_sha"] = np.where(results["mode"] == "base", "1111aaaa", "2222bbbb")
    with pytest.raises(DataError, match=r"results\.csv.*set 'v1' names 2 different evaluation sets.*base-0"):
        compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=50)
    results["data_sha"] = np.where(results["mode"] == "base", "", "2222bbbb")  # unknown: not checked
    assert (
        compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=50)["runs_a"]
        == 3
    )


def test_a_per_query_file_that_disagrees_with_its_table_is_refused(results_csv, caplog):
    """A per-query file of another table gave compare a mean of -2.86 where results.csv said +1.87,
    and a figure's error bar beside its own bar; one with a run's rows missing dropped the run."""
    results, per_query = load_tables(results_csv)
    run = results.loc[results["mode"] == "ins-dv", "run_id"].iloc[0]
    shifted = per_query.copy()
    shifted.loc[shifted["run_id"] == run, "value"] -= 4.0
    shifted.attrs = per_query.attrs
    for reader in (
        lambda pq: compare_modes(results, pq, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=50),
        lambda pq: summarize(results, "p_mrr", per_query=pq, n_boot=50),
    ):
        with pytest.raises(
            DataError, match=rf"results_per_query.csv: field 'value': .*run {run} v1 p_mrr averages"
        ):
            reader(shifted)
    lacking = per_query[per_query["run_id"] != run]
    lacking.attrs = per_query.attrs
    row = compare_modes(results, lacking, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=50)
    assert row["runs_a"] == 2 and f"have no per-query scores in {per_query.attrs['path']}" in caplog.text
    assert run in caplog.text


def test_an_aggregate_set_is_checked_as_the_mean_of_its_collections(tmp_path):
    """FollowIR's value is the mean of its three collections' means, its per-query ids
    ``<collection>/<qid>``: with 5, 2 and 3 queries a plain mean (13.0) is not the value (16.67),
    and the check refused a correct table."""

    def result(name, values):
        pq = {m: {f"q{i}": v for i, v in enumerate(values)} for m in ("p_mrr", "score")}
        return EvalResult(name, "m", {m: M.mean(d) for m, d in pq.items()}, {}, pq, source="mteb")

    csv = tmp_path / "results.csv"
    for mode, off in (("base", 0.0), ("ins-dv", 5.0)):
        for seed in (0, 1):
            parts = [
                result("Robust04InstructionRetrieval", [10 + off + seed] * 5),
                result("News21InstructionRetrieval", [40 + off] * 2),
                result("Core17InstructionRetrieval", [off] * 3),
            ]
            for r in [*parts, aggregate_followir(parts, bootstrap=20)]:
                model = "m-base" if mode == "base" else f"m-{mode}-{seed}"  # one base model
                save_result(r, csv, model=model, mode=mode, rng_seed=seed)
    results, per_query = load_tables(csv)
    row = compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="followir", n_boot=50)
    assert row["diff"] == pytest.approx(5.0)
    assert len(summarize(results, "p_mrr", per_query=per_query, n_boot=20))


def test_runs_of_two_base_models_pooled_by_a_comparison_are_named(tmp_path, caplog):
    """Two backbones, each with its base row and an Ins-DV run: ``ifir table`` kept them apart, but
    ``compare`` pooled them as "2 runs of ins-dv" without a word, the backbones' difference read as
    run-to-run spread."""
    from ifir_lib.core.run_folder import RunFolder

    csv = tmp_path / "results.csv"
    for backbone, off in (("minilm", 0.0), (str(tmp_path / "backbone2"), 3.0)):
        run = RunFolder(tmp_path / f"run-{off:.0f}")
        run.path.mkdir()
        run.start({"mode": "ins-dv", "rng_seed": 0, "config": {"base_model": backbone}}, "abc")
        for mode, model, shift in (("base", backbone, 0.0), ("ins-dv", str(run.path), 1.0)):
            pq = {"p_mrr": {f"q{i}": off + shift + i for i in range(4)}}
            r = EvalResult("v1", model, {"p_mrr": M.mean(pq["p_mrr"])}, {}, pq)
            save_result(r, csv, model=model, mode=mode, rng_seed=0)
    results, per_query = load_tables(csv)
    with caplog.at_level("WARNING"):
        compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=20)
    assert "set 'v1' holds trained runs of 2 base models (all-MiniLM-L6-v2, backbone2)" in caplog.text
    caplog.clear()
    one = results[results["model"].astype(str).str.contains("run-0|minilm")]  # one backbone's rows
    row = compare_modes(one, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=20)
    assert row["diff"] == pytest.approx(1.0) and "base models" not in caplog.text


def _scored(csv, model: str, mode: str, seed: int, shift: float) -> None:
    """A p-MRR row of ``model`` (four queries, ``shift`` apart from the base's) saved to ``csv``."""
    pq = {"p_mrr": {f"q{i}": shift + i for i in range(4)}}
    r = EvalResult("v1", model, {"p_mrr": M.mean(pq["p_mrr"])}, {}, pq)
    save_result(r, csv, model=model, mode=mode, rng_seed=seed)


def test_runs_of_two_batch_orders_pooled_by_a_comparison_are_named(tmp_path, caplog):
    """An experiment resumed after the batch-order upgrade kept its finished order-1 runs (records
    without ``batch_order``) and trained the missing replicate under order 2: ``compare`` pooled
    them as "3 runs of ins-dv" without a word. One warning names each order's runs, once in a
    report (``warnings_once``); runs of one order are quiet."""
    from ifir_lib.core.run_folder import RunFolder

    csv = tmp_path / "results.csv"

    _scored(csv, "minilm", "base", 0, 0.0)
    for seed in (0, 1, 2):
        run = RunFolder(tmp_path / f"rng{seed}" / "ins-dv")
        run.path.mkdir(parents=True)
        order = {"batch_order": 2} if seed == 2 else {}  # rng0, rng1: recorded before the field
        run.start({"mode": "ins-dv", "rng_seed": seed, "config": {"base_model": "minilm"}, **order}, "abc")
        _scored(csv, str(run.path), "ins-dv", seed, 1.0 + seed)
    results, per_query = load_tables(csv)
    with caplog.at_level("WARNING"), warnings_once():  # one report: said once
        compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=20)
        mode_table(results, per_query, metrics=["p_mrr"], n_boot=20)
    said = [r.getMessage() for r in caplog.records if "batch orders" in r.getMessage()]
    assert len(said) == 1 and "runs of 2 batch orders" in said[0]
    assert f"order 1: 2 run(s) ({tmp_path / 'rng0' / 'ins-dv'}, {tmp_path / 'rng1' / 'ins-dv'})" in said[0]
    assert f"order 2: 1 run(s) ({tmp_path / 'rng2' / 'ins-dv'})" in said[0]
    caplog.clear()
    one = results[~results["model"].astype(str).str.contains("rng2")]  # order 1 only
    with caplog.at_level("WARNING"):
        compare_modes(one, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=20)
    assert "batch orders" not in caplog.text


def test_the_batch_order_check_finds_relative_runs_and_leaves_one_epoch_runs_out(
    tmp_path, caplog, monkeypatch
):
    """Two misses of the batch-order warning: results naming runs by relative paths (as ``ifir
    evaluate runs/...`` writes them) compared from another folder found no record and said nothing
    (they are now looked up from the table's folder too); and runs that never passed epoch 0 (the
    batches both orders share) were named and told to train again (now left out)."""
    from ifir_lib.core.run_folder import RunFolder

    exp = tmp_path / "exp"
    exp.mkdir()
    csv = exp / "results.csv"
    monkeypatch.chdir(exp)

    _scored(csv, "minilm", "base", 0, 0.0)
    for seed in (0, 1, 2):
        run = RunFolder(Path(f"rng{seed}") / "ins-dv")
        run.path.mkdir(parents=True)
        order = {"batch_order": 2} if seed == 2 else {}
        config = {"base_model": "minilm", "batch_size": 8, "epochs": 1.0, "max_steps": 4}
        record = {"mode": "ins-dv", "rng_seed": seed, "config": config, "data": {"examples": 64}}
        run.start({**record, **order}, "abc")
        run.finish(steps=4)
        _scored(csv, str(run.path), "ins-dv", seed, 1.0 + seed)
    monkeypatch.chdir(tmp_path)  # compared from another folder than the one evaluate ran in
    for steps, named in ((4, False), (9, True)):  # 4 x 8 of 64 examples: epoch 0; 9 x 8: past it
        for seed in (0, 1, 2):
            RunFolder(exp / f"rng{seed}" / "ins-dv").update(steps=steps)
        results, per_query = load_tables(csv)
        caplog.clear()
        with caplog.at_level("WARNING"):
            compare_modes(results, per_query, "ins-dv", "base", metric="p_mrr", dataset="v1", n_boot=20)
        assert ("runs of 2 batch orders" in caplog.text) is named, steps
    assert "order 1: 2 run(s) (rng0/ins-dv, rng1/ins-dv)" in caplog.text
