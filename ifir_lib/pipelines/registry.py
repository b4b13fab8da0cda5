"""The registry of runs: every training run and evaluation under a folder, one row each.

``runs_table(root)`` (and ``ifir runs --root out/``) reads what the stages already write, and
nothing else::

    RUN/ifir_run.json         mode, rng_seed, config (backbone), data manifest, git commit, status
    RUN/train_log.jsonl       the last logged step of a run that has not finished
    RUN.lock                  ``pid N on HOST since T`` while a process trains into RUN (``locks``)
    */results.csv             evaluations (``results``); a row whose ``model`` is a run folder
                              gives that run its metrics, any other model is a row of its own

A run's *status* is ``done`` (finished), ``running`` (its lock names a live process),
``stopped`` (killed, interrupted or a non-finite loss: rerunning the command resumes it) or
``failed`` (an exception; ``detail`` says which). The headline metrics are p-MRR and the
paper's Score (MAP@1000 or nDCG@5; nDCG@10 for BEIR sets) per evaluation set, x100, the latest
evaluation of each run; columns are named ``<dataset>:<metric>``.

Example: a demo folder -> one ``eval`` row (the base model) and four ``train`` rows (one per
mode), each with ``followir_mini:p_mrr`` and ``followir_mini:score``. Not handled here: training,
evaluating, comparing runs statistically (``summaries``).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import socket
from pathlib import Path

import pandas as pd

from ..core.config import ABLATIONS
from ..core.errors import DataError
from ..core.jsonl import read_jsonl
from ..core.locks import lock_path
from ..reporting.results import _OLD_NAMES, REQUIRED_RESULT_COLUMNS, backbone_of, load_results

COLUMNS = [
    "run",
    "kind",
    "mode",
    "backbone",
    "rng_seed",
    "data",
    "reversals",
    "budget",
    "steps",
    "git_commit",
    "status",
]
EXTRA_COLUMNS = [
    "detail",
    "started",
    "finished",
    "results",
    "path",
]  # in the DataFrame and --json, not the listing
HEADLINE_METRICS = ("p_mrr", "score", "ndcg_at_10")  # score is absent from BEIR sets, nDCG@10 from FollowIR


# ---------------------------------------------------------------------------------------------
# Writing: what a run records about its data


def data_sources(mode: str, data: str | Path, reversals: str | Path | None, curation=None) -> dict:
    """The provenance fields ``train`` stores in a run's data manifest (``ifir_run.json``).

    ``data_sources('ins-dv', 'seeds.jsonl', None) -> {'data': 'seeds.jsonl', 'reversals': 'reference'}``;
    the template ablation always reads ``'template'``; a synthesis file is named by its path.
    """
    if ABLATIONS.get(mode, {}).get("reversals") == "template":
        rev = "template"
    else:
        rev = str(reversals) if reversals else "reference"
    out = {"data": str(data), "reversals": rev}
    if curation:
        out["curation"] = str(curation)
    return out


def reuse_identical_run(run_dir: str | Path, mode: str, config: dict, manifest: dict) -> str | None:
    """Copy a finished sibling of ``run_dir`` that trained on the same examples (``sha256``) with
    the same ``config`` into ``run_dir``, recorded as a finished run of ``mode``; returns the
    sibling's name, or None (nothing copied).

    Example: the bundled seeds all have an instruction, so ``all-dv`` at the same number of
    examples trains on exactly ``ins-dv``'s examples; retraining would repeat the same run.
    Checkpoints and tracker logs are not copied. ``ifir_run.json`` names the source in ``same_as``.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() or not manifest.get("sha256"):
        return None
    for info_file in sorted(run_dir.parent.glob("*/ifir_run.json")):
        info = json.loads(info_file.read_text())
        same = info.get("config") == config and info.get("data", {}).get("sha256") == manifest["sha256"]
        if (
            not same
            or info_file.parent.name.startswith(".")
            or info.get("status") != "finished"
            or not (info_file.parent / "modules.json").exists()
        ):
            continue
        tmp = run_dir.with_name(f".{run_dir.name}.copying-{os.getpid()}")
        shutil.copytree(
            info_file.parent, tmp, ignore=shutil.ignore_patterns("checkpoints", "tb"), dirs_exist_ok=True
        )
        info.update(mode=mode, data=manifest, same_as=info_file.parent.name)
        (tmp / "ifir_run.json").write_text(json.dumps(info, indent=2))
        try:
            tmp.rename(run_dir)  # atomic: a second process copying the same run loses the race here
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        return info_file.parent.name
    return None


def record_failure(run_dir: str | Path, exc: BaseException, since: float = 0.0) -> None:
    """Mark a run that raised as ``failed: <error>`` (``stopped: interrupted`` for Ctrl-C) in its
    ``ifir_run.json``, unless the run already wrote a status of its own (finished, stopped) or the
    file predates ``since`` (an earlier run's, refused before this one started: left as it was)."""
    run_file = Path(run_dir) / "ifir_run.json"
    try:
        if run_file.stat().st_mtime < since:
            return
        info = json.loads(run_file.read_text())
    except (OSError, ValueError):
        return
    if info.get("status") != "running":
        return
    if isinstance(exc, KeyboardInterrupt):
        info["status"] = "stopped: interrupted"
    else:
        first = (str(exc).splitlines() or [""])[0][:300]
        info["status"] = f"failed: {type(exc).__name__}: {first}"
    run_file.write_text(json.dumps(info, indent=2))


# ---------------------------------------------------------------------------------------------
# Reading


def lock_holder(run_dir: str | Path) -> str | None:
    """The ``pid N on HOST since T`` line of a run folder's lock when that process is alive, else None.

    The lock file is read, never taken: taking it, even for a moment, could make a training run
    that starts at the same instant fail with ``OutputLocked``. A holder on another host cannot
    be checked from here and counts as alive.
    """
    try:
        text = lock_path(run_dir).read_text(encoding="utf-8").strip()
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
        return text
    return text


def run_status(run_dir: str | Path, info: dict) -> tuple[str, str]:
    """``(status, detail)`` of a run folder: ``'finished' -> ('done', '')``; a ``running`` run whose
    lock holder is gone -> ``('stopped', 'process gone ...')``; ``'failed: X' -> ('failed', 'failed: X')``."""
    raw = str(info.get("status") or "")
    if raw == "finished":
        return "done", ""
    if raw == "running":
        holder = lock_holder(run_dir)
        if holder:
            return "running", holder
        return "stopped", "process gone without finishing (killed?); rerun the command to resume"
    for status in ("failed", "stopped"):
        if raw.startswith(status):
            return status, raw
    return raw or "unknown", raw


def _last_step(run_dir: Path) -> int | None:
    log = run_dir / "train_log.jsonl"
    if not log.exists():
        return None
    steps = [r.get("step") for _, r in read_jsonl(log) if isinstance(r.get("step"), int)]
    return max(steps) if steps else None


def find_runs(root: str | Path) -> list[Path]:
    """Every training run folder under ``root`` (it holds ``ifir_run.json``; checkpoints are not runs)."""
    root = Path(root)
    return sorted(
        p.parent for p in root.rglob("ifir_run.json") if "checkpoints" not in p.relative_to(root).parts
    )


def _run_row(run_dir: Path, root: Path) -> dict:
    try:
        info = json.loads((run_dir / "ifir_run.json").read_text())
    except ValueError as e:
        raise DataError(run_dir / "ifir_run.json", None, f"not valid JSON ({e})") from None
    cfg, data = info.get("config") or {}, info.get("data") or {}
    status, detail = run_status(run_dir, info)
    steps = info.get("steps") if status == "done" else _last_step(run_dir)
    return {
        "run": str(run_dir.relative_to(root)) if run_dir != root else run_dir.name,
        "kind": "train",
        "mode": info.get("mode"),
        "backbone": cfg.get("base_model", info.get("base_model")),
        "rng_seed": str(info.get("rng_seed", cfg.get("rng_seed", ""))),
        "data": Path(str(data.get("data") or data.get("source") or "")).name or None,
        "reversals": Path(str(data["reversals"])).name if data.get("reversals") else None,
        "budget": data.get("budget"),
        "steps": steps,
        "git_commit": info.get("git_commit"),
        "status": status,
        "detail": detail,
        "started": info.get("started"),
        "finished": info.get("finished"),
        "results": None,
        "path": str(run_dir.resolve()),
    }


def find_results(root: str | Path) -> list[Path]:
    """Every results table under ``root``: a CSV whose header has the results columns
    (``run_id, model, mode, rng_seed, dataset, metric, value``); per-query files are not tables."""
    out = []
    for p in sorted(Path(root).rglob("*.csv")):
        if p.stem.endswith("_per_query"):
            continue
        try:
            with p.open(encoding="utf-8") as fh:
                header = {_OLD_NAMES.get(c, c) for c in fh.readline().strip().split(",")}
        except (OSError, UnicodeDecodeError):
            continue
        if set(REQUIRED_RESULT_COLUMNS) <= header:
            out.append(p)
    return out


def _match_run(model: str, table: Path, runs: dict[Path, dict], root: Path) -> Path | None:
    """The run folder a results row's ``model`` names: the same folder (relative paths read from
    the working directory or the table's folder), else one whose path under ``root`` ends it
    (a table written on another machine)."""
    p = Path(model)
    for cand in [p] if p.is_absolute() else [p, table.parent / p]:
        try:
            resolved = cand.resolve()
        except OSError:
            continue
        if resolved in runs:
            return resolved
    parts = p.parts
    for run in runs:
        rel = run.relative_to(root.resolve()).parts if run != root.resolve() else ()
        if rel and len(parts) >= len(rel) and parts[-len(rel) :] == rel:
            return run
    return None


def _evaluated_before(grp: pd.DataFrame, finished: str | None) -> bool:
    """True when every row of ``grp`` is older than the run's end (``ifir_run.json`` writes local
    time): those rows scored another model that lived at this path before."""
    if not finished or grp["timestamp"].isna().all():
        return False
    try:
        end = pd.Timestamp(finished).tz_localize(datetime.datetime.now().astimezone().tzinfo)
    except ValueError:
        return False
    return bool(grp["timestamp"].max() < end - pd.Timedelta(minutes=2))


def _headline(res: pd.DataFrame) -> dict:
    """``{'<dataset>:<metric>': value}`` for the headline metrics, the latest row of each."""
    res = res[res["metric"].isin(HEADLINE_METRICS)].sort_values("timestamp", kind="stable")
    last = res.groupby(["dataset", "metric"], sort=False)["value"].last()
    return {f"{d}:{m}": float(v) for (d, m), v in last.items()}


def runs_table(root: str | Path = "out", *, details: bool = True) -> pd.DataFrame:
    """One row per training run and per evaluated model that is not a run, under ``root``.

    Columns: ``COLUMNS`` (run, kind, mode, backbone, rng_seed, data, reversals, budget, steps,
    git_commit, status), then ``<dataset>:<metric>`` headline metrics, then (``details``)
    ``EXTRA_COLUMNS``. Training runs come first, sorted by folder; an empty folder gives an
    empty table.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, None, "not a directory (expected a folder of runs and results)")
    runs = {run.resolve(): _run_row(run, root) for run in find_runs(root)}
    evals: dict[tuple, dict] = {}
    metrics: dict[Path | tuple, pd.DataFrame] = {}
    for table in find_results(root):
        res = load_results(table)
        for (model, mode, rng_seed), grp in res.groupby(["model", "mode", "rng_seed"], sort=False):
            run = _match_run(str(model), table, runs, root)
            if run is not None and _evaluated_before(grp, runs[run]["finished"]):
                run = None  # an earlier model at the same path (the folder was reused or moved)
            key = run if run is not None else (str(model), mode, rng_seed)
            metrics[key] = pd.concat([metrics[key], grp]) if key in metrics else grp
            row = (
                runs[run] if run is not None else evals.setdefault(key, _eval_row(model, mode, rng_seed, grp))
            )
            row["results"] = ";".join(sorted({*filter(None, (row["results"] or "").split(";")), str(table)}))
    rows = []
    for key, row in [*runs.items(), *sorted(evals.items(), key=lambda kv: kv[0])]:
        rows.append({**row, **(_headline(metrics[key]) if key in metrics else {})})
    metric_cols = sorted({c for r in rows for c in r if ":" in c}, key=lambda c: (c.split(":")[0], c))
    df = pd.DataFrame(rows, columns=COLUMNS + metric_cols + EXTRA_COLUMNS)
    for c in ("budget", "steps"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df if details else df.drop(columns=EXTRA_COLUMNS)


def _eval_row(model: str, mode: str, rng_seed: str, grp: pd.DataFrame) -> dict:
    """An evaluation of a model that is not a run under the folder (the base model, a hub model)."""
    commits = grp.sort_values("timestamp", kind="stable")["git_commit"].dropna()
    return {
        "run": str(model),
        "kind": "eval",
        "mode": mode,
        "backbone": backbone_of(model),
        "rng_seed": str(rng_seed),
        "data": None,
        "reversals": None,
        "budget": None,
        "steps": None,
        "git_commit": commits.iloc[-1] if len(commits) else None,
        "status": "done",
        "detail": "",
        "started": str(grp["timestamp"].min()) if grp["timestamp"].notna().any() else None,
        "finished": None,
        "results": None,
        "path": None,
    }


def format_runs(df: pd.DataFrame) -> str:
    """The listing ``ifir runs`` prints: one line per row, metrics with two decimals, '-' for none."""
    if df.empty:
        return "no runs or results found"
    shown = df[[c for c in df.columns if c not in EXTRA_COLUMNS]].astype(object)
    for c in shown.columns:
        if ":" in c:  # metric columns, x100
            shown[c] = [f"{v:.2f}" if pd.notna(v) else None for v in shown[c]]
    return shown.where(shown.notna(), "-").to_string(index=False)


def runs_records(df: pd.DataFrame) -> list[dict]:
    """The table as JSON-ready dicts (``ifir runs --json``): missing values are ``None``."""
    return json.loads(df.to_json(orient="records"))
