"""`ifir demo` end to end in smoke mode: the main job's contract (results, models, figures)."""

import os
import subprocess
import sys

import pandas as pd
import pytest


@pytest.mark.slow
def test_demo_smoke_writes_results_models_and_figures(tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "IFIR_CACHE": str(tmp_path / "cache"),
    }
    out, figs = tmp_path / "demo", tmp_path / "figures"
    cmd = [
        sys.executable,
        "-m",
        "ifir_lib",
        "demo",
        "--preset",
        "smoke",
        "--out",
        str(out),
        "--figures",
        str(figs),
        "--max-steps",
        "1",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    df = pd.read_csv(out / "results.csv")
    assert set(df["mode"]) == {"base", "ins-orig", "ins-dv", "all-orig", "all-dv"}
    assert {"p_mrr", "map_at_1000", "ndcg_at_5"} <= set(df.metric)
    assert df.value.notna().all() and (df.git_commit.astype(str) != "").all()
    for mode in ("ins-orig", "ins-dv", "all-orig", "all-dv"):
        assert (out / "models" / mode / "modules.json").exists()
    assert {p.name for p in figs.glob("*.png")} >= {
        "fig_pmrr_by_config.png",
        "fig_pmrr_vs_score.png",
        "fig_loss_curves.png",
    }
    # a rerun redoes nothing: same rows, no duplicates
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(pd.read_csv(out / "results.csv")) == len(df)
    assert again.stdout.count("already in results.csv") == 5
