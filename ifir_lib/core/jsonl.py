"""JSON Lines: one reader, one writer, atomic replacement. Every stage reads and writes through here.

``read_jsonl(path)`` yields ``(line_number, object)`` one line at a time, so a file need not fit
in memory (a million synthesis rows). A UTF-8 byte order mark and blank lines are skipped. The
reader forgives exactly one thing: a *cut last line*, the mark a killed writer leaves (the file
does not end in a newline). That line is kept if it parses and dropped with a warning if not;
``ends_cut(path)`` says whether a file has one. Any other bad line is an error naming the file
and line (``DataError``)::

    'a\n{"k": 1}\n{"k": 2' -> line 1 raises DataError('f.jsonl:1: invalid JSON ...')
    '{"k": 1}\n{"k": 2'     -> yields (1, {"k": 1}); warns about the cut line 2

Not handled here: what the rows mean (each stage validates its own fields) and locking.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import DataError

log = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, as some editors write


def read_jsonl(path: str | Path, unique_keys: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line, reading line by line (see the
    module docstring for the cut last line). ``unique_keys``: a key given twice in one object (a
    hand edit that appended the corrected field) is a ``DataError`` instead of the last value
    winning; it costs about 40% more parsing, so files people edit by hand (seeds) ask for it."""
    path = Path(path)
    hook = _unique if unique_keys else None
    if not path.exists():
        raise DataError(path, None, "file not found")
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if n == 1 and line.startswith(_BOM):
                line = line[len(_BOM) :]
            if not line.strip():
                continue
            if line.endswith(b"\n"):
                yield n, _parse(path, n, line[:-1], hook)
                continue
            try:  # the last line, without its newline
                row = _parse(path, n, line, hook)
            except KeyGivenTwice:
                raise  # a whole line, not a cut one: hand-edited files often end without a newline
            except DataError:
                if n == 1 and _looks_like_array(line):
                    raise  # a one-line JSON array without a final newline, not a cut write
                log.warning(
                    "%s: dropping a cut last line (%d bytes) left by an interrupted write", path, len(line)
                )
                return
            yield n, row


def ends_cut(path: str | Path) -> bool:
    """True when ``path`` lacks its final newline (a write cut by a kill): its last line was kept by
    ``read_jsonl`` if it parses, dropped if not. An empty file (or a lone BOM) is not cut."""
    with Path(path).open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return False
        fh.seek(max(0, size - len(_BOM)))
        tail = fh.read()
    return not tail.endswith(b"\n") and not (size == len(_BOM) and tail == _BOM)


def _looks_like_array(line: bytes) -> bool:
    return line.lstrip()[:1] == b"["


class _KeyTwice(ValueError):
    pass


class KeyGivenTwice(DataError):
    """A key given twice in one JSON object (``read_jsonl(..., unique_keys=True)``)."""


def _unique(pairs: list[tuple[str, object]]) -> dict:
    """``json.loads``'s ``object_pairs_hook``: the object, or ``_KeyTwice`` naming a repeated key."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        raise _KeyTwice(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return obj


def _parse(path: Path, n: int, line: bytes, hook=None) -> dict:
    hint = (
        "; the file looks like a JSON array, write one object per line"
        if n == 1 and _looks_like_array(line)
        else ""
    )
    try:
        obj = json.loads(line.decode("utf-8"), object_pairs_hook=hook)
    except _KeyTwice as e:
        raise KeyGivenTwice(path, n, "given twice in one object (which value is meant?)", str(e)) from None
    except UnicodeDecodeError as e:
        raise DataError(path, n, f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise DataError(path, n, f"invalid JSON ({e.msg} at column {e.colno}){hint}") from None
    if not isinstance(obj, dict):
        raise DataError(path, n, f"expected a JSON object, got {type(obj).__name__}{hint}")
    return obj


def _parses(line: bytes) -> bool:
    """True when ``line`` is one whole JSON object (a last line that only lacks its newline)."""
    try:
        return isinstance(json.loads(line.removeprefix(_BOM)), dict)
    except ValueError:
        return False


def dumps(row: dict) -> str:
    """One JSONL line, newline included; non-ASCII text stays readable."""
    return json.dumps(row, ensure_ascii=False) + "\n"


def atomic_write_text(path: str | Path, text: str, fsync: bool = True) -> None:
    """Write via a temp file in the same folder + ``os.replace``: readers see old or new, never half."""
    atomic_write_chunks(path, [text], fsync=fsync)


def atomic_write_chunks(path: str | Path, chunks: Iterable[str], fsync: bool = True) -> None:
    """``atomic_write_text`` for text that comes in pieces (written as they come, never joined).
    Through a symlink the file it names is replaced, not the link (which would leave the link's
    target behind, holding the old text, while writers that appended through the link go on)."""
    path = Path(path).resolve()
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


def set_aside_cut_tail(path: str | Path, is_whole=None) -> Path | None:
    """Before an append: move a cut last line (text after the last newline) out of ``path``.

    ``is_whole(tail: bytes) -> bool`` may say that the last line is complete and only lacks its
    newline (a JSONL object that parses, written by another tool): it then gets its newline and
    stays. Otherwise the fragment goes to a side file ``<path>.cut-<UTC time>-<pid>`` and ``path`` is truncated
    after its last whole line, so the next appended row can never be glued onto it; a warning
    names both files. Returns the side file, or None when the file is absent, empty or whole.
    Text files of any kind (JSONL, CSV). The caller holds the file's writer lock.

    Example: ``'a\nb\nc'`` -> the file keeps ``'a\nb\n'``, the side file holds ``'c'``.
    """
    path = Path(path)
    if not path.exists() or not ends_cut(path):
        return None
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1  # 0 when the file holds no whole line at all
    if is_whole is not None and is_whole(data[keep:]):
        with open(path, "ab") as fh:
            fh.write(b"\n")
        return None
    side = _side_file(path)
    with open(side, "wb") as fh:
        fh.write(data[keep:])
        fh.flush()
        os.fsync(fh.fileno())
    with open(path, "r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning(
        "%s: its last line was cut (%d bytes); set aside in %s before appending", path, len(data) - keep, side
    )
    return side


def _side_file(path: Path) -> Path:
    """A new, unused ``<path>.cut-<UTC time>-<pid>[-<n>]``: two set-asides never share a file."""
    stamp = f"{path.name}.cut-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    for n in range(1000):
        side = path.with_name(stamp + (f"-{n}" if n else ""))
        try:
            side.touch(exist_ok=False)
            return side
        except FileExistsError:
            continue
    raise OSError(f"{path}: cannot name a side file for its cut last line")


def append_jsonl(path: str | Path, rows: Iterable[dict], fsync: bool = True) -> None:
    """Append ``rows`` in one write (a reader never sees half a batch of short rows), then fsync.
    A cut last line already in the file is set aside first (``set_aside_cut_tail``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    set_aside_cut_tail(path, is_whole=_parses)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(dumps(r) for r in rows))
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
