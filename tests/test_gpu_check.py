"""bench/gpu_check.py: the prepared GPU check runs on a CPU (``--device cpu --tiny``) and its
GradCache comparison can tell a broken setup from a working one."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def gc_mod():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_tiny_run_reports_every_figure_as_json(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--budget-s", "600"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    cmp = report["compare"]
    assert cmp["result"] == "PASS" and report["pass"]
    assert cmp["precision"] == "fp32" and cmp["loss_tol"] == 1e-5
    assert cmp["loss_rel_diff"] <= cmp["loss_tol"] and cmp["grad_rel_diff"] <= cmp["grad_tol"]
    assert cmp["grad_cosine"] > 0.999
    thr = report["throughput"]
    assert thr["steps"] == 3 and len(thr["step_s"]) == 2 and thr["peak_gpu_gb"] is None
    assert all(math.isfinite(x) for x in thr["losses"])
    assert thr["tokens_per_s"] > 0
    # tokens/s is examples/s times the tokens of one example (a query and 1 + 3 documents of <= 32)
    assert thr["tokens_per_s"] == pytest.approx(
        thr["examples_per_s"] * report["tokens_per_example"], rel=0.01
    )
    assert 5 * 4 < report["tokens_per_example"] <= 5 * 32
    proj = report["projection"]
    assert proj["hours"] == pytest.approx(480_000 / (8 * thr["examples_per_s"]) / 3600, rel=0.01)
    # the tiny search is capped at batch 8: one probe with GradCache, two without (4, 8)
    assert report["max_batch"]["max_fits"] == 8 and report["max_batch"]["stopped_by"] == "cap 8"
    assert [p["batch"] for p in report["max_batch_uncached"]["probes"]] == [4, 8]
    assert not any(Path(tmp_path).glob("ifir-gpu-check-*")), "scratch folder left behind"


def test_search_doubles_then_bisects(gc_mod):
    seen = []

    def probe(b):
        seen.append(b)
        return b <= 1300, None

    r = gc_mod.search_max_batch(probe, 512, 256, lambda b: 0.0, deadline=1e18, cap=1 << 16)
    assert seen[:3] == [512, 1024, 2048]  # doubling until the first out-of-memory error
    assert r["first_oom"] - r["max_fits"] <= r["max_fits"] // 8 and r["max_fits"] <= 1300 < r["first_oom"]
    assert r["stopped_by"] == "out-of-memory bracketed"
    # nothing fits: halve down to the smallest even batch, then give up
    r = gc_mod.search_max_batch(lambda b: (False, None), 8, None, lambda b: 0.0, 1e18, 1 << 16)
    assert r["max_fits"] is None and [p["batch"] for p in r["probes"]] == [8, 4, 2]
    # a probe predicted to outlast the deadline is not started
    r = gc_mod.search_max_batch(probe, 512, 256, lambda b: 1e9, deadline=0.0, cap=1 << 16)
    assert r["probes"] == [] and r["stopped_by"] == "time budget" and r["max_fits"] == 256


def test_comparison_fails_when_the_two_passes_differ(gc_mod, tmp_path):
    """The negative control: with dropout on, the cached and uncached passes draw different masks,
    so loss and gradients differ and the check must say FAIL (it is not a test that cannot fail)."""
    from transformers import AutoTokenizer

    from ifir_lib.training.trainer import TrainConfig

    cc = gc_mod.TINY
    enc, nodrop, _ = gc_mod.write_random_encoder(tmp_path, cc)
    words = gc_mod.vocabulary_words(AutoTokenizer.from_pretrained(enc))
    examples = gc_mod.synthetic_examples(cc.compare_batch, cc, words, rng_seed=1)
    results = {}
    for name, folder in (("nodrop", nodrop), ("dropout", enc)):
        cfg = TrainConfig.preset(
            "paper",
            base_model=str(folder),
            max_seq_length=cc.seq_len,
            num_negatives=cc.num_negatives,
            mini_batch_size=cc.compare_mini_batch,
        )
        results[name] = gc_mod.judge(gc_mod.compare_cached_uncached(folder, cfg, examples, "cpu", False), cc)
    assert results["nodrop"]["result"] == "PASS"
    assert results["dropout"]["result"] == "FAIL" and results["dropout"]["grad_rel_diff"] > 100 * cc.grad_tol
