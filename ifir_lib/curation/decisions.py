"""Curation decisions: the one place that reads, writes and applies them.

The inspection notebook appends one row per click to a curation JSONL::

    {"key": "<synthesis row key>", "decision": "accept" | "reject" | null, "comment": str | null,
     "time": iso, "backend": str | null, "model": str | null, "reversal_sha": "<12 hex>"}

A decision is about one text: ``reversal_sha`` (``reversal_hash``) is a short hash of the
reversal on screen, ``backend`` and ``model`` say where it came from. The explorer can show two
rows under one key (an LLM's and the template baseline's reversal of ``seed-0001``), so a
decision applies to a row only when the row's reversal has that hash (``decision_for``). The
last non-null decision per key and text wins; a null decision only carries a comment. Rows
written before the hash was recorded have no ``reversal_sha``: they apply by key alone, to
whatever text the key holds, as they always did.

Appends are fsync'd, and the file is never rewritten, so a crash loses at most the click in
flight. Two sessions (two kernels or tabs of notebook 02, two curators) may share one file: before
each append a store reads what the others appended since it last read the file, and a decision
that overturns another session's decision of the same key and text is still recorded (the last
decision wins) but warned about, naming both, since its curator never saw the other one.
Training (``trainsets``) leaves out the seeds whose trained reversal was rejected
(``CurationCheck``) and names, in one warning, the decisions about another text than the one
trained (stale: they apply to nothing). Not handled here: the widgets (``widgets``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
from pathlib import Path

from ..core.errors import ConfigError, DataError
from ..core.jsonl import append_jsonl, read_jsonl
from ..core.locks import shared_append

log = logging.getLogger(__name__)

DECISIONS = ("accept", "reject")
NEGATIVE_KEYS = 3  # a seed's rows are keyed "<id>" or "<id>#<j>", j < 3 instruction negatives


def reversal_hash(text) -> str:
    """A 12-hex digest of a reversal's exact text (no text counts as ``""``): what a decision judged."""
    return hashlib.sha256((text if isinstance(text, str) else "").encode("utf-8")).hexdigest()[:12]


class Decisions(dict):
    """``{key: last decision}``, whatever text it was about (what earlier versions returned, and
    what a plain lookup reads), plus ``judged``: per key, the last decision about each text,
    ``{key: {reversal_sha: {"decision", "backend", "model", "order"}}}``. The sha ``None`` holds a
    row without one (a log written before hashes were recorded): it applies by key. Apply a
    ``Decisions`` to a row with ``decision_for``.
    """

    def __init__(self):
        super().__init__()
        self.judged: dict[str, dict[str | None, dict]] = {}
        self._clicks = 0

    def add(self, key: str, decision: str, row: dict) -> None:
        self._clicks += 1
        self[key] = decision
        self.judged.setdefault(key, {})[row.get("reversal_sha")] = {
            "decision": decision,
            "backend": row.get("backend"),
            "model": row.get("model"),
            "order": self._clicks,  # which of a key's decisions came last
        }

    def count(self) -> dict[str, int]:
        """``{"accept": n, "reject": m}`` over every key and text judged."""
        vals = [j["decision"] for texts in self.judged.values() for j in texts.values()]
        return {d: vals.count(d) for d in DECISIONS}


def decision_for(decisions, key: str, reversal) -> str | None:
    """The decision that applies to the row ``key`` holding the text ``reversal``: the last one
    about this exact text or, from an old log, about the key; ``None`` when undecided.

    ``decisions`` is a ``Decisions`` (``load_decisions``, ``CurationStore.decisions``) or a plain
    ``{key: decision}`` (applied by key). Example: reject (openai, text A), then accept
    (template, text B), both under ``seed-0001`` -> ``"reject"`` for A, ``"accept"`` for B.
    """
    judged = getattr(decisions, "judged", None)
    if judged is None:
        return decisions.get(key)
    sha = reversal_hash(reversal)
    hits = [j for s, j in judged.get(key, {}).items() if s is None or s == sha]
    return max(hits, key=lambda j: j["order"])["decision"] if hits else None


class CurationCheck:
    """Decisions applied to the reversals one training set uses, seed by seed (``trainsets``).

    ``rejects(seed_id, reversal)`` reads every key of the seed (``<id>``, ``<id>#0`` ... ``#2``):
    a reject about the reversal trained (its ``{"reversal": text}`` or the text), or a hashless
    one from an old log, leaves the seed out. A decision with a hash about another text under
    those keys is stale (the curator judged a text this set does not train): ``warn_stale``
    counts and names them in one warning. Decisions about seeds outside the set are not read.
    """

    def __init__(self, decisions):
        self.decisions = decisions or {}
        self.stale: list[str] = []

    def rejects(self, seed_id: str, reversal) -> bool:
        if not self.decisions:  # no curation file: nothing to hash (a million seeds on the Arrow path)
            return False
        text = reversal.get("reversal") if isinstance(reversal, dict) else reversal
        sha, judged = reversal_hash(text), getattr(self.decisions, "judged", {})
        keys = [seed_id, *(f"{seed_id}#{j}" for j in range(NEGATIVE_KEYS))]
        for key in keys:
            self.stale += [
                f"{key} ({j['decision']} of {_source(j)})"
                for s, j in judged.get(key, {}).items()
                if s is not None and s != sha
            ]
        return any(decision_for(self.decisions, key, text) == "reject" for key in keys)

    def warn_stale(self, where: str) -> int:
        """Log one warning naming the stale decisions seen so far (the first 10); returns their count."""
        n = len(self.stale)
        if n:
            more = f" and {n - 10} more" if n > 10 else ""
            log.warning(
                "%s: %d curation decision(s) judged another reversal text than the one trained for "
                "their seed, so they do not apply: %s%s",
                where,
                n,
                ", ".join(self.stale[:10]),
                more,
            )
        return n


def _source(judged: dict) -> str:
    """``openai gpt-4o``, ``template`` (model = backend), or ``unknown``: where a judged text came from."""
    backend, model = judged.get("backend"), judged.get("model")
    return " ".join(filter(None, (backend, model if model != backend else None))) or "unknown"


def load_decisions(path: str | Path) -> Decisions:
    """The decisions of a curation file (``Decisions``: ``{key: last decision}`` plus what each
    judged); apply them to a row with ``decision_for``."""
    if not Path(path).exists():
        raise DataError(path, None, "file not found")
    return CurationStore(path).decisions


def judged_fields(row: dict) -> dict:
    """What a decision about ``row`` (an explorer example or synthesis row) records it judged."""
    return {
        "backend": row.get("backend"),
        "model": row.get("model"),
        "reversal_sha": reversal_hash(row.get("reversal")),
    }


class CurationStore:
    """Append-only curation log; state is rebuilt from the file, so it survives restarts.

    Each call to ``record`` appends ``{"key", "decision", "comment", "time"}`` (and, given the
    row judged, its ``backend``, ``model`` and ``reversal_sha``) and flushes it to disk before
    returning. ``decisions`` is what ``load_decisions`` returns; ``comments[key]`` lists every
    comment in order. ``overturned`` is the warning of the last ``record`` (``None``: it overturned
    no other session's decision), for the explorer to show beside the click.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.decisions = Decisions()
        self.comments: dict[str, list[str]] = {}
        self.overturned: str | None = None
        self._rows_read = 0  # rows of the file this store holds (read, or appended by it)
        self._state_seen: tuple[int, int] | None = None  # (size, mtime) when it last read or appended
        self._catch_up()

    def _catch_up(self) -> list[dict]:
        """Apply the rows appended to the file since this store last read it (by other sessions);
        returns them. Rows are counted, not bytes: a cut last line dropped here and set aside by the
        next append was never counted, so the count stays right. The file is reread only when its
        size or mtime moved since this store's last read or append (a scripted curation of 8,000
        rows took 130 s rereading it per row)."""
        state = self._file_state()
        if state is None or state[0] == 0 or state == self._state_seen:
            return []
        new = []
        for k, (n, row) in enumerate(read_jsonl(self.path)):
            if k >= self._rows_read:
                self._apply(row, n)
                new.append(row)
        self._rows_read += len(new)
        self._state_seen = state
        return new

    def _file_state(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def _check(self, row: dict, n: int | None = None) -> None:
        if "key" not in row:
            raise DataError(self.path, n, "missing", "key")
        d = row.get("decision")
        if d is not None and d not in DECISIONS:
            raise DataError(self.path, n, f"must be 'accept', 'reject' or null, got {d!r}", "decision")
        sha = row.get("reversal_sha")
        if sha is not None and not isinstance(sha, str):
            raise DataError(self.path, n, f"must be a hash string or absent, got {sha!r}", "reversal_sha")

    def _apply(self, row: dict, n: int | None = None) -> None:
        self._check(row, n)
        key, d = str(row["key"]), row.get("decision")
        if d is not None:
            self.decisions.add(key, d, row)
        if row.get("comment"):
            self.comments.setdefault(key, []).append(str(row["comment"]))

    def record(
        self, key: str, decision: str | None = None, comment: str | None = None, row: dict | None = None
    ) -> dict:
        """Append one row; ``decision=None`` with a comment leaves the decision unchanged.
        ``row``: the example judged (its ``reversal``, ``backend``, ``model``); without it the
        decision applies to the key whatever its text. Under the append lock, the rows other
        sessions appended since this store last read the file are applied first; when one of them
        decided this key and text otherwise, this decision still wins but is warned about
        (``overturned``), naming both: its curator decided without seeing the other."""
        comment = (comment or "").strip() or None
        if decision is None and comment is None:
            raise ConfigError("record needs a decision or a comment")
        entry = {
            "key": str(key),
            "decision": decision,
            "comment": comment,
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **(judged_fields(row) if row is not None else {}),
        }
        self._check(entry)  # validates before anything is written
        with shared_append(self.path):  # two sessions on one file append whole rows, in turn
            self.overturned = _overturned(entry, self._catch_up(), self.path)
            append_jsonl(self.path, [entry])  # fsync'd: a kernel crash right after a click must not lose it
            self._rows_read += 1
            self._state_seen = self._file_state()  # the file as this store now knows it, under the lock
        self._apply(entry)  # after the other sessions' rows, as in the file
        if self.overturned:
            log.warning("%s", self.overturned)
        return entry

    def summary(self) -> dict[str, int]:
        """``{"accept": n, "reject": m, "commented": k}``, each text judged under a key counted once."""
        return {**self.decisions.count(), "commented": len(self.comments)}

    def rows(self):
        """The file as a table (for display)."""
        import pandas as pd

        cols = ["key", "decision", "comment", "time", "backend", "model", "reversal_sha"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        return pd.DataFrame([r for _, r in read_jsonl(self.path)], columns=cols)


def _overturned(entry: dict, others: list[dict], path: Path) -> str | None:
    """The warning for ``entry`` when the last of ``others`` (rows another session appended unseen)
    that decided the same key about the same text (or about the key, from a hashless row) decided
    otherwise; None when none did, or it decided alike, or ``entry`` only comments."""
    d, sha = entry.get("decision"), entry.get("reversal_sha")
    same = [
        r
        for r in others
        if str(r["key"]) == entry["key"]
        and r.get("decision") is not None
        and (sha is None or r.get("reversal_sha") in (None, sha))
    ]
    if d is None or not same or same[-1]["decision"] == d:
        return None
    when = f" at {same[-1]['time']}" if same[-1].get("time") else ""
    return (
        f"{entry['key']}: another session recorded {same[-1]['decision']!r}{when} in {path} after this "
        f"session read it; this session's {d!r}, decided without seeing it, is recorded after it and "
        "wins (the last decision wins): look at the example again if that was not meant"
    )
