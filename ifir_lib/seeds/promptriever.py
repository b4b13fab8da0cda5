"""Promptriever rows (``samaya-ai/msmarco-w-instructions``) -> seeds, one Arrow batch at a time.

``map_promptriever`` is the one mapping rule, applied column by column to a batch of source rows
(docs/method.md §1): rows without an instruction, an instruction negative or a positive are
skipped; ``only_query`` (else ``query`` with the instruction cut from its end) and
``only_instruction`` are stripped; a passage is
``title + " " + text`` when it has a title; at most 3 instruction negatives and
``max_hard_negatives`` hard negatives are kept. Promptriever stores ``query`` as
query+instruction and ``only_instruction`` separately; ``new_negatives`` are the instruction
negatives. Both outputs go through it, so they give the same seeds:

- ``load_promptriever``: a list of seed dicts (the schema of ``seeds.schema``), or the tables below;
- ``promptriever_to_arrow``: the Arrow seed tables (``seeds.arrow``) for the full 980k rows, so
  no row becomes a Python object. ``seeds_to_arrow`` writes any seed dicts the same way.

**Counterparts** (All-orig's second view, arXiv 2604.18845 Tables 1-2). Promptriever holds a
query twice: with an instruction, and as a bare-query row (``has_instruction`` false, empty
``only_instruction``) under the same ``query_id`` with its own positive and hard negatives. With
``counterparts=True`` (the default) each seed keeps the first such row read as
``counterpart_positive`` and ``counterpart_hard_negatives`` (at most ``max_hard_negatives``),
under the same passage rules and checks. Both paths match over every row read, in any order
and across batch and shard boundaries (the Arrow path joins at the end); with a ``limit``,
reading stops at the row of the last seed kept, whatever the batch size. A seed whose query
has no bare row keeps neither field, and training builds its counterpart from the seed
(``training.trainsets``); ``meta.json`` counts the bare rows read and the seeds that got one.
The passages of bare rows whose query has no instruction seed are stored too (unused).

Each seed id comes once: a seed id read twice (a Parquet shard given twice, overlapping exports)
raises ``DataError`` naming the file, its row and the id, in both paths. Each passage id is
written once; the mapping from passage id to row number is the structure that grows with the
data (a dict entry per distinct passage: ~4.9M for 1M rows; the bare rows' hard negatives add
theirs), with one int per seed id beside it and the hash of each passage's text. Where the
source gives one passage id two texts, the first text read is kept and a warning counts them
(``meta.json``'s ``passage_text_clashes``); the list keeps each row's own text. Training
refuses such seeds on both paths (``schema.passage_text_clashes``, ``trainsets``).

Not handled here: reading the tables back (``seeds.arrow``), the seed checks (``seeds.schema``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import ConfigError, DataError
from .arrow import (
    COUNTERPART_COLUMNS,
    LIST_COLUMNS,
    META_FILE,
    PASSAGES_FILE,
    PASSAGES_SCHEMA,
    SEEDS_FILE,
    SEEDS_SCHEMA,
    ArrowSeeds,
)
from .schema import check_unique_ids, query_holds_instruction

log = logging.getLogger(__name__)

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
# the source columns every seed row fills (``_kept``, ``map_promptriever``)
_SEED_COLUMNS = ("has_instruction", "only_instruction", "new_negatives", "positive_passages")
# source list column -> seed field, and how many of its passages a seed keeps (None: max_hard_negatives)
_PASSAGE_FIELDS = (
    ("positive_passages", "positive", 1),
    ("new_negatives", "instruction_negatives", 3),
    ("negative_passages", "hard_negatives", None),
)

# the bare-query rows' passages: source list column -> seed field, passages kept (None: max_hard_negatives)
_COUNTERPART_FIELDS = (
    ("positive_passages", "counterpart_positive", 1),
    ("negative_passages", "counterpart_hard_negatives", None),
)
# the bare-query rows of a conversion, joined to the seeds by query id when it closes
_COUNTERPARTS_SCHEMA = pa.schema(
    [("id", pa.string()), ("positive", pa.int64()), ("hard_negatives", pa.list_(pa.int64()))]
)

# ``(offsets, ids, texts)`` of one passage field: seed ``j`` owns passages ``offsets[j]:offsets[j + 1]``
PassageGroup = tuple[np.ndarray, pa.Array, pa.Array]
Passages = dict[str, PassageGroup]  # seed field -> its passages


class _Writer:
    """Appends seeds and (deduplicated) passages to the two stream files of ``out_dir``; with
    ``join_counterparts``, bare-query rows go to a third file, joined to the seeds by ``close``."""

    def __init__(self, out_dir: Path, join_counterparts: bool = False):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir = out_dir
        self.join = join_counterparts
        self.seeds_path = out_dir / (SEEDS_FILE + ".part" if join_counterparts else SEEDS_FILE)
        self.seeds = pa.ipc.new_stream(str(self.seeds_path), SEEDS_SCHEMA)
        self.passages = pa.ipc.new_stream(str(out_dir / PASSAGES_FILE), PASSAGES_SCHEMA)
        self.bare_path = out_dir / "counterparts.arrow.part"
        self.bare = (
            pa.ipc.new_stream(str(self.bare_path), _COUNTERPARTS_SCHEMA) if join_counterparts else None
        )
        self.row_of: dict[str, int] = {}  # passage id -> row in passages.arrow
        self.text_hash = np.empty(1 << 16, dtype=np.int64)  # row -> hash() of its text (this process)
        self.clashes: list[str] = []  # passage ids read again with another text (the first is kept)
        self.n_seeds = self.n_bare = 0

    def passage_rows(self, ids: pa.Array, texts: pa.Array) -> np.ndarray:
        """Row numbers for ``ids``; ids not seen before are appended with their text. An id read
        again with another text keeps its first one and is counted (``clashes``)."""
        rows = np.empty(len(ids), dtype=np.int64)
        new = []
        row_of, pids = self.row_of, ids.to_pylist()
        for i, pid in enumerate(pids):
            r = row_of.get(pid)
            if r is None:
                r = row_of[pid] = len(row_of)
                new.append(i)
            rows[i] = r
        hashes = np.fromiter(map(hash, texts.to_pylist()), dtype=np.int64, count=len(pids))
        if len(row_of) > len(self.text_hash):
            self.text_hash = np.resize(self.text_hash, 2 * len(row_of))
        self.text_hash[rows[new]] = hashes[new]  # a new id's first text (the first of its repeats)
        self.clashes += [pids[i] for i in np.flatnonzero(self.text_hash[rows] != hashes)]
        if new:
            take = pa.array(new, pa.int64())
            self.passages.write_batch(
                pa.record_batch([ids.take(take), texts.take(take)], schema=PASSAGES_SCHEMA)
            )
        return rows

    def write_seeds(self, cols: dict, passages: Passages) -> None:
        """Append seeds: ``cols`` holds their scalar columns, ``passages`` their passages (the
        counterpart fields optional: a seed with no ``counterpart_positive`` gets nulls)."""
        cols = dict(cols)
        has_cp = None
        if "counterpart_positive" in passages:
            has_cp = np.diff(passages["counterpart_positive"][0]) > 0
        for dst, (off, pid, text) in passages.items():
            prow = self.passage_rows(pid, text)
            if dst == "positive":
                cols[dst] = pa.array(prow, pa.int64())
            elif dst == "counterpart_positive":
                full = np.zeros(len(has_cp), dtype=np.int64)
                full[has_cp] = prow
                cols[dst] = pa.array(full, pa.int64(), mask=~has_cp)
            else:
                mask = pa.array(~has_cp) if dst == "counterpart_hard_negatives" else None
                cols[dst] = pa.ListArray.from_arrays(pa.array(off, pa.int32()), pa.array(prow), mask=mask)
        n = len(cols["id"])
        batch = {f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in SEEDS_SCHEMA}
        self.seeds.write_table(pa.Table.from_arrays(list(batch.values()), schema=SEEDS_SCHEMA))
        self.n_seeds += n

    def write_bare(self, cps: Counterparts) -> None:
        """Append bare-query rows (their query ids and passages), for ``close`` to join."""
        pos = self.passage_rows(*cps.passages["counterpart_positive"][1:])
        off, pid, text = cps.passages["counterpart_hard_negatives"]
        hard = pa.ListArray.from_arrays(pa.array(off, pa.int32()), pa.array(self.passage_rows(pid, text)))
        self.bare.write_batch(pa.record_batch([cps.ids, pa.array(pos), hard], schema=_COUNTERPARTS_SCHEMA))
        self.n_bare += len(cps.ids)

    def close(self, meta: dict) -> ArrowSeeds:
        self.seeds.close()
        self.passages.close()
        meta = {**meta, "seeds": self.n_seeds, "passages": len(self.row_of)}
        if self.clashes:
            meta["passage_text_clashes"] = len(self.clashes)
            log.warning(
                "%s: %d passage(s) came again under an id read before with another text (ids %s); each "
                "keeps its first text, so a later seed may have another seed's passage: check the source",
                self.out_dir,
                len(self.clashes),
                ", ".join(map(repr, dict.fromkeys(self.clashes[:5]))),
            )
        if self.join:
            self.bare.close()
            meta.update(bare_rows=self.n_bare, counterparts=self._join_counterparts())
        (self.out_dir / META_FILE).write_text(json.dumps(meta, indent=2))
        return ArrowSeeds.open(self.out_dir)

    def _join_counterparts(self) -> int:
        """Rewrite the seeds with each one's first bare-query row of the same id; returns how many
        seeds got one. One batch of seeds at a time; the bare rows are read memory-mapped."""
        matched = 0
        with pa.memory_map(str(self.bare_path)) as fb, pa.memory_map(str(self.seeds_path)) as fs:
            bare = pa.ipc.open_stream(fb).read_all().combine_chunks()
            ids = bare.column("id").combine_chunks()
            with pa.ipc.new_stream(str(self.out_dir / SEEDS_FILE), SEEDS_SCHEMA) as out:
                for batch in pa.ipc.open_stream(fs):
                    idx = pc.index_in(batch.column("id"), value_set=ids)  # the first of duplicates
                    has = idx.is_valid().to_numpy(zero_copy_only=False)
                    got = bare.take(idx.filter(pa.array(has)))
                    full = np.zeros(len(has), dtype=np.int64)
                    full[has] = got.column("positive").to_numpy()
                    hard = got.column("hard_negatives").combine_chunks()
                    lens = np.zeros(len(has), dtype=np.int32)
                    lens[has] = pc.list_value_length(hard).to_numpy(zero_copy_only=False)
                    off = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
                    cols = {
                        "counterpart_positive": pa.array(full, pa.int64(), mask=~has),
                        "counterpart_hard_negatives": pa.ListArray.from_arrays(
                            off, hard.flatten(), mask=pa.array(~has)
                        ),
                    }
                    arrays = [cols.get(f, batch.column(f)) for f in SEEDS_SCHEMA.names]
                    out.write_batch(pa.record_batch(arrays, schema=SEEDS_SCHEMA))
                    matched += int(has.sum())
        self.seeds_path.unlink()
        self.bare_path.unlink()
        return matched


# --------------------------------------------------------------------------------------------
# The mapping rule: Promptriever rows -> seed columns, one Arrow batch at a time


def _head_passages(passages: Passages, n: int) -> Passages:
    """The passages of the first ``n`` owners (offsets start at 0)."""
    return {
        f: (off[: n + 1], pid.slice(0, off[n]), text.slice(0, off[n]))
        for f, (off, pid, text) in passages.items()
    }


@dataclass
class Counterparts:
    """The bare-query rows of one batch (the seeds' counterparts): their ``query_id``s, their
    positions in the batch (``rows``) and passages (``counterpart_positive``: one each,
    ``counterpart_hard_negatives``)."""

    ids: pa.Array
    rows: np.ndarray
    passages: Passages

    def head(self, n: int) -> Counterparts:
        """The first ``n`` bare rows."""
        return Counterparts(self.ids.slice(0, n), self.rows[:n], _head_passages(self.passages, n))

    def dicts(self) -> Iterator[tuple[str, dict]]:
        """``(query_id, {"counterpart_positive", "counterpart_hard_negatives"})`` per row, in order."""
        groups = _groups(self.passages)
        for j, qid in enumerate(self.ids.to_pylist()):
            pos, hard = (groups[f][j] for f in COUNTERPART_COLUMNS)
            yield qid, {"counterpart_positive": pos[0], "counterpart_hard_negatives": hard}


@dataclass
class Mapped:
    """The seeds of one batch of ``read`` source rows: ``rows`` (their positions in the batch), the
    scalar seed columns (``cols``), the passages of each seed (``passages``) and the batch's
    bare-query rows (``counterparts``; None when there are none or they are not kept)."""

    read: int
    rows: np.ndarray
    cols: dict[str, pa.Array]
    passages: Passages
    counterparts: Counterparts | None = None

    def seeds(self) -> list[dict]:
        """The seed dicts (the schema of ``seeds.schema``), without their counterparts (joined by
        query id over every batch: ``load_promptriever``)."""
        out, cols = [], {k: a.to_pylist() for k, a in self.cols.items()}
        groups = _groups(self.passages)
        for j in range(len(self.rows)):
            s = {k: v[j] for k, v in cols.items()}
            s.update((dst, g[j]) for dst, g in groups.items())
            s["positive"] = s["positive"][0]
            out.append(s)
        return out

    def head(self, n: int) -> Mapped:
        """The first ``n`` seeds (``0 < n <= len(rows)``), as if the batch ended at the row of the
        last: the rows read and the bare rows stop there too, so a ``limit`` does not depend on
        where batches end.

        Example: seeds at rows [1, 3, 5] and bare rows at [0, 2, 4] -> ``head(2)`` keeps seeds at
        [1, 3], bare rows at [0, 2], and ``read`` 4.
        """
        last = int(self.rows[n - 1])
        cps = self.counterparts
        if cps is not None:
            k = int(np.searchsorted(cps.rows, last, side="right"))
            cps = cps.head(k) if k else None
        cols = {name: a.slice(0, n) for name, a in self.cols.items()}
        return Mapped(last + 1, self.rows[:n], cols, _head_passages(self.passages, n), cps)


def _groups(passages: Passages) -> dict[str, list[list[dict]]]:
    """Each field's passages as ``{"id", "text"}`` dicts, one list per seed."""
    groups = {}
    for dst, (off, pid, text) in passages.items():
        ps = [{"id": i, "text": x} for i, x in zip(pid.to_pylist(), text.to_pylist())]
        groups[dst] = [ps[a:b] for a, b in zip(off[:-1], off[1:])]
    return groups


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


def _check_bare(query: pa.Array, instruction: pa.Array, source, first_row: int, rows, only_q) -> None:
    """A seed query that still ends with its instruction (an ``only_query`` exported with the
    instruction, or a fallback ``query`` equal to it) is a ``DataError`` naming the source row:
    training appends the instruction, so it would be read twice (``schema.query_holds_instruction``,
    the check a JSONL seed gets)."""
    given = pc.greater(pc.utf8_length(only_q), 0).to_numpy(zero_copy_only=False)
    for i, (q, ins) in enumerate(zip(query.to_pylist(), instruction.to_pylist())):
        if query_holds_instruction(q, ins):
            field = "only_query" if given[i] else "query"
            raise DataError(
                source,
                first_row + int(rows[i]) + 1,
                "ends with the row's only_instruction: training reads query + ' ' + instruction, so it "
                "would read the instruction twice; give the bare query",
                field,
            )


def _lens(t: pa.Table, name: str) -> np.ndarray:
    """The length of list column ``name`` in each row (0 where null or absent)."""
    if name not in t.column_names:
        return np.zeros(t.num_rows, dtype=np.int64)
    return pc.fill_null(pc.list_value_length(t.column(name)), 0).to_numpy(zero_copy_only=False)


def _has_instruction(t: pa.Table) -> np.ndarray:
    n = t.num_rows
    has = t.column("has_instruction") if "has_instruction" in t.column_names else pa.nulls(n, pa.bool_())
    return pc.fill_null(has.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)


def _kept(t: pa.Table) -> np.ndarray:
    """Which rows can seed a reversal: those with an instruction, an instruction negative and a
    positive (the paper skips the others)."""
    return _has_instruction(t) & (_lens(t, "new_negatives") > 0) & (_lens(t, "positive_passages") > 0)


def _bare(t: pa.Table) -> np.ndarray:
    """Which rows are bare-query rows that can be a seed's counterpart: no instruction (neither the
    flag nor ``only_instruction``) and a positive."""
    if "only_instruction" in t.column_names:
        no_text = pc.equal(pc.utf8_length(_text(t.column("only_instruction"))), 0)
        no_text = no_text.to_numpy(zero_copy_only=False)
    else:
        no_text = np.ones(t.num_rows, dtype=bool)
    return ~_has_instruction(t) & no_text & (_lens(t, "positive_passages") > 0)


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


def _checked_passages(t, fields, keep, rows, max_hard, source, first_row) -> Passages:
    """The passages of the ``keep`` rows for each ``(source column, seed field, k)`` of ``fields``;
    an empty id or text raises ``DataError`` naming the source row and the seed field."""
    passages = {}
    for src, dst, k in fields:
        off, pid, text = passages[dst] = _passages(t, src, max_hard if k is None else k, keep)
        owner = rows[np.repeat(np.arange(len(rows)), np.diff(off))]
        _check_nonempty(pid, source, first_row, owner, dst, "missing or empty 'id'")
        _check_nonempty(text, source, first_row, owner, dst, "missing or empty 'text'")
    return passages


def _counterparts(t: pa.Table, source, first_row: int, max_hard: int) -> Counterparts | None:
    """The bare-query rows of ``t`` (``_bare``) with their passages; None when there are none."""
    keep = _bare(t)
    rows = np.flatnonzero(keep)
    if not len(rows):
        return None
    ids = t.column("query_id") if "query_id" in t.column_names else pa.nulls(t.num_rows, pa.string())
    ids = pc.fill_null(ids.filter(pa.array(keep)).combine_chunks().cast(pa.string()), "")
    return Counterparts(
        ids, rows, _checked_passages(t, _COUNTERPART_FIELDS, keep, rows, max_hard, source, first_row)
    )


def _bare_query(query, only_q, instruction, source, first_row: int, rows) -> pa.Array:
    """``only_query``, else ``query`` with the instruction cut from its end: Promptriever's
    ``query`` is ``only_query + " " + only_instruction``, and training appends the instruction
    again. A fallback query that does not end with its instruction is kept, with a warning."""
    fallback = np.flatnonzero(pc.equal(pc.utf8_length(only_q), 0).to_numpy(zero_copy_only=False))
    if not len(fallback):
        return only_q
    out, ins = only_q.to_pylist(), instruction.to_pylist()
    full, kept_whole = query.to_pylist(), 0
    for i in fallback:
        q, cut = full[i], ins[i]
        if cut and q.endswith(cut):
            q = q[: -len(cut)].strip()
        else:
            kept_whole += 1
        out[i] = q
    log.warning(
        "%s rows %d-%d: %d kept row(s) have no only_query, so their query is read from 'query' with "
        "the instruction cut from its end%s",
        source,
        first_row + int(rows[0]) + 1,
        first_row + int(rows[-1]) + 1,
        len(fallback),
        f"; {kept_whole} do not end with it and are kept whole" if kept_whole else "",
    )
    return pa.array(out, pa.string())


def map_promptriever(
    t: pa.Table, source, first_row: int = 0, max_hard_negatives: int = 30, counterparts: bool = True
) -> Mapped:
    """The seeds of Promptriever rows ``t`` (rows ``first_row + 1 ...`` of ``source``), by the rule
    in the module docstring, and (``counterparts``) its bare-query rows. A kept row with an empty
    id, query, instruction or passage raises ``DataError`` naming the source row and the seed field."""
    keep = _kept(t)
    rows = np.flatnonzero(keep)
    cps = _counterparts(t, source, first_row, max_hard_negatives) if counterparts else None
    if not len(rows):
        return Mapped(t.num_rows, rows, {}, {}, cps)
    mask, n = pa.array(keep), len(rows)

    def kept(name):  # a scalar column of the kept rows, as strings
        if name not in t.column_names:
            return pa.nulls(n, pa.string())
        return t.column(name).filter(mask).combine_chunks().cast(pa.string())

    query, only_q = _text(kept("query")), _text(kept("only_query"))
    instruction = _text(kept("only_instruction"))
    cols = {
        "id": pc.fill_null(kept("query_id"), ""),
        "query": _bare_query(query, only_q, instruction, source, first_row, rows),
        "instruction": instruction,
    }
    for name, arr in cols.items():
        _check_nonempty(arr, source, first_row, rows, name, "must be a non-empty string")
    _check_bare(cols["query"], instruction, source, first_row, rows, only_q)
    cols["instruction_type"] = pa.array(["unknown"] * n, pa.string())
    cols["domain"] = pa.array(["msmarco"] * n, pa.string())
    cols["reference_reversal"] = pa.nulls(n, pa.string())
    passages = _checked_passages(t, _PASSAGE_FIELDS, keep, rows, max_hard_negatives, source, first_row)
    return Mapped(t.num_rows, rows, cols, passages, cps)


# --------------------------------------------------------------------------------------------
# Reading the source, and the two outputs


def _source_batches(
    source, split: str, batch_size: int, streaming: bool = False
) -> Iterator[tuple[str, pa.Table]]:
    """``(file, batch)``: Arrow batches of the source rows and the file each comes from: local
    Parquet streamed from disk (a folder: each shard), JSONL, or a hub name via ``datasets``
    (converted once into its memory-mapped cache, or streamed with ``streaming``; file = the name)."""
    src = Path(source)
    files = sorted(src.glob("*.parquet")) if src.is_dir() else [src] if src.suffix == ".parquet" else []
    if files:
        import pyarrow.parquet as pq

        for f in files:
            for b in pq.ParquetFile(f).iter_batches(batch_size=batch_size):
                yield str(f), pa.Table.from_batches([b])
        return
    if src.exists():  # JSON Lines, streamed in blocks under the hub schema (other fields ignored)
        import pyarrow.json as pj

        opts = pj.ParseOptions(explicit_schema=PROMPTRIEVER_SCHEMA, unexpected_field_behavior="ignore")
        with pj.open_json(src, read_options=pj.ReadOptions(block_size=1 << 24), parse_options=opts) as r:
            for b in r:
                yield str(src), pa.Table.from_batches([b])
        return
    import datasets

    ds = datasets.load_dataset(str(source), split=split, streaming=streaming)
    yield from ((str(source), t) for t in ds.with_format("arrow").iter(batch_size=batch_size))


class _SeedIds:
    """Refuses a seed id read twice: a shard given twice (``train-00000 (1).parquet``) or two
    overlapping exports would give every seed two copies under one id. One int per seed id."""

    def __init__(self):
        self.first: dict[str, int] = {}  # seed id -> its row across the source (1-based)
        self.files: list[tuple[int, str]] = []  # (first row across the source, file) per file

    def where(self, row: int) -> tuple[str, int]:
        """``(file, row in that file)`` of a row counted across the source."""
        start, name = next((s, f) for s, f in reversed(self.files) if s <= row)
        return name, row - start + 1

    def check(self, m: Mapped, name: str, first_row: int) -> None:
        """``m``'s seeds (rows ``first_row + 1 ...`` of the source, from ``name``): the first
        repeated id raises ``DataError`` naming the file, the row and the id."""
        if not self.files or self.files[-1][1] != name:
            self.files.append((first_row + 1, name))
        if not len(m.rows):
            return
        for r, sid in zip(m.rows.tolist(), m.cols["id"].to_pylist()):
            row = first_row + r + 1
            prev = self.first.setdefault(sid, row)
            if prev != row:
                f, k = self.where(prev)
                _, here = self.where(row)
                raise DataError(
                    name,
                    here,
                    f"seed id {sid!r} was already read at {f} row {k} (a shard given twice, or "
                    "overlapping exports?): each seed id may come once",
                    "query_id",
                )


def _mapped_batches(
    source,
    split: str,
    limit: int | None,
    max_hard: int,
    batch_size: int,
    streaming: bool = False,
    counterparts: bool = True,
) -> Iterator[Mapped]:
    """The seeds of each source batch, until ``limit`` seeds (``None``: all). The batch that reaches
    ``limit`` is cut after its last seed's row (``Mapped.head``): the rows read, and so the bare
    rows found, are the same for any ``batch_size``. A seed id read twice raises ``DataError``
    (``_SeedIds``), for both outputs."""
    read = seeds = 0
    ids = _SeedIds()
    empty = set(_SEED_COLUMNS)  # the columns a seed needs that no row read has filled yet
    for name, t in _source_batches(source, split, batch_size, streaming):
        if limit is not None and seeds >= limit:
            return
        empty -= {c for c in empty if c in t.column_names and t.column(c).null_count < t.num_rows}
        m = map_promptriever(t, source, read, max_hard, counterparts)
        if limit is not None and seeds + len(m.rows) > limit:
            m = m.head(limit - seeds)
        ids.check(m, name, read)
        read += m.read
        seeds += len(m.rows)
        yield m
    if not seeds:
        why = f"; {', '.join(sorted(empty))} absent or null in every row" if empty else ""
        raise DataError(
            source,
            None,
            f"{read} row(s) read, none a seed: a seed row needs has_instruction true, only_instruction, "
            f"new_negatives and positive_passages (the hub schema){why}",
        )


def load_promptriever(
    source: str | Path = "samaya-ai/msmarco-w-instructions",
    split: str = "train",
    limit: int | None = None,
    streaming: bool = False,
    as_dataset: bool = False,
    out_dir: str | Path | None = None,
    max_hard_negatives: int = 30,
    counterparts: bool = True,
):
    """Load Promptriever rows as seeds, from a local JSONL/Parquet file or (when asked) the hub.

    A local path is read with ``pyarrow`` in the hub's schema (Parquet may be a folder of shards);
    a hub name needs network access (``HF_DATASETS_OFFLINE=1`` makes it fail fast offline) and is
    streamed with ``streaming``. Returns a list of seeds, or with ``as_dataset=True`` an
    ``ArrowSeeds`` written to ``out_dir`` (memory-mapped, passages stored once by id; the path for
    the full 980k rows). ``limit`` stops after that many seeds (a falsy one keeps all in the list)
    and after the row of the last: only bare rows read before it count, at any batch size.
    ``counterparts``: keep each seed's bare-query row (the module docstring); the list path logs
    how many seeds got one.
    """
    if as_dataset:
        if out_dir is None:
            raise ValueError("as_dataset=True needs out_dir, the folder for the Arrow tables")
        return promptriever_to_arrow(
            source,
            out_dir,
            split=split,
            limit=limit,
            max_hard_negatives=max_hard_negatives,
            counterparts=counterparts,
        )
    seeds, bare = [], {}
    batches = _mapped_batches(
        source, split, limit or None, max_hard_negatives, 10_000, streaming, counterparts
    )
    for m in batches:
        seeds += m.seeds()
        for qid, cp in m.counterparts.dicts() if m.counterparts else ():
            bare.setdefault(qid, cp)  # the first bare row of a query id, as the Arrow path's join
    for s in seeds:
        s.update(bare.get(s["id"], {}))
    if counterparts:
        n = sum(1 for s in seeds if "counterpart_positive" in s)
        log.info(
            "%d of %d seeds have their bare-query row as counterpart (%d bare query ids read)",
            n,
            len(seeds),
            len(bare),
        )
    return seeds


def promptriever_to_arrow(
    source: str | Path,
    out_dir: str | Path,
    *,
    split: str = "train",
    limit: int | None = None,
    max_hard_negatives: int = 30,
    batch_size: int = 10_000,
    counterparts: bool = True,
) -> ArrowSeeds:
    """Convert Promptriever rows to ``out_dir/{seeds,passages}.arrow`` and open them.

    ``source``: a Parquet file, a folder of Parquet shards, a JSONL file, or a hub dataset name.
    ``limit`` stops after that many seeds, as ``load_promptriever``'s. ``counterparts``: keep each
    seed's bare-query row (the module docstring; ``meta.json`` counts ``bare_rows`` and
    ``counterparts``). Memory: one batch
    of rows plus the passage-id index, and the query ids of the bare rows when joining.
    """
    w, read = _Writer(Path(out_dir), join_counterparts=counterparts), 0
    for m in _mapped_batches(source, split, limit, max_hard_negatives, batch_size, counterparts=counterparts):
        read += m.read
        if len(m.rows):
            w.write_seeds(m.cols, m.passages)
        if m.counterparts is not None:
            w.write_bare(m.counterparts)
    meta = {
        "source": str(source),
        "split": split,
        "rows_read": read,
        "max_hard_negatives": max_hard_negatives,
    }
    return w.close(meta)


def seeds_to_arrow(seeds: Iterable[dict], out_dir: str | Path, batch_size: int = 1000) -> ArrowSeeds:
    """Write seed dicts (any source, e.g. ``seeds.schema.load_seeds``) as an ``ArrowSeeds`` folder,
    their counterparts (``counterpart_positive``, ``counterpart_hard_negatives``) included. A seed id
    given twice is a ``ConfigError`` (``schema.check_unique_ids``), and the files written are removed."""
    w, buf = _Writer(Path(out_dir)), []

    def flush():
        cols = {
            f: pa.array([s.get(f) for s in buf], SEEDS_SCHEMA.field(f).type)
            for f in SEEDS_SCHEMA.names
            if f not in ("positive", *LIST_COLUMNS, *COUNTERPART_COLUMNS)
        }
        passages = {}
        for f in ("positive", *LIST_COLUMNS, *COUNTERPART_COLUMNS):
            if f in ("positive", "counterpart_positive"):
                lists = [[s[f]] if s.get(f) else [] for s in buf]
            else:
                lists = [s.get(f) or [] for s in buf]
            ps = [p for lst in lists for p in lst]
            passages[f] = (
                np.concatenate([[0], np.cumsum([len(lst) for lst in lists])]),
                pa.array([p["id"] for p in ps], pa.string()),
                pa.array([p["text"] for p in ps], pa.string()),
            )
        w.write_seeds(cols, passages)
        buf.clear()

    def checked():  # the ids as they pass; a repeat stops the folder before close writes meta.json
        for s in seeds:
            yield s["id"]
            buf.append(s)
            if len(buf) >= batch_size:
                flush()

    try:
        check_unique_ids(checked(), str(out_dir))
    except ConfigError:
        w.seeds.close()
        w.passages.close()
        for f in (SEEDS_FILE, PASSAGES_FILE):
            (Path(out_dir) / f).unlink(missing_ok=True)
        raise
    if buf:
        flush()
    return w.close({"source": "seeds"})
