"""One digest of files' bytes: ``files_digest([(label, path), ...])``.

Each file enters as its label (a name or relative path), a NUL, then its bytes read in 1 MiB
blocks; the result is the first ``n`` hex characters of the SHA-256. Used for an experiment's
input files (``pipelines.plan.input_digests``), a benchmark's local copy
(``evaluation.tasks.copy_digest``) and an installed package's code (``config.git_commit``):
equal digests mean the same labelled bytes, wherever the files lie.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def files_digest(files: Iterable[tuple[str, Path]], n: int = 16) -> str:
    """``files_digest([("seeds.jsonl", Path("in/seeds.jsonl"))]) -> '3fa2...'`` (``n`` hex characters)."""
    h = hashlib.sha256()
    for label, path in files:
        h.update(label.encode() + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:n]
