"""Promptriever rows -> the Arrow seed tables (``arrow_seeds``), a batch at a time.

``promptriever_to_arrow`` reads ``samaya-ai/msmarco-w-instructions`` (or local Parquet/JSONL in
its schema) in Arrow batches and applies ``seeds.promptriever_to_seed``'s rule column by
column, so no row becomes a Python object; ``seeds_to_arrow`` writes any seed dicts the same
way. Each passage id is written once; the mapping from passage id to row number is the one
structure that grows with the data (a dict entry per distinct passage: ~4.9M for 1M rows).
Where the source gives one id two texts, the first text read is kept.

Not handled here: reading the tables back (``arrow_seeds``), the list loader
(``seeds.load_promptriever``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import DataError
from .arrow import (
    LIST_COLUMNS,
    META_FILE,
    PASSAGES_FILE,
    PASSAGES_SCHEMA,
    SEEDS_FILE,
    SEEDS_SCHEMA,
    ArrowSeeds,
)

_PASSAGE = pa.struct([("docid", pa.string()), ("text", pa.string()), ("title", pa.string())])
_LABELLED = pa.struct(
    [
        ("docid", pa.string()),
        ("explanation", pa.string()),
        ("followir_score", pa.float64()),
        ("joint_id", pa.string()),
        ("text", pa.string()),
        ("title", pa.string()),
    ]
)
# The hub dataset's features, from its dataset card
# (https://huggingface.co/datasets/samaya-ai/msmarco-w-instructions, 980,250 train rows).
# Only the fields ``_convert_batch`` reads matter; others are ignored.
PROMPTRIEVER_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("positive_passages", pa.list_(_LABELLED)),
        ("negative_passages", pa.list_(_PASSAGE)),
        ("only_instruction", pa.string()),
        ("only_query", pa.string()),
        ("has_instruction", pa.bool_()),
        ("new_negatives", pa.list_(_LABELLED)),
    ]
)


class _Writer:
    """Appends seeds and (deduplicated) passages to the two stream files of ``out_dir``."""

    def __init__(self, out_dir: Path):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir = out_dir
        self.seeds = pa.ipc.new_stream(str(out_dir / SEEDS_FILE), SEEDS_SCHEMA)
        self.passages = pa.ipc.new_stream(str(out_dir / PASSAGES_FILE), PASSAGES_SCHEMA)
        self.row_of: dict[str, int] = {}  # passage id -> row in passages.arrow
        self.n_seeds = 0

    def passage_rows(self, ids: pa.Array, texts: pa.Array) -> np.ndarray:
        """Row numbers for ``ids``; ids not seen before are appended with their text."""
        rows = np.empty(len(ids), dtype=np.int64)
        new = []
        row_of = self.row_of
        for i, pid in enumerate(ids.to_pylist()):
            r = row_of.get(pid)
            if r is None:
                r = row_of[pid] = len(row_of)
                new.append(i)
            rows[i] = r
        if new:
            take = pa.array(new, pa.int64())
            self.passages.write_batch(
                pa.record_batch([ids.take(take), texts.take(take)], schema=PASSAGES_SCHEMA)
            )
        return rows

    def write_seeds(self, cols: dict) -> None:
        n = len(cols["id"])
        batch = {f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in SEEDS_SCHEMA}
        self.seeds.write_table(pa.Table.from_arrays(list(batch.values()), schema=SEEDS_SCHEMA))
        self.n_seeds += n

    def close(self, meta: dict) -> ArrowSeeds:
        self.seeds.close()
        self.passages.close()
        meta = {**meta, "seeds": self.n_seeds, "passages": len(self.row_of)}
        (self.out_dir / META_FILE).write_text(json.dumps(meta, indent=2))
        return ArrowSeeds.open(self.out_dir)


# --------------------------------------------------------------------------------------------
# Promptriever rows -> the two tables, one Arrow batch at a time


def _text(arr: pa.Array) -> pa.Array:
    return pc.utf8_trim_whitespace(pc.fill_null(arr.cast(pa.string()), ""))


def _head_positions(lists: pa.ListArray, k: int | None, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, positions)``: the first ``k`` items of each kept list, as positions in its values.

    Example: lengths [3, 0, 2, 4], k=2, keep [1, 1, 1, 0] -> offsets [0, 2, 2, 4], positions [0, 1, 3, 4].
    """
    off = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    start, lens = off[:-1], np.diff(off)
    if lists.null_count:
        lens = np.where(lists.is_null().to_numpy(zero_copy_only=False), 0, lens)
    if k is not None:
        lens = np.minimum(lens, k)
    lens = np.where(keep, lens, 0)
    before = np.concatenate([[0], np.cumsum(lens)])
    pos = np.repeat(start - off[0] - before[:-1], lens) + np.arange(before[-1])
    return np.concatenate([[0], np.cumsum(lens[keep])]), pos


def _check_nonempty(arr: pa.Array, source, first_row: int, rows: np.ndarray, field: str, what: str):
    bad = pc.equal(pc.utf8_length(arr), 0).to_numpy(zero_copy_only=False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(source, first_row + int(rows[i]) + 1, what, field)


def _convert_batch(t: pa.Table, w: _Writer, source, first_row: int, max_hard: int) -> int:
    """Write the seeds of Promptriever rows ``t`` (rows ``first_row + 1 ...`` of the source).

    The same rule as ``seeds.promptriever_to_seed``, column by column: rows without an
    instruction, an instruction negative or a positive are skipped; ``only_query`` (else ``query``)
    and ``only_instruction`` are stripped; a passage is ``title + " " + text`` when it has a title.
    Returns how many seeds were written.
    """
    n = t.num_rows

    def lens(name):
        if name not in t.column_names:
            return np.zeros(n, dtype=np.int64)
        return pc.fill_null(pc.list_value_length(t.column(name)), 0).to_numpy(zero_copy_only=False)

    has = t.column("has_instruction") if "has_instruction" in t.column_names else pa.nulls(n, pa.bool_())
    keep = (
        pc.fill_null(has.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
        & (lens("new_negatives") > 0)
        & (lens("positive_passages") > 0)
    )
    rows = np.flatnonzero(keep)
    if not len(rows):
        return 0
    mask = pa.array(keep)

    def scalar(name):  # a scalar column of the kept rows (list columns are cut by position below)
        return t.column(name).filter(mask).combine_chunks()

    only_q = _text(scalar("only_query")) if "only_query" in t.column_names else None
    query = _text(scalar("query"))
    if only_q is not None:
        query = pc.if_else(pc.greater(pc.utf8_length(only_q), 0), only_q, query)
    instruction = (
        _text(scalar("only_instruction"))
        if "only_instruction" in t.column_names
        else pa.array([""] * len(rows), pa.string())
    )
    ids = scalar("query_id").cast(pa.string())
    ids = pc.fill_null(ids, "")
    for name, arr in (("id", ids), ("query", query), ("instruction", instruction)):
        _check_nonempty(arr, source, first_row, rows, name, "must be a non-empty string")
    cols = {
        "id": ids,
        "query": query,
        "instruction": instruction,
        "instruction_type": pa.array(["unknown"] * len(rows), pa.string()),
        "domain": pa.array(["msmarco"] * len(rows), pa.string()),
    }
    for src, dst, k in (
        ("positive_passages", "positive", 1),
        ("new_negatives", "instruction_negatives", 3),
        ("negative_passages", "hard_negatives", max_hard),
    ):
        if src not in t.column_names:
            cols[dst] = pa.array([[]] * len(rows), pa.list_(pa.int64()))
            continue
        lists = t.column(src).combine_chunks()
        off, pos = _head_positions(lists, k, keep)
        flat = lists.flatten().take(pa.array(pos, pa.int64()))  # one copy: the kept passages only
        pid = pc.fill_null(flat.field("docid").cast(pa.string()), "")
        title = _text(flat.field("title")) if "title" in {f.name for f in flat.type} else None
        text = _text(flat.field("text"))
        if title is not None:
            text = pc.if_else(
                pc.greater(pc.utf8_length(title), 0), pc.binary_join_element_wise(title, text, " "), text
            )
        owner = np.repeat(np.arange(len(rows)), np.diff(off))
        _check_nonempty(pid, source, first_row, rows[owner], dst, "missing or empty 'id'")
        _check_nonempty(text, source, first_row, rows[owner], dst, "missing or empty 'text'")
        prow = w.passage_rows(pid, text)
        if dst == "positive":
            cols[dst] = pa.array(prow, pa.int64())
        else:
            cols[dst] = pa.ListArray.from_arrays(pa.array(off, pa.int32()), pa.array(prow, pa.int64()))
    w.write_seeds(cols)
    return len(rows)


def _source_batches(source, split: str, batch_size: int) -> Iterator[pa.Table]:
    """Arrow batches of the source rows: local Parquet streamed from disk, JSONL or a hub name via
    ``datasets`` (converted once into its memory-mapped cache)."""
    src = Path(source)
    files = sorted(src.glob("*.parquet")) if src.is_dir() else [src] if src.suffix == ".parquet" else []
    if files:
        import pyarrow.parquet as pq

        for f in files:
            for b in pq.ParquetFile(f).iter_batches(batch_size=batch_size):
                yield pa.Table.from_batches([b])
        return
    if src.exists():  # JSON Lines, streamed in blocks under the hub schema (other fields ignored)
        import pyarrow.json as pj

        opts = pj.ParseOptions(explicit_schema=PROMPTRIEVER_SCHEMA, unexpected_field_behavior="ignore")
        with pj.open_json(src, read_options=pj.ReadOptions(block_size=1 << 24), parse_options=opts) as r:
            for b in r:
                yield pa.Table.from_batches([b])
        return
    import datasets

    ds = datasets.load_dataset(str(source), split=split)
    yield from ds.with_format("arrow").iter(batch_size=batch_size)


def promptriever_to_arrow(
    source: str | Path,
    out_dir: str | Path,
    *,
    split: str = "train",
    limit: int | None = None,
    max_hard_negatives: int = 30,
    batch_size: int = 10_000,
) -> ArrowSeeds:
    """Convert Promptriever rows to ``out_dir/{seeds,passages}.arrow`` and open them.

    ``source``: a Parquet file, a folder of Parquet shards, a JSONL file, or a hub dataset name.
    ``limit`` stops after that many seeds. Memory: one batch of rows plus the passage-id index.
    """
    w = _Writer(Path(out_dir))
    read = 0
    for t in _source_batches(source, split, batch_size):
        if limit is not None and w.n_seeds >= limit:
            break
        _convert_batch(t, w, source, read, max_hard_negatives)
        read += t.num_rows
    meta = {
        "source": str(source),
        "split": split,
        "rows_read": read,
        "max_hard_negatives": max_hard_negatives,
    }
    ds = w.close(meta)
    return ds.head(limit) if limit is not None and len(ds) > limit else ds


def seeds_to_arrow(seeds: Iterable[dict], out_dir: str | Path, batch_size: int = 1000) -> ArrowSeeds:
    """Write seed dicts (any source, e.g. ``seeds.load_seeds``) as an ``ArrowSeeds`` folder."""
    w, buf = _Writer(Path(out_dir)), []

    def flush():
        cols = {
            f: pa.array([s.get(f) for s in buf], SEEDS_SCHEMA.field(f).type)
            for f in SEEDS_SCHEMA.names
            if f not in ("positive", *LIST_COLUMNS)
        }
        for f in ("positive", *LIST_COLUMNS):
            ps = [p for s in buf for p in ([s[f]] if f == "positive" else s.get(f, []))]
            rows = w.passage_rows(pa.array([p["id"] for p in ps]), pa.array([p["text"] for p in ps]))
            if f == "positive":
                cols[f] = pa.array(rows, pa.int64())
            else:
                off = np.concatenate([[0], np.cumsum([len(s.get(f, [])) for s in buf])])
                cols[f] = pa.ListArray.from_arrays(pa.array(off, pa.int32()), pa.array(rows, pa.int64()))
        w.write_seeds(cols)
        buf.clear()

    for s in seeds:
        buf.append(s)
        if len(buf) >= batch_size:
            flush()
    if buf:
        flush()
    return w.close({"source": "seeds"})
