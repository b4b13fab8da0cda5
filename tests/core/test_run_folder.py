"""RunFolder: the run record, logs and the search for runs, on hand-made folders."""

import json

from ifir_lib.core.run_folder import RunFolder


def test_trim_logs_survives_a_cut_last_line(tmp_path):
    """A run killed mid-write leaves a cut log line; resuming trims the log without a traceback."""
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    lines = [json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3)]
    run.train_log.write_text("".join(lines) + '{"step": 4, "lo')
    run.trim_logs(2)
    assert [r["step"] for r in run.read_log()] == [1, 2]
    assert run.train_log.read_text().endswith("\n")


def test_find_sees_runs_not_checkpoints_and_filters_by_saved_model(tmp_path):
    for name in ("a", "b", "a/checkpoints/checkpoint-1"):
        RunFolder(tmp_path / name).path.mkdir(parents=True, exist_ok=True)
        RunFolder(tmp_path / name).write({"mode": "ins-dv", "status": "running"})
    (tmp_path / "b" / "modules.json").write_text("[]")
    assert [r.path.name for r in RunFolder.find(tmp_path)] == ["a", "b"]
    assert [r.path.name for r in RunFolder.find(tmp_path, with_model=True)] == ["b"]
    assert RunFolder(tmp_path / "a").info()["mode"] == "ins-dv" and RunFolder(tmp_path / "none").info() == {}


def test_record_failure_marks_only_a_running_run(tmp_path):
    run = RunFolder(tmp_path)
    run.write({"status": "running"})
    run.record_failure(ValueError("bad thing\nmore"))
    assert run.status() == ("failed", "failed: ValueError: bad thing")
    run.write({"status": "finished"})
    run.record_failure(KeyboardInterrupt())
    assert run.info()["status"] == "finished"


BASE = {"base_model": "/m/base", "base_model_sha256": "b1"}


def _finished(path, **record):
    run = RunFolder(path)
    run.path.mkdir(parents=True)
    run.write(
        {
            "mode": "ins-dv",
            "config": {"lr": 1},
            "data": {"sha256": "abc"},
            "status": "finished",
            **BASE,
            **record,
        }
    )
    (run.path / "modules.json").write_text("[]")
    return run


def test_a_sibling_trained_with_another_loss_is_not_copied(tmp_path):
    """An mnrl ins-dv run is no relation-loss all-dv run, however alike their examples and config."""
    _finished(tmp_path / "ins-dv", loss="mnrl")
    target = RunFolder(tmp_path / "all-dv")
    assert (
        target.copy_finished_sibling("all-dv", {"lr": 1}, {"sha256": "abc"}, loss="relation", base=BASE)
        is None
    )
    assert not target.path.exists()
    copied = target.copy_finished_sibling("all-dv", {"lr": 1}, {"sha256": "abc"}, loss="mnrl", base=BASE)
    assert copied == "ins-dv" and target.info()["loss"] == "mnrl" and target.info()["mode"] == "all-dv"


def test_a_sibling_recorded_without_a_loss_counts_as_relation(tmp_path):
    _finished(tmp_path / "ins-dv")  # written before runs recorded their loss
    assert (
        RunFolder(tmp_path / "a").copy_finished_sibling(
            "all-dv", {"lr": 1}, {"sha256": "abc"}, "mnrl", base=BASE
        )
        is None
    )
    assert (
        RunFolder(tmp_path / "b").copy_finished_sibling("all-dv", {"lr": 1}, {"sha256": "abc"}, base=BASE)
        == "ins-dv"
    )


def test_a_sibling_is_copied_only_from_the_same_base_content(tmp_path):
    """The config names the base by the string given: ``./mybase`` from two project folders, or a
    folder replaced between two runs, was copied as the same run. A record from before runs kept
    the digest has an unknown base: not copied (the run trains)."""
    _finished(tmp_path / "ins-dv")
    other = {"base_model": "/n/base", "base_model_sha256": "b2"}
    target = RunFolder(tmp_path / "all-dv")
    assert target.copy_finished_sibling("all-dv", {"lr": 1}, {"sha256": "abc"}, base=other) is None
    assert target.copy_finished_sibling("all-dv", {"lr": 1}, {"sha256": "abc"}, base=BASE) == "ins-dv"
    assert target.info()["base_model"] == "/m/base" and target.info()["same_as"] == "ins-dv"
    old = _finished(tmp_path / "old" / "ins-dv")
    old.write({k: v for k, v in old.info().items() if k != "base_model_sha256"})  # recorded before it
    assert (
        RunFolder(tmp_path / "old" / "all-dv").copy_finished_sibling(
            "all-dv", {"lr": 1}, {"sha256": "abc"}, base=BASE
        )
        is None
    )
    hub = {"base_model": "org/model", "base_model_sha256": None}  # a hub name: the config compares it
    _finished(tmp_path / "hub" / "ins-dv", **hub)
    assert (
        RunFolder(tmp_path / "hub" / "all-dv").copy_finished_sibling(
            "all-dv", {"lr": 1}, {"sha256": "abc"}, base=hub
        )
        == "ins-dv"
    )


def test_a_lock_line_whose_pid_was_reused_is_no_holder(tmp_path):
    """A kill -9 leaves 'pid N on HOST since T' in the lock; once N belongs to a process started
    after T, the dead run read as running."""
    import os
    import socket
    import subprocess
    import time

    from ifir_lib.core.locks import lock_path

    run = RunFolder(tmp_path / "run")
    line = lambda pid, t: (
        f"pid {pid} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S', t)}\n"
    )  # noqa: E731
    lock_path(run.path).write_text(line(os.getpid(), time.localtime()))
    assert run.lock_holder()  # this process, alive, started before its line
    other = subprocess.Popen(["sleep", "30"])
    try:
        lock_path(run.path).write_text(line(other.pid, time.localtime()))
        os.utime(lock_path(run.path), (time.time() - 3600,) * 2)  # the line written an hour ago
        assert run.lock_holder() is None  # started an hour after the line: another process
    finally:
        other.kill()
