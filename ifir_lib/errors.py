"""Errors that name the file, line and field, so a user can fix bad input without a debugger."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


class DataError(ValueError):
    """Bad input file. ``str(err)`` reads ``path:line: field 'x': what is wrong``."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = f"{self.path}:{line}" if line is not None else self.path
        what = f"field '{field}': {message}" if field else message
        super().__init__(f"{where}: {what}")


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line; bad JSON raises ``DataError``.

    >>> # a file whose 2nd line is '{"a": 1' raises DataError('f.jsonl:2: invalid JSON ...')
    """
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(path, n, f"invalid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise DataError(path, n, f"expected a JSON object, got {type(obj).__name__}")
            yield n, obj
