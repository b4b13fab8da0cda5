"""A training run's folder, and the one class that reads and writes it: ``RunFolder``.

A run folder is a SentenceTransformer folder plus its provenance::

    RUN/                      SentenceTransformer(RUN) loads it once finished (modules.json)
    RUN/ifir_run.json         mode, rng_seed, base_model (absolute for a local folder) and
                              base_model_sha256 (its files' digest), config, loss, data manifest,
                              world_size, git commit and start (each resume in ``resumes``), status
    RUN/train_log.jsonl       one line per logged step: loss, learning rate, epoch
    RUN/heldout_log.jsonl     one line per held-out evaluation (when the run early-stops)
    RUN/checkpoints/          HF Trainer checkpoints (``checkpoint-<step>``); a rerun resumes;
                              removed when the run finishes (unless ``keep_checkpoints``)
    RUN.lock                  ``pid N on HOST since T`` while a process trains into RUN (``locks``)

``status`` in ``ifir_run.json`` is ``running``, ``finished``, ``stopped: <why>`` or ``failed:
<error>``. Every other module goes through ``RunFolder`` for these files; nothing else names
``ifir_run.json``. Example::

    run = RunFolder("out/demo/models/ins-dv")
    run.info()["mode"]        -> 'ins-dv'          ({} when the folder is no run)
    run.status()              -> ('done', '')
    RunFolder.find("out/demo") -> [RunFolder('out/demo/models/all-dv'), ...]

Not handled here: training into the folder (``training.trainer``), the table of every run
(``pipelines.registry``), loading the model (``core.models``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path

from .config import ABLATIONS
from .errors import DataError
from .jsonl import read_jsonl, write_jsonl
from .locks import lock_path

log = logging.getLogger(__name__)

RUN_FILE = "ifir_run.json"
TRAIN_LOG = "train_log.jsonl"
HELDOUT_LOG = "heldout_log.jsonl"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")  # local time, as every run file has recorded it


def data_sources(mode: str, data: str | Path, reversals: str | Path | None, curation=None) -> dict:
    """The provenance fields a run stores in its data manifest.

    ``data_sources('ins-dv', 'seeds.jsonl', None) -> {'data': 'seeds.jsonl', 'reversals': 'reference'}``;
    the template and abstract ablations read ``'template'``, ``'abstract'``; a synthesis file is named by its path.
    """
    if ABLATIONS.get(mode, {}).get("reversals") in ("template", "abstract"):
        rev = ABLATIONS[mode]["reversals"]
    else:
        rev = str(reversals) if reversals else "reference"
    out = {"data": str(data), "reversals": rev}
    if curation:
        out["curation"] = str(curation)
    return out


def batch_order(info: dict) -> int:
    """The batch order a run record names (``training.samplers.BATCH_ORDER``): 1 for a record
    written before the field (``seed + epoch``), 2 since 9fa2ea9."""
    return int(info.get("batch_order", 1))


def past_first_epoch(info: dict) -> bool:
    """Whether a run record shows training past its first epoch, the only batches the two batch
    orders share (``samplers.epoch_rng``): False for a run of ``epochs`` <= 1 without ``max_steps``
    (which overrides epochs), or one whose ``steps`` x ``batch_size`` x ``world_size`` examples fit
    in its set (``data.examples``; each step takes at most that many, and the samplers keep the last
    partial batch, so an epoch has at least that many steps). True when the record cannot tell."""
    cfg, data = info.get("config") or {}, info.get("data") or {}
    try:
        if float(cfg.get("max_steps") or -1) <= 0 and cfg.get("epochs") is not None:
            return float(cfg["epochs"]) > 1
        steps, size, world = int(info["steps"]), int(cfg["batch_size"]), int(info.get("world_size") or 1)
        return steps * size * world > int(data["examples"])
    except (KeyError, TypeError, ValueError):
        return True


def mixed_batch_orders(records: dict[str, dict]) -> str:
    """``''`` when the run records ``records`` (``{name: ifir_run.json}``; ``{}``: no record, left
    out) name one batch order; else words that name how many runs of each order and which: runs
    read together as replicates or compared though their epochs after the first saw other batches.
    Runs that did not train past their first epoch (``past_first_epoch``) saw the same batches under
    both orders and are left out. Old results stay usable; the words say how to train the older
    runs again (docs/experiments.md, "Batch order")."""
    by: dict[int, list[str]] = {}
    for name, info in records.items():
        if info and past_first_epoch(info):
            by.setdefault(batch_order(info), []).append(str(name))
    if len(by) < 2:
        return ""
    said = "; ".join(
        f"order {o}: {len(n)} run(s) ({', '.join(sorted(n)[:6])}{', ...' if len(n) > 6 else ''})"
        for o, n in sorted(by.items())
    )
    return (
        f"runs of {len(by)} batch orders are read together ({said}): epochs after the first shuffled "
        "their batches otherwise, so they are not replicates of one condition; train the older runs "
        "again under this code (docs/experiments.md, 'Batch order')"
    )


class RunFolder(os.PathLike):
    """One training run folder (see the module docstring for its files)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RunFolder) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    # ---- files ----------------------------------------------------------------------------
    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def train_log(self) -> Path:
        return self.path / TRAIN_LOG

    @property
    def heldout_log(self) -> Path:
        return self.path / HELDOUT_LOG

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def is_run(self) -> bool:
        """True when the folder holds a run record (finished or not)."""
        return self.run_file.exists()

    def has_model(self) -> bool:
        """True when a trained model has been saved into the folder."""
        return (self.path / "modules.json").exists()

    # ---- the run record -------------------------------------------------------------------
    def info(self) -> dict:
        """The run record, or ``{}`` when there is none or it cannot be read (a model folder)."""
        try:
            return json.loads(self.run_file.read_text())
        except (OSError, ValueError):
            return {}

    def identity(self) -> str:
        """16 hex characters that name this training run wherever its folder lies: a digest of
        its record's first start, commit, mode, rng_seed, config and training-set sha256
        (``''`` for a folder with no record or no start: a plain model). A copied or moved run
        folder keeps it; the same folder trained again gets a new one. Results record it
        (``run_sha``), so a copy evaluated under another path is not counted as a second run."""
        info = self.info()
        if not info.get("started"):
            return ""
        fields = {k: info.get(k) for k in ("started", "git_commit", "mode", "rng_seed", "config")}
        fields["data"] = (info.get("data") or {}).get("sha256")
        text = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def read(self) -> dict:
        """The run record; a ``DataError`` naming the file when it is not valid JSON."""
        try:
            return json.loads(self.run_file.read_text())
        except ValueError as e:
            raise DataError(self.run_file, None, f"not valid JSON ({e})") from None

    def write(self, info: dict) -> None:
        self.run_file.write_text(json.dumps(info, indent=2))

    def update(self, **fields) -> dict:
        info = self.read()
        info.update(fields)
        self.write(info)
        return info

    def start(self, record: dict, git_commit: str, resuming: bool = False) -> None:
        """Record a run that starts now: ``record`` (mode, rng_seed, config, data...) plus status.
        ``resuming`` from a checkpoint keeps the first start's ``git_commit`` and ``started`` and
        adds ``{"git_commit", "started"}`` to ``resumes``: the steps before ran that code (a warning
        says so when the commit differs)."""
        now = {"git_commit": git_commit, "started": _now()}
        prev = self.info() if resuming else {}
        if prev.get("started"):
            if prev.get("git_commit") != git_commit:
                log.warning(
                    "%s: resumed under commit %s; its earlier steps ran %s",
                    self.path,
                    git_commit,
                    prev.get("git_commit"),
                )
            first = {"git_commit": prev.get("git_commit"), "started": prev["started"]}
            now = {**first, "resumes": [*prev.get("resumes", []), now]}
        self.write({**record, **now, "status": "running"})

    def finish(self, **fields) -> None:
        self.update(status="finished", **fields, finished=_now())

    def stop(self, reason: str, **fields) -> None:
        self.update(status=f"stopped: {reason}", **fields)

    def is_finished(self) -> bool:
        return self.info().get("status") == "finished" and self.has_model()

    def record_failure(self, exc: BaseException, since: float = 0.0) -> None:
        """Mark a run that raised as ``failed: <error>`` (``stopped: interrupted`` for Ctrl-C),
        unless the run already wrote a status of its own (finished, stopped) or the record
        predates ``since`` (an earlier run's, refused before this one started: left as it was)."""
        try:
            if self.run_file.stat().st_mtime < since:
                return
            info = json.loads(self.run_file.read_text())
        except (OSError, ValueError):
            return
        if info.get("status") != "running":
            return
        if isinstance(exc, KeyboardInterrupt):
            info["status"] = "stopped: interrupted"
        else:
            first = (str(exc).splitlines() or [""])[0][:300]
            info["status"] = f"failed: {type(exc).__name__}: {first}"
        self.write(info)

    # ---- logs and checkpoints -------------------------------------------------------------
    def read_log(self, which: str = "train") -> list[dict]:
        """The rows of ``train_log.jsonl`` (``which='heldout'``: ``heldout_log.jsonl``)."""
        path = self.train_log if which == "train" else self.heldout_log
        if not path.exists():
            return []
        return [row for _, row in read_jsonl(path)]  # a cut last line (a killed run) is dropped

    def last_step(self) -> int | None:
        """The last step the training log reached, or None (no log yet)."""
        if not self.train_log.exists():
            return None
        steps = [r.get("step") for _, r in read_jsonl(self.train_log) if isinstance(r.get("step"), int)]
        return max(steps) if steps else None

    def trim_logs(self, step: int) -> None:
        """Drop log lines after ``step``: a run resumed from that checkpoint logs them again.
        The log is replaced atomically, so a kill during the rewrite loses nothing."""
        for which, path in (("train", self.train_log), ("heldout", self.heldout_log)):
            if path.exists():
                write_jsonl(path, [r for r in self.read_log(which) if r["step"] <= step])

    def checkpoints(self) -> list[Path]:
        """``checkpoints/checkpoint-<step>`` folders, oldest step first."""
        found = self.checkpoints_dir.glob("checkpoint-*") if self.checkpoints_dir.exists() else []
        return sorted(found, key=lambda p: int(p.name.split("-")[1]))

    # ---- status ---------------------------------------------------------------------------
    def lock_holder(self) -> str | None:
        """The ``pid N on HOST since T`` line of the folder's lock when that process is alive.

        The lock file is read, never taken: taking it, even for a moment, could make a training
        run that starts at the same instant fail with ``OutputLocked``. A holder on another host
        cannot be checked from here and counts as alive.
        """
        try:
            text = lock_path(self.path).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        parts = text.split()
        if len(parts) < 4 or parts[0] != "pid" or not parts[1].isdigit():
            return None
        if parts[3] != socket.gethostname():
            return text
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, another user's
            pass
        return None if _started_after(int(parts[1]), lock_path(self.path)) else text

    def status(self, info: dict | None = None) -> tuple[str, str]:
        """``(status, detail)``: ``'finished' -> ('done', '')``; a ``running`` run whose lock
        holder is gone -> ``('stopped', 'process gone ...')``; ``'failed: X' -> ('failed', 'failed: X')``."""
        raw = str((self.info() if info is None else info).get("status") or "")
        if raw == "finished":
            return "done", ""
        if raw == "running":
            holder = self.lock_holder()
            if holder:
                return "running", holder
            return "stopped", "process gone without finishing (killed?); rerun the command to resume"
        for status in ("failed", "stopped"):
            if raw.startswith(status):
                return status, raw
        return raw or "unknown", raw

    # ---- siblings and search --------------------------------------------------------------
    def copy_finished_sibling(
        self, mode: str, config: dict, manifest: dict, loss: str = "relation", *, base: dict
    ) -> str | None:
        """Copy a finished sibling that trained on the same examples (``sha256``) with the same
        ``config`` and ``loss`` from the same base model content into this (absent) folder,
        recorded as a finished run of ``mode``; returns the sibling's name, or None (nothing
        copied). ``base`` is this run's ``core.models.base_record``: its ``base_model_sha256``
        must equal the sibling's (both None: one hub name, which the config compares), since the
        config names the base by the string given (``./mybase`` from two project folders, or a
        folder replaced between two runs, held other models). A sibling whose record has no
        ``loss`` (written before runs recorded it) counts as ``relation``, the default.

        Example: the bundled seeds all have an instruction, so ``all-dv`` at the same number of
        examples trains on exactly ``ins-dv``'s examples; retraining would repeat the same run.
        Checkpoints and tracker logs are not copied. The record names the source in ``same_as``.
        """
        if self.path.exists() or not manifest.get("sha256"):
            return None
        for sibling in (RunFolder(p.parent) for p in sorted(self.path.parent.glob(f"*/{RUN_FILE}"))):
            info = sibling.info()
            same = info.get("config") == config and info.get("data", {}).get("sha256") == manifest["sha256"]
            same = same and info.get("loss", "relation") == loss and _same_base(info, base)
            if not same or sibling.path.name.startswith(".") or not sibling.is_finished():
                continue
            tmp = RunFolder(self.path.with_name(f".{self.path.name}.copying-{os.getpid()}"))
            shutil.copytree(
                sibling.path, tmp.path, ignore=shutil.ignore_patterns("checkpoints", "tb"), dirs_exist_ok=True
            )
            info.update(mode=mode, data=manifest, same_as=sibling.path.name, **base)
            tmp.write(info)
            try:
                tmp.path.rename(self.path)  # atomic: a second process copying the same run loses here
            except OSError:
                shutil.rmtree(tmp.path, ignore_errors=True)
                return None
            return sibling.path.name
        return None

    @classmethod
    def find(cls, root: str | Path, *, with_model: bool = False) -> list[RunFolder]:
        """Every run folder under ``root`` (it holds a run record), sorted by path; checkpoints
        inside a run are not runs. ``with_model``: only those with a saved model (evaluable)."""
        root = Path(root)
        if not root.exists():
            return []
        runs = (cls(p.parent) for p in root.rglob(RUN_FILE) if "checkpoints" not in p.relative_to(root).parts)
        return sorted((r for r in runs if r.has_model() or not with_model), key=lambda r: r.path)


def _same_base(info: dict, base: dict) -> bool:
    """Whether a run record was trained from ``base``'s content (``base_model_sha256``). A record
    written before runs kept the digest has none: its base is unknown, so it is not copied (the
    run trains); ``trainer._check_rerun`` still accepts such a record in its own folder."""
    key = "base_model_sha256"
    return key in info and key in base and info[key] == base[key]


def _started_after(pid: int, lock: Path) -> bool:
    """Whether process ``pid`` started after its lock line was written (the lock file's mtime, which
    no time zone shifts): then the pid was reused by another process and the holder is gone (a
    ``kill -9`` leaves its line in the lock; a dead run read "running" once its pid came back).
    False when either time is unknown (Linux's ``/proc`` gives the start)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime")
        )
        began = boot + ticks / os.sysconf("SC_CLK_TCK")
        held = lock.stat().st_mtime
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return began > held + 2  # seconds: btime is whole seconds; a holder starts before it writes its line
