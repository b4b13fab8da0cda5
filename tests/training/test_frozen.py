"""The cheaper variant (``training.frozen``): top layers trained on cached frozen states, and wsd."""

import pytest
import torch

from ifir_lib.core.errors import ConfigError
from ifir_lib.training.frozen import FrozenBottom
from ifir_lib.training.trainer import TrainConfig, _schedule, train
from ifir_lib.training.trainsets import build_trainset

TEXTS = ["Winter pruning of apple trees keeps them open.", "Tide tables", "A long " + "word " * 40]


def _minilm():
    from ifir_lib.core.models import build_model

    return build_model("minilm", max_seq_length=64, pooling="mean", device="cpu")


def test_cached_encoding_equals_the_full_model_and_freezes_the_bottom():
    model = _minilm().eval()
    fb = FrozenBottom(model, top=2)
    features = model.tokenize(TEXTS)
    with torch.no_grad():
        full = model(dict(features))["sentence_embedding"]
        cached = fb.encode(dict(features))
        assert len(fb.cache) == 3
        again = fb.encode(dict(model.tokenize(TEXTS[::-1])))  # from the cache, other padding
    assert torch.allclose(full, cached, atol=1e-5) and torch.allclose(full, again.flip(0), atol=1e-5)
    assert len(fb.cache) == 3
    layers = model[0].auto_model.encoder.layer
    assert not any(p.requires_grad for p in layers[3].parameters())
    assert all(p.requires_grad for p in layers[4].parameters())
    assert fb.trainable_parameters() < sum(p.numel() for p in model.parameters()) / 2
    with pytest.raises(ConfigError, match="train_top_layers must be 1..6"):
        FrozenBottom(model, top=7)


def test_training_moves_only_the_top_layers(tmp_path, bundled_seeds):
    from sentence_transformers import SentenceTransformer

    cfg = TrainConfig.preset("smoke", max_steps=2, rng_seed=3, train_top_layers=1, learning_rate=1e-3)
    ts = build_trainset("ins-dv", bundled_seeds, budget=16, num_negatives=cfg.num_negatives, rng_seed=3)
    res = train(ts.examples, tmp_path / "run", cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")
    before = _minilm()[0].auto_model.encoder.layer
    after = SentenceTransformer(str(res.run_dir), device="cpu")[0].auto_model.encoder.layer
    same = [
        all(torch.equal(a, b) for a, b in zip(x.parameters(), y.parameters())) for x, y in zip(before, after)
    ]
    assert same == [True] * 5 + [False]


def test_schedules():
    assert _schedule(TrainConfig.preset("smoke")) == {"lr_scheduler_type": "linear"}
    wsd = _schedule(TrainConfig.preset("smoke", lr_schedule="wsd", max_steps=200))
    assert wsd == {"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"num_decay_steps": 20}}
    with pytest.raises(ConfigError, match="needs max_steps > 0"):
        TrainConfig.preset("smoke", lr_schedule="wsd", max_steps=0)
    with pytest.raises(ConfigError, match="lr_schedule must be one of"):
        TrainConfig.preset("smoke", lr_schedule="cosine")


def test_frozen_states_are_shared_by_the_base_content_not_its_name(tmp_path, bundled_seeds):
    """The process-wide cache was keyed on the base model's name: a folder replaced in place (a
    notebook kernel, a long-lived process) trained its top layers on the old backbone's states."""
    from ifir_lib.core.models import load_model
    from ifir_lib.training.trainer import _model_and_data

    base = tmp_path / "base"
    load_model("minilm", device="cpu").save(str(base))
    cfg = TrainConfig.preset("smoke", base_model=str(base), train_top_layers=1)
    ts = build_trainset("ins-dv", bundled_seeds, budget=4, num_negatives=cfg.num_negatives)
    old, _, old_loss, *_ = _model_and_data(cfg, ts.examples, "relation", "cpu")
    features = dict(old.tokenize(TEXTS))
    with torch.no_grad():
        old_loss.doc_encoder.encode(features)  # the old base's states, in the process-wide cache
        old[0].auto_model.embeddings.word_embeddings.weight.mul_(1.5)
    old.save(str(base))  # another checkpoint in the same folder
    new, _, new_loss, *_ = _model_and_data(cfg, ts.examples, "relation", "cpu")
    new.eval()
    with torch.no_grad():
        cached, full = new_loss.doc_encoder.encode(features), new(features)["sentence_embedding"]
    assert torch.allclose(cached, full, atol=1e-5)
    again = _model_and_data(cfg, ts.examples, "relation", "cpu")[2].doc_encoder
    assert again.cache is new_loss.doc_encoder.cache  # one base content: still shared
