"""The registry of runs: real run folders in each status, the listing, --json, and the join with results."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ifir_lib.cli import main
from ifir_lib.core.config import SEEDS_PATH
from ifir_lib.core.locks import exclusive, lock_path
from ifir_lib.core.run_folder import RunFolder, data_sources
from ifir_lib.evaluation.evaluator import EvalResult
from ifir_lib.pipelines.registry import runs_records, runs_table
from ifir_lib.reporting.results import save_result
from ifir_lib.training.trainer import TrainConfig, train
from support.runs import recorded_run


def _result(dataset: str, p_mrr: float, score: float) -> EvalResult:
    """An evaluation as ``evaluate_followir`` returns it (x100), two queries."""
    return EvalResult(
        dataset=dataset,
        model="m",
        metrics={"p_mrr": p_mrr, "score": score, "ndcg_at_5": 50.0},
        ci={"p_mrr": (p_mrr - 1, p_mrr + 1)},
        per_query={"p_mrr": {"q1": p_mrr - 1, "q2": p_mrr + 1}},
    )


@pytest.fixture(scope="module")
def root(module_tmp):
    """``out/`` with one finished run, trained for real through ``ifir train`` (1 step, no tracker)."""
    root = module_tmp / "out"
    argv = ["train", "--mode", "ins-dv", "--preset", "smoke", "--budget", "16", "--max-steps", "1"]
    assert (
        main([*argv, "--rng-seed", "3", "--out", str(root / "models" / "ins-dv"), "--report-to", "none"]) == 0
    )
    return root


def _copy_run(root: Path, name: str, **status) -> Path:
    """A copy of the finished run under ``models/<name>`` with its ``ifir_run.json`` fields changed."""
    dst = root / "models" / name
    shutil.copytree(
        root / "models" / "ins-dv", dst, ignore=shutil.ignore_patterns("*.safetensors", "checkpoints")
    )
    info = json.loads((dst / "ifir_run.json").read_text())
    info.update(status)
    (dst / "ifir_run.json").write_text(json.dumps(info))
    return dst


def test_a_finished_run_is_listed_with_its_provenance(root):
    df = runs_table(root)
    row = df[df["run"] == "models/ins-dv"].iloc[0]
    info = json.loads((root / "models" / "ins-dv" / "ifir_run.json").read_text())
    assert (row["kind"], row["mode"], row["backbone"], row["rng_seed"]) == ("train", "ins-dv", "minilm", "3")
    assert (row["data"], row["reversals"]) == (SEEDS_PATH.name, "reference")
    assert (row["budget"], row["steps"], row["status"]) == (16, 1, "done")
    assert row["git_commit"] == info["git_commit"] and info["data"]["data"] == str(SEEDS_PATH)


def test_data_sources_name_the_reversals_each_mode_reads():
    assert data_sources("ins-dv", "s.jsonl", "out/rev.jsonl")["reversals"] == "out/rev.jsonl"
    assert data_sources("ins-dv-template", "s.jsonl", "out/rev.jsonl")["reversals"] == "template"
    assert data_sources("all-orig", "s.jsonl", None) == {"data": "s.jsonl", "reversals": "reference"}


def test_running_stopped_and_failed(root, tmp_path):
    live = _copy_run(root, "live", status="running", steps=None)
    killed = _copy_run(root, "killed", status="running", steps=None)
    # a process that took the lock and was killed with SIGKILL: its line stays in the lock file
    code = f"import time; from ifir_lib.core.locks import exclusive\nwith exclusive({str(killed)!r}): print('held', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    assert RunFolder(killed).lock_holder() is not None  # alive: the lock names it
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lock_path(killed).read_text().startswith(f"pid {proc.pid} ")
    # a real failure: the backbone cannot be loaded once the run has written its status
    cfg = TrainConfig.preset("smoke", base_model=str(tmp_path / "no-such-model"), max_steps=1)
    with pytest.raises(OSError, match="no-such-model"):  # the run must record whatever loading raises
        train([], root / "models" / "broken", cfg, mode="ins-dv", report_to="none")
    with exclusive(live, "training run folder"):  # this test process is the live trainer
        df = runs_table(root).set_index("run")
    assert (
        df.loc["models/live", "status"] == "running"
        and f"pid {os.getpid()} " in df.loc["models/live", "detail"]
    )
    assert df.loc["models/killed", "status"] == "stopped"
    assert df.loc["models/killed", "steps"] == 1  # the last step in train_log.jsonl
    assert df.loc["models/broken", "status"] == "failed"
    assert (
        df.loc["models/broken", "detail"].startswith("failed: ")
        and "no-such-model" in df.loc["models/broken", "detail"]
    )
    assert runs_table(root).set_index("run").loc["models/live", "status"] == "stopped"  # lock released


def test_a_refused_rerun_leaves_the_earlier_status_alone(root):
    run = _copy_run(root, "refused", status="running")
    cfg = TrainConfig.preset("smoke", learning_rate=1e-3)  # another config than the one recorded
    with pytest.raises(ValueError, match="another config"):
        train([], run, cfg, mode="ins-dv", report_to="none")
    assert json.loads((run / "ifir_run.json").read_text())["status"] == "running"


def test_results_join_their_runs_and_other_models_get_rows_of_their_own(root, tmp_path, monkeypatch):
    table = root / "results.csv"
    run = root / "models" / "ins-dv"
    save_result(_result("followir_mini", 2.0, 80.0), table, model=str(run), mode="ins-dv", rng_seed=3)
    save_result(_result("followir_v2", -1.5, 70.0), table, model=str(run), mode="ins-dv", rng_seed=3)
    save_result(_result("followir_mini", -5.0, 78.0), table, model="minilm", mode="base", rng_seed=0)
    # the same run named by a relative path, from another folder's table (re-evaluated later: latest wins)
    monkeypatch.chdir(root)
    save_result(
        _result("followir_mini", 4.0, 81.0),
        root / "sub" / "results.csv",
        model="models/ins-dv",
        mode="ins-dv",
        rng_seed=3,
    )
    df = runs_table(root).set_index("run")
    assert (
        df.loc["models/ins-dv", "followir_mini:p_mrr"] == 4.0
        and df.loc["models/ins-dv", "followir_mini:score"] == 81.0
    )
    assert (
        df.loc["models/ins-dv", "followir_v2:p_mrr"] == -1.5
        and df.loc["models/ins-dv", "followir_v2:score"] == 70.0
    )
    assert "followir_mini:ndcg_at_5" not in df.columns  # headline metrics only
    base = df.loc["minilm"]
    assert (base["kind"], base["mode"], base["backbone"], base["status"]) == (
        "eval",
        "base",
        "minilm",
        "done",
    )
    assert base["followir_mini:p_mrr"] == -5.0 and pd.isna(base["followir_v2:p_mrr"])
    assert sorted(df.loc["models/ins-dv", "results"].split(";")) == sorted(
        [str(table), str(root / "sub" / "results.csv")]
    )


def test_a_table_from_another_machine_joins_by_the_end_of_the_path(root):
    other = root / "moved" / "results.csv"
    save_result(
        _result("beir_x", 0.0, 0.0), other, model="/elsewhere/out/models/ins-dv", mode="ins-dv", rng_seed=3
    )
    df = runs_table(root).set_index("run")
    assert "/elsewhere/out/models/ins-dv" not in df.index and df.loc["models/ins-dv", "beir_x:p_mrr"] == 0.0


def test_an_evaluation_older_than_the_run_scored_an_earlier_model(root):
    table = root / "old" / "results.csv"
    save_result(
        _result("followir_old", 9.0, 9.0),
        table,
        model=str(root / "models" / "ins-dv"),
        mode="ins-dv",
        rng_seed=3,
    )
    rows = pd.read_csv(table)
    rows["timestamp"] = "2000-01-01T00:00:00+00:00"
    rows.to_csv(table, index=False)
    df = runs_table(root).set_index("run")
    assert df.loc[str(root / "models" / "ins-dv"), "kind"] == "eval"
    assert pd.isna(df.loc["models/ins-dv", "followir_old:p_mrr"])


def test_rows_of_another_run_are_not_the_run_s_whatever_the_clocks_say(tmp_path):
    """A run copied over from another machine, trained before the rows of the run that lived in
    its folder were written, was listed with that run's metrics: rows recording another
    ``run_sha`` are a model of their own; the run keeps rows of its own identity."""
    run = recorded_run(tmp_path / "models" / "ins-dv", rng_seed=3)  # before the rows
    table = tmp_path / "results.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=3)
    save_result(_result("v_old", 9.0, 9.0), table, run_sha="0123456789abcdef", **row)
    save_result(_result("v_new", 1.0, 1.0), table, run_sha=run.identity(), **row)
    df = runs_table(tmp_path).set_index("run")
    assert pd.isna(df.loc["models/ins-dv", "v_old:p_mrr"]) and df.loc["models/ins-dv", "v_new:p_mrr"] == 1.0
    assert df.loc[str(run.path), "kind"] == "eval" and df.loc[str(run.path), "v_old:p_mrr"] == 9.0


def test_rows_of_this_run_stay_its_rows_whatever_the_clocks_say(tmp_path):
    """A run's record holds naive local times; read in a zone west of the machine that wrote it,
    the run seemed to end after its own rows, and ``ifir runs`` listed them as a model of their own
    (the run with no metrics). Rows recording the run's ``run_sha`` are its, whatever the clocks say;
    rows without one older than its end are still another model's."""
    run = recorded_run(tmp_path / "models" / "ins-dv", rng_seed=3, later=True)  # clocks ahead of the rows
    table = tmp_path / "results.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=3)
    save_result(_result("v_old", 9.0, 9.0), table, **row)  # no run_sha, older than the run
    save_result(_result("v_new", 1.0, 1.0), table, run_sha=run.identity(), **row)
    df = runs_table(tmp_path).set_index("run")
    assert df.loc["models/ins-dv", "v_new:p_mrr"] == 1.0 and pd.isna(df.loc["models/ins-dv", "v_old:p_mrr"])
    assert df.loc[str(run.path), "kind"] == "eval" and pd.isna(df.loc[str(run.path), "v_new:p_mrr"])


def test_cli_listing_and_json(root, capsys):
    assert main(["runs", "--root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, row = lines[0].split(), next(line.split() for line in lines if line.split()[0] == "models/ins-dv")
    assert (
        header[:11] == "run kind mode backbone rng_seed data reversals budget steps git_commit status".split()
    )
    assert row[1:9] == ["train", "ins-dv", "minilm", "3", SEEDS_PATH.name, "reference", "16", "1"]
    assert main(["runs", "--root", str(root), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records == runs_records(runs_table(root))
    assert {r["run"]: r["status"] for r in records}["models/ins-dv"] == "done"


def test_bad_roots(tmp_path, capsys):
    assert runs_table(tmp_path).empty
    assert main(["runs", "--root", str(tmp_path)]) == 0 and "no runs" in capsys.readouterr().out
    assert main(["runs", "--root", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "ifir_run.json").write_text("{not json")
    assert main(["runs", "--root", str(tmp_path)]) == 2
    assert "ifir_run.json" in capsys.readouterr().err


def test_a_mode_with_the_same_examples_and_config_reuses_the_finished_run(tmp_path):
    """all-dv at budget 12 (11 seeds x 2 views) trains on exactly ins-dv's 22 examples at budget
    22: the second is copied, not retrained; another config or other examples train."""
    from ifir_lib.pipelines.train import train_modes

    kw = dict(preset="smoke", rng_seed=0, max_steps=1, report_to="none")
    train_modes(tmp_path, modes=("ins-dv",), budget=22, **kw)
    src = json.loads((tmp_path / "ins-dv" / "ifir_run.json").read_text())
    runs = train_modes(tmp_path, modes=("all-dv",), budget=12, **kw)
    info = json.loads((tmp_path / "all-dv" / "ifir_run.json").read_text())
    assert (info["mode"], info["same_as"], info["data"]["mode"]) == ("all-dv", "ins-dv", "all-dv")
    assert info["data"]["sha256"] == src["data"]["sha256"] and info["config"] == src["config"]
    assert runs["all-dv"].seconds == 0.0  # nothing trained
    assert (tmp_path / "all-dv" / "model.safetensors").read_bytes() == (
        tmp_path / "ins-dv" / "model.safetensors"
    ).read_bytes()
    assert not (tmp_path / "all-dv" / "checkpoints").exists()

    shutil.copytree(tmp_path / "ins-dv", tmp_path / "other" / "ins-dv")
    train_modes(tmp_path / "other", modes=("all-dv",), budget=12, **{**kw, "learning_rate": 1e-5})
    assert "same_as" not in json.loads((tmp_path / "other" / "all-dv" / "ifir_run.json").read_text())
    train_modes(tmp_path, modes=("all-orig",), budget=12, **kw)
    assert "same_as" not in json.loads((tmp_path / "all-orig" / "ifir_run.json").read_text())


def test_a_later_evaluation_by_another_backend_is_a_headline_of_its_own(root):
    """The listing showed the latest row of any kind: an int8 evaluation written after the torch
    one replaced the torch number without a word."""
    table = root / "backends" / "results.csv"
    run = str(root / "models" / "ins-dv")
    save_result(_result("followir_be", 2.0, 80.0), table, model=run, mode="ins-dv", rng_seed=3)
    int8 = _result("followir_be", 3.5, 79.0)
    int8.backend = "onnx-int8"
    save_result(int8, table, model=run, mode="ins-dv", rng_seed=3)
    save_result(
        _result("followir_be", 1.0, 70.0), table, model=run, mode="ins-dv", rng_seed=3, prompts="benchmark"
    )
    row = runs_table(root).set_index("run").loc["models/ins-dv"]
    assert row["followir_be:p_mrr"] == 2.0 and row["followir_be:p_mrr [onnx-int8]"] == 3.5
    assert row["followir_be:score [benchmark prompts]"] == 70.0


def test_a_task_s_own_main_score_is_its_headline_and_each_column_names_its_metric(tmp_path, capsys):
    """NevIR's rows record its paired accuracy beside nDCG@10; the listing showed nDCG@10 (81.5
    for a model failing every pair, whose paired accuracy is 0) under a column that did not say
    it was not the task's score."""
    table = tmp_path / "results.csv"
    nevir = EvalResult("NevIR", "m", {"ndcg_at_10": 81.5, "paired_accuracy": 0.0}, {}, {}, source="mteb")
    save_result(nevir, table, model="minilm", mode="base", rng_seed=0)
    save_result(_result("followir_mini", -5.0, 79.0), table, model="minilm", mode="base", rng_seed=0)
    row = runs_table(tmp_path).set_index("run").loc["minilm"]
    assert row["NevIR:paired_accuracy"] == 0.0 and "NevIR:ndcg_at_10" not in row.index
    assert row["followir_mini:p_mrr"] == -5.0 and row["followir_mini:score"] == 79.0
    assert main(["runs", "--root", str(tmp_path)]) == 0
    legend = capsys.readouterr().out.strip().splitlines()[-1]
    assert "NevIR:paired_accuracy = the task's own main score" in legend
    assert "followir_mini:score = MAP@1000" in legend and "followir_mini:p_mrr = p-MRR" in legend


def test_a_metric_added_by_hand_is_no_main_score(tmp_path, capsys):
    """A BEIR folder's rows with a hand-added recall_at_100 showed it in place of nDCG@10, and the
    legend called it ``the task's own main score (mteb's main_score)``; only mteb's main score of a
    known task of that name is one."""
    table = tmp_path / "results.csv"
    scifact = EvalResult("scifact", "m", {"ndcg_at_10": 60.0, "recall_at_100": 90.0}, {}, {})
    save_result(scifact, table, model="minilm", mode="base", rng_seed=0)
    row = runs_table(tmp_path).set_index("run").loc["minilm"]
    assert row["scifact:ndcg_at_10"] == 60.0 and "scifact:recall_at_100" not in row.index
    assert main(["runs", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "main score" not in out and "scifact:ndcg_at_10 = nDCG@10" in out.splitlines()[-1]


def test_finished_runs_of_two_batch_orders_are_named_under_the_listing(root, tmp_path, capsys):
    """An experiment resumed after the batch-order upgrade keeps its finished order-1 runs (records
    without ``batch_order``) beside order-2 ones: ``ifir runs`` listed them alike. Each run's order
    is a column of ``--json``, and a warning line under the listing names the runs of each order."""
    out = tmp_path / "out"
    for name in ("old", "new"):
        shutil.copytree(
            root / "models" / "ins-dv", out / name, ignore=shutil.ignore_patterns("*.safetensors")
        )
    assert main(["runs", "--root", str(out)]) == 0 and "batch order" not in capsys.readouterr().out
    info = json.loads((out / "old" / "ifir_run.json").read_text())
    assert info.pop("batch_order") == 2  # as a run recorded before the field reads
    (out / "old" / "ifir_run.json").write_text(json.dumps(info))
    assert dict(zip(runs_table(out)["run"], runs_table(out)["batch_order"])) == {"new": 2, "old": 1}
    # 1 step of 8 examples from 16: both trained within epoch 0, the batches both orders share
    assert main(["runs", "--root", str(out)]) == 0 and "batch order" not in capsys.readouterr().out
    for name in ("old", "new"):  # as runs of 5 steps (40 examples from 16: past their first epoch)
        info = json.loads((out / name / "ifir_run.json").read_text())
        (out / name / "ifir_run.json").write_text(json.dumps({**info, "steps": 5}))
    assert main(["runs", "--root", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("warning: runs of 2 batch orders") and "order 1: 1 run(s) (old)" in said
    assert "order 2: 1 run(s) (new)" in said


def test_two_experiments_of_one_batch_order_each_under_one_root_are_not_named(tmp_path, capsys):
    """``ifir runs`` warned "not replicates of one condition" whenever the root held finished runs
    of both orders, though an old experiment (order 1) beside a new one (order 2) pools nothing.
    Only runs of one cell (experiment folder, plan, mode, backbone, set, reversals, budget) under
    several orders are named."""
    root = tmp_path / "out"

    def run(exp, seed, mode="ins-dv", **order):
        r = RunFolder(root / exp / "models" / f"rng{seed}" / mode)
        r.path.mkdir(parents=True)
        r.start({"mode": mode, "rng_seed": seed, "config": {"base_model": "minilm"}, **order}, "abc")
        r.finish()  # no steps or batch size: the record cannot tell its epochs, so it counts

    for seed in (0, 1):
        run("exp_old", seed)
        run("exp_new", seed, batch_order=2)
    run("exp_new", 0, mode="all-dv")  # another mode of the new experiment, order 1
    assert main(["runs", "--root", str(root)]) == 0
    assert "batch order" not in capsys.readouterr().out
    run("exp_new", 2)  # a replicate of exp_new's ins-dv cell under order 1
    assert main(["runs", "--root", str(root)]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert (
        said.startswith("warning: runs of 2 batch orders")
        and "order 1: 1 run(s) (exp_new/models/rng2/ins-dv)" in said
    )
    assert "order 2: 2 run(s) (exp_new/models/rng0/ins-dv, exp_new/models/rng1/ins-dv)" in said
