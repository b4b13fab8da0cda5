"""Synthesis output files: which keys a run plans, resume, read, and merge shards.

One row per *key*: ``"<seed_id>"``, or ``"<seed_id>#<negative_index>"`` when every negative
becomes N* in turn. A run appends rows; a restart (``prepare_output``) repairs a line cut by a
kill, drops duplicates and failed rows, and returns the keys already done. Shards split seeds by
a stable hash of their id, and ``merge_shards`` joins their files. Not handled here: producing
rows (``synthesize``), locking the file against a second writer.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError
from .jsonl import atomic_write_text, dumps, read_rows
from .jsonl_stream import JsonlStream, atomic_write_rows
from .seeds import load_seeds

log = logging.getLogger(__name__)

# Which instruction negative becomes N*. "reference" is the seed's own ``reference_negative_index``
# (the bundled reference reversals); the others are for LLM backends.
NEGATIVE_MODES = ("first", "random", "all")


def choose_negatives(seed: dict, mode: str = "first", rng_seed: int = 0) -> list[int]:
    """Indices of the negatives that become N*: ``first -> [0]``, ``all -> [0..k-1]``, ``random -> [j]``,
    ``reference -> [seed["reference_negative_index"]]``.

    ``random`` draws from ``Random(f"{rng_seed}:{seed_id}")``, so the choice depends on the seed
    alone, not on file order, ``--limit`` or sharding.
    """
    k = len(seed["instruction_negatives"])
    if mode == "reference":
        return [int(seed.get("reference_negative_index") or 0)]
    if mode == "first":
        return [0]
    if mode == "all":
        return list(range(k))
    if mode == "random":
        return [random.Random(f"{rng_seed}:{seed['id']}").randrange(k)]
    raise ValueError(f"unknown negative mode {mode!r}")


def row_key(seed_id: str, negative_index: int, mode: str) -> str:
    """``"s1"`` for one reversal per seed; ``"s1#2"`` under ``negative='all'``."""
    return f"{seed_id}#{negative_index}" if mode == "all" else seed_id


def parse_shard(shard: str) -> tuple[int, int]:
    """``"1/4" -> (1, 4)``; raise ValueError unless ``0 <= i < n``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(shard))
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard expects i/n with 0 <= i < n, got {shard!r}")
    return int(m.group(1)), int(m.group(2))


def shard_of(seed_id: str, num_shards: int) -> int:
    """Stable across machines and Python runs (unlike ``hash()``): sha256 of the id, mod n."""
    return int(hashlib.sha256(seed_id.encode("utf-8")).hexdigest()[:16], 16) % num_shards


def iter_plan(seeds, mode: str = "first", rng_seed: int = 0, shard: str | None = None):
    """``(key, seed, negative_index)`` for this shard, in seed order, one at a time: ``seeds`` may
    be any iterable of seed dicts (``arrow_seeds.ArrowSeeds`` streams them from disk)."""
    i, n = parse_shard(shard) if shard else (0, 1)
    for s in seeds:
        if n == 1 or shard_of(s["id"], n) == i:
            for j in choose_negatives(s, mode, rng_seed):
                yield row_key(s["id"], j, mode), s, j


def plan(
    seeds: list[dict], mode: str = "first", rng_seed: int = 0, shard: str | None = None
) -> list[tuple[str, dict, int]]:
    """``[(key, seed, negative_index), ...]`` for this shard, in seed order."""
    return list(iter_plan(seeds, mode, rng_seed, shard))


def _read_rows(path: Path) -> tuple[list[dict], bool]:
    """Rows of an output file, and whether it needs repair (its last line lacks a newline)."""
    rows, cut = read_rows(path)
    for n, row in rows:
        if "key" not in row:
            raise DataError(path, n, "missing", "key")
    return [r for _, r in rows], cut


def load_synthesis(path: str | Path) -> list[dict]:
    """Rows of a synthesis output, one per key (first kept), ignoring a cut last line.

    Read-only: the file is not repaired (``synthesize`` does that when it resumes).
    """
    rows, _ = _read_rows(Path(path))
    seen, out = set(), []
    for r in rows:
        if r["key"] not in seen:
            seen.add(r["key"])
            out.append(r)
    return out


def prepare_output(path: Path, retry_failed: bool) -> set[str]:
    """Make ``path`` a clean resume point; return the keys already done.

    Drops a cut last line, duplicate keys and (with ``retry_failed``) failed rows, rewriting the
    file atomically only when something changed, so a kill during this step loses nothing. The
    file is read line by line (twice when it is rewritten): only the keys are held.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        return set()
    stream = JsonlStream(path)

    def kept(done: set[str]):
        for n, r in stream:
            if "key" not in r:
                raise DataError(path, n, "missing", "key")
            if r["key"] in done or (retry_failed and r.get("status") == "failed"):
                continue
            done.add(r["key"])
            yield r

    done, n_kept = set(), 0
    for _ in kept(done):
        n_kept += 1
    if stream.cut or n_kept != stream.rows:
        log.info(
            "%s: rewriting (%d rows kept of %d, cut last line: %s)", path, n_kept, stream.rows, stream.cut
        )
        atomic_write_rows(path, kept(set()))
    return done


@dataclass
class MergeSummary:
    out: str
    rows: int
    duplicates: int
    conflicts: int
    missing: list[str]
    failed: int
    unexpected: int

    @property
    def complete(self) -> bool:
        return not self.missing and not self.failed


def merge_shards(
    paths: list[str | Path],
    out: str | Path,
    seeds: list[dict] | str | Path | None = None,
    negative: str | None = None,
    rng_seed: int = 0,
    on_conflict: str = "keep-first",
) -> MergeSummary:
    """Join shard outputs into ``out`` (written atomically), one row per key.

    Duplicates keep the first non-failed row; two different accepted reversals for one key are
    counted as ``conflicts``. With ``seeds``, completeness is checked against the keys the
    seeds imply (``negative`` defaults to ``all`` when keys carry ``#``, else ``first``).
    ``on_conflict='error'`` raises ``DataError`` naming the key and both files, before writing.
    """
    best: dict[str, dict] = {}
    origin: dict[str, str] = {}
    dups = conflicts = 0
    for p in paths:
        for r in load_synthesis(p):
            k = r["key"]
            if k not in best:
                best[k], origin[k] = r, str(p)
                continue
            dups += 1
            old = best[k]
            if old.get("status") == "failed" and r.get("status") != "failed":
                best[k] = r
            elif old.get("status") == r.get("status") == "accepted" and old.get("reversal") != r.get(
                "reversal"
            ):
                conflicts += 1
                if on_conflict == "error":
                    raise DataError(
                        p,
                        None,
                        f"key {k!r} has another accepted reversal in {origin[k]}; nothing was written",
                        "reversal",
                    )
    missing, unexpected, order = [], 0, sorted(best)
    if seeds is not None:
        seeds = load_seeds(seeds, stage="synthesis") if isinstance(seeds, (str, Path)) else seeds
        mode = negative or ("all" if any("#" in k for k in best) else "reference")
        expected = [k for k, _, _ in iter_plan(seeds, mode, rng_seed)]  # keys only, seeds streamed
        missing = [k for k in expected if k not in best]
        exp = set(expected)
        unexpected = sum(1 for k in best if k not in exp)
        order = [k for k in expected if k in best] + sorted(k for k in best if k not in exp)
    rows = [best[k] for k in order]
    atomic_write_text(Path(out), "".join(dumps(r) for r in rows))
    return MergeSummary(
        str(out),
        len(rows),
        dups,
        conflicts,
        missing,
        sum(1 for r in rows if r.get("status") == "failed"),
        unexpected,
    )
