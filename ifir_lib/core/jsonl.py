"""JSON Lines: one reader, one writer, atomic replacement. Every stage reads and writes through here.

The reader forgives exactly one thing: a *cut last line*, the mark a killed writer leaves (the
file does not end in a newline and its last line does not parse). That line is dropped with a
warning. Any other bad line is an error naming the file and line (``DataError``)::

    'a\n{"k": 1}\n{"k": 2' -> line 1 raises DataError('f.jsonl:1: invalid JSON ...')
    '{"k": 1}\n{"k": 2'     -> yields (1, {"k": 1}); warns about the cut line 2

Not handled here: what the rows mean (each stage validates its own fields) and locking.

JSON Lines read one line at a time, for files too large to hold (a million synthesis rows).

``JsonlStream(path)`` yields ``(line_number, object)`` like ``jsonl.read_jsonl`` and keeps the
same rules: a UTF-8 byte order mark is skipped, blank lines are skipped, and a last line without
its newline (a write cut by a kill) is kept if it parses and dropped with a warning if not;
``stream.cut`` then says so. Errors name file and line. Not handled here: writing (``jsonl``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import DataError

# ---------------------------------------------------------------------------------------------
# (was jsonl.py)

log = logging.getLogger(__name__)


def read_rows(path: str | Path) -> tuple[list[tuple[int, dict]], bool]:
    """``([(line_number, object), ...], cut)``: ``cut`` is True when the file lacks its final newline
    (the last line was dropped if it does not parse, kept if only the newline was lost)."""
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark, as some editors write
        data = data[3:]
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    out = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            out.append((n, _parse(path, n, line)))
    if tail.strip():
        try:
            out.append((len(lines) + 1, _parse(path, len(lines) + 1, tail)))
        except DataError:
            if not lines and tail.lstrip()[:1] == b"[":
                raise  # a one-line JSON array without a final newline, not a cut write
            log.warning(
                "%s: dropping a cut last line (%d bytes) left by an interrupted write", path, len(tail)
            )
    return out, tail != b""


def _parse(path: Path, n: int, line: bytes) -> dict:
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise DataError(path, n, f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        hint = (
            "; the file looks like a JSON array, write one object per line"
            if n == 1 and line.lstrip()[:1] == b"["
            else ""
        )
        raise DataError(path, n, f"invalid JSON ({e.msg} at column {e.colno}){hint}") from None
    if not isinstance(obj, dict):
        hint = (
            "; the file looks like a JSON array, write one object per line"
            if n == 1 and line.lstrip()[:1] == b"["
            else ""
        )
        raise DataError(path, n, f"expected a JSON object, got {type(obj).__name__}{hint}")
    return obj


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line (see the module docstring)."""
    rows, _ = read_rows(path)
    yield from rows


def dumps(row: dict) -> str:
    """One JSONL line, newline included; non-ASCII text stays readable."""
    return json.dumps(row, ensure_ascii=False) + "\n"


def atomic_write_text(path: str | Path, text: str, fsync: bool = True) -> None:
    """Write via a temp file in the same folder + ``os.replace``: readers see old or new, never half."""
    atomic_write_chunks(path, [text], fsync=fsync)


def atomic_write_chunks(path: str | Path, chunks: Iterable[str], fsync: bool = True) -> None:
    """``atomic_write_text`` for text that comes in pieces (written as they come, never joined)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | Path, rows: Iterable[dict], fsync: bool = True) -> Path:
    """Replace ``path`` with ``rows``, atomically, writing as the rows come (they need not fit in memory)."""
    atomic_write_chunks(path, (dumps(r) for r in rows), fsync=fsync)
    return Path(path)


def append_jsonl(path: str | Path, rows: Iterable[dict], fsync: bool = True) -> None:
    """Append ``rows`` in one write (a reader never sees half a batch of short rows), then fsync."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(dumps(r) for r in rows))
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())


# ---------------------------------------------------------------------------------------------
# (was jsonl_stream.py)


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
