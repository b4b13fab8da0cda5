"""Curation decisions: the one place that reads and writes them.

The inspection notebook appends one row per click to a curation JSONL::

    {"key": "<synthesis row key>", "decision": "accept" | "reject" | null, "comment": str | null, "time": iso}

The last non-null decision per key wins; a null decision only carries a comment. Appends are
fsync'd, and the file is never rewritten, so a crash loses at most the click in flight.
Training (``trainsets``) excludes keys decided ``reject``. Not handled here: the widgets
(``inspect_widgets``).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..core.errors import ConfigError, DataError
from ..core.jsonl import append_jsonl, read_jsonl
from ..core.locks import shared_append

DECISIONS = ("accept", "reject")


def load_decisions(path: str | Path) -> dict[str, str]:
    """``{key: "accept" | "reject"}``: the last decision per key in a curation file."""
    if not Path(path).exists():
        raise DataError(path, None, "file not found")
    return CurationStore(path).decisions


class CurationStore:
    """Append-only curation log; state is rebuilt from the file, so it survives restarts.

    Each call to ``record`` appends ``{"key", "decision", "comment", "time"}`` and flushes it to
    disk before returning. ``decisions[key]`` is the last non-null decision (what
    ``load_decisions`` returns); ``comments[key]`` lists every comment in order.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.decisions: dict[str, str] = {}
        self.comments: dict[str, list[str]] = {}
        if self.path.exists() and self.path.stat().st_size:
            for n, row in read_jsonl(self.path):
                self._apply(row, n)

    def _apply(self, row: dict, n: int | None = None) -> None:
        if "key" not in row:
            raise DataError(self.path, n, "missing", "key")
        d = row.get("decision")
        if d is not None and d not in DECISIONS:
            raise DataError(self.path, n, f"must be 'accept', 'reject' or null, got {d!r}", "decision")
        key = str(row["key"])
        if d is not None:
            self.decisions[key] = d
        if row.get("comment"):
            self.comments.setdefault(key, []).append(str(row["comment"]))

    def record(self, key: str, decision: str | None = None, comment: str | None = None) -> dict:
        """Append one row; ``decision=None`` with a comment leaves the decision unchanged."""
        comment = (comment or "").strip() or None
        if decision is None and comment is None:
            raise ConfigError("record needs a decision or a comment")
        row = {
            "key": str(key),
            "decision": decision,
            "comment": comment,
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        self._apply(row)  # validates before anything is written
        with shared_append(self.path):  # two sessions on one file append whole rows, in turn
            append_jsonl(self.path, [row])  # fsync'd: a kernel crash right after a click must not lose it
        return row

    def summary(self) -> dict[str, int]:
        """``{"accept": n, "reject": m, "commented": k}``."""
        vals = list(self.decisions.values())
        return {
            "accept": vals.count("accept"),
            "reject": vals.count("reject"),
            "commented": len(self.comments),
        }

    def rows(self):
        """The file as a table (for display)."""
        import pandas as pd

        cols = ["key", "decision", "comment", "time"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        return pd.DataFrame([r for _, r in read_jsonl(self.path)], columns=cols)
