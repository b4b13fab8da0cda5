"""What training reads: texts that differ but read the same once cut at the training length."""

import pytest

from ifir_lib.core.models import build_model
from ifir_lib.core.run_folder import RunFolder
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.lengths import views_read_same
from ifir_lib.training.trainer import TrainConfig, train
from ifir_lib.training.trainsets import build_trainset

# a FollowIR-style narrative's background (~120 words): the sentence that differs comes after it
BACKGROUND = " ".join(
    f"A relevant document number {k} discusses the topic in depth, with its causes, options and evidence."
    for k in range(8)
)


def long_seeds(n: int = 6) -> list[dict]:
    """Seeds whose instruction and reversal differ only after ``BACKGROUND`` (past 96 tokens)."""
    seeds = [make_seed(i) for i in range(n)]
    for s in seeds:
        s["instruction"] = BACKGROUND + " " + s["instruction"]
        s["reference_reversal"] = BACKGROUND + " " + s["reference_reversal"]
    return seeds


def test_training_warns_of_seeds_whose_two_views_read_the_same_at_its_length(tmp_path, caplog):
    """At smoke's 96 tokens both views of each seed read the background only: one input with
    swapped labels, which trained without a word."""
    cfg = TrainConfig.preset("smoke", max_steps=1, num_negatives=2)
    ts = build_trainset("ins-dv", long_seeds(), num_negatives=2, negative_audit=None)
    with caplog.at_level("WARNING"):
        train(ts.examples, tmp_path / "run", cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")
    assert "6 seeds have two views (query + instruction) that read the same once cut" in caplog.text
    assert "96 tokens" in caplog.text and "seed-0000" in caplog.text


def test_views_that_differ_within_the_length_are_not_named():
    long = build_trainset("ins-dv", long_seeds(), num_negatives=2, negative_audit=None).examples
    short = build_trainset("ins-dv", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None)
    at_96 = build_model("minilm", max_seq_length=96, pooling="mean", device="cpu")
    at_256 = build_model("minilm", max_seq_length=256, pooling="mean", device="cpu")
    assert views_read_same(at_96, long) == [f"seed-{i:04d}" for i in range(6)]
    assert views_read_same(at_256, long) == [] and views_read_same(at_96, short.examples) == []


def header_seeds(n: int = 6) -> list[dict]:
    """Seeds whose positive and instruction negatives share ``BACKGROUND`` as a header (one source)."""
    seeds = [make_seed(i) for i in range(n)]
    for s in seeds:
        for p in (s["positive"], *s["instruction_negatives"]):
            p["text"] = BACKGROUND + " " + p["text"]
    return seeds


def test_training_warns_of_positives_that_read_as_one_of_their_negatives(tmp_path, caplog):
    """At 96 tokens P+ and each instruction negative read the shared header only: the loss ranked
    one input above itself, without a word."""
    cfg = TrainConfig.preset("smoke", max_steps=1, num_negatives=2)
    ts = build_trainset("ins-orig", header_seeds(), num_negatives=2, negative_audit=None)
    with caplog.at_level("WARNING"):
        train(ts.examples, tmp_path / "run", cfg, mode="ins-orig", manifest=ts.manifest(), device="cpu")
    assert "6 examples have a positive that reads the same as one of their negatives once cut" in caplog.text
    assert "seed-0000::orig" in caplog.text


def test_positives_that_differ_within_the_length_are_not_named():
    from ifir_lib.training.lengths import positives_read_as_negatives

    ex = build_trainset("ins-orig", header_seeds(), num_negatives=2, negative_audit=None).examples
    short = build_trainset("ins-orig", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None)
    at_96 = build_model("minilm", max_seq_length=96, pooling="mean", device="cpu")
    at_256 = build_model("minilm", max_seq_length=256, pooling="mean", device="cpu")
    assert len(positives_read_as_negatives(at_96, ex)) == 6
    assert positives_read_as_negatives(at_256, ex) == positives_read_as_negatives(at_96, short.examples) == []


def test_a_run_saved_reading_fewer_tokens_than_it_trained_on_is_warned_about(tmp_path, caplog):
    """MiniLM reads 256 tokens; a run trained at 300 (as the paper preset's 512) was saved at 256
    and every evaluation cut what training read, without a word."""
    cfg = TrainConfig.preset("smoke", max_steps=1, num_negatives=2, max_seq_length=300)
    ts = build_trainset("ins-orig", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None)
    with caplog.at_level("WARNING"):
        res = train(ts.examples, tmp_path / "run", cfg, mode="ins-orig", manifest=ts.manifest(), device="cpu")
    assert "minilm trains reading up to 300 tokens but is saved reading 256" in caplog.text
    assert RunFolder(res.run_dir).info()["saved_max_seq_length"] == 256
    caplog.clear()
    with caplog.at_level("WARNING"):  # saved at the length it trains on: nothing to say
        train(
            ts.examples, tmp_path / "b", cfg.replace(save_max_seq_length=300), mode="ins-orig", device="cpu"
        )
    assert "but is saved reading" not in caplog.text


def test_the_held_out_score_is_that_of_the_model_as_saved(tmp_path):
    """The held-out score picks the checkpoint (``keep_best``); it was computed at the training
    length (96 tokens: each held-out seed's two long instructions read the same), while the
    saved model reads 256: the pick was judged on another model than the one saved."""
    from sentence_transformers import SentenceTransformer

    from ifir_lib.training.heldout import heldout_scores

    held = long_seeds(10)[6:]
    cfg = TrainConfig.preset("smoke", max_steps=1, num_negatives=2, eval_steps=1)
    ts = build_trainset("ins-orig", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None)
    res = train(ts.examples, tmp_path / "run", cfg, mode="ins-orig", heldout=held, device="cpu")
    logged = RunFolder(res.run_dir).read_log("heldout")[-1]
    saved = heldout_scores(SentenceTransformer(str(res.run_dir), device="cpu"), held)
    assert saved["heldout_score"] == pytest.approx(logged["score"], abs=1e-6)
    assert logged["orig_acc"] == pytest.approx(saved["orig_acc"]) and logged["rev_acc"] == pytest.approx(
        saved["rev_acc"]
    )


def test_examples_without_a_group_are_checked_for_positives_only(caplog):
    """Hand-made examples for the mnrl loss carry no ``group``: the view check raised KeyError on
    them (train() failed); they have no views to compare, and the positive check still runs."""
    from ifir_lib.training.lengths import warn_cut_alike

    ex = build_trainset("ins-orig", header_seeds(), num_negatives=2, negative_audit=None).examples
    ex = [{k: v for k, v in e.items() if k != "group"} for e in ex]
    at_96 = build_model("minilm", max_seq_length=96, pooling="mean", device="cpu")
    with caplog.at_level("WARNING"):
        assert warn_cut_alike(at_96, ex) == []
    assert "6 examples have a positive that reads the same as one of their negatives" in caplog.text


def test_only_the_negatives_that_train_are_compared_with_the_positive(tmp_path, caplog):
    """A set stored with more negatives than the run trains (``--num-negatives 2`` on a built set
    of more): a negative past the second is never read, yet reading as the positive was warned
    about as "the loss ranks one input above itself"."""
    ex = build_trainset(
        "ins-orig", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None
    ).examples
    for e in ex:
        e["positive"] = {**e["positive"], "text": BACKGROUND + " " + e["positive"]["text"]}
        e["negatives"] = [*e["negatives"][:2], {"text": BACKGROUND + " another ending"}]
    cfg = TrainConfig.preset("smoke", max_steps=1, num_negatives=2)
    with caplog.at_level("WARNING"):
        train(ex, tmp_path / "run", cfg, mode="ins-orig", device="cpu")
    assert "reads the same as one of their negatives" not in caplog.text


def test_the_saved_shorter_warning_says_what_a_cli_user_can_do_and_is_logged_by_rank_0_only(
    monkeypatch, caplog
):
    """Its advice named save_max_seq_length and max_seq_length, neither an ``ifir train`` flag, and
    every DDP rank logged it (8 lines on 8 GPUs)."""
    from ifir_lib.training.trainer import _warn_saved_shorter

    model = build_model("minilm", max_seq_length=512, pooling="mean", device="cpu")  # reads 256 on its own
    cfg = TrainConfig.preset("smoke", max_seq_length=512)
    monkeypatch.setenv("RANK", "1")
    with caplog.at_level("WARNING"):
        _warn_saved_shorter(model, cfg)
    assert "but is saved reading" not in caplog.text
    monkeypatch.setenv("RANK", "0")
    with caplog.at_level("WARNING"):
        _warn_saved_shorter(model, cfg)
    assert caplog.text.count("but is saved reading 256") == 1
    assert "--base-model" in caplog.text and "TrainConfig.save_max_seq_length" in caplog.text


def test_the_length_check_keeps_digests_and_checks_a_fixed_sample_above_its_bound(monkeypatch, caplog):
    """The check (rank 0, other ranks waiting) kept every text's token ids (~6.5 KiB a passage)
    and read every example: ~45 GiB and ~30 min at 480k examples. It keeps a digest per text and,
    above ``MAX_CHECKED`` examples, checks a fixed sample, saying how many of how many."""
    from ifir_lib.training import lengths

    at_96 = build_model("minilm", max_seq_length=96, pooling="mean", device="cpu")
    ids = lengths.read_ids(at_96, [BACKGROUND, "short"], "document")
    assert all(isinstance(v, bytes) and len(v) == 16 for v in ids.values())
    ex = build_trainset("ins-orig", header_seeds(), num_negatives=2, negative_audit=None).examples
    monkeypatch.setattr(lengths, "MAX_CHECKED", 4)
    with caplog.at_level("INFO"):
        lengths.warn_cut_alike(at_96, ex)
    assert "4 examples have a positive that reads the same" in caplog.text
    assert "checked 4 of 6 examples" in caplog.text
    assert lengths.checked_sample(ex) == lengths.checked_sample(list(ex))  # the same sample each time
    dv = build_trainset("ins-dv", [make_seed(i) for i in range(6)], num_negatives=2, negative_audit=None)
    sample = lengths.checked_sample(dv.examples, limit=3)  # two views a seed: the last one is not split
    views = {g: sum(e["group"] == g for e in dv.examples) for g in {e["group"] for e in sample}}
    assert len(sample) == 4 and all(sum(e["group"] == g for e in sample) == n for g, n in views.items())
