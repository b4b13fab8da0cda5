"""The results table: append-only writing, reading, backbones, the published numbers."""

import json
import shutil

import pandas as pd
import pytest

from ifir_lib.core.config import PUBLISHED_RESULTS_PATH
from ifir_lib.core.errors import DataError
from ifir_lib.reporting import figures as F
from ifir_lib.reporting import results as R
from ifir_lib.reporting import style as ST
from ifir_lib.reporting import summaries as S
from support.fakes import fake_result, results_frame


def test_results_table_is_appended_never_overwritten(tmp_path):
    path = tmp_path / "results.csv"
    r = fake_result("fir", [1.0, 2.0, 3.0])
    R.save_result(r, path, run_id="a", model="minilm", mode="base", rng_seed=0)
    R.save_result(r, path, run_id="b", model="minilm", mode="ins-dv", rng_seed=1)
    df = R.load_results(path)
    assert list(df.columns) == R.RESULT_COLUMNS and list(df["run_id"]) == ["a", "b"]
    assert df.loc[0, "value"] == 2.0 and df.loc[0, "ci_low"] == 1.0 and df.loc[0, "n_queries"] == 3
    assert path.read_text().count("run_id") == 1
    pq = R.load_per_query(path)
    assert list(pq.columns) == R.PER_QUERY_COLUMNS and len(pq) == 6
    assert R.per_query_path(path).name == "results_per_query.csv"
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="refusing to append"):
        R.append_results(other, R.result_rows(r, run_id="c"))
    assert other.read_text() == "a,b\n1,2\n"


def test_rows_say_which_prompts_and_which_plan(tmp_path):
    path = tmp_path / "results.csv"
    r = fake_result("fir", [1.0, 2.0])
    R.save_result(r, path, run_id="a", model="m")
    R.save_result(r, path, run_id="b", model="m", prompts="benchmark", plan="3f9a0c")
    assert R.RESULT_COLUMNS[-5:] == ["prompts", "plan", "backend", "data_sha", "run_sha"]
    assert R.OLDER_HEADERS == tuple(R.RESULT_COLUMNS[:-k] for k in (5, 3, 2, 1))
    df = R.load_results(path)
    assert df[["run_id", "prompts", "plan"]].values.tolist() == [
        ["a", "model", ""],
        ["b", "benchmark", "3f9a0c"],
    ]


def older_table(path, rows=1, columns=R.LEGACY_RESULT_COLUMNS):
    """A results file as written before the prompts / plan columns (or before backend)."""
    cells = ["m", "base", 0, "d", "p_mrr", 1.5, 1, 2, 3, "c", "t", "model", ""]
    rows = [dict(zip(columns, [f"r{i}", *cells])) for i in range(rows)]
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    return path


def test_rows_say_which_backend_encoded_them(tmp_path):
    path = tmp_path / "results.csv"
    r = fake_result("fir", [1.0, 2.0])
    R.save_result(r, path, run_id="a", model="m")
    r.backend = "onnx-int8"
    R.save_result(r, path, run_id="b", model="m")
    assert R.load_results(path)[["run_id", "backend"]].values.tolist() == [["a", "torch"], ["b", "onnx-int8"]]


def test_a_table_from_before_the_backend_column_takes_torch_rows_only(tmp_path):
    path = older_table(tmp_path / "old.csv", columns=R.RESULT_COLUMNS[:14])
    assert R.load_results(path).loc[0, "backend"] == "torch"
    r = fake_result("fir", [1.0])
    R.save_result(r, path, run_id="t", model="m")  # torch: the table's own 14 columns
    assert path.read_text().splitlines()[0] == ",".join(R.RESULT_COLUMNS[:14])
    before = path.read_bytes()
    r.backend = "onnx-int8"  # read back, this row would pass for torch's: refused, nothing written
    with pytest.raises(DataError, match="before the backend column.*backend='onnx-int8'.*start a new"):
        R.save_result(r, path, run_id="q", model="m")
    with pytest.raises(DataError, match="backend='torch-bf16'"):
        R.check_outputs(path, backend="torch-bf16")
    assert path.read_bytes() == before


def test_rows_of_the_commits_that_did_not_record_their_backend_are_named(tmp_path, caplog):
    """``ifir evaluate --backend onnx-int8`` at 76479bd..ab5d91c wrote no backend column: its rows
    read as torch's (MiniLM's v1 p-MRR -2.69 for -5.03), in every table and for skip_done, which
    then skipped the torch evaluation. Rows of those commits are named in a warning; a table of
    other commits reads as before, without one."""
    import logging

    path = older_table(tmp_path / "old.csv", rows=3, columns=R.RESULT_COLUMNS[:14])
    table = pd.read_csv(path)
    table["git_commit"] = ["8ba25de", "76479bd+dirty", "5bbd97f"]
    table.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        assert list(R.load_results(path)["backend"]) == ["torch"] * 3  # still read as torch's
    assert "2 row(s) were written at commit(s) 76479bd, 8ba25de" in caplog.text and str(path) in caplog.text
    caplog.clear()
    table["git_commit"] = ["5bbd97f", "unknown", ""]
    table.to_csv(tmp_path / "other.csv", index=False)  # another file: this one was named already
    with caplog.at_level(logging.WARNING):
        R.load_results(tmp_path / "other.csv")
    assert "backend column" not in caplog.text


def test_the_unrecorded_backend_warning_is_said_once_and_a_backend_column_ends_it(tmp_path, caplog):
    """The warning on rows of 76479bd..ab5d91c came again on each read: ``--collect`` read the
    table once per evaluate_models call and said it each time. It names a file once per process,
    leaves out an experiment's rows (``plan``: it had no eval backend then), and its advice holds:
    a ``backend`` column naming each row's encoder reads them as written, without a warning."""
    import logging

    path = older_table(tmp_path / "old.csv", rows=3, columns=R.RESULT_COLUMNS[:14])
    table = pd.read_csv(path, keep_default_na=False)
    table["git_commit"] = ["8ba25de", "8ba25de", "5bbd97f"]
    table["plan"] = ["", "0123abcd", ""]  # the second row is an experiment's
    table.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        R.load_results(path)
        R.load_results(path)
    assert caplog.text.count("were written at commit") == 1 and "1 row(s) were written" in caplog.text
    assert "add a backend column" in caplog.text
    caplog.clear()
    fixed = table.assign(backend=["onnx-int8", "torch", "torch"])
    fixed.to_csv(tmp_path / "fixed.csv", index=False)
    with caplog.at_level(logging.WARNING):
        assert list(R.load_results(tmp_path / "fixed.csv")["backend"]) == ["onnx-int8", "torch", "torch"]
    assert "were written at commit" not in caplog.text


def test_an_older_table_reads_with_defaults_and_takes_rows_with_them(tmp_path):
    path = older_table(tmp_path / "old.csv")
    df = R.load_results(path)
    assert (
        list(df.columns) == R.RESULT_COLUMNS and df.loc[0, "prompts"] == "model" and df.loc[0, "plan"] == ""
    )
    R.check_outputs(path)
    R.save_result(fake_result("fir", [1.0]), path, run_id="new", model="m")  # the defaults: old columns
    assert path.read_text().splitlines()[0] == ",".join(R.LEGACY_RESULT_COLUMNS)
    assert R.load_results(path)[["run_id", "prompts", "plan"]].values.tolist() == [
        ["r0", "model", ""],
        ["new", "model", ""],
    ]


@pytest.mark.parametrize("labels", [{"prompts": "benchmark"}, {"plan": "3f9a0c"}])
def test_an_older_table_refuses_rows_it_cannot_record(tmp_path, labels):
    path = older_table(tmp_path / "old.csv")
    before = path.read_bytes()
    for call in (
        lambda: R.check_outputs(path, **labels),
        lambda: R.save_result(fake_result("fir", [1.0]), path, run_id="new", **labels),
    ):
        with pytest.raises(DataError) as e:
            call()
        msg = str(e.value)
        assert len(msg.splitlines()) == 1 and str(path) in msg and "start a new results file" in msg
        assert next(iter(labels)) in msg
    assert path.read_bytes() == before and not R.per_query_path(path).exists()


def test_empty_prompts_plan_and_backend_cells_read_as_the_defaults(tmp_path):
    path = tmp_path / "r.csv"
    row = dict(zip(R.RESULT_COLUMNS, ["a", "m", "base", 0, "d", "p_mrr", 1.5, 1, 2, 3, "c", "t", "", "", ""]))
    pd.DataFrame([row], columns=R.RESULT_COLUMNS).to_csv(path, index=False)
    assert R.load_results(path)[["prompts", "plan", "backend"]].values.tolist() == [["model", "", "torch"]]


def test_published_results_are_tables_1_and_2():
    pub = R.load_published()
    assert len(pub) == 2 * 4 * 6 and list(pub.columns) == ["backbone", "mode", "metric", "value", "source"]
    v = pub.set_index(["backbone", "mode", "metric"])["value"]
    gte, bge = "gte-multilingual-mlm-base", "bge-m3-retromae"
    # the headline: FollowIR p-MRR 5.21 -> 7.57 (Ins-orig -> Ins-DV, gte)
    assert v[gte, "ins-orig", "followir_p_mrr"] == 5.21 and v[gte, "ins-dv", "followir_p_mrr"] == 7.57
    assert v[gte, "all-orig", "infosearch_keyword_p_mrr"] == -49.65  # the data-mixing collapse
    assert v[gte, "all-dv", "mair_instructir_ndcg_at_10"] == 90.74
    assert v[bge, "all-dv", "followir_p_mrr"] == 13.92 and v[bge, "ins-dv", "followir_score"] == 19.76
    assert (
        v[bge, "all-orig", "infosearch_length_p_mrr"] == -27.08
        and v[bge, "ins-orig", "mair_ifeval_ndcg_at_10"] == 27.12
    )
    assert set(pub[pub.backbone == gte]["source"]) == {"Zeng et al. 2026, arXiv 2604.18845, Table 1"}
    assert set(pub[pub.backbone == bge]["source"]) == {"Zeng et al. 2026, arXiv 2604.18845, Table 2"}
    first = PUBLISHED_RESULTS_PATH.read_text().splitlines()[0]
    assert first.startswith("#") and "arXiv 2604.18845" in first  # provenance line


def test_trained_runs_are_grouped_under_their_backbone(tmp_path):
    """``evaluate`` records a trained run by its folder; ifir_run.json names the backbone."""

    run = tmp_path / "runs" / "ins-dv-s0"
    run.mkdir(parents=True)
    (run / "ifir_run.json").write_text(
        json.dumps({"mode": "ins-dv", "rng_seed": 0, "config": {"base_model": "minilm", "rng_seed": 0}})
    )
    res = results_frame(
        [
            {"run_id": "a", "model": "minilm", "mode": "base", "metric": "p_mrr", "value": -5.0},
            {"run_id": "b", "model": str(run), "mode": "ins-dv", "metric": "p_mrr", "value": 2.0},
            {
                "run_id": "c",
                "model": "/elsewhere/ins-dv-s0",
                "mode": "ins-dv",
                "rng_seed": 1,
                "metric": "p_mrr",
                "value": 4.0,
            },
        ]
    )
    assert R.add_backbone(res)["backbone"].tolist() == ["minilm", "minilm", "/elsewhere/ins-dv-s0"]
    moved = R.add_backbone(res, runs_dir=tmp_path / "runs")  # found by folder name under --runs
    assert moved["backbone"].tolist() == ["minilm"] * 3
    s = S.summarize(moved, "p_mrr").set_index("mode")
    assert (
        set(s["backbone"]) == {"all-MiniLM-L6-v2"}
        and s.loc["ins-dv", "mean"] == 3.0
        and s.loc["ins-dv", "n_runs"] == 2
    )
    fig = F.fig_metrics_by_mode(moved, metrics=("p_mrr",), published=None)
    assert fig.layout.width == ST.COLUMN_WIDTH  # one panel, not one per run folder


def test_a_moved_experiment_finds_its_runs_by_their_trailing_folders(tmp_path, caplog):
    """An experiment's runs are ``<exp>/models/rng<k>/<mode>``: every run folder is called
    ``ins-dv``, so only the trailing folders of the label, and the run records, tell them apart."""

    def run(folder, base, seed, plan="p1"):
        folder.mkdir(parents=True)
        record = {"mode": "ins-dv", "rng_seed": seed, "config": {"base_model": base}, "data": {"plan": plan}}
        (folder / "ifir_run.json").write_text(json.dumps(record))

    moved = tmp_path / "moved"
    run(moved / "exp" / "rng0" / "ins-dv", "minilm", 0)
    run(moved / "exp" / "rng1" / "ins-dv", "mpnet", 1)
    run(moved / "rng0" / "ins-dv", "other", 0)  # a shorter match: the longest one wins
    run(tmp_path / "other_exp" / "rng1" / "ins-dv", "other", 1, plan="p2")  # another experiment's run
    rows = [
        ("/gone/exp/rng0/ins-dv", "ins-dv", 0),
        ("out/exp/rng1/ins-dv", "ins-dv", 1),
        ("minilm", "base", 0),
    ]
    res = results_frame(
        [
            {
                "run_id": str(i),
                "model": m,
                "mode": mode,
                "rng_seed": seed,
                "plan": "p1",
                "metric": "p_mrr",
                "value": 1.0,
            }
            for i, (m, mode, seed) in enumerate(rows)
        ]
    )
    with caplog.at_level("WARNING", logger=R.log.name):
        lost = R.add_backbone(res, runs_dir=tmp_path / "other_exp")["backbone"].tolist()
    assert lost == ["/gone/exp/rng0/ins-dv", "out/exp/rng1/ins-dv", "minilm"]  # plan p2 is not ours
    assert "2 trained model(s) without a run folder" in caplog.text and "--runs" in caplog.text
    assert "minilm," not in caplog.text  # the base model is its own backbone, not a lost run
    assert R.add_backbone(res, runs_dir=moved)["backbone"].tolist() == ["minilm", "mpnet", "minilm"]
    assert R.add_backbone(res, runs_dir=moved / "exp")["backbone"].tolist() == ["minilm", "mpnet", "minilm"]
    windows = res.assign(model=res["model"].str.replace("/", "\\"))
    assert R.add_backbone(windows, runs_dir=moved)["backbone"].tolist()[:2] == ["minilm", "mpnet"]


def test_load_results_names_a_missing_column(tmp_path):
    p = tmp_path / "r.csv"
    pd.DataFrame(
        {"run_id": ["a"], "model": ["m"], "mode": ["base"], "metric": ["p_mrr"], "value": [1]}
    ).to_csv(p, index=False)
    with pytest.raises(DataError, match="rng_seed, dataset"):
        R.load_results(p)


def test_a_relative_run_folder_is_found_from_another_working_directory(tmp_path, monkeypatch):
    """``make demo`` records ``out/demo/models/<mode>``; notebook 05 reads the table from notebooks/."""
    run = R.REPO_DIR / "out" / f"test-backbone-{tmp_path.name}" / "ins-dv"
    run.mkdir(parents=True)
    try:
        (run / "ifir_run.json").write_text(json.dumps({"config": {"base_model": "minilm"}}))
        monkeypatch.chdir(tmp_path)
        assert R.backbone_of(str(run.relative_to(R.REPO_DIR))) == "minilm"
    finally:
        shutil.rmtree(run.parent)


def test_rows_record_the_set_s_digest_and_an_older_table_still_takes_rows(tmp_path, caplog):
    path = tmp_path / "results.csv"
    R.save_result(fake_result("fir", [1.0]), path, run_id="a", model="m", data_sha="0123456789abcdef")
    R.save_result(fake_result("fir", [1.0]), path, run_id="b", model="m", data_sha="0123456789012345")
    # read as text: a digest of digits keeps its leading zero, and is not a number
    assert R.load_results(path)["data_sha"].tolist() == ["0123456789abcdef", "0123456789012345"]
    old = older_table(tmp_path / "old.csv", columns=R.RESULT_COLUMNS[:15])
    assert R.load_results(old).loc[0, "data_sha"] == ""  # written before the column: unknown
    with caplog.at_level("WARNING"):
        R.save_result(fake_result("fir", [1.0]), old, run_id="new", model="m", data_sha="0123456789abcdef")
    assert old.read_text().splitlines()[0] == ",".join(R.RESULT_COLUMNS[:15])  # its own columns
    assert f"{old} was written before the data_sha column" in caplog.text
    assert R.load_results(old)["run_id"].tolist() == ["r0", "new"]


def test_one_rng_seed_has_one_spelling(tmp_path):
    path = tmp_path / "results.csv"
    R.save_result(fake_result("fir", [1.0]), path, run_id="a", model="m", rng_seed="01")
    assert path.read_text().splitlines()[1].split(",")[3] == "1"  # written as the integer
    rows = [
        {
            "run_id": r,
            "model": "m",
            "mode": "base",
            "dataset": "d",
            "metric": "p_mrr",
            "value": 1.0,
            "rng_seed": s,
        }
        for r, s in (("b", "1"), ("c", "01"), ("d", "1.0"), ("e", None), ("f", "-02"))
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "old.csv", index=False)  # an older file, spelled every way
    old = R.load_results(tmp_path / "old.csv")
    seeds = old["rng_seed"].tolist()
    assert seeds[:3] + seeds[4:] == ["1", "1", "1", "-2"] and pd.isna(seeds[3])  # empty: missing


# ---- reading runs: the checks every table, summary, figure and comparison shares -------------


def _evals(*rows) -> pd.DataFrame:
    """A checked results frame of (run_id, model, mode, rng_seed, dataset, value, timestamp) rows."""
    keys = ("run_id", "model", "mode", "rng_seed", "dataset", "value", "timestamp")
    return results_frame([dict(zip(keys, r), metric="p_mrr") for r in rows])


def test_one_evaluation_per_run_keeps_the_latest_whole_evaluation(caplog):
    df = _evals(
        ("a1", "m", "ins-dv", 0, "v1", 1.0, "2026-01-02"),
        ("a0", "m", "ins-dv", 0, "v1", 9.0, "2026-01-01"),  # earlier, written later
        ("a0", "m", "ins-dv", 0, "v2", 5.0, "2026-01-01"),  # only evaluation on v2: kept
        ("b0", "m", "ins-dv", 1, "v1", 3.0, "2026-01-01"),  # another rng_seed: another run
    )
    kept = R.one_evaluation_per_run(df)
    assert list(zip(kept["run_id"], kept["dataset"])) == [("a1", "v1"), ("a0", "v2"), ("b0", "v1")]
    assert "1 repeated evaluation(s) of one model on one set left out (run ids a0)" in caplog.text
    assert R.one_evaluation_per_run(kept).equals(kept)  # nothing more to leave out


def test_one_run_folder_under_two_spellings_is_one_run(caplog):
    """A moved experiment collected again, or a folder typed once with a trailing slash: the same
    model under a second label was a second run (sd 0, 4 runs of 2, a smaller p)."""
    df = _evals(
        ("x0", "/a/exp/models/rng0/ins-dv", "ins-dv", 0, "v1", -1.25, "2026-01-01"),
        ("x1", "/b/moved/models/rng0/ins-dv", "ins-dv", 0, "v1", -1.25, "2026-01-02"),  # the same run, moved
        ("y0", "runs/ins-orig", "ins-orig", 0, "v1", 2.5, "2026-01-01"),
        ("y1", "runs/ins-orig/", "ins-orig", 0, "v1", 2.5, "2026-01-01"),  # typed with a slash
        ("z0", "sweep/lr1/ins-dv", "ins-dv", 0, "v1", -1.25, "2026-01-01"),  # a sweep's runs: other folders
        ("z1", "sweep/lr3/ins-dv", "ins-dv", 0, "v1", -1.25, "2026-01-01"),
        ("w0", "/c/models/rng0/ins-dv", "ins-dv", 0, "v1", 0.5, "2026-01-01"),  # other scores: kept
        ("v0", "/d/models/rng1/ins-dv", "ins-dv", 1, "v1", -1.25, "2026-01-01"),  # another rng_seed: kept
    )
    kept = R.runs_to_read(df)
    assert list(kept["run_id"]) == ["x1", "y1", "z0", "z1", "w0", "v0"]
    assert "2 evaluation(s) repeat another model label's training run" in caplog.text
    assert "/a/exp/models/rng0/ins-dv (as /b/moved/models/rng0/ins-dv)" in caplog.text
    # judged on every metric of the table, whatever subset a reader averages: a tie on p-MRR alone
    # with MAP apart is two runs for the table, the summaries (figures) and compare alike
    both = pd.concat([df, df.assign(metric="map_at_1000", value=[80.0, 80.5, 1, 1, 1, 1, 1, 1])])
    one_metric = both[both["metric"] == "p_mrr"]
    assert set(R.runs_to_read(one_metric, whole=both)["run_id"]) == {"x0", "x1", "y1", "z0", "z1", "w0", "v0"}
    assert len(R.runs_to_read(one_metric)) == 6  # judged on p-MRR alone, x0 would go
    runs = S.per_run(both, "p_mrr")
    assert len(runs[(runs["mode"] == "ins-dv") & (runs["rng_seed"].astype(str) == "0")]) == 5  # x0 stays


def test_a_run_id_that_labels_two_runs_on_one_set_is_an_error_naming_file_and_run_id():
    df = _evals(
        ("trial1", "minilm", "base", 0, "v1", 0.0, None), ("trial1", "runs/dv", "ins-dv", 0, "v1", 9.0, None)
    )
    df.attrs["path"] = "out/results.csv"
    with pytest.raises(
        DataError, match=r"out/results\.csv.*run id 'trial1' labels 2 different runs on set 'v1'"
    ):
        R.runs_to_read(df)
    # one run id over several sets of one run is how ``ifir evaluate`` writes: fine
    ok = _evals(("r", "minilm", "base", 0, "v1", 0.0, None), ("r", "minilm", "base", 0, "v2", 0.0, None))
    assert len(R.runs_to_read(ok)) == 2


def test_a_run_id_with_two_values_for_one_set_and_metric_is_an_error_and_repeats_count_once(caplog):
    # two sets of one name evaluated in one call (older versions): one run id, two values per metric
    df = _evals(("r", "minilm", "base", 0, "v1", 54.17, None), ("r", "minilm", "base", 0, "v1", 27.08, None))
    df.attrs["path"] = "out/results.csv"
    with pytest.raises(
        DataError,
        match=r"out/results\.csv.*run id 'r' holds 2 different rows for set 'v1', metric 'p_mrr' "
        r"\(values 54\.17, 27\.08\).*evaluated twice under one run id.*re-evaluate",
    ):
        R.runs_to_read(df)
    # an exact repeat of a row is the same number: read once, with a warning
    same = _evals(
        *[("r", "minilm", "base", 0, "v1", 54.17, None)] * 2, ("r", "minilm", "base", 0, "v2", 1.0, None)
    )
    kept = R.runs_to_read(same)
    assert list(kept["dataset"]) == ["v1", "v2"]
    assert "1 repeated row(s) of one run, set and metric left out (run ids r)" in caplog.text


def test_one_set_name_with_two_data_digests_is_an_error_naming_the_runs_of_each():
    df = _evals(*[(f"r{i}", f"m{i}", "base", 0, "synth", 1.0, None) for i in range(3)]).assign(
        data_sha=["aaaa1111", "bbbb2222", ""]  # '' = unknown: not checked
    )
    with pytest.raises(
        DataError,
        match=r"set 'synth' names 2 different evaluation sets.*aaaa1111: run id\(s\) r0; "
        r"data_sha bbbb2222: run id\(s\) r1\); .*rename one folder and re-evaluate",
    ):
        R.runs_to_read(df, "res.csv")
    same = df.assign(data_sha=["aaaa1111", "aaaa1111", ""])
    assert len(R.runs_to_read(same)) == 3 and len(R.runs_to_read(df.drop(columns="data_sha"))) == 3


def test_mixed_conditions_warn_once_within_warnings_once(caplog):
    df = _evals(("a", "m", "base", 0, "v1", 1.0, None), ("b", "n", "base", 0, "v1", 2.0, None))
    df["backend"] = ["torch", "onnx-int8"]
    with R.warnings_once():
        for _ in range(3):
            R.runs_to_read(df)
    assert caplog.text.count("the table mixes backend values ('torch', 'onnx-int8')") == 1
    R.runs_to_read(df)  # outside a block, every call says it
    assert caplog.text.count("mixes backend values") == 2


def test_synthesis_rows_read_the_redone_row_of_a_key(tmp_path):
    """After ``--redo-changed`` a key has its stale row and, appended later, the redone one: figure
    (d) reads the redone one, at the key's place; a file without redone rows reads one row per key,
    the first, as ``load_synthesis`` does; a row without status is an error naming its line."""
    from ifir_lib.synthesis.run import load_synthesis

    p = tmp_path / "o.jsonl"
    rows = [
        {"key": "a", "seed_id": "a", "seed_sha": "old", "status": "accepted"},
        {"key": "b", "seed_id": "b", "seed_sha": "b1", "status": "accepted"},
        {"key": "b", "seed_id": "b", "seed_sha": "b1", "status": "failed"},  # a repeat: not read
        {"key": "a", "seed_id": "a", "seed_sha": "new", "status": "declined"},  # redone
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert R.load_synthesis_rows(p) == [rows[3], rows[1]]
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    assert R.load_synthesis_rows([plain]) == load_synthesis(plain) == rows[:2]
    p.write_text(p.read_text() + json.dumps({"key": "c", "seed_id": "c"}) + "\n")
    with pytest.raises(DataError, match=r"o.jsonl:5: field 'status': row 'c' has no status"):
        R.load_synthesis_rows(p)


def test_runs_of_one_mode_sharing_an_rng_seed_are_named(caplog):
    """Two Ins-DV runs with other steps and learning rates, both rng_seed 0, were averaged as
    replicates: a hyper-parameter's effect read as seed-to-seed spread (sd 3.71 in the probe)."""
    df = _evals(
        ("a", "sweep/lr1/ins-dv", "ins-dv", 0, "v1", 1.0, None),
        ("b", "sweep/lr3/ins-dv", "ins-dv", 0, "v1", 4.0, None),
        ("c", "runs/rng1/ins-dv", "ins-dv", 1, "v1", 2.0, None),
    )
    assert len(R.runs_to_read(df)) == 3  # still read: a warning, not an error
    assert "1 group(s) of runs share an rng_seed within a mode" in caplog.text
    assert "ins-dv rng_seed 0 on v1: sweep/lr1/ins-dv, sweep/lr3/ins-dv" in caplog.text
    caplog.clear()
    R.runs_to_read(df[df["run_id"] != "b"])
    assert "share an rng_seed" not in caplog.text


def test_run_sha_tells_copies_from_runs_that_tie(caplog):
    """With ``run_sha`` the label's folders and a tie on every metric no longer decide: a copy
    under other folders, scored a digit apart on another machine, is one run; two runs whose
    labels end alike and whose scores tie on a small set stay two."""
    df = _evals(
        ("a0", "/exp/models/rng0/ins-dv", "ins-dv", 0, "v1", -1.25, "2026-01-01"),
        ("a1", "/backup/copy-a", "ins-dv", 0, "v1", -1.2500001, "2026-01-02"),  # the same run, copied
        ("b0", "/e1/models/rng0/ins-dv", "ins-dv", 0, "v1", 3.0, "2026-01-01"),
        ("b1", "/e2/models/rng0/ins-dv", "ins-dv", 0, "v1", 3.0, "2026-01-01"),  # another run that ties
    )
    df["run_sha"] = ["1111222233334444", "1111222233334444", "aaaa", "bbbb"]
    kept = R.runs_to_read(df)
    assert list(kept["run_id"]) == ["a1", "b0", "b1"]
    assert "/exp/models/rng0/ins-dv (as /backup/copy-a)" in caplog.text
    # an older table without the column, read with the trailing-folder rule: b1 and b0 are one
    assert list(R.runs_to_read(df.drop(columns="run_sha"))["run_id"]) == ["a0", "a1", "b1"]


def test_an_older_table_takes_new_rows_without_run_sha_and_says_so(tmp_path, caplog):
    old = tmp_path / "old.csv"
    old.write_text(",".join(R.RESULT_COLUMNS[:16]) + "\n")
    R.save_result(fake_result("v1", [1.0]), old, model="runs/a", mode="ins-dv", run_sha="1234abcd1234abcd")
    assert "before the run_sha column" in caplog.text
    assert R.load_results(old).loc[0, "run_sha"] == ""  # not recorded: unknown
