"""Training examples streamed into a memory-mapped Arrow file in the trainer's columns.

``ExampleWriter`` takes example dicts (``trainsets``' schema) one at a time and writes, a batch
at a time, the columns ``SentenceTransformerTrainer`` reads::

    query (query + " " + instruction), positive, negative_1 .. negative_k, label

``label`` is ``[group, query, positive_doc, negative_doc_1, ...]`` as 64-bit hashes (blake2b) of
the seed id, the query text and the passage ids: equal strings get equal integers without a
table of every id, which is all the loss and the samplers ask of them (``encode_ids`` numbers
small lists densely instead). The writer also hashes the examples for the manifest, exactly as
``TrainSet.manifest`` does for a list. Not handled here: choosing the examples (``trainsets``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa

from ..core.models import format_query


def hash_id(s: str) -> int:
    """A stable signed 64-bit integer for ``s`` (same on every machine and Python run)."""
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def trainer_schema(num_negatives: int) -> pa.Schema:
    cols = [("query", pa.string()), ("positive", pa.string())]
    cols += [(f"negative_{j + 1}", pa.string()) for j in range(num_negatives)]
    return pa.schema([*cols, ("label", pa.list_(pa.int64()))])


class ExampleWriter:
    """Append examples to ``path`` (an Arrow stream file); ``close()`` opens it as a Dataset."""

    def __init__(self, path: str | Path, num_negatives: int, batch_size: int = 2048):
        self.path, self.k, self.batch_size = Path(path), num_negatives, batch_size
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.schema = trainer_schema(num_negatives)
        self.writer = pa.ipc.new_stream(str(self.path), self.schema)
        self.buf: list[dict] = []
        self.sha = hashlib.sha256()
        self.n = 0

    def add(self, ex: dict) -> None:
        if len(ex["negatives"]) < self.k:
            raise ValueError(f"example {ex['id']} has {len(ex['negatives'])} negatives, expected {self.k}")
        self.sha.update(json.dumps(ex, sort_keys=True).encode())
        self.buf.append(ex)
        self.n += 1
        if len(self.buf) >= self.batch_size:
            self._flush()

    def _flush(self) -> None:
        b, k = self.buf, self.k
        cols = [
            [format_query(e["query"], e["instruction"]) for e in b],
            [e["positive"]["text"] for e in b],
        ]
        cols += [[e["negatives"][j]["text"] for e in b] for j in range(k)]
        cols.append(
            [
                [
                    hash_id(e["group"]),
                    hash_id(q),
                    *(hash_id(p["id"]) for p in (e["positive"], *e["negatives"][:k])),
                ]
                for e, q in zip(b, cols[0])
            ]
        )
        self.writer.write_batch(
            pa.record_batch([pa.array(c, f.type) for c, f in zip(cols, self.schema)], self.schema)
        )
        self.buf = []

    def close(self):
        """Finish the file; returns ``(dataset, sha256)``, the dataset memory-mapped."""
        from datasets import Dataset

        if self.buf:
            self._flush()
        self.writer.close()
        return Dataset.from_file(str(self.path)), self.sha.hexdigest()
