"""Generated Promptriever rows in the hub schema, at any size, for the scale bench and tests.

``write_fake_promptriever(out_dir, rows)`` writes Parquet shards whose columns and types are
those of ``samaya-ai/msmarco-w-instructions`` (``arrow_seeds.PROMPTRIEVER_SCHEMA``), with the
lengths of the real thing: queries of 4-8 words, instructions of 30-50, passages of 45-75 (MS
MARCO passages average ~60). Rows come in pairs, as Promptriever's do: the bare query, then the
same query with an instruction, 1-3 instruction negatives (``new_negatives``, unique to the row)
and ``negatives`` hard negatives drawn from a corpus of ``4 * rows`` passages (at most MS MARCO's
8.8M), so hard negatives recur across rows as they do in the source. Text is a function of the
passage id (hashed words from a fixed vocabulary), so a passage id always has the same text,
and everything is vectorised: a million rows take minutes, not hours.

Not handled here: reading the rows (``arrow_seeds``), the small hand-written fixture
(``tests/fixtures/promptriever_rows.jsonl``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..seeds.promptriever import PROMPTRIEVER_SCHEMA

MSMARCO_PASSAGES = 8_841_823
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(keys: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of ``keys`` and ``salt``: well-spread 64-bit values, vectorised."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(
            (salt * 0x632BE59BD9B4E019 + 1) % 2**64
        )
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _word_stream(n_words: int = 500_000, vocab: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, word_starts)``: a long text of pseudo-words with Zipf-like frequencies, from which
    every generated text is a slice (cutting slices is far cheaper than joining words)."""
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz", dtype=np.uint8)
    freq = np.array(
        [
            12,
            9,
            8,
            7.5,
            7,
            6.7,
            6.3,
            6,
            6,
            4.3,
            4,
            2.8,
            2.8,
            2.4,
            2.2,
            2.4,
            2,
            2,
            1,
            1.5,
            2,
            0.8,
            0.2,
            0.1,
            0.2,
            0.1,
        ]
    )
    lens = rng.integers(2, 11, size=vocab)
    words = [bytes(rng.choice(letters, size=n, p=freq / freq.sum())) for n in lens]
    rank = np.minimum(rng.zipf(1.3, size=n_words), vocab) - 1
    stream = b" ".join(words[i] for i in rank) + b" "
    wlen = lens[rank] + 1
    starts = np.concatenate([[0], np.cumsum(wlen)])
    return np.frombuffer(stream, dtype=np.uint8), starts


_STREAM, _STARTS = _word_stream()


def texts(keys: np.ndarray, lo: int, hi: int, salt: int) -> pa.Array:
    """One text of ``lo``-``hi`` words per key, the same for the same ``(key, salt)``.

    Example: ``texts([7, 7, 8], 4, 8, salt=1)`` -> three strings of 4-8 words, the first two equal.
    """
    keys = np.asarray(keys, dtype=np.uint64)
    n_words = (lo + _mix(keys, salt) % np.uint64(hi - lo + 1)).astype(np.int64)
    first = (_mix(keys, salt + 1000) % np.uint64(len(_STARTS) - hi - 2)).astype(np.int64)
    begin = _STARTS[first]
    lens = _STARTS[first + n_words] - 1 - begin  # drop the trailing space
    # string views into the stream (16 bytes each: length, then the text inline when <= 12
    # bytes, else its first 4 bytes, buffer 0, offset), cast to plain strings in one copy
    views = np.zeros((len(keys), 16), dtype=np.uint8)
    views[:, :4] = lens.astype(np.int32).view(np.uint8).reshape(-1, 4)
    head = _STREAM[np.minimum(begin[:, None] + np.arange(12), len(_STREAM) - 1)]
    short = lens <= 12
    views[:, 4:16] = np.where(short[:, None], head * (np.arange(12) < lens[:, None]), 0)
    views[~short, 4:8] = head[~short, :4]
    views[~short, 12:16] = begin[~short].astype(np.int32).view(np.uint8).reshape(-1, 4)
    arr = pa.Array.from_buffers(
        pa.string_view(), len(keys), [None, pa.py_buffer(views), pa.py_buffer(_STREAM)]
    )
    return arr.cast(pa.string())


def _passages(keys: np.ndarray, off: np.ndarray, salt: int, kind: pa.DataType) -> pa.ListArray:
    """A list of passages per row (``off``: list offsets) with ids ``keys`` and their texts."""
    n = len(keys)
    empty = pa.array([""] * n, pa.string())
    fields = {
        "docid": pc.cast(pa.array(keys.astype(np.int64)), pa.string()),
        "text": texts(keys, 45, 75, salt),
        "title": empty,
        "explanation": empty,
        "joint_id": empty,
        "followir_score": pa.nulls(n, pa.float64()),
    }
    struct_type = kind.value_type
    values = pa.StructArray.from_arrays([fields[f.name] for f in struct_type], fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(off, pa.int32()), values)


def fake_rows(start: int, stop: int, rows: int, negatives: int = 30) -> pa.Table:
    """Rows ``start..stop-1`` of a generated Promptriever of ``rows`` rows (see the module docstring)."""
    r = np.arange(start, stop, dtype=np.int64)
    j, has = r // 2, r % 2 == 1
    corpus = min(MSMARCO_PASSAGES, max(1000, 4 * rows))
    only_query = texts(j, 4, 8, salt=1)
    instruction = pc.if_else(pa.array(has), texts(j, 30, 50, salt=2), "")
    query = pc.if_else(pa.array(has), pc.binary_join_element_wise(only_query, instruction, " "), only_query)
    # the positive: passage j of the corpus, the same for the bare and the instructed query
    schema = {f.name: f.type for f in PROMPTRIEVER_SCHEMA}
    one = np.arange(len(r) + 1)
    pos = _passages(j % corpus, one, 3, schema["positive_passages"])
    slot = np.repeat(r.astype(np.uint64), negatives) * np.uint64(64) + np.tile(
        np.arange(negatives, dtype=np.uint64), len(r)
    )
    neg_keys = (_mix(slot, 5) % np.uint64(corpus)).astype(np.int64)
    neg = _passages(neg_keys, one * negatives, 3, schema["negative_passages"])
    # 1-3 instruction negatives per instructed row, ids past the corpus, unique to the row
    k = np.where(has, 1 + j % 3, 0)
    off = np.concatenate([[0], np.cumsum(k)])
    ins_keys = corpus + 3 * np.repeat(j, k) + (np.arange(off[-1]) - np.repeat(off[:-1], k))
    new = _passages(ins_keys, off, 4, schema["new_negatives"])
    cols = {
        "query_id": pc.cast(pa.array(j), pa.string()),  # the bare and the instructed row share it
        "query": query,
        "positive_passages": pos,
        "negative_passages": neg,
        "only_instruction": instruction,
        "only_query": only_query,
        "has_instruction": pa.array(has),
        "new_negatives": new,
    }
    return pa.Table.from_arrays([cols[f.name] for f in PROMPTRIEVER_SCHEMA], schema=PROMPTRIEVER_SCHEMA)


def write_fake_promptriever(
    out_dir: str | Path, rows: int, negatives: int = 30, shard_rows: int = 20_000
) -> list[Path]:
    """Write ``rows`` generated rows as ``out_dir/train-00000.parquet ...``; returns the files."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for i, start in enumerate(range(0, rows, shard_rows)):
        f = out / f"train-{i:05d}.parquet"
        pq.write_table(fake_rows(start, min(start + shard_rows, rows), rows, negatives), f)
        files.append(f)
    return files
