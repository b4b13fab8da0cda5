"""One writer per output: two real processes on one synthesis output, one run folder, one table."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import OPENAI_KEY

from ifir_lib.core.errors import OutputLocked
from ifir_lib.core.jsonl import atomic_write_text
from ifir_lib.core.locks import exclusive
from ifir_lib.reporting.results import PER_QUERY_COLUMNS, RESULT_COLUMNS, per_query_path
from ifir_lib.testing.inputs import write_seeds
from ifir_lib.testing.openai_server import DEFAULT_MODEL
from ifir_lib.training.trainer import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path):
    return dict(
        os.environ,
        OPENAI_API_KEY=OPENAI_KEY,
        IFIR_CACHE=str(tmp_path / "cache"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(REPO),
    )


def test_exclusive_names_the_holder_and_frees_on_exit(tmp_path):
    out = tmp_path / "o.jsonl"
    with exclusive(out) as lp:
        assert f"pid {os.getpid()}" in lp.read_text()
        with pytest.raises(
            OutputLocked,
            match=f"o.jsonl: this output is being written by another process \\(pid {os.getpid()}",
        ):
            with exclusive(out):
                pass
    with exclusive(out):  # released: the next writer gets it at once
        pass


def test_an_output_named_through_a_symlink_takes_its_target_s_lock(tmp_path):
    """Two synthesize runs, one on rev.jsonl and one on a link to it, each took its own lock and
    wrote one file at once (86 of 100 keys twice in the probe); a rewrite through the link
    replaced the link with a file, so the two went on writing two files."""
    out = tmp_path / "rev.jsonl"
    out.write_text('{"key": "a"}\n')
    (tmp_path / "alias.jsonl").symlink_to("rev.jsonl")
    (tmp_path / "runs").mkdir()
    (tmp_path / "latest").symlink_to("runs")
    with exclusive(out):
        for other in (tmp_path / "alias.jsonl", tmp_path / "latest" / ".." / "rev.jsonl"):
            with pytest.raises(OutputLocked):
                with exclusive(other):
                    pass
    with exclusive(tmp_path / "runs" / "ins-dv"):
        with pytest.raises(OutputLocked):
            with exclusive(tmp_path / "latest" / "ins-dv"):
                pass
    atomic_write_text(tmp_path / "alias.jsonl", '{"key": "b"}\n')
    assert (tmp_path / "alias.jsonl").is_symlink() and out.read_text() == '{"key": "b"}\n'


def test_second_synthesis_on_one_output_fails_fast_first_finishes(server, tmp_path):
    n = 20
    write_seeds(tmp_path / "seeds.jsonl", n)
    server.latency_s = 2.0  # 40 s for the first run unless sped up: the second fails well inside it
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "ifir_lib", "synthesize", "--preset", "paper"]
    cmd += ["--seeds", str(tmp_path / "seeds.jsonl")]
    cmd += ["--out", str(out), "--backend", "openai", "--model", DEFAULT_MODEL, "--base-url", server.url]
    cmd += ["--concurrency", "1", "--no-progress"]
    first = subprocess.Popen(
        cmd, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or not out.read_bytes().count(b"\n")):
        time.sleep(0.05)
    assert first.poll() is None, "the first run should still be writing"
    t0 = time.monotonic()
    second = subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"pid {first.pid}" in second.stderr and "being written by another process" in second.stderr
    assert first.poll() is None, "the second run must fail while the first is still running"
    assert time.monotonic() - t0 < 30  # at once: interpreter start-up, no request, no wait
    server.latency_s = 0.0
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert len(keys) == n and len(set(keys)) == n  # exactly one row per seed


def test_training_into_a_held_run_folder_fails_before_loading(tmp_path):
    run = tmp_path / "run"
    with exclusive(run, "training run folder"):
        t0 = time.monotonic()
        with pytest.raises(OutputLocked, match="training run folder is being written"):
            train([], run, TrainConfig.preset("smoke"), mode="ins-dv")
        assert time.monotonic() - t0 < 5


APPENDER = """
import sys
from ifir_lib.reporting.results import append_results
path, tag = sys.argv[1], sys.argv[2]
cols = {cols!r}
numbers = {{"rng_seed": 0, "value": 1.5, "ci_low": 1.0, "ci_high": 2.0, "n_queries": 5}}  # refused if not numbers
for i in range(150):
    row = {{c: numbers.get(c, f"{{tag}}-{{i}}-{{c}}") for c in cols}}
    pq = [{{"run_id": f"{{tag}}-{{i}}", "dataset": "d", "metric": "m", "query_id": f"q{{k}}", "value": k}} for k in range(5)]
    append_results(path, [row, row], pq)
"""


def test_two_evaluations_appending_at_once_never_interleave(tmp_path):
    path = tmp_path / "results.csv"
    script = APPENDER.format(cols=RESULT_COLUMNS)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), tag], env=_env(tmp_path), stderr=subprocess.PIPE
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read()
    df = pd.read_csv(path, dtype=str)
    assert list(df.columns) == RESULT_COLUMNS and len(df) == 600
    # each run's two summary rows are adjacent, and each per-query block is whole
    assert (df["run_id"].iloc[0::2].values == df["run_id"].iloc[1::2].values).all()
    pq = pd.read_csv(per_query_path(path), dtype=str)
    assert list(pq.columns) == PER_QUERY_COLUMNS and len(pq) == 1500
    assert all(
        g["query_id"].tolist() == [f"q{k}" for k in range(5)] for _, g in pq.groupby("run_id", sort=False)
    )
