"""An experiment's plan as a file, written before any run and checked on every rerun.

The plan is what ``ifir experiment`` will do: its inputs, modes, rng_seeds, training settings,
evaluation, the primary comparison and the family of tests corrected together. It is written to
``OUT/experiment.toml`` before the first run; its hash (``plan_hash``: the first 12 hex digits of
the SHA-256 of the plan's canonical JSON) is stored in every run's data manifest and every results
row. A rerun into the same folder with a different plan is refused, naming each changed field,
and nothing is touched; ``set_aside`` moves the old experiment's outputs under
``OUT/superseded/<hash>/`` so that a new experiment can start there with nothing lost. Example::

    write_plan("out/exp", {"seeds": "s.jsonl", "modes": ["ins-orig", "ins-dv"], ...}) -> "3f9c0a1d2b4e"

The file is TOML in sections (``SECTIONS``) for the reader; reading flattens it back to one
mapping of fields. A field left out of the file (an unset option, ``None``) takes its default.
``eval_targets``, ``dataset_of`` and ``sets_of`` read the plan's evaluation items.
Not handled here: what the fields mean and their defaults (``experiment.ExperimentConfig``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import tomllib

from ..core import config as C
from ..core.digests import files_digest
from ..core.errors import ConfigError, DataError
from ..core.locks import check_not_written, shared_append
from ..core.models import model_digest
from ..core.run_folder import RUN_FILE
from ..evaluation.corpora import FOLLOWIR_FILES, FOLLOWIR_TASKS
from ..evaluation.mteb_glue import expand_task_names
from ..evaluation.tasks import PAPER_TASKS as PAPER_TASK_NAMES

PLAN_FILE = "experiment.toml"
SUPERSEDED = "superseded"
# The plan's sections, in the order the file shows them; a field not named here goes to "settings".
SECTIONS = {
    "inputs": ("seeds", "reversals", "curation", "base_model"),
    "design": (
        "experiment_preset",
        "train_preset",
        "modes",
        "extra_modes",
        "rng_seeds",
        "budget",
        "heldout_seeds",
    ),
    "evaluation": ("eval", "prompts", "eval_backend", "bootstrap"),
    "primary": ("primary_a", "primary_b", "primary_metric", "primary_set"),
    "family": ("baseline", "tested_metrics", "correction", "n_boot"),
}
# The plan's fields that name input files: stored as absolute paths (``absolute_paths``), so a
# printed run command finds them from any folder; "bundled" names the seeds shipped in the package.
PATH_FIELDS = ("seeds", "reversals", "curation")
# Plan fields that may name a local model folder, whose content is an input too (``input_digests``)
MODEL_FIELDS = ("base_model",)
# What the evaluation writes for a FollowIR-format folder (``evaluator.followir_per_query``) and
# for ``followir``, the paper's aggregate of FollowIR's three tasks (``mteb_glue.aggregate_followir``)
FOLDER_METRICS = ("p_mrr", "map_at_1000", "ndcg_at_5", "score")
AGGREGATE_METRICS = ("p_mrr", "score")
# What an experiment folder holds besides its plan; set_aside moves these.
OUTPUTS = ("models", "results.csv", "results_per_query.csv", "summary.md", "comparisons.csv", "modes.csv")
OUTPUTS += ("figures", "experiment.json")


def input_digests(fields: dict) -> dict[str, str]:
    """``{field: sha256[:16]}`` of each input named by ``PATH_FIELDS`` in ``fields`` that exists (a
    folder: its files, in name order), and of a ``base_model`` that is a local folder (its model
    files, ``core.models.model_digest``). The plan stores paths; this is what the files held, so a
    file replaced between two runs of one experiment, or a base model folder swapped, is seen. ``"bundled"`` and unset inputs are
    left out (the package's own data)."""
    out = {}
    for k in (*PATH_FIELDS, *MODEL_FIELDS):
        path = fields.get(k)
        if not isinstance(path, str) or path == "bundled" or not Path(path).exists():
            continue
        if k in MODEL_FIELDS:  # a local model folder: its weights and config (a hub name has none)
            if digest := model_digest(Path(path)):
                out[k] = digest
            continue
        files = [Path(path)]
        if files[0].is_dir():  # an Arrow seeds folder: its tables, not lock files or hidden temp files
            files = sorted(p for p in files[0].rglob("*") if p.is_file() and not _bookkeeping(p.name))
        out[k] = files_digest((f.name, f) for f in files)
    return out


def _bookkeeping(name: str) -> bool:
    return name.startswith(".") or name.endswith(".lock")


def plan_hash(plan: dict) -> str:
    """The plan's identity: ``sha256(canonical JSON)[:12]`` (key order and tuple/list do not matter)."""
    text = json.dumps(_normal(plan), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string


def to_toml(plan: dict, header: str = "") -> str:
    """The plan as TOML in ``SECTIONS`` (fields that are ``None`` are left out: they take defaults)."""
    placed = {f for fields in SECTIONS.values() for f in fields}
    sections = {**SECTIONS, "settings": tuple(f for f in plan if f not in placed)}
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for name, fields in sections.items():
        body = [f"{f} = {_toml_value(plan[f])}" for f in fields if f in plan and plan[f] is not None]
        if body:
            lines += ["", f"[{name}]", *body]
    return "\n".join(lines).lstrip("\n") + "\n"


def read_plan(path: str | Path) -> dict:
    """The fields of a plan file, flattened (``[design] modes = [...]`` -> ``{"modes": [...]}``)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(path, None, "no such plan file") from None
    except tomllib.TOMLDecodeError as e:
        raise DataError(path, getattr(e, "lineno", None), f"not valid TOML ({e})") from None
    flat = {}
    for section, fields in data.items():
        if not isinstance(fields, dict):
            raise DataError(path, None, f"{section!r}: expected a [section] of fields, got a bare value")
        for field, value in fields.items():
            if field in flat:
                raise DataError(path, None, f"field {field!r} appears in two sections")
            flat[field] = value
    return flat


def stored_plan(out: str | Path) -> dict | None:
    """The plan stored in an experiment folder, or None when it has none yet."""
    path = Path(out) / PLAN_FILE
    return read_plan(path) if path.exists() else None


def _normal(plan: dict) -> dict:
    """Lists for tuples, no ``None`` fields: what a plan reads back as from its file."""
    return json.loads(json.dumps({k: v for k, v in plan.items() if v is not None}, default=list))


def changes(old: dict, new: dict) -> list[str]:
    """``['budget 640 -> 320', ...]``: the fields where two plans differ (``None`` = unset)."""
    old, new = _normal(old), _normal(new)
    return [
        f"{k} {old.get(k)!r} -> {new.get(k)!r}"
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k)
    ]


def absolute_paths(fields: dict, base: str | Path | None = None) -> dict:
    """``fields`` with each input path (``PATH_FIELDS``, ``eval`` items that are folders, a local
    base model folder) made absolute from ``base`` (a plan file's folder: its relative paths are
    its own), else the current folder: ``{"seeds": "my.jsonl"} -> {"seeds": "/home/me/proj/my.jsonl"}``;
    ``"bundled"``, ``v1``/``v2``, task names, aliases, hub names and unset stay."""

    def here(v: str) -> str:
        return os.path.abspath(
            os.path.join(base, os.path.expanduser(v)) if base is not None else os.path.expanduser(v)
        )

    out = {
        k: here(v) if k in PATH_FIELDS and isinstance(v, str) and v != "bundled" else v
        for k, v in fields.items()
    }
    if isinstance(out.get("eval"), (list, tuple)):  # --eval folders too: a printed --run job starts anywhere
        out["eval"] = type(out["eval"])(_folder(x, base, here, "eval") for x in out["eval"])
    if isinstance(out.get("primary_set"), str) and out["primary_set"]:  # a set named by its folder
        out["primary_set"] = _folder(out["primary_set"], base, here, "primary_set")
    for k in MODEL_FIELDS:  # a local base model folder (not an alias or hub name) likewise
        v = out.get(k)
        if isinstance(v, str) and v not in ("minilm", "mpnet"):
            out[k] = _folder(v, base, here, k, reserved=False)
    return out


def _folder(item, base, here, field: str, reserved: bool = True):
    """``item`` absolute when it names a folder (from ``base``, a plan file's folder, else here;
    ``reserved``: a reserved ``--eval`` name is a name); else as given. A plan file's relative
    folder that exists only from the current folder is a ``ConfigError``: it was found there."""
    if not isinstance(item, str):
        return item
    found = is_folder_item(item, base) if reserved else Path(here(item)).is_dir()
    if found:
        return here(item)
    if (
        base is not None
        and not os.path.isabs(item)
        and (is_folder_item(item) if reserved else Path(item).is_dir())
    ):
        raise ConfigError(
            f"{field} {item!r}: no such folder beside the plan file ({base}); a plan file's relative paths "
            "are read from its own folder"
        )
    return item


def is_folder_item(item, base: str | Path | None = None) -> bool:
    """Whether an ``--eval`` item names a folder: one that exists (from ``base``, else here) and
    is not a reserved name (``v1``/``v2``, ``paper``, ``followir``, a paper task): a LaTeX
    ``paper/`` folder beside the project made the paper preset plan it as an evaluation set.
    Name such a folder with a path (``./paper``)."""
    if not isinstance(item, str) or item in C.EVAL_SETS or item.lower() in ("paper", "followir"):
        return False
    if item in PAPER_TASK_NAMES:  # FollowIR's three included
        return False
    return Path(os.path.join(base, item) if base is not None else item).is_dir()


def _stored_spelling(old: dict, new: dict) -> dict:
    """``new`` with each input path that names the same file as the stored plan's (read from the
    current folder) spelled as stored: a plan stored with relative paths (before they were made
    absolute) keeps its hash when its command is run again."""
    same = {
        k: old[k]
        for k in (*PATH_FIELDS, *MODEL_FIELDS, "primary_set")
        if isinstance(old.get(k), str)
        and isinstance(new.get(k), str)
        and old[k] != new[k]
        and os.path.abspath(old[k]) == os.path.abspath(new[k])
    }
    a, b = old.get("eval"), new.get("eval")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and a != b:
        if all(
            x == y or (Path(x).is_dir() and os.path.abspath(x) == os.path.abspath(y)) for x, y in zip(a, b)
        ):
            same["eval"] = a  # a plan stored with relative --eval folders keeps its hash
    return {**new, **same}


def write_plan(out: str | Path, plan: dict, header: str = "") -> str:
    """Store ``plan`` in ``out`` unless the same plan is there; returns its hash.

    A different stored plan raises ``ConfigError`` naming the changes (nothing is written): start
    a new experiment in another folder, or set the old one aside (``set_aside``). An input path
    naming the stored one's file (``my.jsonl`` stored, ``/abs/my.jsonl`` now) is no change. Safe when several
    processes (a scheduler's array of runs) start at once: the first writes, the rest compare.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = _normal(plan)
    path = out / PLAN_FILE
    with shared_append(path):  # processes started together (a scheduler array) wait their turn
        old = stored_plan(out)
        if old is not None:
            plan = _stored_spelling(old, plan)
        if old is not None and _normal(old) != plan:
            raise ConfigError(
                f"{path}: this folder holds experiment {plan_hash(_normal(old))}, planned differently "
                f"({'; '.join(changes(old, plan))}); nothing was changed. Write to another --out, or pass "
                f"--new-experiment to move its outputs to {out / SUPERSEDED}/<hash>/ and start anew"
            )
        if old is None:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(to_toml(plan, header), encoding="utf-8")
            os.replace(tmp, path)
    return plan_hash(plan)


COLLECT_LOCK = ".collect"  # ``OUT/.collect.lock``: held while ``--collect`` evaluates and writes


def set_aside(out: str | Path) -> Path | None:
    """Move an experiment's plan and outputs to ``OUT/superseded/<hash>/``; returns that folder
    (None when ``out`` holds no plan). Nothing is deleted. An old plan's ``--collect`` or training
    job still at work is ``OutputLocked``, named: moved from under it, it went on writing into the
    new plan's table and run folders."""
    out = Path(out)
    old = stored_plan(out)
    if old is None:
        return None
    busy = [out / COLLECT_LOCK, *(p.parent for p in (out / "models").rglob(RUN_FILE))]
    for path in busy:
        check_not_written(path, "experiment's output (an old plan's job still runs)")
    dest = out / SUPERSEDED / plan_hash(_normal(old))
    if dest.exists():
        dest = dest.with_name(f"{dest.name}-{len(list(dest.parent.iterdir()))}")
    dest.mkdir(parents=True)
    for name in (PLAN_FILE, *OUTPUTS):
        if (out / name).exists():
            shutil.move(str(out / name), str(dest / name))
    return dest


def eval_targets(items) -> tuple[list[Path], list[str]]:
    """``(FollowIR folders, mteb task names)`` of ``--eval`` items: ``v1``/``v2`` (bundled), an
    existing folder, else a task name or ``paper``. ``eval_targets(["v1", "paper"]) -> ([.../followir_mini], ["paper"])``.

    Two items stored under one ``dataset`` name (``dataset_of``: ``v1`` and a folder of yours
    named ``followir_mini``, or ``a/test`` and ``b/test``) are a ``ConfigError`` naming both:
    their rows would be pooled into one set in the tables."""
    seen: dict[str, str] = {}
    for item in items:
        name = dataset_of(item)
        if name in seen:
            raise ConfigError(
                f"--eval {seen[name]!r} and {item!r} are both stored as dataset {name!r}, so their "
                "results would be pooled; evaluate one of them, or copy one folder under another name"
            )
        seen[name] = item
    folders, tasks = [], []
    for item in items:
        if item in C.EVAL_SETS:
            folders.append(Path(C.EVAL_SETS[item]))
        elif is_folder_item(item):
            folders.append(Path(item))
        elif "/" in item or item.startswith("."):
            raise ConfigError(f"--eval {item!r}: no such folder (a FollowIR-format folder was expected)")
        else:
            tasks.append(item)
    return folders, tasks


def check_layout(item: str | Path) -> None:
    """A ``ConfigError`` when a folder in ``--eval`` lacks a file of the FollowIR layout: a BEIR
    folder (``qrels/test.tsv``) or a half-copied one trained every run before ``--collect`` refused it."""
    missing = [f for f in FOLLOWIR_FILES if not (Path(item) / f).is_file()]
    if missing:
        beir = (
            " (a BEIR folder: evaluate it with `ifir evaluate --beir`)"
            if (Path(item) / "qrels").is_dir()
            else ""
        )
        raise ConfigError(
            f"--eval {item}: {Path(item) / missing[0]} not found{beir}; the experiment evaluates "
            f"FollowIR-format folders, which hold {', '.join(FOLLOWIR_FILES)}"
        )


def metrics_written(dataset: str, items) -> tuple[str, ...] | None:
    """The metrics the evaluation writes for the results' set ``dataset`` of the ``--eval``
    ``items``: a folder's (bundled or yours) ``FOLDER_METRICS``, the ``followir`` aggregate's
    ``AGGREGATE_METRICS``; None for a named task (known once mteb has scored it)."""
    if any(dataset_of(i) == dataset for i in items if i in C.EVAL_SETS or is_folder_item(i)):
        return FOLDER_METRICS
    return AGGREGATE_METRICS if dataset == "followir" else None


def sets_of(item: str) -> list[str]:
    """The results' ``dataset`` names an ``--eval`` item writes: a folder's name, or the tasks a
    name expands to, FollowIR's aggregate first when it holds all three (``sets_of('paper') ->
    ['followir', 'Robust04InstructionRetrieval', ..., 'MAIR-InstructIR']``)."""
    if item in C.EVAL_SETS or is_folder_item(item):
        return [dataset_of(item)]
    names = expand_task_names([item])
    return ["followir", *names] if set(FOLLOWIR_TASKS) <= set(names) else names


def dataset_of(item: str) -> str:
    """The results table's ``dataset`` for an ``--eval`` item (a folder's name, else the item)."""
    if item in C.EVAL_SETS:
        return Path(C.EVAL_SETS[item]).name
    return Path(item).name if is_folder_item(item) else item
