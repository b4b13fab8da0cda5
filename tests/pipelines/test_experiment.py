"""The experiment as a researcher runs it: their inputs, a plan written first, runs printed for a
scheduler and collected, the same tables as one local run."""

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import ConfigError
from ifir_lib.core.run_folder import RunFolder
from ifir_lib.evaluation.corpora import write_followir
from ifir_lib.pipelines import experiment as E
from ifir_lib.pipelines import plan as P
from ifir_lib.pipelines.experiment import ExperimentConfig, planned_runs, run_commands
from ifir_lib.reporting.results import load_results
from ifir_lib.testing.inputs import synthetic_followir, write_beir, write_seeds
from ifir_lib.training.trainer import TrainConfig


def test_config_refuses_what_cannot_run(tmp_path):
    with pytest.raises(ConfigError, match="baseline"):
        ExperimentConfig.preset("smoke", modes=("ins-orig",))
    with pytest.raises(ConfigError, match="no such folder"):
        ExperimentConfig.preset("smoke", eval=("./nowhere",))
    with pytest.raises(ConfigError, match="primary comparison"):
        ExperimentConfig.preset("smoke", primary_b="all-orig", extra_modes=())
    with pytest.raises(ConfigError, match="primary_set"):
        ExperimentConfig.preset("smoke", primary_set="v9")
    with pytest.raises(ConfigError, match="unknown field"):
        ExperimentConfig.from_plan({"budjet": 3}, "x.toml")


def test_plan_round_trips_through_toml_and_its_hash_is_stable(tmp_path):
    cfg = ExperimentConfig.preset("smoke", reversals=str(tmp_path / "r.jsonl"))
    h = P.write_plan(tmp_path, cfg.plan())
    back = ExperimentConfig.from_plan(P.stored_plan(tmp_path))
    assert back == cfg and P.plan_hash(back.plan()) == h
    text = (tmp_path / P.PLAN_FILE).read_text()
    assert "[primary]" in text and 'primary_a = "ins-dv"' in text and "curation" not in text  # None: left out
    assert 'seeds = "bundled"' in text  # no path of this checkout: the plan's hash is the same in any clone
    assert P.write_plan(tmp_path, cfg.plan()) == h  # the same plan again is accepted


def test_a_changed_plan_is_refused_and_nothing_is_lost(tmp_path):
    cfg = ExperimentConfig.preset("smoke")
    P.write_plan(tmp_path, cfg.plan())
    (tmp_path / "results.csv").write_text("kept\n")
    before = (tmp_path / P.PLAN_FILE).read_bytes()
    with pytest.raises(ConfigError, match=r"budget 16 -> 32.*--new-experiment"):
        P.write_plan(tmp_path, ExperimentConfig.preset("smoke", budget=32).plan())
    assert (tmp_path / P.PLAN_FILE).read_bytes() == before
    moved = P.set_aside(tmp_path)
    assert (moved / "results.csv").read_text() == "kept\n" and (moved / P.PLAN_FILE).read_bytes() == before
    assert not (tmp_path / "results.csv").exists()


def test_an_old_plan_s_job_at_work_is_never_set_aside_from_under_it(tmp_path):
    """--new-experiment while the old plan's --collect evaluated: the old collect wrote its base
    rows into the new plan's fresh table (its report then dropped the base model for good)."""
    from ifir_lib.core.errors import OutputLocked
    from ifir_lib.core.locks import exclusive

    P.write_plan(tmp_path, ExperimentConfig.preset("smoke").plan())
    run = tmp_path / "models" / "rng0" / "ins-dv"
    run.mkdir(parents=True)
    RunFolder(run).write({"mode": "ins-dv", "status": "training"})
    for busy in (tmp_path / P.COLLECT_LOCK, run):
        with exclusive(busy):
            with pytest.raises(
                OutputLocked,
                match=re.escape(f"{busy}: this experiment's output (an old plan's job still runs)"),
            ):
                P.set_aside(tmp_path)
        assert (tmp_path / P.PLAN_FILE).exists() and run.exists()  # nothing moved
    assert (P.set_aside(tmp_path) / "models" / "rng0" / "ins-dv").exists()  # no job at work: moved


def test_planned_runs_and_their_commands(tmp_path, monkeypatch):
    cfg = ExperimentConfig.preset("smoke", rng_seeds=(3, 4), modes=("ins-orig", "ins-dv"))
    assert planned_runs(cfg) == [(3, "ins-orig"), (3, "ins-dv"), (4, "ins-orig"), (4, "ins-dv")] + [
        (3, "all-orig"),
        (3, "all-dv"),
    ]
    plain = run_commands(tmp_path, cfg)
    assert shlex.split(plain[1]) == ["ifir", "experiment", "--out", str(tmp_path), "--run", "rng3/ins-dv"]
    monkeypatch.chdir(tmp_path)
    assert shlex.split(run_commands("exp", cfg)[0])[3] == str(tmp_path / "exp")  # absolute, for any folder
    torch = run_commands(tmp_path, cfg, "torchrun", nproc=8)[0]
    assert torch.startswith("torchrun --nproc-per-node=8 -m -- ifir_lib experiment")
    acc = run_commands(tmp_path, cfg, "accelerate", launch_config="launch/accelerate_ddp_8gpu.yaml")[0]
    assert "--config_file launch/accelerate_ddp_8gpu.yaml -m ifir_lib experiment" in acc
    # each launcher's own parser takes the printed command (torchrun read --run as --run-path)
    from accelerate.commands.launch import launch_command_parser
    from torch.distributed.run import get_args_parser

    for parser, cmd in ((get_args_parser(), torch), (launch_command_parser(), acc)):
        args = parser.parse_args(shlex.split(cmd)[2 if cmd.startswith("accelerate") else 1 :])
        assert (args.training_script, args.training_script_args[-2:]) == (
            "ifir_lib",
            ["--run", "rng3/ins-orig"],
        )
    with pytest.raises(ConfigError, match="needs --launch-config"):
        run_commands(tmp_path, cfg, "accelerate")


def test_cli_takes_a_plan_file_and_the_stored_plan(tmp_path, capsys):
    plan = tmp_path / "my.toml"
    assert main(["experiment", "--preset", "smoke", "--budget", "24", "--show-plan"]) == 0
    plan.write_text(capsys.readouterr().out)
    out = tmp_path / "exp"
    assert main(["experiment", "--plan", str(plan), "--out", str(out), "--print-runs"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 8 and all(line.startswith("ifir experiment --out") for line in printed)
    assert P.stored_plan(out)["budget"] == 24
    # a printed command reads the stored plan; a changed one is refused with one line, exit 2
    assert main(["experiment", "--out", str(out), "--budget", "8", "--print-runs"]) == 2
    assert "budget 24 -> 8" in capsys.readouterr().err
    assert main(["experiment", "--out", str(out), "--run", "rng9/ins-dv"]) == 2
    assert "not in the plan" in capsys.readouterr().err


def test_a_mistyped_input_is_refused_before_it_enters_the_plan(tmp_path, capsys):
    """A typo in --curation (or --seeds, --reversals) would be stored in the plan, and the fixed
    path then refused as a changed plan: it is an error before anything is written."""
    for name in ("seeds", "reversals", "curation"):
        out = tmp_path / name
        args = [
            "experiment",
            "--preset",
            "smoke",
            f"--{name}",
            str(tmp_path / "typo.jsonl"),
            "--out",
            str(out),
        ]
        assert main([*args, "--print-runs"]) == 2
        assert f"--{name} {tmp_path / 'typo.jsonl'}: no such file" in capsys.readouterr().err
        assert not out.exists()


def test_two_eval_items_stored_under_one_dataset_name_are_refused(tmp_path):
    """Your folder named like v1's (followir_mini), or a/test and b/test: rows would be pooled."""
    for sub in ("mine/followir_mini", "a/test", "b/test"):
        (tmp_path / sub).mkdir(parents=True)
    mine = str(tmp_path / "mine" / "followir_mini")
    with pytest.raises(ConfigError, match=rf"'v1' and '{mine}' are both stored as dataset 'followir_mini'"):
        ExperimentConfig.preset("smoke", eval=("v1", mine))
    with pytest.raises(ConfigError, match="both stored as dataset 'test'"):
        P.eval_targets([str(tmp_path / "a" / "test"), str(tmp_path / "b" / "test")])
    assert P.eval_targets(["v1", "v2"])[0] != []  # distinct names pass


def test_printed_runs_work_from_any_folder_and_a_run_needs_a_plan(tmp_path, monkeypatch, capsys):
    """A scheduler's job starts elsewhere: the printed --out and the plan's input paths are
    absolute; --run on a folder with no plan is refused instead of training a default plan's run."""
    proj, job = tmp_path / "proj", tmp_path / "job"
    proj.mkdir(), job.mkdir()
    monkeypatch.chdir(proj)
    (proj / "my.jsonl").touch(), (proj / "cur.jsonl").touch()  # only their paths are read here
    args = [
        "experiment",
        "--preset",
        "smoke",
        "--seeds",
        "my.jsonl",
        "--curation",
        "cur.jsonl",
        "--out",
        "exp",
    ]
    assert main([*args, "--print-runs"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert shlex.split(printed[0])[3] == str(proj / "exp")
    stored = P.stored_plan(proj / "exp")
    assert (stored["seeds"], stored["curation"]) == (str(proj / "my.jsonl"), str(proj / "cur.jsonl"))
    monkeypatch.chdir(job)

    def never(*a, **kw):
        raise AssertionError("trained a run of a plan nobody stored")

    monkeypatch.setattr(E, "train_run", never)
    assert main(["experiment", "--out", "exp", "--run", "rng0/ins-dv"]) == 2
    assert f"{job / 'exp'} holds no experiment plan" in capsys.readouterr().err
    assert not (job / "exp").exists()  # nothing written, nothing trained
    assert main([*shlex.split(printed[0])[1:4], "--run", "rng9/ins-dv"]) == 2  # the stored plan is found
    assert "is not in the plan; planned runs: rng0/ins-orig" in capsys.readouterr().err


def test_a_plan_stored_with_relative_paths_keeps_its_hash(tmp_path, monkeypatch, capsys):
    """An experiment planned before input paths were made absolute: its own command, rerun from
    its folder, names the same files, so it is the same plan (not refused, same hash)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.jsonl").touch()
    old = P.write_plan("exp", ExperimentConfig.preset("smoke", seeds="my.jsonl").plan())
    before = (tmp_path / "exp" / P.PLAN_FILE).read_bytes()
    assert (
        main(["experiment", "--preset", "smoke", "--seeds", "my.jsonl", "--out", "exp", "--print-runs"]) == 0
    )
    assert (tmp_path / "exp" / P.PLAN_FILE).read_bytes() == before
    assert (
        P.write_plan("exp", ExperimentConfig.preset("smoke", seeds=str(tmp_path / "my.jsonl")).plan()) == old
    )
    with pytest.raises(ConfigError, match="seeds 'my.jsonl' -> "):
        P.write_plan("exp", ExperimentConfig.preset("smoke", seeds=str(tmp_path / "other.jsonl")).plan())


def _user_inputs(tmp_path):
    seeds = write_seeds(tmp_path / "my_seeds.jsonl", 60)
    fir = write_followir(synthetic_followir(4, 40, 24, rng_seed=2), tmp_path / "my_set")
    return seeds, fir


def _table(out):
    r = load_results(out / "results.csv")
    r["model"] = r["model"].str.replace(str(out), "OUT")
    cols = ["model", "mode", "rng_seed", "dataset", "metric", "value", "ci_low", "ci_high", "n_queries"]
    return r[cols].sort_values(cols[:5]).reset_index(drop=True)


@pytest.mark.slow
def test_user_inputs_local_run_equals_printed_runs_then_collect(tmp_path, private_cache, capsys):
    seeds, fir = _user_inputs(tmp_path)
    base = TrainConfig.preset("smoke").base_model
    args = [
        "experiment",
        "--preset",
        "smoke",
        "--seeds",
        str(seeds),
        "--base-model",
        base,
        "--eval",
        str(fir),
    ]
    args += ["--rng-seeds", "0,1", "--modes", "ins-orig,ins-dv", "--extra-modes", "all-dv"]
    args += ["--primary", "ins-dv,ins-orig,p_mrr"]
    local, split = tmp_path / "local", tmp_path / "split"
    assert main([*args, "--out", str(local)]) == 0
    capsys.readouterr()
    assert main([*args, "--out", str(split), "--print-runs"]) == 0
    commands = [shlex.split(c) for c in capsys.readouterr().out.splitlines()]
    assert main(commands[0][1:]) == 0  # one run of five finished: collect names the others
    assert main(["experiment", "--out", str(split), "--collect"]) == 0
    assert "rng0/ins-dv" in capsys.readouterr().err
    for c in commands[1:]:
        assert main(c[1:]) == 0
    assert main(["experiment", "--out", str(split), "--collect"]) == 0
    pd.testing.assert_frame_equal(_table(local), _table(split))
    assert set(_table(local)["dataset"]) == {"my_set"} and set(_table(local)["mode"]) == {
        "base",
        "ins-orig",
        "ins-dv",
        "all-dv",
    }
    for name in ("modes.csv", "comparisons.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(local / name), pd.read_csv(split / name))
    plan_hash = P.plan_hash(P.stored_plan(local))
    assert set(load_results(local / "results.csv")["plan"]) == {plan_hash}
    for s, m in planned_runs(ExperimentConfig.from_plan(P.stored_plan(local))):
        info = json.loads((local / "models" / f"rng{s}" / m / "ifir_run.json").read_text())
        assert info["data"]["plan"] == plan_hash and info["data"]["data"] == str(seeds)
        assert info["data"]["inputs"] == P.input_digests({"seeds": str(seeds)})  # what the file held
        assert info["saved_step"] == info["steps"]  # the fixed final step is the model
    summary = (local / "summary.md").read_text()
    assert "Primary comparison" in summary and "rev_acc" in summary
    # a rerun changes nothing; a changed plan is refused and loses nothing
    rows = len(load_results(local / "results.csv"))
    assert main([*args, "--out", str(local)]) == 0
    assert len(load_results(local / "results.csv")) == rows
    assert main([*args, "--out", str(local), "--budget", "8"]) == 2
    assert len(load_results(local / "results.csv")) == rows
    # a run deleted after a collect was named as left out while its old rows stayed in every number
    import shutil

    capsys.readouterr()
    shutil.rmtree(local / "models" / "rng1" / "ins-dv")
    assert main(["experiment", "--out", str(local), "--collect"]) == 0
    err = capsys.readouterr().err
    assert "rng1/ins-dv" in err and "no finished run of this experiment now" in err
    modes = pd.read_csv(local / "modes.csv")
    assert set(modes.loc[modes["mode"] == "ins-dv", "runs"]) == {1}
    caption = (local / "figures" / "fig_pmrr_by_config.caption.txt").read_text()
    assert "Ins-DV 1" in caption and "runs per mode" in caption  # the figures read what the tables read


def test_runs_trained_on_inputs_that_changed_are_never_pooled(tmp_path):
    """A reversals file redone between two --run jobs: both runs recorded the same path and plan,
    and --collect averaged them as one condition."""
    seeds, _ = _user_inputs(tmp_path)
    rev = tmp_path / "rev.jsonl"
    rev.write_text('{"key": "a", "reversal": "first"}\n')
    cfg = dataclasses.replace(
        ExperimentConfig.preset("smoke"),
        seeds=str(seeds),
        reversals=str(rev),
        rng_seeds=(0, 1),
        modes=("ins-orig", "ins-dv"),
    )
    out = tmp_path / "exp"
    plan_hash = E.start(out, cfg)
    digests = lambda: P.input_digests({"seeds": str(seeds), "reversals": str(rev)})  # noqa: E731

    def finished(name, inputs):
        run = RunFolder(out / "models" / name)
        run.path.mkdir(parents=True)
        data = {"plan": plan_hash, **({"inputs": inputs} if inputs else {})}
        run.start({"mode": name.split("/")[1], "data": data}, "abc")
        run.finish()

    first = digests()
    assert set(first) == {"seeds", "reversals"}
    finished("rng0/ins-dv", first)
    E._check_runs_agree_on_inputs(out, cfg, now=digests())  # unchanged: rng1 may train
    rev.write_text('{"key": "a", "reversal": "redone"}\n')
    with pytest.raises(
        ConfigError,
        match=rf"trained on reversals {rev} holding other content \(sha256 rng0/ins-dv: {first['reversals']}; "
        r"the files now: \w+\)",
    ):
        E.train_run(out, cfg, 1, "ins-dv", plan_hash)  # refused before any training
    finished("rng1/ins-dv", digests())  # trained anyway (before this check existed, or by hand)
    finished("rng0/ins-orig", None)  # recorded before digests were kept: never compared
    said = rf"trained on reversals {rev} holding other content \(sha256 rng0/ins-dv: {first['reversals']}; rng1/ins-dv: \w+\)"
    with pytest.raises(ConfigError, match=said):
        E.collect(out, cfg, plan_hash)  # before any model is evaluated
    assert not (out / "results.csv").exists()
    (out / "models" / "rng1" / "ins-dv" / "ifir_run.json").unlink()
    E._check_runs_agree_on_inputs(out, cfg)


def test_a_base_model_folder_swapped_between_runs_is_refused(tmp_path, minilm):
    """The base model's folder held another encoder for rng1 than for rng0: the two were pooled as
    replicates, and --collect scored the swapped folder as the base row."""
    base = tmp_path / "base"
    minilm.save(str(base))
    (base / "checkpoints").mkdir()  # what is not the model does not count
    cfg = dataclasses.replace(ExperimentConfig.preset("smoke"), base_model=str(base), rng_seeds=(0, 1))
    out = tmp_path / "exp"
    plan_hash = E.start(out, cfg)
    first = P.input_digests({"base_model": str(base)})
    assert set(first) == {"base_model"}
    run = RunFolder(out / "models" / "rng0" / "ins-dv")
    run.path.mkdir(parents=True)
    run.start({"mode": "ins-dv", "data": {"plan": plan_hash, "inputs": first}}, "abc")
    run.finish()
    E._check_runs_agree_on_inputs(out, cfg, now=P.input_digests({"base_model": str(base)}))
    (base / "checkpoints" / "x.safetensors").write_bytes(b"not the model")
    assert P.input_digests({"base_model": str(base)}) == first
    (base / "config_sentence_transformers.json").write_text("{}")  # another model in the same folder
    said = rf"trained on base_model {base} holding other content \(sha256 rng0/ins-dv: {first['base_model']}; the files now"
    with pytest.raises(ConfigError, match=said):
        E.train_run(out, cfg, 1, "ins-dv", plan_hash)
    with pytest.raises(ConfigError, match=said):
        E.collect(out, cfg, plan_hash)  # before the base row is scored from the folder as it is now
    assert P.input_digests({"base_model": "minilm"}) == {}  # an alias or hub name: nothing to digest


def test_an_input_folder_s_digest_is_its_tables_not_its_lock_files(tmp_path):
    folder = tmp_path / "arrow_seeds"
    folder.mkdir()
    (folder / "seeds.arrow").write_bytes(b"rows")
    before = P.input_digests({"seeds": str(folder)})
    (folder / "seeds.arrow.lock").write_text("pid 1")
    (folder / ".seeds.arrow.123.tmp").write_text("half")
    assert P.input_digests({"seeds": str(folder)}) == before
    (folder / "seeds.arrow").write_bytes(b"other rows")
    assert P.input_digests({"seeds": str(folder)}) != before


def test_runs_started_together_store_one_plan(tmp_path):
    """A scheduler starts many runs at once: each waits for the plan's lock and finds the same plan."""
    import subprocess
    import sys

    plan = json.dumps(ExperimentConfig.preset("smoke").plan())
    code = "import json, sys; from ifir_lib.pipelines.plan import write_plan; "
    code += "print(write_plan(sys.argv[1], json.loads(sys.argv[2])))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), plan], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    hashes = {p.communicate(timeout=300)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert hashes == {P.plan_hash(ExperimentConfig.preset("smoke").plan())}


def test_runs_trained_under_several_commits_are_named(tmp_path, capsys):
    """An experiment spanning a code change: the input digests agree, but the training sets built
    from them may not; --collect pooled them without a word."""
    runs = {}
    for (s, m), commit in (((0, "ins-dv"), "aaa"), ((1, "ins-dv"), "bbb"), ((0, "ins-orig"), "aaa")):
        run = RunFolder(tmp_path / f"rng{s}" / m)
        run.path.mkdir(parents=True)
        run.start({"mode": m}, commit)
        runs[(s, m)] = run.path
    E._warn_commits({k: v for k, v in runs.items() if k != (1, "ins-dv")})
    assert capsys.readouterr().err == ""
    E._warn_commits(runs)
    assert (
        "trained under 2 commits (aaa: rng0/ins-dv, rng0/ins-orig; bbb: rng1/ins-dv)"
        in capsys.readouterr().err
    )


def test_the_paper_evaluation_has_a_primary_set_and_any_set_it_evaluates_may_be_named():
    """``--eval paper`` (the paper preset's default) looked its primary set up as the dataset
    ``paper``, which no row has: the report said "a side has no finished run" after every run
    finished, and naming ``followir`` was refused as not an --eval item."""
    from ifir_lib.pipelines.experiment_report import primary_set_of

    cfg = ExperimentConfig.preset("smoke", eval=("paper",))
    assert primary_set_of(cfg) == "followir"  # the paper's headline aggregate
    for name in ("followir", "InfoSearchLength"):
        assert primary_set_of(dataclasses.replace(cfg, primary_set=name)) == name
    with pytest.raises(ConfigError, match="nor a set they evaluate"):
        dataclasses.replace(cfg, primary_set="followir_mini")
    assert primary_set_of(ExperimentConfig.preset("smoke", eval=("v1",))) == "followir_mini"


def test_eval_folders_enter_the_plan_absolute_and_older_relative_plans_keep_their_hash(tmp_path, monkeypatch):
    """``--eval sets/myset`` was stored as given: a printed --run job started in another folder
    failed with 'no such folder' (the docs say the commands run from anywhere)."""
    write_followir(synthetic_followir(2, 10, 5), tmp_path / "sets" / "myset")
    monkeypatch.chdir(tmp_path)
    fields = P.absolute_paths({"eval": ["sets/myset", "v2", "InfoSearchLength"]})
    assert fields["eval"] == [str(tmp_path / "sets" / "myset"), "v2", "InfoSearchLength"]
    cfg = ExperimentConfig.preset("smoke", eval=("sets/myset",))
    old = _normal_plan = P._normal(cfg.plan())  # a plan stored before: the folder relative
    P.write_plan(tmp_path / "exp", old)
    again = P._normal(dataclasses.replace(cfg, eval=(str(tmp_path / "sets" / "myset"),)).plan())
    assert P.write_plan(tmp_path / "exp", again) == P.plan_hash(_normal_plan)  # the same plan
    # the primary set may name the folder as given, though the plan holds it absolute
    from ifir_lib.pipelines.experiment_report import primary_set_of

    mine = ExperimentConfig.preset(
        "smoke", eval=(str(tmp_path / "sets" / "myset"),), primary_set="sets/myset"
    )
    assert primary_set_of(mine) == "myset"


def _run_record(path, mode, config=None, world_size=1, commit="aaa", **fields):
    run = RunFolder(path)
    run.path.mkdir(parents=True, exist_ok=True)
    record = {"mode": mode, "config": {"learning_rate": 5e-5, "rng_seed": 0, **(config or {})}}
    run.start({**record, **({"world_size": world_size} if world_size is not None else {})}, commit)
    if fields:
        run.update(**fields)
    return run.path


def test_runs_of_one_mode_under_other_settings_are_not_pooled(tmp_path, capsys):
    """A learning rate edited between two --run jobs, or a node with other GPU counts (another
    global batch): --collect pooled them as replicates; the commit check is blind to a checkout
    with uncommitted changes."""
    runs = {
        (0, "ins-dv"): _run_record(tmp_path / "rng0/ins-dv", "ins-dv"),
        (1, "ins-dv"): _run_record(tmp_path / "rng1/ins-dv", "ins-dv", {"rng_seed": 1}),
        (0, "ins-orig"): _run_record(tmp_path / "rng0/ins-orig", "ins-orig", {"learning_rate": 1e-4}),
    }
    E._check_runs_are_replicates(runs)  # other rng_seeds, and another mode's settings: fine
    runs[(1, "ins-dv")] = _run_record(tmp_path / "rng1b/ins-dv", "ins-dv", {"learning_rate": 5e-4})
    with pytest.raises(
        ConfigError, match=r"rng0/ins-dv and rng1/ins-dv of ins-dv .*learning_rate 5e-05 vs 0.0005"
    ):
        E._check_runs_are_replicates(runs)
    runs[(1, "ins-dv")] = _run_record(tmp_path / "rng1c/ins-dv", "ins-dv", world_size=2)
    with pytest.raises(ConfigError, match="world_size 1 vs 2"):
        E._check_runs_are_replicates(runs)
    runs[(0, "ins-dv")] = _run_record(
        tmp_path / "old/ins-dv", "ins-dv", world_size=None
    )  # before it was recorded
    E._check_runs_are_replicates(runs)
    E._warn_commits({(0, "ins-dv"): _run_record(tmp_path / "dirty", "ins-dv", commit="abc+dirty")})
    assert "under commit abc+dirty (no git checkout, or uncommitted changes)" in capsys.readouterr().err


def test_the_report_says_which_step_each_model_is(tmp_path):
    """A plan with keep_best saved the held-out pick, and the report still said "fixed final step"."""
    from ifir_lib.pipelines.experiment_report import _which_step

    final = {(0, "ins-dv"): _run_record(tmp_path / "a", "ins-dv", steps=4, saved_step=4)}
    assert _which_step(final) == "each run's fixed final step"
    picked = {**final, (1, "ins-dv"): _run_record(tmp_path / "b", "ins-dv", steps=4, saved_step=2)}
    assert "for 1 of 2 runs (rng1/ins-dv) is the held-out pick (keep_best)" in _which_step(picked)


def test_a_plan_s_epochs_set_the_length_and_duplicates_or_typos_are_refused_when_planned():
    """epochs was stored and hashed but the preset's max_steps won (3 epochs trained 2); duplicate
    rng_seeds printed two jobs for one folder; a mistyped metric failed only at --collect."""
    assert TrainConfig.preset("smoke", epochs=3.0).max_steps == 0
    assert TrainConfig.preset("smoke", epochs=3.0, max_steps=0).epochs == 3.0
    with pytest.raises(ConfigError, match="both given"):
        TrainConfig.preset("smoke", epochs=3.0, max_steps=4)
    with pytest.raises(ConfigError, match="rng_seeds: 0 given twice"):
        ExperimentConfig.preset("smoke", rng_seeds=(0, 0))
    with pytest.raises(ConfigError, match="ins-dv given twice"):
        ExperimentConfig.preset("smoke", extra_modes=("ins-dv",))
    with pytest.raises(ConfigError, match="metric 'pmrr'"):
        ExperimentConfig.preset("smoke", primary_metric="pmrr")
    with pytest.raises(ConfigError, match="correction 'bonferoni'"):
        ExperimentConfig.preset("smoke", correction="bonferoni")
    with pytest.raises(
        ConfigError, match="both given"
    ):  # the smoke preset sets max_steps: refused when planned
        ExperimentConfig.preset("smoke", epochs=3.0)
    assert ExperimentConfig.preset("smoke", epochs=3.0, max_steps=0).epochs == 3.0


def test_a_plan_file_s_paths_are_its_own_and_reserved_eval_names_are_names(tmp_path, monkeypatch, capsys):
    """A plan file's relative seeds path was read from the current folder (another file of that
    name was used); a missing one was planned; a LaTeX ``paper/`` folder here was planned as the
    evaluation set ``paper``; a relative base model folder was stored relative."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    seeds, _ = _user_inputs(project)
    elsewhere.mkdir()
    (elsewhere / "paper").mkdir()  # a LaTeX folder, not the paper's benchmarks
    (elsewhere / "models" / "base").mkdir(parents=True)
    plan = project / "plan.toml"
    design = '[design]\nexperiment_preset = "smoke"\ntrain_preset = "smoke"\n'
    plan.write_text(f'[inputs]\nseeds = "{seeds.name}"\n{design}[evaluation]\neval = ["paper"]\n')
    monkeypatch.chdir(elsewhere)
    assert main(["experiment", "--plan", str(plan), "--out", "exp", "--print-runs"]) == 0
    stored = P.stored_plan(elsewhere / "exp")
    assert stored["seeds"] == str(seeds) and stored["eval"] == ["paper"]
    assert P.eval_targets(["paper"]) == ([], ["paper"]) and P.eval_targets(["./paper"])[0] == [
        Path("./paper")
    ]
    assert P.absolute_paths({"base_model": "models/base"})["base_model"] == str(elsewhere / "models" / "base")
    plan.write_text(f'[inputs]\nseeds = "missing.jsonl"\n{design}')
    assert main(["experiment", "--plan", str(plan), "--out", "exp2", "--print-runs"]) == 2
    assert "seeds " + str(project / "missing.jsonl") + ": no such file" in capsys.readouterr().err
    (elsewhere / "mine").mkdir()  # an eval folder found here, not beside the plan file
    plan.write_text(f'[inputs]\nseeds = "{seeds.name}"\n{design}[evaluation]\neval = ["mine"]\n')
    assert main(["experiment", "--plan", str(plan), "--out", "exp3", "--print-runs"]) == 2
    assert "eval 'mine': no such folder beside the plan file" in capsys.readouterr().err
    # --primary naming an --eval folder as given: stored absolute with it, so a job elsewhere reads it
    both = P.absolute_paths({"eval": ["mine"], "primary_set": "mine"})
    assert both["primary_set"] == both["eval"][0] == str(elsewhere / "mine")


def test_collect_warns_that_a_raw_base_row_is_pooled_otherwise_than_training_started(
    tmp_path, monkeypatch, caplog
):
    """A transformers folder as the base: the base row (load_model: mean pooling) and every run's
    start (build_model: the paper preset's cls pooling) were two models, with no word."""
    from support.folders import raw_backbone

    class Scored(Exception):
        pass

    def stop(*a, **kw):  # the base row is what is checked; nothing need be scored
        raise Scored

    monkeypatch.setattr(E, "evaluate_models", stop)
    raw = str(raw_backbone(tmp_path / "raw"))
    for preset, warned in (("paper", True), ("smoke", False)):  # smoke pools by mean, as the base row
        cfg = dataclasses.replace(ExperimentConfig.preset("smoke"), base_model=raw, train_preset=preset)
        caplog.clear()
        with caplog.at_level("WARNING"), pytest.raises(Scored):
            E.collect(tmp_path / preset, cfg)
        assert (
            "its base row is scored with mean pooling, but the runs started from it with cls" in caplog.text
        ) is warned


def test_a_plan_refuses_fields_that_would_train_otherwise_than_it_says(tmp_path, capsys):
    """Probe 46 P: what a hand-edited plan or a flag let through, recorded as planned, trained otherwise."""
    smoke = ExperimentConfig.preset("smoke")
    plan = {k: list(v) if isinstance(v, tuple) else v for k, v in smoke.plan().items()}
    bad = {
        "keep_best": ("false", "plan field keep_best: expected bool"),  # a string: true to Python
        "co_batch_views": ("false", "plan field co_batch_views"),
        "rng_seeds": ([0, "0"], "plan field rng_seeds"),  # two runs, one folder
        "eval": ("v1", "plan field eval"),  # the tasks 'v' and '1'
        "max_steps": (4.5, "plan field max_steps"),
        "budget": (-2, "budget -2: a budget is a positive number"),  # all but 2 seeds, unmatched
        "tested_metrics": (["p_mrr", "map_at_1000", "p_mrr"], "tested_metrics: p_mrr given twice"),
        "primary_b": ("ins-dv", "primary comparison: 'ins-dv' against itself"),
        "experiment_preset": ("bogus", "experiment_preset 'bogus'"),
    }
    for field, (value, said) in bad.items():
        with pytest.raises(ConfigError, match=re.escape(said)):
            ExperimentConfig.from_plan({**plan, field: value}, "plan.toml")
    with pytest.raises(ConfigError, match="budget 17 is odd"):
        ExperimentConfig.preset("smoke", budget=17)
    assert ExperimentConfig.preset(
        "smoke", budget=17, modes=("ins-orig",), baseline="ins-orig", primary_a="base"
    )
    for name in ("old", "new"):  # one set's two versions in sibling folders
        write_followir(synthetic_followir(4, 30, 20, rng_seed=1), tmp_path / name / "robust")
    with pytest.raises(ConfigError, match=r"primary_set .*new/robust is not evaluated"):
        ExperimentConfig.preset(
            "smoke", eval=(str(tmp_path / "old" / "robust"),), primary_set=str(tmp_path / "new" / "robust")
        )
    P.write_plan(tmp_path, smoke.plan())
    stored = str(tmp_path / "experiment.toml")
    argv = ["experiment", "--plan", stored, "--preset", "cpu", "--out", str(tmp_path / "x"), "--show-plan"]
    assert main(argv) == 2 and "the plan file holds every field; give one" in capsys.readouterr().err


def test_collect_refuses_held_out_seeds_the_runs_did_not_hold_out(tmp_path):
    """The base's held-out scores ("on the same seeds") were read from the seed file as edited after the runs."""
    seeds, _ = _user_inputs(tmp_path)
    cfg = dataclasses.replace(ExperimentConfig.preset("smoke"), seeds=str(seeds), heldout_seeds=4)
    out = tmp_path / "exp"
    plan_hash = E.start(out, cfg)
    run = RunFolder(out / "models" / "rng0" / "ins-dv")
    run.path.mkdir(parents=True)
    run.start(
        {"mode": "ins-dv", "data": {"plan": plan_hash, "inputs": P.input_digests({"seeds": str(seeds)})}},
        "abc",
    )
    run.finish()
    seeds.write_text("".join(seeds.read_text().splitlines(keepends=True)[1:]))  # a clean-up after the runs
    with pytest.raises(ConfigError, match=f"trained on seeds {seeds} holding other content"):
        E.collect(out, cfg, plan_hash)
    assert not (out / "results.csv").exists()


def test_what_collect_would_refuse_is_refused_when_planned(tmp_path):
    """Probe 46 P: a metric no set writes and a BEIR folder in --eval were refused at --collect, after training."""
    with pytest.raises(
        ConfigError, match="primary_metric 'ndcg_at_10': the evaluation of followir_mini writes"
    ):
        ExperimentConfig.preset("smoke", primary_metric="ndcg_at_10")
    with pytest.raises(ConfigError, match="tested_metrics: no set of --eval .* writes 'recall_at_7'"):
        ExperimentConfig.preset("smoke", tested_metrics=("p_mrr", "recall_at_7"))
    with pytest.raises(
        ConfigError, match="primary_metric 'map_at_1000': the evaluation of followir writes p_mrr"
    ):
        ExperimentConfig.preset("smoke", eval=("paper",), primary_metric="map_at_1000")
    assert ExperimentConfig.preset("smoke", eval=("paper",), tested_metrics=("ndcg_at_10",))  # known once run
    beir = write_beir(tmp_path / "scifact", {"d1": "a text"}, {"q1": "a question"}, {"q1": {"d1": 1}})
    with pytest.raises(ConfigError, match=r"qrels_og/test.jsonl not found \(a BEIR folder"):
        ExperimentConfig.preset("smoke", eval=(str(beir),))


def test_the_base_s_held_out_scores_read_own_seeds_as_training_did(tmp_path):
    """Probe 46 P: seeds without hard negatives (optional for training) trained, then collect read them
    as a bundle's and failed after every run had finished."""
    path = tmp_path / "my_seeds.jsonl"
    rows = [json.loads(line) for line in write_seeds(path, 40).read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "hard_negatives"}) + "\n" for r in rows)
    )
    cfg = dataclasses.replace(ExperimentConfig.preset("smoke"), seeds=str(path), heldout_seeds=4)
    scores = E._heldout_base(cfg)
    assert scores and all(isinstance(v, float) for v in scores.values())


def _long_instruction_seeds(path, n: int = 12) -> Path:
    """Seeds whose instruction and reversal differ only after ~120 words (past smoke's 96 tokens)."""
    from ifir_lib.testing.inputs import make_seed

    background = " ".join(
        f"A relevant document number {k} discusses causes, options and evidence." for k in range(10)
    )
    rows = [make_seed(i) for i in range(n)]
    for r in rows:
        r["instruction"], r["reference_reversal"] = (
            f"{background} {r[f]}" for f in ("instruction", "reference_reversal")
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_base_s_held_out_scores_are_read_at_the_length_the_runs_are_scored_at(tmp_path, minilm):
    """Probe 49a: the base held-out line was read at the training length (96 tokens: each seed's
    two instructions the same), the runs' held-out scores at the length they are saved with."""
    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.training.heldout import heldout_scores, split_heldout

    path = _long_instruction_seeds(tmp_path / "long.jsonl")
    cfg = dataclasses.replace(ExperimentConfig.preset("smoke"), seeds=str(path), heldout_seeds=4)
    _, held = split_heldout(load_seeds(path, stage="train"), 4)
    assert minilm.max_seq_length == 256
    assert E._heldout_base(cfg) == pytest.approx(heldout_scores(minilm, held))


def test_the_base_s_held_out_scores_are_those_of_the_model_the_runs_start_from(tmp_path, minilm):
    """Probe 49a: a raw transformers base was scored with CLS pooling for the base's held-out line,
    while the cpu and smoke runs start from it with mean pooling (79.34 against 88.37)."""
    from ifir_lib.core.models import build_model
    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.training.heldout import heldout_scores, split_heldout
    from ifir_lib.training.trainer import saved_length

    raw = tmp_path / "raw_minilm"
    minilm[0].auto_model.save_pretrained(raw)
    minilm.tokenizer.save_pretrained(raw)
    cfg = dataclasses.replace(ExperimentConfig.preset("smoke", base_model=str(raw)), heldout_seeds=8)
    tcfg = TrainConfig.preset(cfg.train_preset)
    start = build_model(str(raw), max_seq_length=tcfg.max_seq_length, pooling=tcfg.pooling, device="cpu")
    start.max_seq_length = saved_length(start, tcfg)
    _, held = split_heldout(load_seeds(cfg.seeds_path(), stage="train"), 8)
    assert tcfg.pooling == "mean" and E._heldout_base(cfg) == pytest.approx(heldout_scores(start, held))
