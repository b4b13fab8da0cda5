"""Training: sampler invariants, a real CPU run, resume after a kill, NaN stop, DDP on 2 processes."""

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import ConfigError, DataError, NonFiniteLossError
from ifir_lib.core.run_folder import RunFolder
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.trainer import TrainConfig, _resume_point, mode_config, train
from ifir_lib.training.trainsets import build_trainset, save_trainset

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def smoke_run(module_tmp, bundled_seeds):
    cfg = TrainConfig.preset("smoke", max_steps=2, rng_seed=7)
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives, rng_seed=7)
    out = module_tmp / "run"
    return cfg, ts, train(ts.examples, out, cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")


def test_run_directory_is_a_loadable_model_with_provenance(smoke_run):
    from sentence_transformers import SentenceTransformer

    cfg, ts, res = smoke_run
    model = SentenceTransformer(str(res.run_dir), device="cpu")
    assert model.prompts["query"] == cfg.query_prompt and "document" in model.prompts
    info = json.loads((res.run_dir / "ifir_run.json").read_text())
    assert (
        info["status"] == "finished"
        and info["mode"] == "ins-dv"
        and info["data"]["sha256"] == ts.manifest()["sha256"]
    )
    assert [r["step"] for r in res.log] == [1, 2] and all(r["loss"] > 0 for r in res.log)


def test_same_seed_same_weights(smoke_run, tmp_path):
    from sentence_transformers import SentenceTransformer

    from ifir_lib.core.models import model_fingerprint

    cfg, ts, res = smoke_run
    again = train(ts.examples, tmp_path / "again", cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")
    a = SentenceTransformer(str(res.run_dir), device="cpu")
    b = SentenceTransformer(str(again.run_dir), device="cpu")
    assert model_fingerprint(a) == model_fingerprint(b)


def test_other_config_in_same_run_dir_is_refused(smoke_run):
    cfg, ts, res = smoke_run
    with pytest.raises(ValueError, match="another config"):
        train(ts.examples, res.run_dir, cfg.replace(learning_rate=1e-3), mode="ins-dv")


def test_other_data_in_same_run_dir_is_refused(smoke_run, bundled_seeds):
    """A rerun on other examples (new reversals, say) must not reuse the finished model quietly."""
    cfg, ts, res = smoke_run
    other = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives, rng_seed=8)
    assert other.manifest()["sha256"] != ts.manifest()["sha256"]
    with pytest.raises(ValueError, match="trained on other data"):
        train(other.examples, res.run_dir, cfg, mode="ins-dv", manifest=other.manifest())
    same = train(
        ts.examples, res.run_dir, cfg, mode="ins-dv", manifest=ts.manifest()
    )  # the same data: reused
    assert same.seconds == 0.0 and same.steps == res.steps


def test_other_loss_in_same_run_dir_is_refused(smoke_run, tmp_path):
    """A finished relation-loss run is not an mnrl run; a record without ``loss`` counts as relation."""
    cfg, ts, res = smoke_run
    assert json.loads((res.run_dir / "ifir_run.json").read_text())["loss"] == "relation"
    with pytest.raises(ValueError, match="another config, loss or mode"):
        train(ts.examples, res.run_dir, cfg, mode="ins-dv", manifest=ts.manifest(), loss="mnrl")
    old = RunFolder(tmp_path / "old")  # a finished run written before runs recorded their loss
    old.path.mkdir()
    info = {k: v for k, v in json.loads((res.run_dir / "ifir_run.json").read_text()).items() if k != "loss"}
    old.write(info)
    (old.path / "modules.json").write_text("[]")
    with pytest.raises(ValueError, match="another config, loss or mode"):
        train(ts.examples, old.path, cfg, mode="ins-dv", manifest=ts.manifest(), loss="mnrl")
    assert train(ts.examples, old.path, cfg, mode="ins-dv", manifest=ts.manifest()).seconds == 0.0


def test_mnrl_trains_the_layers_it_records_and_says_what_it_batches(smoke_run, tmp_path, caplog):
    """``loss='mnrl'`` froze nothing under ``train_top_layers`` and recorded co-batched views it never had."""
    from sentence_transformers import SentenceTransformer

    from ifir_lib.core.models import resolve_model

    cfg, ts, _ = smoke_run
    cfg = cfg.replace(train_top_layers=1)
    with caplog.at_level("INFO"):
        res = train(ts.examples, tmp_path / "mnrl", cfg, mode="ins-dv", device="cpu", loss="mnrl")
    assert "co_batch_views=True" in caplog.text and "in_batch_negatives=False" in caplog.text  # info
    recorded = json.loads((res.run_dir / "ifir_run.json").read_text())["config"]
    assert recorded["co_batch_views"] is False and recorded["in_batch_negatives"] is True
    assert recorded["train_top_layers"] == 1
    base = SentenceTransformer(resolve_model(cfg.base_model), device="cpu")[0].auto_model.state_dict()
    trained = SentenceTransformer(str(res.run_dir), device="cpu")[0].auto_model.state_dict()
    changed = {
        k.split(".")[0] + ("." + k.split(".")[2] if ".layer." in k else "")
        for k in base
        if not base[k].equal(trained[k])
    }
    top = f"encoder.{len([k for k in base if k.endswith('attention.self.query.weight')]) - 1}"
    assert changed and all(c == top or not c.startswith(("embeddings", "encoder")) for c in changed), changed
    old = RunFolder(res.run_dir)  # a finished mnrl run recorded before: its config as given
    old.write({**old.read(), "config": dataclasses.asdict(cfg)})
    assert train(ts.examples, res.run_dir, cfg, mode="ins-dv", device="cpu", loss="mnrl").seconds == 0.0
    from ifir_lib.training.trainer import as_mnrl  # what train_modes (ifir train) passes since

    assert (
        train(ts.examples, res.run_dir, as_mnrl(cfg), mode="ins-dv", device="cpu", loss="mnrl").seconds == 0.0
    )


def _built_run(tmp_path, bundled_seeds, sha_of=None):
    """A built training set (``ifir train --data``) and a finished run folder recorded as trained
    on ``sha_of``'s examples (None: a record with no hash, as built sets had before)."""
    cfg = TrainConfig.preset("smoke")
    sets = [build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=3, rng_seed=r) for r in (0, 7)]
    tmp_path.mkdir(parents=True, exist_ok=True)
    built = save_trainset(sets[0], tmp_path / "set.jsonl")
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    data = {"source": str(built), **({"sha256": sha_of.manifest()["sha256"]} if sha_of else {})}
    config = dataclasses.asdict(mode_config(cfg, "ins-dv"))
    run.write({"mode": "ins-dv", "config": config, "loss": "relation", "data": data, "status": "finished"})
    (run.path / "modules.json").write_text("[]")
    return built, run, sets


def test_a_rebuilt_training_set_is_not_reused(tmp_path, bundled_seeds, caplog):
    """``ifir train --data built.jsonl``: the built set's examples are hashed like a set built from
    seeds, so a rewritten set is refused, never reused. A run recorded before built sets were
    hashed is reused on its own file, with a warning that it is unverified, and refused on another."""
    from ifir_lib.pipelines.train import train_modes

    kw = dict(modes=("ins-dv",), preset="smoke", flat=True, report_to="none")
    built, run, sets = _built_run(tmp_path, bundled_seeds, sha_of=None)
    with caplog.at_level("WARNING"):
        assert train_modes(run.path, seeds_path=built, **kw)["ins-dv"].seconds == 0.0
    assert "recorded before built training sets were hashed" in caplog.text
    other = save_trainset(sets[1], tmp_path / "other.jsonl")
    with pytest.raises(ValueError, match="training data cannot be compared"):
        train_modes(run.path, seeds_path=other, **kw)
    built, run, sets = _built_run(tmp_path / "b", bundled_seeds, sha_of=sets[0])
    assert train_modes(run.path, seeds_path=built, **kw)["ins-dv"].seconds == 0.0  # the same examples
    save_trainset(sets[1], built)  # rebuilt in place with other seeds
    with pytest.raises(ValueError, match="trained on other data"):
        train_modes(run.path, seeds_path=built, **kw)


def test_a_run_killed_before_its_first_checkpoint_starts_its_log_anew(tmp_path):
    """No checkpoint to resume from: training starts at step 0, so the earlier lines are dropped."""
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.train_log.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in (1, 2)))
    assert _resume_point(run, rank=1) is None and run.last_step() == 2  # other ranks leave the log
    assert _resume_point(run, rank=0) is None and run.read_log() == []


def test_non_finite_loss_stops_and_keeps_checkpoint(bundled_seeds, tmp_path):
    cfg = TrainConfig.preset("smoke", learning_rate=1e30, save_steps=1, max_steps=6)
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives)
    with pytest.raises(NonFiniteLossError, match="last good checkpoint: .*checkpoint-"):
        train(ts.examples, tmp_path / "nan", cfg, mode="ins-dv", device="cpu")
    info = json.loads((tmp_path / "nan" / "ifir_run.json").read_text())
    assert info["status"].startswith("stopped: non-finite loss")
    assert Path(info["last_checkpoint"]).exists() and not (tmp_path / "nan" / "modules.json").exists()


def _train_args(out, budget, *extra):
    """``ifir train`` arguments for a smoke Ins-DV run into ``out``."""
    return [
        "-m",
        "ifir_lib",
        "train",
        "--mode",
        "ins-dv",
        "--preset",
        "smoke",
        "--budget",
        str(budget),
        "--out",
        str(out),
        *extra,
    ]


def _train_cmd(out, *extra):
    return [sys.executable, *_train_args(out, 16, *extra)]


@pytest.mark.slow
def test_killed_run_resumes_from_last_checkpoint(tmp_path):
    out = tmp_path / "run"
    cmd = _train_cmd(out, "--max-steps", "4", "--save-steps", "2")
    proc = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 240
    while not (out / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "run ended before its first checkpoint"
        time.sleep(0.5)
    time.sleep(1.0)  # let the checkpoint's files finish writing
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "modules.json").exists()
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming" in done.stderr
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 4  # one line per step, none duplicated
    info = json.loads((out / "ifir_run.json").read_text())
    assert info["steps"] == 4 and info["batch_order"] == 2  # a later resume checks it
    losses = [json.loads(line)["loss"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert info["train_loss"] == pytest.approx(sum(losses) / 4)  # every step's, not the resumed two's


@pytest.mark.slow
def test_ddp_two_processes_on_cpu_train_one_run_together(tmp_path):
    """Real DistributedDataParallel on CPU (gloo): before, torchrun without ACCELERATE_USE_CPU ran two
    whole trainings into one folder (every log line twice) and agreed trivially, and real DDP
    stopped at step 2 on BERT's unused pooler."""
    out = tmp_path / "ddp"
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--nproc_per_node", "2", *_train_args(out, 32, "--max-steps", "2")]
    done = subprocess.run(
        cmd, env={**ENV, "ACCELERATE_USE_CPU": "true"}, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and log[-1]["epoch"] == 1.0  # 32 examples, 2 x 8 a step
    assert json.loads((out / "ifir_run.json").read_text())["world_size"] == 2
    prints = [(out / f"rank{r}.fingerprint").read_text() for r in (0, 1)]
    assert prints[0] == prints[1]
    from sentence_transformers import SentenceTransformer

    from ifir_lib.core.models import model_fingerprint

    saved = SentenceTransformer(str(out), device="cpu")
    saved.max_seq_length = TrainConfig.preset("smoke").max_seq_length  # as trained, before it was saved
    assert model_fingerprint(saved) == prints[0]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _kill_tree(proc: subprocess.Popen, wait_s: float = 30.0) -> None:
    """Kill ``proc``'s children (torchrun starts its workers in sessions of their own), then its
    process group, and wait for them, ``wait_s`` at most."""
    workers = _children(proc.pid)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=wait_s)
    deadline = time.time() + wait_s
    while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers):
        assert time.time() < deadline, f"processes {workers} still alive {wait_s} s after SIGKILL"
        time.sleep(0.2)


def _run(cmd: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a session of its own, whose processes are all killed when it times out
    (``subprocess.run`` kills the command only, not torchrun's workers)."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.returncode is None:
            _kill_tree(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_a_timed_out_command_s_processes_are_all_killed():
    """The DDP test left torchrun's workers running when it failed or timed out: a child in a
    session of its own (as torchrun's workers are) must go too."""
    with pytest.raises(subprocess.TimeoutExpired):
        _run(["bash", "-c", "setsid sleep 317 & sleep 317"], dict(os.environ), 3)
    gone = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _cmdline(p) == "sleep\x00317\x00"]
    assert not [p for p in gone if "Z" not in _state(int(p.parent.name))]


def _cmdline(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.slow
def test_ddp_run_resumed_in_a_later_epoch_trains_that_epochs_batches(tmp_path):
    """A DDP run resumed inside epoch 1 trained epoch 0's batch order (accelerate wraps the sampler
    twice on a resume, and nothing set its epoch): some seeds twice in that epoch, others never.
    Resumed, every step's loss is the uninterrupted run's. 32 examples, 2 x 8 a step: 2 steps an
    epoch, checkpoint-3 at epoch 1.5."""
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**ENV, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}

    def cmd(out):
        args = _train_args(out, 32, "--max-steps", "8", "--save-steps", "3")
        return [str(torchrun), "--standalone", "--nproc_per_node", "2", *args]

    def losses(out):
        return [json.loads(x)["loss"] for x in (out / "train_log.jsonl").read_text().splitlines()]

    whole, cut = tmp_path / "whole" / "run", tmp_path / "cut" / "run"
    done = _run(cmd(whole), env, 600)
    assert done.returncode == 0, done.stderr[-3000:]
    proc = subprocess.Popen(
        cmd(cut), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        ckpt, deadline = cut / "checkpoints" / "checkpoint-3", time.time() + 400
        while not all((ckpt / f).exists() for f in ("trainer_state.json", "rng_state_1.pth")):
            assert proc.poll() is None and time.time() < deadline, "run ended before checkpoint-3"
            time.sleep(0.5)
        time.sleep(1.0)  # let the checkpoint's files finish writing
    finally:
        _kill_tree(proc)  # torchrun's workers outlive a kill of its own process group
    assert not (cut / "modules.json").exists(), "the run finished before it was killed"
    done = _run(cmd(cut), env, 600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stderr
    assert losses(cut) == pytest.approx(losses(whole), rel=1e-4)


def test_processes_that_would_not_train_together_and_resumes_under_another_count_are_refused(tmp_path):
    """torchrun on a CPU without ACCELERATE_USE_CPU: each process trained the whole run alone into
    one folder. A run resumed under another number of processes skips or repeats data."""
    from types import SimpleNamespace

    from transformers.training_args import ParallelMode

    from ifir_lib.training.trainer import _check_distributed, _check_resume_world

    with pytest.raises(ValueError, match="WORLD_SIZE=2 processes, but training would not be distributed"):
        _check_distributed(SimpleNamespace(parallel_mode=ParallelMode.NOT_PARALLEL), 2)
    _check_distributed(SimpleNamespace(parallel_mode=ParallelMode.NOT_PARALLEL), 1)
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.start({"mode": "ins-dv", "world_size": 1}, "abc")
    with pytest.raises(ValueError, match=r"written by 1 process\(es\); resume it with 1 \(now 2\)"):
        _check_resume_world(run, 2)
    _check_resume_world(run, 1)
    run.write({"mode": "ins-dv"})  # recorded before runs kept their world size: not checked
    _check_resume_world(run, 2)


def test_a_whole_checkpoint_resumed_under_another_process_count_is_refused_not_set_aside(tmp_path):
    """Rank parts are judged by the world that resumes: a 1-process checkpoint (``rng_state.pth``)
    rerun under 2 processes lacks ``rng_state_0/1.pth``, and was moved aside as cut, the run
    starting again at step 0, where the world check refuses it (review 49b)."""
    from ifir_lib.training.trainer import _resuming

    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.start({"mode": "ins-dv", "world_size": 1}, "abc")
    ckpt = run.checkpoints_dir / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text('{"global_step": 2}')
    (ckpt / "rng_state.pth").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"written by 1 process\(es\); resume it with 1 \(now 2\)"):
        _resuming(run, 2)
    assert [c.name for c in run.checkpoints()] == ["checkpoint-2"]
    assert _resuming(run, 1)
    run.write({"mode": "ins-dv"})  # a record from before runs kept their world size: its files tell
    with pytest.raises(ValueError, match=r"written by 1 process\(es\)"):
        _resuming(run, 2)
    (ckpt / "rng_state.pth").unlink()
    for r in (0, 1):
        (ckpt / f"rng_state_{r}.pth").write_bytes(b"x")
    assert _resuming(run, 2)


def test_a_resumed_run_keeps_its_first_start_and_lists_the_resumes(tmp_path, caplog):
    """Resumed under newer code, the record said only the new commit and start time."""
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.start({"mode": "ins-dv"}, "commit-old")
    first = run.info()["started"]
    with caplog.at_level("WARNING"):
        run.start({"mode": "ins-dv"}, "commit-new", resuming=True)
    info = run.info()
    assert (info["git_commit"], info["started"]) == ("commit-old", first)
    assert [r["git_commit"] for r in info["resumes"]] == ["commit-new"]
    assert "resumed under commit commit-new; its earlier steps ran commit-old" in caplog.text
    run.start({"mode": "ins-dv"}, "commit-new")  # not a resume (no checkpoint): a new start
    assert run.info()["git_commit"] == "commit-new" and "resumes" not in run.info()


def test_a_built_set_refuses_what_only_building_uses_and_another_modes_label(tmp_path, bundled_seeds):
    """A built set is read as it is: ``--reversals``, ``--curation`` and ``--budget`` would be
    ignored without a word, and a built ins-orig set trained as ins-dv would carry a false label."""
    from ifir_lib.pipelines.train import train_modes

    kw = dict(preset="smoke", flat=True, report_to="none", dry_run=True)
    orig = save_trainset(
        build_trainset("ins-orig", bundled_seeds, budget=8, num_negatives=3), tmp_path / "o.jsonl"
    )
    dv = save_trainset(
        build_trainset("ins-dv", bundled_seeds, budget=8, num_negatives=3), tmp_path / "d.jsonl"
    )
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text("")
    for given, flag in (
        (dict(budget=4), "--budget"),
        (dict(curation_path=decisions), "--curation"),
        (dict(narrative_share=0.0), "--narrative-share"),
    ):
        with pytest.raises(ValueError, match=f"built training set .*{flag}"):
            train_modes(tmp_path / "r", modes=("ins-dv",), seeds_path=dv, **given, **kw)
    with pytest.raises(ValueError, match=r"views \['orig'\] cannot train ins-dv"):
        train_modes(tmp_path / "r", modes=("ins-dv",), seeds_path=orig, **kw)
    assert train_modes(tmp_path / "r", modes=("ins-dv",), seeds_path=dv, **kw)["ins-dv"]["examples"] == 8


def test_seeds_with_another_toolkits_negatives_field_are_seeds_not_a_built_set(tmp_path):
    """Rows with ``instruction_negatives`` and ``negatives`` (another toolkit's hard negatives) were
    read as a built set: one example per seed, no reversed view, under an ins-dv label."""
    from ifir_lib.pipelines.train import train_modes

    rows = [make_seed(i) for i in range(12)]
    for r in rows:
        r["negatives"] = r.pop("hard_negatives")
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"seeds.jsonl:1: field 'negatives'.*did you mean 'hard_negatives'"):
        train_modes(
            tmp_path / "r", modes=("ins-dv",), seeds_path=path, preset="smoke", flat=True, dry_run=True
        )


def test_a_finished_run_drops_its_checkpoints_unless_asked_to_keep_them(tmp_path, bundled_seeds):
    """Checkpoints only resume an unfinished run: a finished one kept ~350 MB of them per run."""
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=3)
    cfg = TrainConfig.preset("smoke", max_steps=2, save_steps=1)
    dropped = train(ts.examples, tmp_path / "a", cfg, mode="ins-dv", manifest=ts.manifest(), report_to="none")
    kept = train(
        ts.examples,
        tmp_path / "b",
        cfg,
        mode="ins-dv",
        manifest=ts.manifest(),
        report_to="none",
        keep_checkpoints=True,
    )
    assert not (dropped.run_dir / "checkpoints").exists() and RunFolder(dropped.run_dir).is_finished()
    assert RunFolder(dropped.run_dir).info()["checkpoints"] == "removed when the run finished"
    assert [p.name for p in RunFolder(kept.run_dir).checkpoints()] == ["checkpoint-1", "checkpoint-2"]
    assert train(ts.examples, tmp_path / "a", cfg, mode="ins-dv", manifest=ts.manifest()).seconds == 0.0


def test_a_checkpoint_cut_while_it_was_saved_is_set_aside_and_the_one_before_resumed(tmp_path, caplog):
    """A kill during a checkpoint's save left ``checkpoint-4`` without ``trainer_state.json``:
    every rerun failed on it with a FileNotFoundError instead of resuming from ``checkpoint-2``."""
    from ifir_lib.training.trainer import _resume_point

    run = RunFolder(tmp_path / "run")
    for step, whole in ((2, True), (4, False)):
        ckpt = run.checkpoints_dir / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").write_bytes(b"w")
        if whole:
            (ckpt / "trainer_state.json").write_text("{}")
    with caplog.at_level("WARNING"):
        assert _resume_point(run, rank=0) == str(run.checkpoints_dir / "checkpoint-2")
    assert [c.name for c in run.checkpoints()] == ["checkpoint-2"]
    assert (run.checkpoints_dir / ".cut-checkpoint-4" / "model.safetensors").exists()
    assert "checkpoint-4 was cut while it was saved" in caplog.text


def test_a_ddp_checkpoint_missing_another_rank_s_part_is_set_aside(tmp_path, caplog):
    """Rank 0 writes ``trainer_state.json`` without waiting for the other ranks: a checkpoint whose
    rank 1 was killed before its ``rng_state_1.pth`` resumed as whole, that rank's random state
    silently not restored. Under 2 processes it is cut; one process never writes rank files."""
    from ifir_lib.training.trainer import _resume_point

    run = RunFolder(tmp_path / "run")
    for step, files in ((2, ("rng_state_0.pth", "rng_state_1.pth")), (4, ("rng_state_0.pth",))):
        ckpt = run.checkpoints_dir / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        for name in ("trainer_state.json", *files):
            (ckpt / name).write_text("{}")
    with caplog.at_level("WARNING"):
        assert _resume_point(run, rank=1, world=2) == str(run.checkpoints_dir / "checkpoint-2")
        assert [c.name for c in run.checkpoints()] == ["checkpoint-2", "checkpoint-4"]  # rank 0 moves it
        assert _resume_point(run, rank=0, world=2) == str(run.checkpoints_dir / "checkpoint-2")
    assert [c.name for c in run.checkpoints()] == ["checkpoint-2"]
    assert "checkpoint-4 was cut while it was saved (no rng_state_1.pth)" in caplog.text
    (run.checkpoints_dir / "checkpoint-6").mkdir()
    (run.checkpoints_dir / "checkpoint-6" / "trainer_state.json").write_text("{}")
    assert _resume_point(run, rank=0) == str(run.checkpoints_dir / "checkpoint-6")  # one process


def test_a_launcher_s_mixed_precision_that_the_config_does_not_ask_for_is_refused(
    tmp_path, monkeypatch, bundled_seeds
):
    """``accelerate launch --config_file launch/accelerate_ddp_8gpu.yaml`` exports its
    ``mixed_precision: bf16``: a bf16=False config (smoke) trained under bf16 autocast, its record
    saying bf16=False. A bf16 config under the same variable trains as it asks."""
    cfg = TrainConfig.preset("smoke", max_steps=1)
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    with pytest.raises(ConfigError, match=r"ACCELERATE_MIXED_PRECISION=bf16 .* bf16=False"):
        train(ts.examples, tmp_path / "run", cfg, mode="ins-dv", manifest=ts.manifest(), report_to="none")
    assert not (tmp_path / "run" / "train_log.jsonl").exists()
    from ifir_lib.training.trainer import _check_precision

    _check_precision(TrainConfig.preset("paper"))  # what the paper preset asks for
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    with pytest.raises(ConfigError, match=r"=fp16 .* bf16=True") as e:
        _check_precision(TrainConfig.preset("paper"))
    # on a GPU with bf16 a bf16 config overrides the variable: the refusal says where it would not
    assert "on a GPU without bf16, or on the CPU, it would train in fp16 and record bf16=True" in str(e.value)


def test_training_into_the_base_model_or_another_model_s_folder_is_refused(tmp_path, minilm):
    """``--base-model DIR --out DIR`` fine-tuned the base in place: every later run from DIR
    started from the fine-tuned model, and the run named itself as its base."""
    from ifir_lib.core.errors import ConfigError
    from ifir_lib.training.trainer import _check_new_folder

    base = tmp_path / "mybase"
    minilm.save(str(base))
    with pytest.raises(ConfigError, match="--out is the base model's own folder"):
        _check_new_folder(RunFolder(base), str(base))
    with pytest.raises(ConfigError, match="holds a model but no run record"):
        _check_new_folder(RunFolder(base), "minilm")
    _check_new_folder(RunFolder(tmp_path / "fresh"), str(base))  # a new folder: fine
    weights = (base / "model.safetensors").read_bytes()
    argv = ["train", "--mode", "ins-dv", "--preset", "smoke", "--max-steps", "1", "--report-to", "none"]
    assert main([*argv, "--base-model", str(base), "--out", str(base)]) == 2  # through the command
    assert (base / "model.safetensors").read_bytes() == weights


def test_a_built_set_needs_each_seeds_views_once_and_each_example_id_once(tmp_path, bundled_seeds):
    """The union of views alone passed an ins-dv set concatenated with an ins-orig one (half its
    seeds without a reversed view, recorded as ins-dv) and one whose dv rows were partly deleted;
    one set built twice in two instruction forms trained one seed's example id twice."""
    from ifir_lib.pipelines.train import train_modes

    kw = dict(preset="smoke", flat=True, report_to="none", dry_run=True, modes=("ins-dv",))
    dv = build_trainset("ins-dv", bundled_seeds[:600], budget=8, num_negatives=3)
    orig = build_trainset("ins-orig", bundled_seeds[600:], budget=8, num_negatives=3)
    both = tmp_path / "dv_orig.jsonl"
    both.write_text("".join(json.dumps(e) + "\n" for e in [*dv.examples, *orig.examples]))
    with pytest.raises(ConfigError, match=r"8 of 12 seeds \(groups\) do not hold ins-dv's views"):
        train_modes(tmp_path / "r", seeds_path=both, **kw)
    cut = tmp_path / "cut.jsonl"  # the dv rows that failed `ifir verify` deleted by hand
    cut.write_text("".join(json.dumps(e) + "\n" for e in dv.examples if e["id"] != dv.examples[1]["id"]))
    with pytest.raises(ConfigError, match=r"1 of 4 seeds .* with \['orig'\]"):
        train_modes(tmp_path / "r", seeds_path=cut, **kw)
    forms = [
        build_trainset("ins-dv", bundled_seeds, budget=8, num_negatives=3, narrative_share=share)
        for share in (1.0, 0.0)
    ]
    twice = tmp_path / "two_forms.jsonl"
    twice.write_text("".join(json.dumps(e) + "\n" for ts in forms for e in ts.examples))
    changed = next(n for n, (a, b) in enumerate(zip(*(ts.examples for ts in forms))) if a != b)
    with pytest.raises(
        DataError,
        match=rf"two_forms\.jsonl:{9 + changed}: field 'id': example id '.*::(orig|dv)' is on line ",
    ):
        train_modes(tmp_path / "r", seeds_path=twice, **kw)
    assert train_modes(tmp_path / "r", seeds_path=save_trainset(dv, tmp_path / "d.jsonl"), **kw)


def test_training_sets_are_the_sets_train_modes_trains():
    """``training_sets`` reads ``train_modes``' own arguments and defaults (one signature)."""
    from ifir_lib.pipelines.train import training_sets

    sets = training_sets(("ins-orig", "ins-dv"), preset="cpu", budget=80)
    assert {m: t.counts["seeds_used"] for m, t in sets.items()} == {"ins-orig": 80, "ins-dv": 40}
    with pytest.raises(TypeError, match="buget"):
        training_sets(("ins-dv",), preset="cpu", buget=80)


def test_a_run_from_other_base_content_under_the_same_path_is_neither_copied_nor_reused(
    tmp_path, minilm, monkeypatch
):
    """``--base-model ./mybase`` named the base by its string: a new checkpoint put in ``./mybase``
    got a copy of the finished sibling trained from the old one, recorded as "same examples and
    config", and a rerun into the old run's folder found it finished."""
    import copy

    import torch

    from ifir_lib.pipelines.train import train_modes
    from ifir_lib.training.trainer import _check_rerun

    monkeypatch.chdir(tmp_path)
    minilm.save("mybase")
    kw = dict(preset="smoke", rng_seed=0, max_steps=1, report_to="none", base_model="./mybase")
    kw.update(batch_size=2, max_seq_length=16, num_negatives=1)  # fast: what is checked is the base
    train_modes("runs", modes=("ins-dv",), budget=22, **kw)
    first = RunFolder("runs/ins-dv").info()
    assert first["base_model"] == str(tmp_path / "mybase") and first["config"]["base_model"] == "./mybase"
    other = copy.deepcopy(minilm)
    with torch.no_grad():
        next(other.parameters()).mul_(1.5)
    other.save("mybase")  # another checkpoint in the same folder
    train_modes("runs", modes=("all-dv",), budget=12, **kw)  # ins-dv's examples, the other base
    info = RunFolder("runs/all-dv").info()
    assert "same_as" not in info and info["base_model_sha256"] != first["base_model_sha256"]
    with pytest.raises(ConfigError, match="trained from other base model content"):
        train_modes("runs", modes=("ins-dv",), budget=22, **kw)
    # a record written before runs kept the digest is accepted in its own folder (not retrained)
    old = RunFolder("runs/ins-dv")
    old.write({k: v for k, v in first.items() if k != "base_model_sha256"})
    assert _check_rerun(old, first["config"], "ins-dv", first["data"], base_sha=info["base_model_sha256"])


def test_training_names_the_base_model_s_stored_prompts_it_replaces(tmp_path, minilm, bundled_seeds, caplog):
    """An E5-style base (``query: `` / ``passage: ``) was trained and scored without its prefixes,
    and its base row with them, without a word."""
    import copy

    from ifir_lib.training.trainer import _model_and_data

    e5 = copy.deepcopy(minilm)
    e5.prompts = {"query": "query: ", "passage": "passage: "}
    e5.save(str(tmp_path / "e5like"))
    cfg = TrainConfig.preset("smoke", base_model=str(tmp_path / "e5like"))
    ts = build_trainset("ins-dv", bundled_seeds, budget=4, num_negatives=cfg.num_negatives)
    with caplog.at_level("WARNING"):
        model = _model_and_data(cfg, ts.examples, "relation", "cpu")[0]
    assert model.prompts == {"query": "", "document": ""}  # the training prompts, as before
    said = "stores the prompts {'query': 'query: ', 'passage': 'passage: '}; training replaces them"
    assert said in caplog.text and "TrainConfig(query_prompt=..., document_prompt=...)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        _model_and_data(
            cfg.replace(query_prompt="query: ", document_prompt="passage: "), ts.examples, "relation", "cpu"
        )
    assert "training replaces them" not in caplog.text


def test_a_resumed_run_s_loss_weights_each_logged_mean_by_the_steps_it_covers(tmp_path, caplog):
    """Logged every 10 steps, resumed from step 25: the row at 30 is the mean of steps 26-30."""
    from ifir_lib.training.trainer import _run_loss

    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.start({"mode": "ins-dv"}, "abc")
    run.update(resumes=[{"git_commit": "abc", "started": "now"}])
    rows = [(10, 0, 1.0), (20, 10, 2.0), (25, 20, 3.0), (30, 25, 4.0)]  # the kill lost no logged step
    run.train_log.write_text(
        "".join(json.dumps({"step": s, "since": a, "loss": v}) + "\n" for s, a, v in rows)
    )
    assert _run_loss(run, 9.9, 30) == pytest.approx((10 * 1 + 10 * 2 + 5 * 3 + 5 * 4) / 30)
    run.train_log.write_text(
        "".join(json.dumps({"step": s, "since": a, "loss": v}) + "\n" for s, a, v in rows[:2] + rows[3:])
    )
    with caplog.at_level("WARNING"):  # steps 21-25 were logged by no row: the session's loss, said
        assert _run_loss(run, 9.9, 30) == 9.9
    assert "covers only the steps since the last resume" in caplog.text


def test_a_built_set_whose_original_views_lack_n_star_is_warned_about(tmp_path, bundled_seeds, caplog):
    """A set built and saved before the original view kept N* under a cut to num_negatives trained
    P+ against the first instruction negative while its dv view swapped P+ and N*, without a word."""
    from ifir_lib.pipelines.train import train_modes

    kw = dict(preset="smoke", flat=True, report_to="none", dry_run=True, modes=("ins-dv",), num_negatives=1)
    seeds = [s for s in bundled_seeds if s["reference_negative_index"] != 0][:20]
    by_id = {s["id"]: s for s in seeds}
    ts = build_trainset("ins-dv", seeds, budget=8, num_negatives=1)
    old = [  # the original view as built before: the seed's order, cut to one negative
        {**e, "negatives": by_id[e["group"]]["instruction_negatives"][:1]} if e["view"] == "orig" else e
        for e in ts.examples
    ]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(e) + "\n" for e in old))
    with caplog.at_level("WARNING"):
        train_modes(tmp_path / "r", seeds_path=save_trainset(ts, tmp_path / "new.jsonl"), **kw)
        assert "lacks N*" not in caplog.text
        train_modes(tmp_path / "r", seeds_path=tmp_path / "old.jsonl", **kw)
    assert "old.jsonl: 4 of 4 seeds' original view (e.g. " in caplog.text and "lacks N*" in caplog.text


def _one_step_from(base, seeds, out):
    """One smoke step of Ins-DV from the base model saved at ``base``, into ``out``."""
    cfg = TrainConfig.preset("smoke", base_model=str(base), max_steps=1)
    ts = build_trainset("ins-dv", seeds, budget=8, num_negatives=cfg.num_negatives)
    return train(ts.examples, out, cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")


def test_a_base_declaring_dot_is_saved_declaring_the_cosine_it_was_trained_with(
    tmp_path, minilm, bundled_seeds, caplog
):
    """A TAS-B-like base (no Normalize module, ``similarity_fn_name='dot'``) was trained with the
    cosine loss and saved still declaring ``dot``: mteb and plain sentence-transformers then scored
    the trained model by dot product (v1 p-MRR -2.32 against -5.34 by cosine), without a word."""
    from sentence_transformers import SentenceTransformer

    dot = SentenceTransformer(modules=[minilm[0], minilm[1]], device="cpu", similarity_fn_name="dot")
    dot.save(str(tmp_path / "dotbase"))
    with caplog.at_level("WARNING"):
        res = _one_step_from(tmp_path / "dotbase", bundled_seeds, tmp_path / "run")
    assert "declares similarity 'dot'; training optimises cosine" in caplog.text
    assert SentenceTransformer(str(res.run_dir), device="cpu").similarity_fn_name == "cosine"
    assert SentenceTransformer(str(tmp_path / "dotbase"), device="cpu").similarity_fn_name == "dot"


def test_a_base_s_default_prompt_that_training_replaces_leaves_a_loadable_run(
    tmp_path, minilm, bundled_seeds, caplog
):
    """A base naming one of the prompts training replaces as its ``default_prompt_name`` trained to
    the end, then neither sentence-transformers nor ``load_model`` could open the run folder."""
    import copy

    from sentence_transformers import SentenceTransformer

    base = copy.deepcopy(minilm)
    base.prompts = {"query": "query: ", "retrieval": "Represent this for retrieval: "}
    base.default_prompt_name = "retrieval"
    base.save(str(tmp_path / "withdefault"))
    with caplog.at_level("WARNING"):
        res = _one_step_from(tmp_path / "withdefault", bundled_seeds, tmp_path / "run")
    assert "names 'retrieval' as its default prompt; training replaces that prompt" in caplog.text
    loaded = SentenceTransformer(str(res.run_dir), device="cpu")
    assert loaded.default_prompt_name is None and loaded.prompts == {"query": "", "document": ""}


def test_a_built_set_trained_with_fewer_negatives_keeps_n_star_in_its_original_view(tmp_path, bundled_seeds):
    """A set built at 3 negatives (N* kept in seed order, as instruction negative 1 or 2) and trained
    at num_negatives 1 cut N* from every original view: P+ trained against another instruction
    negative while the dv view swapped P+ and N*. It is moved first now, as building at 1 does."""
    from ifir_lib.pipelines.train import training_sets

    seeds = [s for s in bundled_seeds if s["reference_negative_index"] != 0][:20]
    built = build_trainset("ins-dv", seeds, budget=8, num_negatives=3)
    path = save_trainset(built, tmp_path / "built_k3.jsonl")
    kw = dict(seeds_path=path, preset="smoke")
    ex = training_sets(("ins-dv",), num_negatives=1, **kw)["ins-dv"].examples
    n_star = {e["group"]: e["positive"]["id"] for e in ex if e["view"] == "dv"}
    origs = [e for e in ex if e["view"] == "orig"]
    assert len(origs) == 4 and all(e["negatives"][0]["id"] == n_star[e["group"]] for e in origs)
    assert all(len(e["negatives"]) == 3 for e in origs)  # moved first, none dropped
    # where the cut keeps N*, the rows are the file's as they are (same data sha)
    kept = training_sets(("ins-dv",), num_negatives=3, **kw)["ins-dv"]
    assert kept.examples == built.examples and kept.manifest()["sha256"] == built.manifest()["sha256"]


def test_training_with_in_batch_negatives_warns_of_co_batched_seeds_sharing_a_query(tmp_path, caplog):
    """The count was tested on its own; training must call it (with in-batch negatives on, on rank
    0) or a run co-batching two seeds of one query pushes each one's passages away without a word."""
    from ifir_lib.testing.inputs import make_seed

    seeds = [make_seed(i) for i in range(6)]
    seeds[1] = {**seeds[1], "query": "  " + seeds[0]["query"].upper()}
    cfg = TrainConfig.preset("smoke", batch_size=16, max_steps=1, num_negatives=2, in_batch_negatives=True)
    ts = build_trainset("ins-dv", seeds, budget=12, num_negatives=2, negative_audit=None)
    with caplog.at_level("WARNING"):
        train(ts.examples, tmp_path / "run", cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")
    assert "in-batch negatives: 1 times over 1 steps a batch holds two seeds with one query" in caplog.text


def test_a_length_past_the_backbone_s_positions_is_capped_with_a_warning(tmp_path, bundled_seeds, caplog):
    """``save_max_seq_length`` 1024 on MiniLM (512 positions) was recorded as 1024 in ifir_run.json
    while every loader read 512; ``max_seq_length`` 1024 let a long text overrun the positions. Both
    are capped at the positions, with a warning, and the record says what loaders read. A RoBERTa-style
    backbone's positions start after its padding index: 514 positions read 512 tokens."""
    import types

    from sentence_transformers import SentenceTransformer
    from transformers import RobertaConfig, RobertaModel

    ts = build_trainset("ins-orig", bundled_seeds, budget=8, num_negatives=1)
    cfg = TrainConfig.preset(
        "smoke", max_steps=1, num_negatives=1, max_seq_length=1024, save_max_seq_length=1024
    )
    with caplog.at_level("WARNING"):
        res = train(
            ts.examples, tmp_path / "run", cfg, mode="ins-orig", manifest=ts.manifest(), report_to="none"
        )
    assert "save_max_seq_length 1024 is more than the backbone's 512 positions" in caplog.text
    assert "max_seq_length (training) 1024 is more than the backbone's 512 positions" in caplog.text
    info = RunFolder(res.run_dir).info()
    assert (
        info["config"]["max_seq_length"] == 1024 and info["trained_max_seq_length"] == 512
    )  # as given; used
    assert (
        info["saved_max_seq_length"]
        == 512
        == SentenceTransformer(str(res.run_dir), device="cpu").max_seq_length
    )
    tiny = RobertaConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8
    )
    tiny.max_position_embeddings = 514
    from ifir_lib.training.trainer import max_positions

    assert max_positions([types.SimpleNamespace(auto_model=RobertaModel(tiny))]) == 512
    from ifir_lib.core.models import build_model
    from ifir_lib.training.trainer import saved_length

    at_128 = build_model("minilm", max_seq_length=128, pooling="mean", device="cpu")
    assert saved_length(at_128, cfg) == 512  # what the held-out evaluations read: capped as the save is
