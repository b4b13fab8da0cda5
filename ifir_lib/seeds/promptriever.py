"""Promptriever rows (``samaya-ai/msmarco-w-instructions``) -> seeds, one Arrow batch at a time.

``map_promptriever`` is the one mapping rule, applied column by column to a batch of source rows
(docs/method.md §1): rows without an instruction, an instruction negative or a positive are
skipped; ``only_query`` (else ``query``) and ``only_instruction`` are stripped; a passage is
``title + " " + text`` when it has a title; at most 3 instruction negatives and
``max_hard_negatives`` hard negatives are kept. Promptriever stores ``query`` as
query+instruction and ``only_instruction`` separately; ``new_negatives`` are the instruction
negatives. Both outputs go through it, so they give the same seeds:

- ``load_promptriever``: a list of seed dicts (the schema of ``seeds.schema``), or the tables below;
- ``promptriever_to_arrow``: the Arrow seed tables (``seeds.arrow``) for the full 980k rows, so
  no row becomes a Python object. ``seeds_to_arrow`` writes any seed dicts the same way.

Each passage id is written once; the mapping from passage id to row number is the one structure
that grows with the data (a dict entry per distinct passage: ~4.9M for 1M rows). Where the
source gives one id two texts, the first text read is kept (the list keeps each row's own text).

Not handled here: reading the tables back (``seeds.arrow``), the seed checks (``seeds.schema``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
_LABELLED = pa.struct(  # a passage with the labels Promptriever's instruction negatives carry
    [("docid", pa.string()), ("explanation", pa.string()), ("followir_score", pa.float64())]
    + [(c, pa.string()) for c in ("joint_id", "text", "title")]
)
# The hub dataset's features, from its dataset card
# (https://huggingface.co/datasets/samaya-ai/msmarco-w-instructions, 980,250 train rows).
# Only the fields ``map_promptriever`` reads matter; others are ignored.
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
# source list column -> seed field, and how many of its passages a seed keeps (None: max_hard_negatives)
_PASSAGE_FIELDS = (
    ("positive_passages", "positive", 1),
    ("new_negatives", "instruction_negatives", 3),
    ("negative_passages", "hard_negatives", None),
)

# ``(offsets, ids, texts)`` of one passage field: seed ``j`` owns passages ``offsets[j]:offsets[j + 1]``
PassageGroup = tuple[np.ndarray, pa.Array, pa.Array]
Passages = dict[str, PassageGroup]  # seed field -> its passages


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

    def write_seeds(self, cols: dict, passages: Passages) -> None:
        """Append seeds: ``cols`` holds their scalar columns, ``passages`` their passages."""
        cols = dict(cols)
        for dst, (off, pid, text) in passages.items():
            prow = pa.array(self.passage_rows(pid, text), pa.int64())
            if dst == "positive":
                cols[dst] = prow
            else:
                cols[dst] = pa.ListArray.from_arrays(pa.array(off, pa.int32()), prow)
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
# The mapping rule: Promptriever rows -> seed columns, one Arrow batch at a time


@dataclass
class Mapped:
    """The seeds of one batch of ``read`` source rows: ``rows`` (their positions in the batch), the
    scalar seed columns (``cols``) and the passages of each seed (``passages``)."""

    read: int
    rows: np.ndarray
    cols: dict[str, pa.Array]
    passages: Passages

    def seeds(self) -> list[dict]:
        """The seed dicts (the schema of ``seeds.schema``)."""
        out, cols = [], {k: a.to_pylist() for k, a in self.cols.items()}
        groups = {}
        for dst, (off, pid, text) in self.passages.items():
            ps = [{"id": i, "text": x} for i, x in zip(pid.to_pylist(), text.to_pylist())]
            groups[dst] = [ps[a:b] for a, b in zip(off[:-1], off[1:])]
        for j in range(len(self.rows)):
            s = {k: v[j] for k, v in cols.items()}
            s.update((dst, g[j]) for dst, g in groups.items())
            s["positive"] = s["positive"][0]
            out.append(s)
        return out


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


def _kept(t: pa.Table) -> np.ndarray:
    """Which rows can seed a reversal: those with an instruction, an instruction negative and a
    positive (the paper skips the others)."""
    n = t.num_rows

    def lens(name):
        if name not in t.column_names:
            return np.zeros(n, dtype=np.int64)
        return pc.fill_null(pc.list_value_length(t.column(name)), 0).to_numpy(zero_copy_only=False)

    has = t.column("has_instruction") if "has_instruction" in t.column_names else pa.nulls(n, pa.bool_())
    return (
        pc.fill_null(has.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
        & (lens("new_negatives") > 0)
        & (lens("positive_passages") > 0)
    )


def _passages(t: pa.Table, src: str, k: int | None, keep: np.ndarray) -> PassageGroup:
    """``(offsets, ids, texts)`` of the first ``k`` passages in list column ``src`` of the kept rows;
    a passage's text is ``title + " " + text`` when it has a title."""
    if src not in t.column_names:
        empty = pa.array([], pa.string())
        return np.zeros(int(keep.sum()) + 1, dtype=np.int64), empty, empty
    lists = t.column(src).combine_chunks()
    off, pos = _head_positions(lists, k, keep)
    flat = lists.flatten().take(pa.array(pos, pa.int64()))  # one copy: the kept passages only
    pid = pc.fill_null(flat.field("docid").cast(pa.string()), "")
    text = _text(flat.field("text"))
    if "title" in {f.name for f in flat.type}:
        title = _text(flat.field("title"))
        text = pc.if_else(
            pc.greater(pc.utf8_length(title), 0), pc.binary_join_element_wise(title, text, " "), text
        )
    return off, pid, text


def map_promptriever(t: pa.Table, source, first_row: int = 0, max_hard_negatives: int = 30) -> Mapped:
    """The seeds of Promptriever rows ``t`` (rows ``first_row + 1 ...`` of ``source``), by the rule
    in the module docstring. A kept row with an empty id, query, instruction or passage raises
    ``DataError`` naming the source row and the seed field."""
    keep = _kept(t)
    rows = np.flatnonzero(keep)
    if not len(rows):
        return Mapped(t.num_rows, rows, {}, {})
    mask, n = pa.array(keep), len(rows)

    def kept(name):  # a scalar column of the kept rows, as strings
        if name not in t.column_names:
            return pa.nulls(n, pa.string())
        return t.column(name).filter(mask).combine_chunks().cast(pa.string())

    query, only_q = _text(kept("query")), _text(kept("only_query"))
    cols = {
        "id": pc.fill_null(kept("query_id"), ""),
        "query": pc.if_else(pc.greater(pc.utf8_length(only_q), 0), only_q, query),
        "instruction": _text(kept("only_instruction")),
    }
    for name, arr in cols.items():
        _check_nonempty(arr, source, first_row, rows, name, "must be a non-empty string")
    cols["instruction_type"] = pa.array(["unknown"] * n, pa.string())
    cols["domain"] = pa.array(["msmarco"] * n, pa.string())
    cols["reference_reversal"] = pa.nulls(n, pa.string())
    passages = {}
    for src, dst, k in _PASSAGE_FIELDS:
        off, pid, text = passages[dst] = _passages(t, src, max_hard_negatives if k is None else k, keep)
        owner = rows[np.repeat(np.arange(n), np.diff(off))]
        _check_nonempty(pid, source, first_row, owner, dst, "missing or empty 'id'")
        _check_nonempty(text, source, first_row, owner, dst, "missing or empty 'text'")
    return Mapped(t.num_rows, rows, cols, passages)


# --------------------------------------------------------------------------------------------
# Reading the source, and the two outputs


def _source_batches(source, split: str, batch_size: int, streaming: bool = False) -> Iterator[pa.Table]:
    """Arrow batches of the source rows: local Parquet streamed from disk, JSONL or a hub name via
    ``datasets`` (converted once into its memory-mapped cache, or streamed with ``streaming``)."""
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

    ds = datasets.load_dataset(str(source), split=split, streaming=streaming)
    yield from ds.with_format("arrow").iter(batch_size=batch_size)


def _mapped_batches(
    source, split: str, limit: int | None, max_hard: int, batch_size: int, streaming: bool = False
) -> Iterator[Mapped]:
    """The seeds of each source batch, until ``limit`` seeds (``None``: all)."""
    read = seeds = 0
    for t in _source_batches(source, split, batch_size, streaming):
        if limit is not None and seeds >= limit:
            return
        m = map_promptriever(t, source, read, max_hard)
        read += m.read
        seeds += len(m.rows)
        yield m


def load_promptriever(
    source: str | Path = "samaya-ai/msmarco-w-instructions",
    split: str = "train",
    limit: int | None = None,
    streaming: bool = False,
    as_dataset: bool = False,
    out_dir: str | Path | None = None,
    max_hard_negatives: int = 30,
):
    """Load Promptriever rows as seeds, from a local JSONL/Parquet file or (when asked) the hub.

    A local path is read with ``pyarrow`` in the hub's schema (Parquet may be a folder of shards);
    a hub name needs network access (``HF_DATASETS_OFFLINE=1`` makes it fail fast offline) and is
    streamed with ``streaming``. Returns a list of seeds, or with ``as_dataset=True`` an
    ``ArrowSeeds`` written to ``out_dir`` (memory-mapped, passages stored once by id; the path for
    the full 980k rows). ``limit`` stops after that many seeds (a falsy one keeps all in the list).
    """
    if as_dataset:
        if out_dir is None:
            raise ValueError("as_dataset=True needs out_dir, the folder for the Arrow tables")
        return promptriever_to_arrow(
            source, out_dir, split=split, limit=limit, max_hard_negatives=max_hard_negatives
        )
    seeds = []
    for m in _mapped_batches(source, split, limit or None, max_hard_negatives, 10_000, streaming):
        seeds += m.seeds()
    return seeds[:limit] if limit else seeds


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
    w, read = _Writer(Path(out_dir)), 0
    for m in _mapped_batches(source, split, limit, max_hard_negatives, batch_size):
        read += m.read
        if len(m.rows):
            w.write_seeds(m.cols, m.passages)
    meta = {
        "source": str(source),
        "split": split,
        "rows_read": read,
        "max_hard_negatives": max_hard_negatives,
    }
    ds = w.close(meta)
    return ds.head(limit) if limit is not None and len(ds) > limit else ds


def seeds_to_arrow(seeds: Iterable[dict], out_dir: str | Path, batch_size: int = 1000) -> ArrowSeeds:
    """Write seed dicts (any source, e.g. ``seeds.schema.load_seeds``) as an ``ArrowSeeds`` folder."""
    w, buf = _Writer(Path(out_dir)), []

    def flush():
        cols = {
            f: pa.array([s.get(f) for s in buf], SEEDS_SCHEMA.field(f).type)
            for f in SEEDS_SCHEMA.names
            if f not in ("positive", *LIST_COLUMNS)
        }
        passages = {}
        for f in ("positive", *LIST_COLUMNS):
            lists = [[s[f]] if f == "positive" else s.get(f, []) for s in buf]
            ps = [p for lst in lists for p in lst]
            passages[f] = (
                np.concatenate([[0], np.cumsum([len(lst) for lst in lists])]),
                pa.array([p["id"] for p in ps], pa.string()),
                pa.array([p["text"] for p in ps], pa.string()),
            )
        w.write_seeds(cols, passages)
        buf.clear()

    for s in seeds:
        buf.append(s)
        if len(buf) >= batch_size:
            flush()
    if buf:
        flush()
    return w.close({"source": "seeds"})
