"""JSON Lines read one line at a time, for files too large to hold (a million synthesis rows).

``JsonlStream(path)`` yields ``(line_number, object)`` like ``jsonl.read_jsonl`` and keeps the
same rules: a UTF-8 byte order mark is skipped, blank lines are skipped, and a last line without
its newline (a write cut by a kill) is kept if it parses and dropped with a warning if not;
``stream.cut`` then says so. Errors name file and line. Not handled here: writing (``jsonl``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import DataError
from .jsonl import _parse, write_jsonl

log = logging.getLogger(__name__)


class JsonlStream:
    """Iterate ``(n, row)`` over ``path``; after the loop, ``rows`` is how many rows it gave and
    ``cut`` is True when the file lacks its final newline."""

    def __init__(self, path: str | Path):
        self.path, self.cut, self.rows = Path(path), False, 0

    def __iter__(self) -> Iterator[tuple[int, dict]]:
        if not self.path.exists():
            raise DataError(self.path, None, "file not found")
        self.cut, self.rows = False, 0
        with self.path.open("rb") as fh:
            for n, line in enumerate(fh, 1):
                if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                if line.endswith(b"\n"):
                    if line.strip():
                        self.rows += 1
                        yield n, _parse(self.path, n, line)
                    continue
                self.cut = True  # the last line, without its newline
                if not line.strip():
                    return
                try:
                    row = _parse(self.path, n, line)
                except DataError:
                    if n == 1 and line.lstrip()[:1] == b"[":
                        raise  # a one-line JSON array without a final newline, not a cut write
                    log.warning(
                        "%s: dropping a cut last line (%d bytes) left by an interrupted write",
                        self.path,
                        len(line),
                    )
                    return
                self.rows += 1
                yield n, row


def atomic_write_rows(path: str | Path, rows: Iterable[dict], fsync: bool = True) -> None:
    """Replace ``path`` with ``rows`` (one JSON line each) via a temp file + ``os.replace``,
    writing as the rows come, so the rows need not fit in memory."""
    write_jsonl(path, rows, fsync=fsync)
