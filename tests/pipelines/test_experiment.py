"""The offline experiment: the held-out split and score, the paired tests, and one real small run."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from ifir_lib.core.errors import ConfigError
from ifir_lib.core.models import format_query
from ifir_lib.pipelines.experiment import ExperimentConfig, markdown_table, paired_tests
from ifir_lib.reporting.results import load_results, save_result
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.heldout import heldout_scores, split_heldout
from ifir_lib.training.trainer import TrainConfig
from support.fakes import FakeEncoder, fake_result


def test_split_heldout_is_fixed_disjoint_and_order_free():
    seeds = [make_seed(i) for i in range(40)]
    train, held = split_heldout(seeds, 6)
    train2, held2 = split_heldout(list(reversed(seeds)), 6)
    assert len(held) == 6 and len(train) == 34
    assert {s["id"] for s in held} == {s["id"] for s in held2}
    assert not {s["id"] for s in held} & {s["id"] for s in train}
    assert split_heldout(seeds, 0) == (seeds, [])
    with pytest.raises(ValueError, match="cannot hold out 40 of 40"):
        split_heldout(seeds, 40)


def _flip_table(seed, follows: bool):
    """Vectors under which the model follows both instructions (or, ``follows=False``, neither)."""
    p, n = ([1.05, 0, 0.1], [0, 1, 0]) if follows else ([0.2, 1, 0.3], [1, 0, 0])
    table = {
        format_query(seed["query"], seed["instruction"]): [1, 0, 0.1],
        format_query(seed["query"], seed["reference_reversal"]): [0, 1, 0.1],
        seed["query"]: [0.5, 0.5, 0.1],
        seed["positive"]["text"]: p,
    }
    for i, d in enumerate(seed["instruction_negatives"]):
        table[d["text"]] = n if i == 0 else [0.3, 0.3, 0.1]
    for d in seed["hard_negatives"]:
        table[d["text"]] = [0, 0, 1]
    return table


def test_heldout_scores_hand_computed():
    seed = make_seed(3, negatives=2)
    good = heldout_scores(FakeEncoder(_flip_table(seed, True)), [seed])
    assert good["orig_acc"] == good["rev_acc"] == good["query_acc"] == 100.0
    bad = heldout_scores(FakeEncoder(_flip_table(seed, False)), [seed])
    # cosines under q + I: N0 .995, N1 .707, P+ .215, hard .0995 -> P+ beats the 2 hard negatives only
    assert bad["orig_acc"] == pytest.approx(50.0)
    # under q + I': P+ .964, N1 .707, N* 0 -> N* beats neither
    assert bad["rev_acc"] == 0.0
    # the bare query still ranks P+ and both instruction negatives above both hard negatives
    assert bad["query_acc"] == 100.0 and bad["heldout_score"] == pytest.approx(50.0)


def test_heldout_scores_pool_the_narrative_form():
    seed = make_seed(3, negatives=2)
    seed.update(narrative="N of I", reversal_narrative="N of I'", aug_narrative="unused here")
    table = _flip_table(seed, True)
    # the model follows the short form and gets the narrative form backwards
    table[format_query(seed["query"], "N of I")] = table[
        format_query(seed["query"], seed["reference_reversal"])
    ]
    table[format_query(seed["query"], "N of I'")] = table[format_query(seed["query"], seed["instruction"])]
    half = heldout_scores(FakeEncoder(table), [seed])
    # short form: all 4 orig pairs and 2 rev pairs right; narrative form: none (P+ .009 < hard .0995)
    assert half["orig_acc"] == half["rev_acc"] == pytest.approx(50.0) and half["query_acc"] == 100.0


def test_early_stopping_needs_held_out_evaluations():
    with pytest.raises(ConfigError, match="needs eval_steps"):
        TrainConfig.preset("smoke", early_stopping_patience=2)
    with pytest.raises(ConfigError, match="baseline"):
        ExperimentConfig.preset("smoke", modes=("ins-orig",))
    with pytest.raises(ConfigError, match="unknown evaluation set"):
        ExperimentConfig.preset("smoke", eval_sets=("v9",))


def test_paired_tests_pair_by_seed_and_query(tmp_path):
    csv = tmp_path / "results.csv"
    dv = {0: [3.0, 1.0, 4.0, 1.0], 1: [5.0, 9.0, 2.0, 6.0]}
    save_result(fake_result("v2", [0.0, 0.0, 0.0, 0.0]), csv, model="base", mode="base", rng_seed=0)
    for s, vals in dv.items():
        save_result(fake_result("v2", vals), csv, model=f"dv{s}", mode="ins-dv", rng_seed=s)
        save_result(
            fake_result("v2", [v - 1 for v in vals]), csv, model=f"orig{s}", mode="ins-orig", rng_seed=s
        )
    save_result(fake_result("v2", [v - 2 for v in dv[0]]), csv, model="alldv", mode="all-dv", rng_seed=0)
    # a run evaluated on two sets keeps one run_id: both sets are tested
    two = tmp_path / "two" / "results.csv"
    for d, b_vals, d_vals in (("v1", [1.0, 2.0], [3.0, 3.0]), ("v2", [0.0, 0.0], [1.0, 1.0])):
        save_result(fake_result(d, b_vals), two, run_id="b", model="base", mode="base", rng_seed=0)
        save_result(fake_result(d, d_vals), two, run_id="d", model="dv", mode="ins-dv", rng_seed=0)
    both = paired_tests(two, ExperimentConfig.preset("smoke", n_perm=200))
    assert sorted(both["dataset"]) == ["v1", "v2"] and list(both["diff"]) == [1.5, 1.0]
    t = paired_tests(csv, ExperimentConfig.preset("smoke", n_perm=200)).set_index("versus")
    assert t.loc["ins-orig", "pairs"] == 8 and t.loc["ins-orig", "diff"] == pytest.approx(1.0)
    assert t.loc["all-dv", "pairs"] == 4 and t.loc["all-dv", "diff"] == pytest.approx(2.0)
    # the base model (one run) is paired with each of Ins-DV's seeds
    assert t.loc["base", "pairs"] == 8 and t.loc["base", "diff"] == pytest.approx(sum(dv[0] + dv[1]) / 8)
    assert (t["p_holm"] >= t["p_value"]).all()
    assert markdown_table(t.reset_index()[["versus", "diff"]]).splitlines()[2] == "| all-dv | 2.00 |"


@pytest.mark.slow
def test_experiment_cli_runs_resumes_and_reports(tmp_path, private_cache):
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "ifir_lib.cli", "experiment", "--preset", "smoke", "--out", str(out)]
    cmd += ["--rng-seeds", "0", "--modes", "ins-orig,ins-dv", "--extra-modes", ""]
    cmd += [
        "--learning-rate",
        "4e-5",
        "--temperature",
        "0.03",
        "--in-batch-negatives",
        "--num-negatives",
        "2",
        "--no-co-batch",
        "--narrative-share",
        "1",
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    results = load_results(out / "results.csv")
    assert set(results["mode"]) == {"base", "ins-orig", "ins-dv"}
    assert set(results["dataset"]) == {"followir_mini", "followir_v2"}
    tests = pd.read_csv(out / "paired_tests.csv")
    assert set(tests["versus"]) == {"base", "ins-orig"} and tests["p_holm"].between(0, 1).all()
    assert "Mean ± sd over rng_seeds" in (out / "summary.md").read_text()
    for mode in ("ins-orig", "ins-dv"):
        run = out / "models" / "rng0" / mode
        info = json.loads((run / "ifir_run.json").read_text())
        assert info["mode"] == mode and info["rng_seed"] == 0 and info["status"] == "finished"
        assert info["heldout_seeds"] == 8 and 1 <= info["best_step"] <= info["steps"]
        assert info["saved_max_seq_length"] == 256  # MiniLM's own, not the training length (96)
        cfg = info["config"]  # the command's training flags reached every run
        flags = ("learning_rate", "temperature", "in_batch_negatives", "num_negatives", "co_batch_views")
        assert tuple(cfg[f] for f in flags) == (4e-5, 0.03, True, 2, False)
        assert info["data"]["forms"]["short"] == 0  # --narrative-share 1: every seed with narratives
        assert (run / "heldout_log.jsonl").read_text().count("\n") >= 1
    assert list((out / "figures").glob("*.png"))
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(load_results(out / "results.csv")) == len(results)  # nothing redone or duplicated


def test_experiment_training_overrides_reach_the_train_config():
    from dataclasses import fields

    from ifir_lib.pipelines.experiment import TRAIN_FIELDS

    assert set(TRAIN_FIELDS) <= {f.name for f in fields(TrainConfig)}
    cfg = ExperimentConfig.preset("cpu", in_batch_negatives=True, temperature=0.05, learning_rate=5e-5)
    tcfg = TrainConfig.preset(cfg.train_preset, **cfg.train_overrides())
    assert (tcfg.in_batch_negatives, tcfg.temperature, tcfg.learning_rate) == (True, 0.05, 5e-5)
    # fields the experiment leaves as None keep the train preset's value
    assert TrainConfig.preset("cpu", **ExperimentConfig.preset("cpu").train_overrides()).temperature == 0.02
