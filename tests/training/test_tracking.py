"""Tracking: a smoke run writes TensorBoard events that TensorBoard's own reader parses, with
the loss and the run's config as hparams; --report-to picks the trackers; the JSONL logs stay."""

import importlib.util
import json

import pytest

from ifir_lib.core.errors import ConfigError
from ifir_lib.training.tracking import TB_DIR, TensorBoardLog, hparams, reporting, resolve_report_to
from ifir_lib.training.trainer import TrainConfig, train
from ifir_lib.training.trainsets import build_trainset


@pytest.fixture(scope="module")
def tb_run(module_tmp, bundled_seeds):
    """A 2-step smoke run with the default ``report_to`` (TensorBoard, installed in the dev env)."""
    cfg = TrainConfig.preset("smoke", max_steps=2, rng_seed=5)
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives, rng_seed=5)
    out = module_tmp / "ins-dv"
    return cfg, train(ts.examples, out, cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")


def _accumulator(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run_dir / TB_DIR))
    ea.Reload()
    return ea


def test_tensorboard_reads_the_loss_of_every_step(tb_run):
    _, res = tb_run
    ea = _accumulator(res.run_dir)
    losses = [(e.step, e.value) for e in ea.Scalars("train/loss")]
    assert [s for s, _ in losses] == [r["step"] for r in res.log] == [1, 2]
    assert [v for _, v in losses] == pytest.approx([r["loss"] for r in res.log], rel=1e-6)  # the JSONL log's
    assert "train/learning_rate" in ea.Tags()["scalars"]


def test_tensorboard_hparams_hold_the_config_mode_and_rng_seed(tb_run):
    from tensorboard.plugins.hparams import plugin_data_pb2

    cfg, res = tb_run
    content = _accumulator(res.run_dir).PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hp = start.session_start_info.hparams
    assert hp["mode"].string_value == "ins-dv" and hp["rng_seed"].number_value == 5
    assert hp["learning_rate"].number_value == pytest.approx(cfg.learning_rate)
    assert hp["base_model"].string_value == cfg.base_model and hp["batch_size"].number_value == cfg.batch_size
    assert hp["co_batch_views"].string_value == "true" and hp["bf16"].string_value == "false"
    assert "mini_batch_size" not in hp  # None in the cpu preset: left out
    exp = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [m.name.tag for m in exp.metric_infos] == ["train/loss"]
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"])
    assert end.session_end_info.status == 1  # STATUS_SUCCESS


def test_the_jsonl_logs_are_still_written(tb_run):
    _, res = tb_run
    rows = [json.loads(x) for x in (res.run_dir / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["loss"] > 0 and "learning_rate" in r for r in rows)


def test_resolve_report_to():
    assert resolve_report_to("auto") == resolve_report_to(None) == ["tensorboard"]  # installed here
    assert resolve_report_to("none") == []
    assert resolve_report_to("TensorBoard, tensorboard") == ["tensorboard"]
    with pytest.raises(ConfigError, match="unknown tracker"):
        resolve_report_to("comet")


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_a_tracker_that_is_not_installed_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="pip install wandb"):
        resolve_report_to("wandb,tensorboard")
    cfg = TrainConfig.preset("smoke")
    with pytest.raises(ConfigError, match="pip install wandb"):
        train([], tmp_path / "run", cfg, mode="ins-dv", report_to="wandb")
    assert not (tmp_path / "run" / "ifir_run.json").exists()  # refused before the run began


def test_reporting_passes_other_trackers_to_the_trainer(tmp_path, monkeypatch):
    args, callbacks = reporting("none", tmp_path, {"lr": 1.0}, mode="ins-dv", rng_seed=2, evaluates=False)
    assert args == {"report_to": "none", "run_name": "ins-dv-s2"} and callbacks == []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())  # as if wandb were installed
    args, callbacks = reporting(
        "wandb,tensorboard", tmp_path, {"lr": 1.0}, mode="all-dv", rng_seed=0, evaluates=True
    )
    assert args["report_to"] == ["wandb"] and [type(c) for c in callbacks] == [TensorBoardLog]
    assert (
        callbacks[0].metrics == ["train/loss", "eval/heldout_score"]
        and callbacks[0].log_dir == tmp_path / TB_DIR
    )


def test_hparams_are_flat_scalars():
    assert hparams({"lr": 3e-5, "mini": None, "modes": ["a", "b"], "bf16": True}, mode="ins-dv") == {
        "mode": "ins-dv",
        "lr": 3e-5,
        "modes": '["a", "b"]',
        "bf16": "true",
    }
