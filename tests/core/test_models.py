"""Loading models: the per-process cache never outlives the folder's weights."""

import copy

import numpy as np
import torch

from ifir_lib.core.models import build_model, load_model
from support.folders import raw_backbone


def test_a_folder_trained_again_is_loaded_again(tmp_path, minilm):
    """``load_model`` cached by path: a run folder retrained after a notebook kernel evaluated it
    was scored again with its old in-memory weights, and the new rows replaced the right ones."""
    folder = tmp_path / "run"
    minilm.save(str(folder))
    first = load_model(str(folder), device="cpu")
    assert load_model(str(folder), device="cpu") is first  # unchanged: cached
    retrained = copy.deepcopy(first)
    with torch.no_grad():
        next(retrained.parameters()).mul_(1.5)
    retrained.save(str(folder))  # what a second training run leaves in the folder
    again = load_model(str(folder), device="cpu")
    assert again is not first
    before, after = (m.encode(["solar panels in the UK"], normalize_embeddings=True) for m in (first, again))
    assert np.allclose(after, retrained.encode(["solar panels in the UK"], normalize_embeddings=True))
    assert not np.allclose(before, after)


def test_a_cached_model_a_caller_changed_is_loaded_again(tmp_path, minilm, caplog):
    """A notebook that set ``max_seq_length = 16`` on the model ``load_model`` returned changed what
    a later evaluation of the same name scored (p-MRR -5.03 -> 0.00 under the label ``minilm``)."""
    folder = tmp_path / "m"
    minilm.save(str(folder))
    first = load_model(str(folder), device="cpu")
    first.max_seq_length = 16
    with caplog.at_level("WARNING"):
        again = load_model(str(folder), device="cpu")
    assert again is not first and again.max_seq_length == minilm.max_seq_length
    assert "max_seq_length changed since" in caplog.text
    assert load_model(str(folder), device="cpu") is again  # unchanged since: cached


def test_a_cached_model_whose_weights_a_caller_changed_in_place_is_loaded_again(tmp_path, minilm, caplog):
    """A notebook that fine-tuned the object ``load_model("minilm")`` returned, in place, had the
    next ``evaluate_models({"minilm": "minilm"})`` score the changed weights as the base row (v1
    MAP@1000 78.96 -> 76.35, p-MRR -5.03 -> -7.47), without a word; ``.half()`` likewise."""
    folder = tmp_path / "m"
    minilm.save(str(folder))
    first = load_model(str(folder), device="cpu")
    text = ["solar panels in the UK"]
    want = first.encode(text, normalize_embeddings=True)
    assert load_model(str(folder), device="cpu") is first  # encoding changes nothing: still cached
    with torch.no_grad():
        next(first.parameters()).mul_(1.5)  # an optimiser step, in effect
    with caplog.at_level("WARNING"):
        again = load_model(str(folder), device="cpu")
    assert again is not first and "weights (in place)" in caplog.text
    assert np.allclose(again.encode(text, normalize_embeddings=True), want)
    assert load_model(str(folder), device="cpu") is again
    again.half()
    assert load_model(str(folder), device="cpu") is not again


def test_a_base_saved_in_fp16_is_built_for_training_in_float32(tmp_path, minilm, caplog):
    """transformers loads a checkpoint in its stored dtype: a base saved in fp16 trained in pure fp16
    on a CPU (AdamW on fp16 weights, no master copy), and half its weights never moved."""
    half = copy.deepcopy(minilm).half()
    half.save(str(tmp_path / "base16"))
    with caplog.at_level("WARNING"):
        model = build_model(str(tmp_path / "base16"), max_seq_length=32, pooling="mean", device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert "stored in float16; cast to float32" in caplog.text


def test_a_raw_backbone_keeps_its_own_length_for_the_saved_model(tmp_path):
    """The raw branch built the transformer at the training length and recorded that as native: a
    backbone trained under the smoke preset was saved reading 96 tokens where its base reads 512."""
    model = build_model(str(raw_backbone(tmp_path / "raw")), max_seq_length=32, pooling="cls", device="cpu")
    assert model.max_seq_length == 32 and model.native_max_seq_length == 512


def test_loading_a_raw_backbone_names_the_pooling_it_is_scored_with(tmp_path, caplog):
    """sentence-transformers loads a transformers folder with mean pooling in silence, while
    training builds it with the preset's (cls in the paper preset): two models under one name."""
    with caplog.at_level("WARNING"):
        model = load_model(str(raw_backbone(tmp_path / "raw")), device="cpu")
    assert model[1].get_config_dict()["pooling_mode"] == "mean"
    assert "not a sentence-transformers folder" in caplog.text and "scored with mean pooling" in caplog.text
    assert "TrainConfig.pooling: 'cls' in the paper preset" in caplog.text


def _fused_step(model) -> None:
    """One fused AdamW step (transformers' default optimiser, ``adamw_torch_fused``): it changes
    every weight in place and bumps no parameter's version counter."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    torch.manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt.step()


def test_a_cached_model_changed_by_a_fused_optimiser_step_is_loaded_again(tmp_path, minilm, caplog):
    """A fused AdamW step on the object ``load_model`` returned (a notebook's fine-tune with the
    default trainer) left the version counters as they were, so the next ``load_model`` of that
    folder handed out the changed weights under the folder's name, without a word."""
    folder = tmp_path / "m"
    minilm.save(str(folder))
    first = load_model(str(folder), device="cpu")
    text = ["solar panels in the UK"]
    want = first.encode(text, normalize_embeddings=True)
    _fused_step(first)
    assert not np.allclose(first.encode(text, normalize_embeddings=True), want, atol=1e-3)
    with caplog.at_level("WARNING"):
        again = load_model(str(folder), device="cpu")
    assert again is not first and "weights (in place)" in caplog.text
    assert np.allclose(again.encode(text, normalize_embeddings=True), want, atol=1e-6)
    assert load_model(str(folder), device="cpu") is again  # unchanged since: cached
