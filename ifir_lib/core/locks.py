"""One writer per output: OS-level file locks (``fcntl.flock``) that die with their process.

``exclusive(path)`` locks ``<path>.lock`` for as long as a run writes ``path`` (a synthesis
output, a training run folder): a second process fails at once with ``OutputLocked``, naming
the holder's pid, host and start time. ``shared_append(path)`` waits its turn instead, for short
writes that many processes make (the results table, the curation log, the embedding cache).
``check_writable(path)`` says before any work, in one line, when ``path`` could not be written.
``check_not_written(path)`` says when a live process writes ``path`` now, without taking it.
The kernel drops a lock when its process exits, so a ``kill -9`` never leaves a stale lock;
the ``.lock`` file itself stays behind and is harmless: empty after a normal exit, still naming
the killed holder after a ``kill -9`` (``RunFolder.lock_holder`` checks that process). Not
handled here: NFS, where ``flock`` may not be enforced across hosts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import DataError, OutputLocked


def check_writable(path: str | Path) -> Path:
    """Raise a one-line ``DataError`` now when the file ``path`` could not be written later: it is a
    folder, a parent is a file, or the nearest existing folder (the file, when it exists) refuses
    writes. Creates nothing (a probe file is made and removed). Returns ``path``.

    Example: ``check_writable('notes.txt/out.csv')`` with ``notes.txt`` a file ->
    ``DataError('notes.txt/out.csv: cannot be written: notes.txt is a file, not a folder')``.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(path, None, "cannot be written: it is a folder; name a file")
    parent = next(p for p in path.parents if p.exists() or p.is_symlink())  # "/" always exists
    if not parent.is_dir():
        raise DataError(path, None, f"cannot be written: {parent} is a file, not a folder")
    try:
        if path.exists():
            with path.open("ab"):
                pass
        else:
            fd, probe = tempfile.mkstemp(dir=parent, prefix=".ifir-write-check-")
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        blocked = path if path.exists() else parent
        raise DataError(
            path, None, f"cannot be written: {blocked} is not writable ({e.strerror or e})"
        ) from None
    return path


def lock_path(path: str | Path) -> Path:
    """``out/reversals.jsonl -> out/reversals.jsonl.lock``, ``runs/ins-dv -> runs/ins-dv.lock``: beside
    the output, whether it exists yet or not. Symlinks are resolved first: an output named through
    a link (``alias.jsonl -> rev.jsonl``, ``runs/latest -> runs/ins-dv``) takes its target's lock."""
    p = Path(path).resolve()
    return p.with_name(p.name + ".lock")


def check_not_written(path: str | Path, what: str = "output") -> None:
    """``OutputLocked`` now, naming the holder, when a live process holds ``path``'s lock (a shard
    still being synthesised, an old plan's run still training); nothing when none does. Creates no
    lock file (a read-only folder of shards stays readable); the lock is tested with a shared,
    non-blocking ``flock`` that is dropped at once."""
    lp = lock_path(path)
    try:
        fh = open(lp, encoding="utf-8")
    except OSError:  # no lock file: no writer ever started here
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = fh.read().strip() or "a process that has not written its name yet"
            raise OutputLocked(
                f"{path}: this {what} is being written by another process ({holder}); "
                "wait for it to finish, or stop it"
            ) from None
        fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive(path: str | Path, what: str = "output") -> Iterator[Path]:
    """Hold the lock on ``path`` for the block, or raise ``OutputLocked`` at once."""
    lp = lock_path(path)
    lp.parent.mkdir(parents=True, exist_ok=True)
    fh = open(lp, "a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "a process that has not written its name yet"
        fh.close()
        raise OutputLocked(
            f"{path}: this {what} is being written by another process ({holder}); "
            "wait for it to finish, stop it, or write to another path"
        ) from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
        fh.flush()
        yield lp
    finally:
        fh.seek(0)
        fh.truncate()
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


@contextlib.contextmanager
def shared_append(path: str | Path) -> Iterator[None]:
    """Wait for, then hold, the append lock on ``path`` for one short write."""
    lp = lock_path(path)
    lp.parent.mkdir(parents=True, exist_ok=True)
    with open(lp, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
