"""The tidy results table: its schema, appending, reading, summarising and comparing runs.

One row per run x dataset x metric, values x100 as the evaluation writes them::

    run_id, model, mode, rng_seed, dataset, metric, value, ci_low, ci_high, n_queries, git_commit, timestamp

``mode`` is the data configuration a model was trained on (``base`` for an untrained model);
per-query scores go to a sibling ``<stem>_per_query.csv`` (``run_id, dataset, metric, query_id,
value``). The table is only ever appended to, one run's rows in one locked write, so two
evaluations appending at once never interleave. Tables written before the vocabulary settled
(``config``/``seed`` columns) are read with those columns renamed.

Used by evaluation (writing), figures and notebooks (reading and summarising). Not handled here:
computing metrics (``evaluate``), drawing (``figures``).
"""

from __future__ import annotations

import csv
import datetime
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.config import BASE_MODE, MODES, PUBLISHED_RESULTS_PATH, REPO_DIR, git_commit
from ..core.errors import DataError
from ..core.jsonl import read_jsonl
from ..core.locks import shared_append
from ..core.run_folder import RunFolder
from ..synthesis.run import load_synthesis

RESULT_COLUMNS = [
    "run_id",
    "model",
    "mode",
    "rng_seed",
    "dataset",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n_queries",
    "git_commit",
    "timestamp",
]
REQUIRED_RESULT_COLUMNS = RESULT_COLUMNS[:7]
PER_QUERY_COLUMNS = ["run_id", "dataset", "metric", "query_id", "value"]
_OLD_NAMES = {"config": "mode", "seed": "rng_seed"}
# dataset names that already hold an average over the FollowIR collections
AGGREGATE_DATASETS = {"all", "mean", "average", "overall", "followir"}


def mode_order(modes) -> list[str]:
    """The paper's order (base, ins-orig, ins-dv, all-orig, all-dv), then any other mode sorted."""
    known = (BASE_MODE, *MODES)
    present = set(modes)
    return [m for m in known if m in present] + sorted(present - set(known))


# ---------------------------------------------------------------------------------------------
# Writing


def make_run_id(model: str, mode: str, rng_seed: int | str) -> str:
    """``make_run_id('runs/ins-dv', 'ins-dv', 1) -> 'ins-dv-ins-dv-s1-20260101T120000'`` (model folder name + time)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{Path(str(model)).name}-{mode}-s{rng_seed}-{stamp}"


def result_rows(
    result,
    *,
    run_id: str,
    model: str | None = None,
    mode: str = BASE_MODE,
    rng_seed: int | str = 0,
    git: str | None = None,
    timestamp: str | None = None,
) -> list[dict]:
    """Rows for the results table, one per metric (x100, with the 95% interval)."""
    git = git or git_commit()
    timestamp = timestamp or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for m, v in result.metrics.items():
        lo, hi = result.ci.get(m, (float("nan"), float("nan")))
        rows.append(
            {
                "run_id": run_id,
                "model": model or result.model,
                "mode": mode,
                "rng_seed": rng_seed,
                "dataset": result.dataset,
                "metric": m,
                "value": v,
                "ci_low": lo,
                "ci_high": hi,
                "n_queries": len(result.per_query.get(m, {})) or None,
                "git_commit": git,
                "timestamp": timestamp,
            }
        )
    return rows


def per_query_rows(result, *, run_id: str) -> list[dict]:
    """Rows for the per-query sibling file: ``run_id, dataset, metric, query_id, value``."""
    return [
        {"run_id": run_id, "dataset": result.dataset, "metric": m, "query_id": q, "value": v}
        for m, d in result.per_query.items()
        for q, v in d.items()
    ]


def per_query_frame(result, *, run_id: str = "-"):
    """``per_query_rows`` as a DataFrame, for plotting one result's per-query distribution."""
    return pd.DataFrame(per_query_rows(result, run_id=run_id), columns=PER_QUERY_COLUMNS)


def per_query_path(path: str | Path) -> Path:
    """``results.csv -> results_per_query.csv`` (same folder)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_per_query{path.suffix or '.csv'}")


def _append_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(encoding="utf-8", newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != columns:
            raise DataError(
                path,
                1,
                f"header {header} does not match the expected columns {columns}; "
                "refusing to append (write to a new file)",
            )
    with path.open("a", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="raise")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow(
                {
                    c: ("" if r.get(c) is None or (isinstance(r.get(c), float) and r[c] != r[c]) else r[c])
                    for c in columns
                }
            )


def append_results(path: str | Path, rows: list[dict], per_query: list[dict] | None = None) -> Path:
    """Append ``rows`` (``RESULT_COLUMNS``) to the results CSV, creating it with a header.

    Never overwrites: an existing file with other columns is an error. ``per_query`` rows go to
    ``per_query_path(path)``. Returns ``path``.
    """
    path = Path(path)
    missing = [c for c in RESULT_COLUMNS if any(c not in r for r in rows)]
    if missing:
        raise ValueError(f"result rows lack columns {missing}")
    with shared_append(path):  # two evaluations appending at once take turns, whole runs at a time
        _append_csv(path, RESULT_COLUMNS, rows)
        if per_query:
            _append_csv(per_query_path(path), PER_QUERY_COLUMNS, per_query)
    return path


def save_result(
    result,
    path: str | Path,
    *,
    run_id: str | None = None,
    model: str | None = None,
    mode: str = BASE_MODE,
    rng_seed: int | str = 0,
) -> str:
    """Append one result (summary rows + per-query rows) to the table; returns the run_id used."""
    run_id = run_id or make_run_id(model or result.model, mode, rng_seed)
    append_results(
        path,
        result_rows(result, run_id=run_id, model=model, mode=mode, rng_seed=rng_seed),
        per_query_rows(result, run_id=run_id),
    )
    return run_id


# ---------------------------------------------------------------------------------------------
# Loading


def load_results(path: str | Path) -> pd.DataFrame:
    """Read the tidy results CSV; a missing column raises ``DataError`` naming it.

    ``value``/``ci_*`` become floats, ``timestamp`` a UTC datetime; the optional columns are
    added empty when absent; ``config``/``seed`` columns of older tables are renamed.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "results file not found")
    try:
        df = pd.read_csv(
            path,
            dtype={
                "run_id": str,
                "model": str,
                "mode": str,
                "config": str,
                "rng_seed": str,
                "seed": str,
                "dataset": str,
                "metric": str,
                "git_commit": str,
            },
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise DataError(path, None, f"not a readable CSV ({str(e).strip().splitlines()[-1]})") from None
    return check_results(df, path)


def check_results(df: pd.DataFrame, path: str | Path = "<results>") -> pd.DataFrame:
    """Validate and normalise a results DataFrame (see ``load_results``)."""
    df = df.rename(columns={k: v for k, v in _OLD_NAMES.items() if k in df.columns and v not in df.columns})
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            path, 1, f"missing column(s) {', '.join(missing)}; have {', '.join(map(str, df.columns))}"
        )
    df = df.copy()
    for c in RESULT_COLUMNS[7:]:
        if c not in df.columns:
            df[c] = np.nan
    df["mode"] = df["mode"].astype(str).str.lower()
    df["rng_seed"] = df["rng_seed"].astype(str)
    for c in ("value", "ci_low", "ci_high"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce", format="mixed")
    df["n_queries"] = pd.to_numeric(df["n_queries"], errors="coerce").astype("Int64")
    return df


def backbone_of(model: str, runs_dir: str | Path | None = None) -> str:
    """The backbone a model was fine-tuned from: ``config.base_model`` of the run folder ``model``
    (or ``<runs_dir>/<folder name>`` when the table moved machines; ``RunFolder``); a model
    without one (the untrained base) is its own backbone. ``'runs/ins-dv-s0' -> 'minilm'``.
    A relative folder is looked up from the working directory, then from the checkout, where
    ``make demo`` writes it (a notebook runs in ``notebooks/``).
    """
    candidates = [Path(str(model))]
    if not candidates[0].is_absolute():
        candidates.append(REPO_DIR / candidates[0])
    if runs_dir is not None:
        candidates.append(Path(runs_dir) / Path(str(model)).name)
    for run in candidates:
        cfg = RunFolder(run).info().get("config")
        if isinstance(cfg, dict) and "base_model" in cfg:
            return str(cfg["base_model"])
    return str(model)


def add_backbone(results: pd.DataFrame, runs_dir: str | Path | None = None) -> pd.DataFrame:
    """Add a ``backbone`` column (``backbone_of`` each model) unless the table has one.

    ``evaluate`` records a trained run by its folder, so ``model`` differs per mode; figures
    compare modes within a backbone, so they group by this column instead.
    """
    if "backbone" in results.columns:
        return results
    out = results.copy()
    lookup = {m: backbone_of(m, runs_dir) for m in out["model"].astype(str).unique()}
    out["backbone"] = out["model"].astype(str).map(lookup)
    return out


def load_per_query(path: str | Path) -> pd.DataFrame:
    """The per-query sibling (pass the results path or the per-query path itself) as a DataFrame."""
    path = Path(path)
    if not path.stem.endswith("_per_query"):
        path = per_query_path(path)
    if not path.exists():
        raise DataError(path, None, "per-query file not found")
    df = pd.read_csv(path, dtype={"run_id": str, "dataset": str, "metric": str, "query_id": str})
    missing = [c for c in PER_QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(path, 1, f"missing column(s) {', '.join(missing)}")
    return df


def load_published(path: str | Path = PUBLISHED_RESULTS_PATH) -> pd.DataFrame:
    """The paper's Tables 1-2 (``backbone, mode, metric, value, source``); '#' lines are provenance."""
    return pd.read_csv(path, comment="#")


def load_train_logs(runs_dir: str | Path) -> pd.DataFrame:
    """Every ``train_log.jsonl`` under ``runs_dir`` as ``run, mode, rng_seed, model, step, epoch, loss``.

    The mode is the run record's ``mode`` (the training set the run used; ``RunFolder``); a log
    without a run record is labelled by its folder name.
    """
    rows = []
    for log in sorted(Path(runs_dir).rglob("train_log.jsonl")):
        run_dir = log.parent
        info = RunFolder(run_dir).read() if RunFolder(run_dir).is_run() else {}
        cfg = info.get("config") or {}
        for _, r in read_jsonl(log):
            if r.get("loss") is None:
                continue
            rows.append(
                {
                    "run": str(run_dir.relative_to(runs_dir)) if run_dir != Path(runs_dir) else run_dir.name,
                    "mode": str(info.get("mode", run_dir.name)).lower(),
                    "rng_seed": info.get("rng_seed", cfg.get("rng_seed", cfg.get("seed"))),
                    "model": cfg.get("base_model"),
                    "step": r.get("step"),
                    "epoch": r.get("epoch"),
                    "loss": float(r["loss"]),
                }
            )
    return pd.DataFrame(rows, columns=["run", "mode", "rng_seed", "model", "step", "epoch", "loss"])


def load_synthesis_rows(paths: str | Path | Sequence[str | Path]) -> list[dict]:
    """Rows of one or several synthesis outputs (``synthesis.run.load_synthesis``: one per key and
    file), so runs of different backends, which share keys, can be compared. Each needs a status."""
    rows = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        for r in load_synthesis(path):
            if "status" not in r:
                raise DataError(path, None, f"row {r['key']!r} has no status", "status")
            rows.append(r)
    return rows
