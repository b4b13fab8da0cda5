"""The on-disk embedding cache, with a fake encoder (no model needed)."""

import logging

import pytest

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
