"""Seeds in Arrow at Promptriever scale: a memory-mapped seed table plus a passages table.

One folder holds (written by ``seeds.promptriever``)::

    DIR/passages.arrow   id, text                      one row per distinct passage id
    DIR/seeds.arrow      id, query, instruction, instruction_type, domain, reference_reversal,
                         reference_negative_index, aug_instruction, the three narratives,
                         abstract_reversal (optional string columns: null when a seed has none),
                         positive: int, instruction_negatives: [int], hard_negatives: [int],
                         counterpart_positive: int?, counterpart_hard_negatives: [int]?
    DIR/meta.json        source, rows read, seeds, passages, counterparts kept

The two counterpart columns hold the source's non-instruction row for the seed's query (null
when the source has none, and in folders written before they existed): a seed dict gets
``counterpart_positive`` and ``counterpart_hard_negatives`` only when they are set.

The seed columns hold row numbers into the passages table, so a passage that the source repeats
(MS MARCO negatives recur across queries) is stored once. ``ArrowSeeds`` reads both files
memory-mapped (``datasets.Dataset.from_file``) and yields the seed dicts of ``seeds.schema`` a
batch at a time, each batch resolving its passages in one read, without holding every row.

Not handled here: writing the tables (``seeds.promptriever``), the seed schema and its checks
(``seeds.schema``), training examples (``training.examples_arrow``).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..core.errors import DataError
from .schema import REQUIRED_FIELDS

PASSAGES_FILE, SEEDS_FILE, META_FILE = "passages.arrow", "seeds.arrow", "meta.json"
PASSAGES_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
_TEXT_COLUMNS = "id query instruction instruction_type domain reference_reversal".split()
_NARRATIVE_COLUMNS = "aug_instruction narrative reversal_narrative aug_narrative abstract_reversal".split()
SEEDS_SCHEMA = pa.schema(
    [(c, pa.string()) for c in _TEXT_COLUMNS]
    + [("reference_negative_index", pa.int64())]
    + [(c, pa.string()) for c in _NARRATIVE_COLUMNS]
    + [("positive", pa.int64())]
    + [(c, pa.list_(pa.int64())) for c in ("instruction_negatives", "hard_negatives")]
    + [("counterpart_positive", pa.int64()), ("counterpart_hard_negatives", pa.list_(pa.int64()))]
)
_FIELDS = (*REQUIRED_FIELDS, "reference_reversal")  # every seed dict has these, in this order
# left out of a seed when null
_OPTIONAL = (
    "domain",
    "reference_negative_index",
    "aug_instruction",
    "narrative",
    "reversal_narrative",
    "aug_narrative",
    "abstract_reversal",
)
LIST_COLUMNS = ("instruction_negatives", "hard_negatives")
COUNTERPART_COLUMNS = ("counterpart_positive", "counterpart_hard_negatives")  # nullable, set together
REMAP_PASSAGES = 100_000  # passages read through one map of the files before it is dropped

# --------------------------------------------------------------------------------------------
# Reading: seed dicts resolved a batch at a time


def _random_access_table(path: Path) -> pa.Table:
    """The table in ``path``, memory-mapped with ``MADV_RANDOM``: passages are read scattered over
    the file, so the kernel's read-ahead around each one would be wasted I/O on a cold cache."""
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_RANDOM"):
        mm.madvise(mmap.MADV_RANDOM)
    return pa.ipc.open_stream(pa.BufferReader(pa.py_buffer(mm))).read_all()  # zero-copy slices of mm


class _Rows:
    """Rows of a memory-mapped table by number, chunk by chunk: ``Table.take`` would first join
    the chunks (a copy of the whole column, which overflows 32-bit offsets past 2 GB of text)."""

    def __init__(self, table: pa.Table):
        self.batches = table.to_batches()  # zero-copy views of the file's record batches
        self.schema = table.schema
        self.bounds = np.cumsum([0] + [b.num_rows for b in self.batches])

    def take(self, rows) -> pa.Table:
        """The rows numbered ``rows`` (any order, repeats allowed), in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        chunk = np.searchsorted(self.bounds, srt, side="right") - 1
        cut = np.flatnonzero(np.diff(chunk)) + 1  # where the sorted rows move to the next chunk
        parts = [
            self.batches[chunk[lo]].take(pa.array(srt[lo:hi] - self.bounds[chunk[lo]]))
            for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(srt)]]))
            if hi > lo
        ]
        t = pa.Table.from_batches(parts, schema=self.schema).combine_chunks()
        if len(rows) > 1 and np.any(order != np.arange(len(rows))):
            inverse = np.empty_like(order)
            inverse[order] = np.arange(len(order))
            t = t.take(pa.array(inverse))
        return t


class ArrowSeeds:
    """A memory-mapped seed table and its passages; iterates seed dicts like a list of seeds.

    ``len``, iteration (batched), ``seeds[i]``, ``head(n)``, ``take(rows)`` and ``column(name)``;
    ``seeds.seeds`` and ``seeds.passages`` are the two ``datasets.Dataset`` tables.
    """

    def __init__(self, seeds, passages, rows: np.ndarray | None = None, folder: Path | None = None):
        self.seeds, self.passages, self.folder = seeds, passages, folder
        self.rows = rows  # a selection of seed rows (None: all, in order)
        self._map()

    def _map(self) -> None:
        """(Re)map both files for our reads. Pages read through a map count in this process's RSS
        until it is dropped (page cache, which the kernel can reclaim, mapped a folio at a time);
        dropping the map every ``REMAP_PASSAGES`` passages returns them, so RSS does not just
        climb to the files' size (2.6 GB at 1M rows) and stay there."""
        if self.folder is None:
            self._ptab, self._stab = self.passages.data.table, self.seeds.data.table
        else:
            self._ptab = _random_access_table(self.folder / PASSAGES_FILE)
            self._stab = pa.ipc.open_stream(pa.memory_map(str(self.folder / SEEDS_FILE))).read_all()
        self._prows, self._srows = _Rows(self._ptab), _Rows(self._stab)
        self._read = 0

    def _touch(self, n: int) -> None:
        self._read += n
        if self._read >= REMAP_PASSAGES:
            self._map()

    @classmethod
    def open(cls, folder: str | Path) -> ArrowSeeds:
        from datasets import Dataset

        folder = Path(folder)
        for f in (SEEDS_FILE, PASSAGES_FILE):
            if not (folder / f).exists():
                raise DataError(folder / f, None, "file not found (write it with promptriever_to_arrow)")
        return cls(
            Dataset.from_file(str(folder / SEEDS_FILE)),
            Dataset.from_file(str(folder / PASSAGES_FILE)),
            None,
            folder,
        )

    def __len__(self) -> int:
        return len(self.seeds) if self.rows is None else len(self.rows)

    def __repr__(self) -> str:
        return f"ArrowSeeds({len(self)} seeds, {len(self.passages)} passages, {self.folder})"

    def take(self, rows) -> ArrowSeeds:
        """The seeds at positions ``rows`` of this selection, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        base = rows if self.rows is None else self.rows[rows]
        return ArrowSeeds(self.seeds, self.passages, base, self.folder)

    def head(self, n: int) -> ArrowSeeds:
        return self.take(np.arange(min(n, len(self))))

    def arrow_column(self, name: str) -> pa.ChunkedArray:
        """One column of the seed table for this selection; passage columns hold passage rows."""
        if self.rows is None:
            return self._stab.column(name)
        return _Rows(self._stab.select([name])).take(self.rows).column(name)

    def column(self, name: str) -> list:
        """One scalar column (``id``, ``aug_instruction``, ...) as a list, without passages."""
        return self.arrow_column(name).to_pylist()

    def passage(self, row: int) -> dict:
        """The passage at ``row`` of the passages table, as ``{"id", "text"}``."""
        p = {"id": self._ptab.column("id")[row].as_py(), "text": self._ptab.column("text")[row].as_py()}
        self._touch(1)
        return p

    def __getitem__(self, i: int) -> dict:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return next(iter(self.take([i])))

    def iter_batches(
        self, batch_size: int = 1024, columns: tuple[str, ...] | None = None
    ) -> Iterator[list[dict]]:
        """Seed dicts, ``batch_size`` at a time; each batch resolves its passages in one ``take``.
        ``columns`` limits the dicts to those fields (``seeds.schema.VERSION_FIELDS``: what a seed's
        version depends on, read without its 30 hard negatives)."""
        stab = self._stab if columns is None else self._stab.select(list(columns))
        rows = self._srows if columns is None else _Rows(stab)
        for lo in range(0, len(self), batch_size):
            hi = min(lo + batch_size, len(self))
            t = stab.slice(lo, hi - lo) if self.rows is None else rows.take(self.rows[lo:hi])
            yield self._resolve(t)

    def __iter__(self) -> Iterator[dict]:
        for batch in self.iter_batches():
            yield from batch

    def _resolve(self, t: pa.Table) -> list[dict]:
        d, n = t.to_pydict(), t.num_rows
        cps = d.get("counterpart_positive") or [None] * n  # absent in older folders (and in a selection)
        cph = d.get("counterpart_hard_negatives") or [None] * n
        need = set(d.get("positive", ())) | {r for r in cps if r is not None}
        for c in ("instruction_negatives", "hard_negatives"):
            for lst in d.get(c, ()):
                need.update(lst)
        for lst in cph:
            need.update(lst or ())
        need = sorted(need)
        sub = self._prows.take(need)
        self._touch(len(need))
        passage = {
            r: {"id": i, "text": x}
            for r, i, x in zip(need, sub.column("id").to_pylist(), sub.column("text").to_pylist())
        }

        def one(r):
            return dict(passage[r])

        def many(rs):
            return [dict(passage[r]) for r in rs or ()]

        how = {"positive": one, "instruction_negatives": many, "hard_negatives": many}
        out = []
        for j in range(n):
            s = {f: how[f](d[f][j]) if f in how else d[f][j] for f in _FIELDS if f in d}
            for f in _OPTIONAL:
                if f in d and d[f][j] is not None:  # a column absent from an older folder: no value
                    s[f] = d[f][j]
            if cps[j] is not None:
                s["counterpart_positive"] = one(cps[j])
                s["counterpart_hard_negatives"] = many(cph[j])
            out.append(s)
        return out
