"""--dry-run: steps, tokens and memory estimated for the paper preset without a GPU."""

import pytest

from ifir_lib.training.dry_run import dry_run
from ifir_lib.training.trainer import TrainConfig
from ifir_lib.training.trainsets import build_trainset


def test_dry_run_paper_preset_estimates_without_gpu(bundled_seeds):
    cfg = TrainConfig.preset("paper")
    ts = build_trainset("ins-dv", bundled_seeds, num_negatives=cfg.num_negatives)
    est = dry_run(cfg, ts.examples, world_size=8)
    assert est["effective_batch"] == 256 * 8 and est["steps"] == 1500
    assert est["texts_per_step"] == 256 * 8 * 32
    assert est["params"] == int(305e6) and 4 < est["est_peak_gb"] < 80
    with pytest.raises(ValueError, match="fewer than 30 negatives"):
        dry_run(cfg, build_trainset("ins-dv", bundled_seeds, num_negatives=3).examples)


def test_dry_run_without_examples_is_an_error_not_a_division_by_zero():
    from ifir_lib.core.errors import ConfigError

    with pytest.raises(ConfigError, match="no training examples"):
        dry_run(TrainConfig.preset("smoke"), [])
