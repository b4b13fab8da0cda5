"""The registry of runs: every training run and evaluation under a folder, one row each.

``runs_table(root)`` (and ``ifir runs --root out/``) reads what the stages already write, and
nothing else::

    RUN/                      every run folder (``core.run_folder.RunFolder``): its record, the
                              last logged step of a run that has not finished, its lock
    */results.csv             evaluations (``results``); a row whose ``model`` is a run folder
                              gives that run its metrics, any other model is a row of its own

A run's *status* is ``done`` (finished), ``running`` (its lock names a live process),
``stopped`` (killed, interrupted or a non-finite loss: rerunning the command resumes it) or
``failed`` (an exception; ``detail`` says which). The headline metrics are p-MRR and the
paper's Score (MAP@1000 or nDCG@5; nDCG@10 for BEIR sets, or a named mteb task's own main score
where its rows record one: NevIR's paired accuracy) per evaluation set, x100, the latest evaluation of
each run; columns are named ``<dataset>:<metric>``, and the listing's last line names each one's
metric.

Example: a demo folder -> one ``eval`` row (the base model) and four ``train`` rows (one per
mode), each with ``followir_mini:p_mrr`` and ``followir_mini:score``. Not handled here: training,
evaluating, comparing runs statistically (``summaries``).
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from pathlib import Path

import pandas as pd

from ..core.errors import DataError
from ..core.run_folder import RunFolder, batch_order, mixed_batch_orders
from ..evaluation.mteb_glue import get_task, metric_name
from ..reporting.results import (
    _OLD_NAMES,
    REQUIRED_RESULT_COLUMNS,
    RESULT_DEFAULTS,
    backbone_of,
    load_results,
)

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
    "batch_order",
    "detail",
    "started",
    "finished",
    "results",
    "path",
]  # in the DataFrame and --json, not the listing
HEADLINE_METRICS = ("p_mrr", "score", "ndcg_at_10")  # score is absent from BEIR sets, nDCG@10 from FollowIR
# what our engines and mteb's write for every set; another metric is a headline only where it is
# the task's own main score (``task_main_score``; ``mteb_glue.evaluate_mteb_task`` writes NevIR's
# paired_accuracy, InstructIR's robustness_at_10), not when added to the rows by hand
ENGINE_METRICS = ("p_mrr", "score", "map_at_1000", "ndcg_at_5", "ndcg_at_10")


def _run_row(run: RunFolder, root: Path) -> dict:
    info = run.read()
    cfg, data = info.get("config") or {}, info.get("data") or {}
    status, detail = run.status(info)
    steps = info.get("steps") if status == "done" else run.last_step()
    run_dir = run.path
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
        "batch_order": batch_order(info),
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


CLOCK_SLACK = pd.Timedelta(hours=26)  # the widest gap between two UTC offsets (UTC-12 to UTC+14)


def rows_of_run(
    rows: pd.DataFrame, identity: str, finished: str | None, started: str | None = None
) -> pd.Series:
    """Which of ``rows`` (a results table's, with ``run_sha`` and ``timestamp``) scored the run now
    in their model's folder (its ``RunFolder.identity``, and the ``finished`` and ``started`` times
    of its record): the one rule ``ifir evaluate``'s skip_done and ``ifir runs`` (so ``--collect``)
    share. A row recording the run's identity (``run_sha``) is its, whatever the clocks say; one
    recording another identity is not (the run trained again there, or another machine's copied
    over it). A row without one (an older table, or a folder with no identity) is the run's unless
    written before ``max(started, finished - CLOCK_SLACK)`` (``_written_before``). The record's
    times are naive local times of the machine that wrote them (its zone is not recorded), read
    here with this machine's zone rules for their date (so a summer record read in winter is right);
    a reader west of the writer still reads them up to the gap of the two offsets late, at most 26
    hours (``CLOCK_SLACK``), and without the slack every row written in that gap after the finish
    (the usual evaluation right after training) would be another model's and evaluated again.
    What the slack lets in is small: rows without ``run_sha`` written after the run's start, which
    only versions before ``run_sha`` wrote (a folder with a record records it from the start), so
    an evaluation of the folder while it trained; rows from before its start (the model there
    before a quick retrain, 37bdb98) stay out. A run not finished (no ``finished``) or a row without
    a time keeps its rows."""
    sha = rows["run_sha"].astype(str)
    mine = sha.eq(identity) & bool(identity)
    old = ~mine & (sha.isin(["", "nan"]) | (not identity))  # no identity: every row judged by time
    return mine | (old & ~_written_before(rows["timestamp"], finished, started))


def _local(naive: str | None) -> pd.Timestamp | None:
    """A record's naive local time with this machine's zone rules for that date (DST included);
    None when missing or unreadable."""
    try:
        return pd.Timestamp(datetime.datetime.fromisoformat(str(naive)).astimezone()) if naive else None
    except (ValueError, OverflowError, OSError):
        return None


def _written_before(timestamps: pd.Series, finished: str | None, started: str | None = None) -> pd.Series:
    """Per row: written before ``max(started, finished - CLOCK_SLACK)`` (a run record's naive local
    times, ``_local``); False when ``finished`` is unknown."""
    end, start = _local(finished), _local(started)
    if end is None:
        return pd.Series(False, index=timestamps.index)
    bound = max(end - CLOCK_SLACK, start) if start is not None else end - CLOCK_SLACK
    return (pd.to_datetime(timestamps, utc=True) < bound).fillna(False).astype(bool)


def main_scores(res: pd.DataFrame) -> dict[str, set[str]]:
    """``{dataset: {metric}}`` of the sets whose rows record their task's own main score: a metric
    none of the engines writes for every set (``ENGINE_METRICS``) that is mteb's ``main_score`` of
    the task of that name (``task_main_score``). Any other metric (a ``recall_at_100`` added by hand
    to a BEIR folder's rows) is no headline: the set keeps its nDCG@10."""
    own = res[~res["metric"].isin(ENGINE_METRICS)]
    found = {}
    for d, g in own.groupby("dataset", sort=False):
        main = task_main_score(str(d))
        if main in set(g["metric"]):
            found[str(d)] = {main}
    return found


@functools.cache
def task_main_score(name: str) -> str | None:
    """mteb's main score of the task ``name`` as the results table spells it (``'NevIR' ->
    'paired_accuracy'``, ``mteb_glue.metric_name``); None for a name that is no known task (a
    folder's) or without mteb. It imports mteb (seconds): asked only for sets with a metric outside
    ``ENGINE_METRICS``."""
    try:
        return metric_name(get_task(name).metadata.main_score)
    except (ImportError, DataError, KeyError, OSError, ValueError):
        return None


def _headline(res: pd.DataFrame) -> dict:
    """``{'<dataset>:<metric>': value}`` for the headline metrics, the latest row of each: p-MRR
    and Score, and a set's own main score where its rows record one (``main_scores``), else its
    nDCG@10 (NevIR's nDCG@10 was shown, 81.5 for a model failing every pair its paired accuracy
    counts). Rows encoded by another backend than PyTorch fp32, or with the benchmark's prompts,
    are headlines of their own (``'v1:p_mrr [onnx-int8]'``): the latest of any kind showed an int8
    number where the table's torch number was expected."""
    main = main_scores(res)
    shown = [
        m in ("p_mrr", "score") or (m == "ndcg_at_10" and d not in main) or m in main.get(d, ())
        for d, m in zip(res["dataset"].astype(str), res["metric"])
    ]
    res = res[shown].sort_values("timestamp", kind="stable")
    kinds = [res[c].astype(str) for c in ("backend", "prompts")]
    last = res.groupby(["dataset", "metric", *kinds], sort=False)["value"].last()
    return {f"{d}:{m}{_condition(b, p)}": float(v) for (d, m, b, p), v in last.items()}


def _condition(backend: str, prompts: str) -> str:
    """``''`` for the default condition (torch, the model's prompts), else ``' [onnx, benchmark prompts]'``."""
    said = [backend] * (backend != RESULT_DEFAULTS["backend"])
    said += [f"{prompts} prompts"] * (prompts != RESULT_DEFAULTS["prompts"])
    return f" [{', '.join(said)}]" if said else ""


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
    found = RunFolder.find(root)
    runs = {run.path.resolve(): _run_row(run, root) for run in found}
    identity = {run.path.resolve(): run.identity() for run in found}
    evals: dict[tuple, dict] = {}
    metrics: dict[Path | tuple, pd.DataFrame] = {}
    for table in find_results(root):
        res = load_results(table)
        for (model, mode, rng_seed), rows in res.groupby(["model", "mode", "rng_seed"], sort=False):
            matched = _match_run(str(model), table, runs, root)
            times = (
                (runs[matched]["finished"], runs[matched]["started"]) if matched is not None else (None, None)
            )
            for run, grp in _of_run(rows, matched, identity.get(matched, ""), times):
                _add_rows(run, grp, (str(model), mode, rng_seed), table, runs, evals, metrics)
    rows = []
    for key, row in [*runs.items(), *sorted(evals.items(), key=lambda kv: kv[0])]:
        rows.append({**row, **(_headline(metrics[key]) if key in metrics else {})})
    metric_cols = sorted({c for r in rows for c in r if ":" in c}, key=lambda c: (c.split(":")[0], c))
    df = pd.DataFrame(rows, columns=COLUMNS + metric_cols + EXTRA_COLUMNS)
    for c in ("budget", "steps"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df if details else df.drop(columns=EXTRA_COLUMNS)


def _of_run(
    rows: pd.DataFrame, run: Path | None, identity: str, times: tuple
) -> list[tuple[Path | None, pd.DataFrame]]:
    """``rows`` of one model label split by whether they scored the run now in its folder (``run``,
    ``identity``, its record's ``(finished, started)``: ``rows_of_run``); the others are a model
    of their own."""
    if run is None:
        return [(run, rows)]
    ours = rows_of_run(rows, identity, *times)
    return [(r, g) for r, g in ((run, rows[ours]), (None, rows[~ours])) if len(g)]


def _add_rows(run, grp, label: tuple, table: Path, runs: dict, evals: dict, metrics: dict) -> None:
    """Give the run ``run`` (None: the evaluated model ``label`` as a row of its own) ``grp``'s metrics."""
    key = run if run is not None else label
    metrics[key] = pd.concat([metrics[key], grp]) if key in metrics else grp
    row = runs[run] if run is not None else evals.setdefault(key, _eval_row(*label, grp))
    row["results"] = ";".join(sorted({*filter(None, (row["results"] or "").split(";")), str(table)}))


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
        "batch_order": None,
        "detail": "",
        "started": str(grp["timestamp"].min()) if grp["timestamp"].notna().any() else None,
        "finished": None,
        "results": None,
        "path": None,
    }


def format_runs(df: pd.DataFrame) -> str:
    """The listing ``ifir runs`` prints: one line per row, metrics with two decimals, '-' for none,
    then a line naming the metric of each metric column (``metric_legend``), and a warning line
    when replicates of one cell were trained under several batch orders (``_mixed_cells``)."""
    if df.empty:
        return "no runs or results found"
    orders = _mixed_cells(df)
    shown = df[[c for c in df.columns if c not in EXTRA_COLUMNS]].astype(object)
    for c in shown.columns:
        if ":" in c:  # metric columns, x100
            shown[c] = [f"{v:.2f}" if pd.notna(v) else None for v in shown[c]]
    legend = metric_legend([c for c in shown.columns if ":" in c])
    listing = shown.where(shown.notna(), "-").to_string(index=False) + (f"\n{legend}" if legend else "")
    return listing + (f"\nwarning: {orders}" if orders else "")


def _mixed_cells(df: pd.DataFrame) -> str:
    """``mixed_batch_orders`` of the finished runs that are replicates of one cell under several
    batch orders (``''``: none): one experiment (the folder above ``rng<k>/<mode>``, and its plan),
    one mode, backbone, set, reversals and budget. Two experiments of one order each under one root
    are not pooled anywhere, so they are not named; each cell's runs are read from their records."""
    if "path" not in df.columns:
        return ""
    done = df[(df["kind"] == "train") & (df["status"] == "done")]
    cells: dict[tuple, dict[str, dict]] = {}
    for row in done.to_dict("records"):
        info, path = RunFolder(row["path"]).info(), Path(row["path"])
        folder = path.parent.parent if re.fullmatch(r"rng\d+", path.parent.name) else path.parent
        plan = (info.get("data") or {}).get("plan")
        key = (str(folder), plan, *(str(row[c]) for c in ("mode", "backbone", "data", "reversals", "budget")))
        cells.setdefault(key, {})[row["run"]] = info
    mixed = [recs for recs in cells.values() if mixed_batch_orders(recs)]
    return mixed_batch_orders({name: info for recs in mixed for name, info in recs.items()})


def metric_legend(columns) -> str:
    """What each ``<dataset>:<metric>`` column holds (x100): ``'metrics x100: followir_mini:score
    = MAP@1000; NevIR:paired_accuracy = the task's own main score (mteb's main_score)'``."""
    from ..reporting.style import metric_label

    said = {}
    for c in columns:
        dataset, metric = c.split(" [")[0].split(":", 1)
        if metric not in ENGINE_METRICS:
            said[f"{dataset}:{metric}"] = "the task's own main score (mteb's main_score)"
        else:
            said[f"{dataset}:{metric}"] = metric_label(metric, [dataset])
    return "metrics x100: " + "; ".join(f"{c} = {v}" for c, v in said.items()) if said else ""


def runs_records(df: pd.DataFrame) -> list[dict]:
    """The table as JSON-ready dicts (``ifir runs --json``): missing values are ``None``."""
    return json.loads(df.to_json(orient="records"))
