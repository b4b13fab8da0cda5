"""Summaries of the results table, pure and unit-tested: per run, per mode, per query, and comparisons.

``summarize`` gives the mean over random seeds per ``(backbone, mode)`` with an error bar (with
per-query scores, a 95% interval: the experiment's two-stage bootstrap over runs and queries, as
``comparisons`` computes it; ``interval_phrase`` names each kind in words), and
``headline_table`` those means for several metrics side by side;
``per_query_summary`` the per-query values and a stratified bootstrap CI; ``smoothed_losses``
the training loss per mode with a centred rolling mean; ``compare_results`` paired tests of
several runs against a baseline (``stats.results_table``).

Every summary of the results table reads it as ``ifir table`` and ``ifir compare`` do
(``results.runs_to_read``): one evaluation per run and set (the latest), a warning when the rows
mix evaluation conditions, a ``DataError`` for a run id shared by two runs or a set name shared
by two sets. A run that lacks a value on one of the sets a summary averages over is left out,
named in a warning, rather than averaged over fewer sets. Not handled here: reading and writing
the table (``results``), drawing (``figures``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..evaluation.stats import bootstrap_ci, results_table, strata_of, stratified_mean, two_stage_bootstrap
from .results import (
    PER_QUERY_COLUMNS,
    RESULT_COLUMNS,
    add_backbone,
    check_per_query,
    frame_path,
    is_aggregate,
    mode_order,
    panel_members,
    panel_sets,
    per_query_rows,
    result_rows,
    runs_to_read,
    warn_if_fractions,
    warn_once,
    warnings_once,
)
from .style import backbone_labels

log = logging.getLogger(__name__)
RUN = ["model", "backbone", "mode", "rng_seed"]  # a run: a trained model (its folder) and rng_seed


def metric_sets(results: pd.DataFrame, metric: str, dataset: str | None = None) -> list[str]:
    """The evaluation sets whose ``metric`` rows stand for a run (``per_run``). For ``dataset``:
    itself; for an aggregate (``followir``, ``mean``...) without a ``metric`` row, the FollowIR
    collections it stands for (``results.panel_members``). Without ``dataset``: that, for the
    aggregate when the table has one (the paper's FollowIR number; the other sets are named by
    ``_complete_runs`` and drawn one panel each in figure (a)), else for every set. Example: Score
    on followir, p-MRR on its collections, both on followir_mini -> score: ``[followir]``; p_mrr:
    ``[core17, news21, robust04]``; without the followir rows, ``[followir_mini]`` for both."""
    have = list(dict.fromkeys(results.loc[results["metric"] == metric, "dataset"].astype(str)))
    every = results["dataset"].astype(str).unique()
    out = []
    for d in [str(dataset)] if dataset is not None else _standing_sets(every):
        members = [d] if d in have else [m for m in panel_members(d, every)[1:] if m in have]
        out += [m for m in members if m not in out]
    return out


def _standing_sets(every) -> list[str]:
    """The sets a run's one number reads: the aggregates among ``results.panel_sets``, else all."""
    sets = panel_sets(every)
    return [d for d in sets if is_aggregate(d)] or sets


def _complete_runs(results: pd.DataFrame, metric: str, dataset: str | None) -> pd.DataFrame:
    """The rows behind ``per_run``: ``metric`` on the sets ``metric_sets`` chose, read as every
    reading path does (``results.runs_to_read``), of the runs with a value on each of those sets.
    A run that lacks one (not evaluated there, or an empty value) is left out, and one warning
    names it and the sets it lacks: averaged over fewer sets it would be compared as if equal.
    With ``dataset`` given, only runs with a row on that set are asked for it."""
    results = add_backbone(results)
    sets = metric_sets(results, metric, dataset)
    every = results["dataset"].astype(str).unique()
    if dataset is None and (apart := [d for d in panel_sets(every) if d not in _standing_sets(every)]):
        warn_once(  # they were dropped in silence; a mean over unrelated benchmarks is no paper number
            log,
            "%s: each run's one number (figure (b), headline_table) reads %s; %s left out of it (figure (a) "
            "draws every set; name a set to read it)",
            metric,
            ", ".join(_standing_sets(every)),
            ", ".join(apart),
        )
    rows = results[results["metric"] == metric]
    chosen = rows[rows["dataset"].astype(str).isin(sets)]
    d = runs_to_read(chosen, frame_path(results), whole=results)
    keys = lambda f: list(zip(*(f[c].astype(str) for c in RUN)))  # noqa: E731
    have: dict[tuple, set] = {}
    valued = d[d["value"].notna()]
    for k, ds in zip(keys(valued), valued["dataset"].astype(str)):
        have.setdefault(k, set()).add(ds)
    asked = dict.fromkeys(keys(rows if dataset is None else chosen))
    lacking = {k: [s for s in sets if s not in have.get(k, ())] for k in asked}
    lacking = {k: v for k, v in lacking.items() if v}
    if lacking:
        warn_once(
            log,
            "%s: %d run(s) left out of the summary, lacking a value on set(s) the others are averaged over: %s",
            metric,
            len(lacking),
            "; ".join(f"{k[0]} ({k[2]}, rng_seed {k[3]}) lacks {', '.join(v)}" for k, v in lacking.items()),
        )
    return d[[k not in lacking for k in keys(d)]]


@warnings_once()
def per_run(results: pd.DataFrame, metric: str, dataset: str | None = None) -> pd.DataFrame:
    """One row per run for ``metric``: ``run_id, backbone, mode, rng_seed, value, ci_low, ci_high``.

    ``dataset=None`` uses an aggregate dataset row (``all``, ``mean``, ``followir``...) when
    there is one, else the mean over the datasets (``metric_sets``), as FollowIR p-MRR is the
    mean over its three collections. Averaged CIs are the mean of the per-dataset bounds (wider
    than the CI of the average, so conservative). Every run is averaged over the same sets: a run
    without a value on one of them is left out with a warning (``_complete_runs``), and a model
    evaluated twice on a set counts once, the latest evaluation (``results.runs_to_read``).
    """
    d = _complete_runs(results, metric, dataset)
    cols = ["run_id", "backbone", "mode", "rng_seed", "value", "ci_low", "ci_high"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    # a run is a trained model, not a table row: ``evaluate`` gives each dataset's rows their own
    # run_id, so group by the model (its first run_id names the run)
    return (
        d.groupby(RUN, dropna=False, sort=False)
        .agg(
            run_id=("run_id", "first"),
            value=("value", "mean"),
            ci_low=("ci_low", "mean"),
            ci_high=("ci_high", "mean"),
        )
        .reset_index()[cols]
    )


def labelled_backbones(results: pd.DataFrame, runs_dir=None) -> pd.DataFrame:
    """``results`` with a ``backbone`` column in words (``style.backbone_labels``; ``add_backbone``
    finds runs under ``runs_dir``): a base row recorded by the packaged folder and a run that
    recorded ``minilm`` are one backbone, "all-MiniLM-L6-v2", and two different backbones with one
    short name keep apart; the one labelling of ``ifir table``, the figures and the summaries
    (summaries grouped the two spellings apart: notebook 05 read "no p-MRR yet" for a pair it held)."""
    out = add_backbone(results, runs_dir)
    return out.assign(backbone=out["backbone"].map(backbone_labels(out["backbone"])))


def _by_backbone_and_mode(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` sorted by backbone, then mode in the paper's order (``mode_order``)."""
    order = {m: i for i, m in enumerate(mode_order(df["mode"]))}
    return df.sort_values(["backbone", "mode"], key=lambda c: c.map(order) if c.name == "mode" else c)


# the kinds of error bar ``summarize`` draws, in words (``interval_phrase``)
TWO_STAGE = (
    "95% two-stage bootstrap interval over runs and queries "
    "(runs resampled within each mode, queries within each set)"
)
QUERY_CI = "95% bootstrap CI over queries"


def interval_phrase(kind: str, n_runs: int = 1) -> str:
    """An error bar of ``summarize`` in words: ``('two-stage', 3)`` -> the two-stage interval;
    ``('ci', 1)`` or ``('bootstrap', 1)`` -> ``'95% bootstrap CI over queries'``."""
    if kind == "two-stage":
        return TWO_STAGE
    if kind == "bootstrap" or (kind == "ci" and n_runs <= 1):
        return QUERY_CI
    if kind == "ci":
        return f"the mean of the runs' {QUERY_CI}s (run-to-run variation not included)"
    if kind == "spread":
        return "min-max over runs (not a 95% interval: no per-query scores to compute one)"
    if kind == "none":
        return "none drawn, no interval recorded (evaluated with --bootstrap 0, or without per-query scores)"
    raise ValueError(f"unknown error-bar kind {kind!r}")


def _query_runs(
    results: pd.DataFrame, per_query: pd.DataFrame, metric: str, dataset: str | None
) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """``{(backbone, mode): {run: {query_id: value}}}`` of the runs and sets ``per_run`` uses
    (``_complete_runs``: the same runs, one evaluation each); a run is a model and rng_seed (its
    sets' run ids joined); with several sets a query id becomes ``'<set>/<query_id>'``, as
    ``aggregate_followir`` names them, so that the bootstrap resamples queries within each set."""
    sets = metric_sets(results, metric, dataset)
    keys = ["dataset", *RUN]
    complete = _complete_runs(results, metric, dataset)
    check_per_query(complete, per_query, [metric])
    runs = complete[["run_id", *keys]].astype({"dataset": str}).drop_duplicates(["run_id", "dataset"])
    pq = per_query[(per_query["metric"] == metric) & per_query["value"].notna()].astype({"dataset": str})
    joined = pq.merge(runs, on=["run_id", "dataset"])
    out: dict = {}
    for (model, backbone, mode, seed), g in joined.groupby(RUN, sort=False, dropna=False):
        ids = g["query_id"].astype(str)
        ids = g["dataset"] + "/" + ids if len(sets) > 1 else ids
        out.setdefault((backbone, mode), {})[f"{model}#{seed}"] = dict(zip(ids, g["value"].astype(float)))
    return out


def _two_stage(results, per_query, metric, dataset, n_boot: int, rng_seed: int) -> dict:
    """``{(backbone, mode): (ci_low, ci_high, n_runs)}``: the two-stage bootstrap interval of each
    mode's mean (``stats.two_stage_bootstrap``, as ``comparisons.mode_table``); one run: over queries."""
    out = {}
    for key, runs in _query_runs(results, per_query, metric, dataset).items():
        strata = strata_of(sorted({q for s in runs.values() for q in s}))
        ci = two_stage_bootstrap(runs, n_boot=n_boot, rng_seed=rng_seed, strata=strata)
        out[key] = (ci.ci_low, ci.ci_high, len(runs))
    return out


@warnings_once()
def summarize(
    results: pd.DataFrame,
    metric: str,
    dataset: str | None = None,
    error: str = "auto",
    per_query: pd.DataFrame | None = None,
    n_boot: int = 2000,
    rng_seed: int = 0,
) -> pd.DataFrame:
    """Mean over seeds per ``(backbone, mode)`` with an error bar.

    ``error='spread'``: min-max over seeds; ``'ci'``: the runs' mean ``ci_low``/``ci_high``;
    ``'auto'``: with ``per_query`` scores for every run of a group, its 95% interval (``'two-stage'``
    over runs and queries; ``'bootstrap'``, over queries, for one run); else spread when a group
    has 2+ seeds, else the CI. Example: seeds with values 4 and 6 (no per-query scores) -> mean
    5, err_minus 1, err_plus 1, error 'spread'. ``interval_phrase`` names each kind.
    Columns: ``backbone, mode, mean, err_minus, err_plus, n_runs, error``.
    """
    if error not in ("auto", "spread", "ci"):
        raise ValueError("error must be 'auto', 'spread' or 'ci'")
    results = labelled_backbones(results)
    warn_if_fractions(results[results["metric"] == metric], frame_path(results))
    runs = per_run(results, metric, dataset)
    use_pq = error == "auto" and per_query is not None and len(runs)
    boot = _two_stage(results, per_query, metric, dataset, n_boot, rng_seed) if use_pq else {}
    out = []
    for (backbone, mode), g in runs.groupby(["backbone", "mode"], sort=False):
        mean = float(g["value"].mean())
        kind = ("spread" if len(g) > 1 else "ci") if error == "auto" else error
        if boot.get((backbone, mode), (0, 0, -1))[2] == len(g):  # per-query scores for every run
            lo, hi, _ = boot[(backbone, mode)]
            kind = "two-stage" if len(g) > 1 else "bootstrap"
        elif kind == "spread":
            lo, hi = float(g["value"].min()), float(g["value"].max())
        else:
            lo, hi = float(g["ci_low"].mean()), float(g["ci_high"].mean())
        # a missing CI draws no bar rather than a zero-width one that looks like certainty, and
        # says so ('none'): a caption promising 95% intervals made the absent bars read as tiny
        em = mean - lo if not math.isnan(lo) else np.nan
        ep = hi - mean if not math.isnan(hi) else np.nan
        kind = "none" if math.isnan(em) or math.isnan(ep) else kind
        out.append(
            {
                "backbone": backbone,
                "mode": mode,
                "mean": mean,
                "err_minus": em,
                "err_plus": ep,
                "n_runs": len(g),
                "error": kind,
            }
        )
    df = pd.DataFrame(out, columns=["backbone", "mode", "mean", "err_minus", "err_plus", "n_runs", "error"])
    return _by_backbone_and_mode(df).reset_index(drop=True)


@warnings_once()
def headline_table(results: pd.DataFrame, metrics=("p_mrr", "score", "ndcg_at_5")) -> pd.DataFrame:
    """One row per ``(backbone, mode)`` in paper order, one column per metric: the mean over
    random seeds of each run's mean over the sets ``metric_sets`` names (figure (a) draws those
    sets one panel each), plus ``runs`` (seeds averaged).

    Metrics absent from the table are left out. A metric averaged over other runs than the first
    (a run without a Score row) gets its own ``runs <metric>`` column instead of one ``runs``.
    Example: seeds of Ins-DV at p-MRR 4 and 6 -> ``p_mrr`` 5.0, ``runs`` 2.
    """
    parts = [
        summarize(results, m)
        .set_index(["backbone", "mode"])[["mean", "n_runs"]]
        .rename(columns={"mean": m, "n_runs": f"runs {m}"})
        for m in metrics
        if (results["metric"] == m).any()
    ]
    if not parts:
        raise ValueError(f"none of {list(metrics)} is in the results table")
    table = parts[0]
    for p in parts[1:]:
        table = table.join(p, how="outer")
    names = [m for m in metrics if m in table]
    counts = table[[f"runs {m}" for m in names]]
    if counts.nunique(axis=1, dropna=False).le(1).all() and not counts.isna().any().any():
        table, runs = table.assign(runs=counts.iloc[:, 0]), ["runs"]
    else:
        runs = list(counts.columns)
    table = _by_backbone_and_mode(table.reset_index())
    return table.set_index(["backbone", "mode"])[[*names, *runs]]


@warnings_once()
def per_query_summary(
    per_query: pd.DataFrame,
    results: pd.DataFrame,
    metric: str = "p_mrr",
    n_boot: int = 2000,
    rng_seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-query values averaged over seeds, and per ``(backbone, mode)`` mean with bootstrap CI.

    Per-query scores are joined to their run's backbone and mode on ``(run_id, dataset)``, after
    the checks every reading path shares (``results.runs_to_read``: one evaluation per run and
    set, the latest). The mean and the percentile-bootstrap CI are stratified by dataset
    (``stats``): the mean of per-dataset means, as the FollowIR aggregate is formed, resampling
    queries within each dataset. Returns
    ``(points[backbone, mode, dataset, query_id, value], cis[backbone, mode, mean, ci_low, ci_high, n,
    runs, runs_in_table])``: ``runs`` the runs each dot averages, ``runs_in_table`` the mode's runs in
    ``results`` (more when some have no per-query scores: ``_every_run_s_queries``).
    """
    runs = runs_to_read(add_backbone(results), frame_path(results))
    runs = runs[runs["metric"] == metric] if "metric" in runs.columns else runs
    runs = runs[["run_id", "dataset", "backbone", "mode"]].astype({"dataset": str})
    runs = runs.drop_duplicates(["run_id", "dataset"])
    pq = per_query[(per_query["metric"] == metric) & per_query["value"].notna()].astype({"dataset": str})
    pq = _every_run_s_queries(pq.merge(runs, on=["run_id", "dataset"], how="inner"), runs, metric)
    points = pq.groupby(["backbone", "mode", "dataset", "query_id"], sort=False)["value"].mean().reset_index()
    # runs averaged per dot, and the mode's runs in the table (the most over its sets): for the caption
    used = pq.groupby(["backbone", "mode", "dataset"])["run_id"].nunique().groupby(["backbone", "mode"]).max()
    had = (
        runs.groupby(["backbone", "mode", "dataset"])["run_id"].nunique().groupby(["backbone", "mode"]).max()
    )
    cis = []
    for (backbone, mode), g in points.groupby(["backbone", "mode"], sort=False):
        v, strata = g["value"].to_numpy(), g["dataset"].astype(str).tolist()
        lo, hi = bootstrap_ci(v, n_boot=n_boot, rng_seed=rng_seed, strata=strata)
        cis.append(
            {
                "backbone": backbone,
                "mode": mode,
                "mean": stratified_mean(v, strata),
                "ci_low": lo,
                "ci_high": hi,
                "n": len(g),
                "runs": int(used[(backbone, mode)]),
                "runs_in_table": int(had.get((backbone, mode), used[(backbone, mode)])),
            }
        )
    return points, pd.DataFrame(cis, columns=[*CI_COLUMNS])


CI_COLUMNS = ("backbone", "mode", "mean", "ci_low", "ci_high", "n", "runs", "runs_in_table")


def _every_run_s_queries(pq: pd.DataFrame, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The per-query rows of queries that every run of their mode and set scored, so each dot is
    the mean over the same runs; one warning names the runs with no per-query rows (left out) and
    counts the queries dropped (a mode's diamond came from 2 of its 3 runs under a caption saying
    "averaged over the mode's runs")."""
    cell = ["backbone", "mode", "dataset"]
    scored = pq.groupby(cell)["run_id"].unique().map(set)
    asked = runs.groupby(cell)["run_id"].unique().map(set)
    lost = sorted(r for k, ids in asked.items() for r in ids - scored.get(k, set()) if k in scored)
    n_runs = pq.groupby(cell)["run_id"].transform("nunique")
    per_q = pq.groupby([*cell, "query_id"])["run_id"].transform("nunique")
    kept = pq[per_q == n_runs]
    dropped = kept.groupby([*cell, "query_id"]).ngroups
    dropped = pq.groupby([*cell, "query_id"]).ngroups - dropped
    said = [f"{len(lost)} run(s) without per-query rows left out ({', '.join(lost[:5])})"] if lost else []
    said += [f"{dropped} query(ies) not scored by every run of their mode left out"] if dropped else []
    if said:
        warn_once(log, "%s per query: %s", metric, "; ".join(said))
    return kept


def synthesis_summary(rows: list[dict] | pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Tables behind figure (d): status counts per instruction type and per backend, reversal
    lengths (words, non-empty reversals), verification pass rate per backend."""
    df = pd.DataFrame(rows).copy()
    for c, default in (
        ("backend", "unknown"),
        ("instruction_type", "unknown"),
        ("reversal", None),
        ("verify_flip", None),
    ):
        if c not in df.columns:
            df[c] = default
    df["backend"] = df["backend"].fillna("unknown").astype(str)
    df["instruction_type"] = df["instruction_type"].fillna("unknown").astype(str)
    by_type = df.groupby(["instruction_type", "status"]).size().rename("n").reset_index()
    by_backend = df.groupby(["backend", "status"]).size().rename("n").reset_index()
    by_backend["share"] = by_backend["n"] / by_backend.groupby("backend")["n"].transform("sum")
    rev = df[df["reversal"].notna() & (df["reversal"].astype(str).str.strip() != "")]
    lengths = pd.DataFrame(
        {
            "backend": rev["backend"],
            "status": rev["status"],
            "words": rev["reversal"].astype(str).str.split().str.len(),
        }
    )
    ver = df[df["verify_flip"].notna()]
    verify = (
        ver.groupby("backend")["verify_flip"]
        .agg(passed=lambda s: int(s.astype(bool).sum()), n="size")
        .reset_index()
    )
    verify["rate"] = verify["passed"] / verify["n"]
    return {"by_type": by_type, "by_backend": by_backend, "lengths": lengths, "verify": verify}


def _largest_odd(n: int) -> int:
    """The largest odd window that fits ``n`` points (at least 1): 4 -> 3, 5 -> 5, 0 -> 1."""
    return max(1, n if n % 2 else n - 1)


def smoothing_window(n_points: int) -> int:
    """Points in the rolling window for a loss curve of ``n_points``: about a fifth of the run,
    odd (so it is centred on a point), at least 3, and never more points than the curve has (1,
    no smoothing, under 3 points). Example: 40 -> 9, 10 -> 3, 3 -> 3, 2 -> 1, 1000 -> 201."""
    w = max(3, round(n_points / 5))
    return min(w if w % 2 else w + 1, _largest_odd(n_points))


def smoothed_losses(logs: pd.DataFrame, window: int | None = None) -> pd.DataFrame:
    """Per mode: the loss at each step averaged over that mode's runs (rng_seeds), then a centred
    rolling mean over ``window`` logged steps (``smoothing_window`` of the mode's steps when None;
    a window longer than the mode's curve shrinks to the largest odd number of its steps, so the
    ``window`` column says what was done: 1 is no smoothing).

    Centred, not TensorBoard's exponential average: an EMA at 0.9 trails a falling loss by about
    nine points, a third of a 30-point run, so the smooth curve would sit above every raw one.
    Near the ends the window holds fewer points (``min_periods=1``). Example: losses 1, 3, 2 with
    window 3 -> 2, 2, 2.5. ``logs`` has ``run, mode, step, loss`` (``results.load_train_logs``).
    Returns ``mode, step, loss, smoothed, n_runs, window``, steps ascending within each mode.
    """
    cols = ["mode", "step", "loss", "smoothed", "n_runs", "window"]
    out = []
    for mode in mode_order(logs["mode"]):
        g = logs[logs["mode"] == mode].groupby("step")["loss"].agg(loss="mean", n_runs="size").reset_index()
        w = min(window, _largest_odd(len(g))) if window else smoothing_window(len(g))
        smooth = g["loss"].rolling(w, center=True, min_periods=1).mean()
        out.append(g.assign(mode=mode, smoothed=smooth, window=w))
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


# ---------------------------------------------------------------------------------------------
# Comparing


def compare_results(
    results: Mapping,
    *,
    baseline: str,
    mode: Mapping[str, str] | None = None,
    **kwargs,
):
    """Several runs (``{label: EvalResult}``, or ``{label: [EvalResult per set]}``) ->
    ``stats.results_table`` vs ``baseline``, one row per run, set and metric.

    Each label becomes the ``run_id``; keyword arguments go to ``stats.results_table``
    (``alpha``, ``test``, ``n``, ``rng_seed``, ``metrics``, ``adjust``). Holm covers every row
    returned: pass all sets in one call (one call per set, joined, corrected each set apart and
    marked 12 rows significant where Holm over the table shown marked 5).
    """
    rows, pq = [], []
    for label, value in results.items():
        for r in [value] if hasattr(value, "per_query") else list(value):
            rows += result_rows(r, run_id=label, mode=(mode or {}).get(label, label), git="-", timestamp="-")
            pq += per_query_rows(r, run_id=label)
    return results_table(
        pd.DataFrame(rows, columns=RESULT_COLUMNS),
        pd.DataFrame(pq, columns=PER_QUERY_COLUMNS),
        baseline=baseline,
        **kwargs,
    )
