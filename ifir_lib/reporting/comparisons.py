"""Mode tables and mode-against-mode comparisons that respect the experiment's design.

The experiment trains each mode once per ``rng_seed`` (a *run*: one ``run_id``, one trained
model) and scores every run on the same queries; the base model is one run. The unit of a claim
"mode a beats mode b" is therefore the run, not the (rng_seed, query) pair: here the interval of
a mode's mean, or of a - b, is the two-stage bootstrap over runs and queries
(``stats.two_stage_bootstrap``), and the p-value is an exact permutation test over run means
(``stats.run_level_test``), reported with the smallest p its number of runs can reach (3 paired
runs: 0.25). A one-run mode enters once, and the row's ``note`` says which variation its
interval cannot see.

- ``load_tables``: the results CSV and its per-query sibling.
- ``mode_table``: one row per (set, metric, mode): mean over runs, run sd, runs, interval.
- ``compare_modes``: one (set, metric, a, b) row; ``comparison_table``: many, Holm-adjusted
  over the rows that have a p-value (the family).
- ``format_comparisons`` / ``comparison_records``: what ``ifir compare`` prints.

Runs are read from the results table (``run_id, mode, rng_seed, model, dataset``) and joined to
the per-query scores on ``(run_id, dataset)``, after the checks every reading path shares
(``results.runs_to_read``): one model evaluated twice on a set (two run ids, same model, mode and
rng_seed) counts once, the later evaluation kept, with a warning; a table that mixes evaluation
conditions (``prompts``, an experiment's ``plan``, ``backend``) draws a warning too: filter it to
one condition first; a run id that labels two runs on one set, or one set name that holds two
different sets (``data_sha``), is a ``DataError`` naming the file.
Not handled here: computing scores (``evaluate``), the statistics themselves (``stats``),
drawing (``figures``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.config import BASE_MODE, REPO_DIR
from ..core.errors import DataError
from ..core.run_folder import RunFolder, mixed_batch_orders
from ..evaluation.stats import holm, run_level_test, strata_of, two_stage_bootstrap
from .results import (
    add_backbone,
    check_per_query,
    check_results,
    load_per_query,
    load_results,
    mode_order,
    per_query_path,
    runs_to_read,
    warn_once,
)
from .style import backbone_labels
from .tables import fixed, markdown_table

log = logging.getLogger(__name__)

MODE_TABLE_COLUMNS = [
    "dataset",
    "metric",
    "mode",
    "runs",
    "n_queries",
    "mean",
    "sd",
    "ci_low",
    "ci_high",
    "note",
]
COMPARISON_COLUMNS = [
    "dataset",
    "metric",
    "a",
    "b",
    "runs_a",
    "runs_b",
    "n_queries",
    "mean_a",
    "sd_a",
    "mean_b",
    "sd_b",
    "diff",
    "ci_low",
    "ci_high",
    "p_run",
    "min_p",
    "note",
]
# {(dataset, metric, mode): {run_id: (rng_seed, {query_id: value})}}
Index = dict[tuple[str, str, str], dict[str, tuple[str, dict[str, float]]]]


def load_tables(results_csv: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(results, per_query)`` of a results CSV and its ``<stem>_per_query.csv`` sibling.

    A missing or bad file is a ``DataError`` naming it; each frame's ``attrs['path']`` keeps its
    file, so later errors name it too.
    """
    results = load_results(results_csv)
    pq_path = per_query_path(results_csv)
    per_query = load_per_query(pq_path)
    results.attrs["path"], per_query.attrs["path"] = str(results_csv), str(pq_path)
    return results, per_query


def _path(frame: pd.DataFrame, default: str) -> str:
    return str(frame.attrs.get("path", default))


def _checked(results: pd.DataFrame) -> pd.DataFrame:
    """``check_results`` (modes lower case, optional columns added: a frame built by hand works
    too), keeping the file name for errors."""
    out = check_results(results, _path(results, "<results>"))
    out.attrs["path"] = _path(results, "<results>")
    return out


def _index(results: pd.DataFrame, per_query: pd.DataFrame, metrics: Sequence[str]) -> Index:
    """Every run's per-query scores for ``metrics``, keyed by (dataset, metric, mode); ``results``
    as ``_checked`` returns it."""
    cols = ["run_id", "model", "mode", "rng_seed", "dataset"]
    read = runs_to_read(results, _path(results, "<results>"))
    _check_one_backbone(read, _path(results, "<results>"))
    _check_one_batch_order(read, _path(results, "<results>"))
    check_per_query(read, per_query, metrics)
    runs = read[cols].drop_duplicates(["run_id", "dataset"])
    pq = per_query[per_query["metric"].isin(list(metrics)) & per_query["value"].notna()]
    joined = pq.merge(runs[["run_id", "dataset", "mode", "rng_seed"]], on=["run_id", "dataset"])
    index: Index = {}
    for (dataset, metric, mode, run_id, seed), g in joined.groupby(
        ["dataset", "metric", "mode", "run_id", "rng_seed"], sort=False
    ):
        index.setdefault((dataset, metric, mode), {})[run_id] = (
            str(seed),
            dict(zip(g["query_id"], g["value"].astype(float))),
        )
    return index


def _check_one_backbone(read: pd.DataFrame, path: str) -> None:
    """One warning when a set's rows hold trained runs of several base models: comparisons pool
    each mode's runs, so two backbones' runs would be read as run-to-run spread (``ifir table`` and
    the figures keep backbones apart; filter the rows to one backbone to compare it). Base rows and
    trained rows whose run folder is not found (``add_backbone`` warns) are not counted."""
    df = add_backbone(read)
    trained = df["mode"].astype(str) != BASE_MODE
    found = trained & (df["backbone"].astype(str) != df["model"].astype(str))
    df = df[found].assign(backbone=lambda d: d["backbone"].map(backbone_labels(d["backbone"])))
    per_set = df.groupby("dataset")["backbone"].agg(lambda b: sorted(set(map(str, b))))
    many = per_set[per_set.map(len) > 1]
    if len(many):
        dataset, backbones = next(iter(many.items()))
        warn_once(
            log,
            "%s: set %r holds trained runs of %d base models (%s); a comparison pools each mode's runs "
            "across them: compare the rows of one base model at a time (ifir table and the figures keep "
            "them apart)",
            path,
            dataset,
            len(backbones),
            ", ".join(backbones[:4]),
        )


def _check_one_batch_order(read: pd.DataFrame, path: str) -> None:
    """A warning (``warn_once``) when the trained runs a comparison reads were trained under several batch
    orders (``run_folder.mixed_batch_orders``: an experiment resumed after the upgrade kept its
    finished order-1 runs and trained the rest under order 2): a mode's mean pooled both, and one
    mode was compared with another across them. A relative folder is looked up from the working
    directory, the table's folder (where ``ifir evaluate`` ran) and the checkout (``backbone_of``);
    runs whose folder is not found are not counted."""
    trained = read[read["mode"].astype(str) != BASE_MODE]
    records = {m: _record(m, path) for m in trained["model"].astype(str).drop_duplicates()}
    if text := mixed_batch_orders(records):
        warn_once(log, "%s: %s", path, text)  # once per warnings_once block (a report, a command)


def _record(model: str, table: str) -> dict:
    """The run record of the folder ``model`` names (``{}``: none found), relative to the working
    directory, then to ``table``'s folder, then to the checkout."""
    p = Path(model)
    for cand in [p] if p.is_absolute() else [p, Path(table).parent / p, REPO_DIR / p]:
        if info := RunFolder(cand).info():
            return info
    return {}


def _check_names(results: pd.DataFrame, modes=(), datasets=None, metrics=()) -> None:
    """A ``DataError`` naming the results file when a mode, set or metric is not in the table."""
    for field, column, wanted in (
        ("mode", "mode", modes),
        ("dataset", "dataset", datasets or ()),
        ("metric", "metric", metrics),
    ):
        have = set(results[column].astype(str))
        missing = [w for w in dict.fromkeys(wanted) if w not in have]
        if missing:
            raise DataError(
                _path(results, "<results>"),
                None,
                f"{', '.join(map(repr, missing))} not in the table; it has {', '.join(sorted(have))}",
                field,
            )


def _runs(index: Index, per_query: pd.DataFrame, dataset: str, metric: str, mode: str):
    runs = index.get((dataset, metric, mode))
    if not runs:
        raise DataError(
            _path(per_query, "<per-query table>"),
            None,
            f"no per-query {metric} scores for mode {mode!r} on set {dataset!r}",
        )
    return runs


def _mode_row(index: Index, key: tuple[str, str, str], n_boot: int, rng_seed: int) -> dict:
    dataset, metric, mode = key
    scores = {r: s for r, (_, s) in index[key].items()}
    ci = two_stage_bootstrap(
        scores,
        n_boot=n_boot,
        rng_seed=rng_seed,
        strata=strata_of(sorted({q for s in scores.values() for q in s})),
        names=(mode, mode),
    )
    return dict(
        dataset=dataset,
        metric=metric,
        mode=mode,
        runs=ci.runs_a,
        n_queries=ci.n_queries,
        mean=ci.mean_a,
        sd=ci.run_sd_a,
        ci_low=ci.ci_low,
        ci_high=ci.ci_high,
        note=ci.note,
    )


def mode_table(
    results: pd.DataFrame,
    per_query: pd.DataFrame,
    *,
    metrics: Sequence[str],
    datasets: Sequence[str] | None = None,
    n_boot: int = 2000,
    rng_seed: int = 0,
) -> pd.DataFrame:
    """One row per (set, metric, mode) with per-query scores: ``MODE_TABLE_COLUMNS``.

    ``mean`` is the mean over runs of each run's mean over the queries every run scores, ``sd``
    the sd of those run means (NaN for one run), ``ci_low/high`` the two-stage bootstrap
    interval of ``mean``. Example: runs r0 (query scores 1, 3) and r1 (3, 5) of ins-dv -> mean 3.0,
    sd 1.41, runs 2. Modes in the paper's order (``mode_order``).
    """
    results = _checked(results)
    _check_names(results, datasets=datasets, metrics=metrics)
    index = _index(results, per_query, metrics)
    keys = [k for k in index if datasets is None or k[0] in datasets]
    order = {m: i for i, m in enumerate(mode_order({k[2] for k in keys}))}
    keys.sort(key=lambda k: (k[0], list(metrics).index(k[1]), order[k[2]]))
    rows = [_mode_row(index, k, n_boot, rng_seed) for k in keys]
    return pd.DataFrame(rows, columns=MODE_TABLE_COLUMNS)


def _compare(index: Index, per_query, a: str, b: str, metric: str, dataset: str, n_boot: int, rng_seed: int):
    """The comparison row of modes ``a`` and ``b`` (``COMPARISON_COLUMNS``) from the run index."""
    ra, rb = (_runs(index, per_query, dataset, metric, m) for m in (a, b))
    sa, sb = ({r: s for r, (_, s) in runs.items()} for runs in (ra, rb))
    queries = sorted({q for s in (*sa.values(), *sb.values()) for q in s})
    ci = two_stage_bootstrap(
        sa, sb, n_boot=n_boot, rng_seed=rng_seed, strata=strata_of(queries), names=(a, b)
    )
    seeds = {r: seed for runs in (ra, rb) for r, (seed, _) in runs.items()}
    test = run_level_test(dict(zip(sa, ci.run_means_a)), dict(zip(sb, ci.run_means_b)), paired_by=seeds)
    note = "; ".join(x for x in (ci.note, test.reason) if x)
    return dict(
        dataset=dataset,
        metric=metric,
        a=a,
        b=b,
        runs_a=ci.runs_a,
        runs_b=ci.runs_b,
        n_queries=ci.n_queries,
        mean_a=ci.mean_a,
        sd_a=ci.run_sd_a,
        mean_b=ci.mean_b,
        sd_b=ci.run_sd_b,
        diff=ci.estimate,
        ci_low=ci.ci_low,
        ci_high=ci.ci_high,
        p_run=test.p,
        min_p=test.min_p,
        note=note,
    )


def compare_modes(
    results: pd.DataFrame,
    per_query: pd.DataFrame,
    a: str,
    b: str,
    *,
    metric: str,
    dataset: str,
    n_boot: int = 2000,
    rng_seed: int = 0,
) -> dict:
    """Mode ``a`` against mode ``b`` on one set and metric: one dict of ``COMPARISON_COLUMNS``.

    ``diff = mean_a - mean_b`` over the queries every run of both modes scores; ``ci_low/high``
    its two-stage bootstrap interval (runs resampled per mode, one query draw for both);
    ``p_run`` the run-level permutation p (paired by rng_seed when both modes have the same
    ones; NaN with 1 run each), ``min_p`` the smallest p the design allows. A mode, set or
    metric not in the table is a ``DataError`` naming the file. Example: ins-dv (3 runs) against
    base (1 run) -> runs_a 3, runs_b 1, min_p 0.25, note '1 run of base: ...'.
    """
    results, a, b = _checked(results), a.lower(), b.lower()
    _check_names(results, modes=(a, b), datasets=[dataset], metrics=[metric])
    return _compare(_index(results, per_query, [metric]), per_query, a, b, metric, dataset, n_boot, rng_seed)


def comparison_table(
    results: pd.DataFrame,
    per_query: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    *,
    metrics: Sequence[str],
    datasets: Sequence[str] | None = None,
    family_adjust: str | None = "holm",
    n_boot: int = 2000,
    rng_seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """``compare_modes`` for every set (``datasets``; None: every set), metric and ``(a, b)`` pair
    that has per-query scores for both modes, as a DataFrame of ``COMPARISON_COLUMNS`` plus
    ``p_holm`` (Holm 1979 over the rows with a p-value, the family; NaN elsewhere; absent when
    ``family_adjust`` is None) and ``significant`` (adjusted p < ``alpha``; never for a row
    without a p-value). A pair no set can compare is a ``DataError``.
    """
    if family_adjust not in ("holm", None):
        raise ValueError(f"family_adjust must be 'holm' or None, not {family_adjust!r}")
    results, pairs = _checked(results), [(a.lower(), b.lower()) for a, b in pairs]
    _check_names(results, modes=[m for p in pairs for m in p], datasets=datasets, metrics=metrics)
    index = _index(results, per_query, metrics)
    sets = datasets if datasets is not None else list(dict.fromkeys(results["dataset"].astype(str)))
    rows = [
        _compare(index, per_query, a, b, metric, dataset, n_boot, rng_seed)
        for dataset in sets
        for metric in metrics
        for a, b in pairs
        if (dataset, metric, a) in index and (dataset, metric, b) in index
    ]
    if not rows:
        raise DataError(
            _path(per_query, "<per-query table>"),
            None,
            f"no set has per-query {', '.join(metrics)} scores for both modes of {list(pairs)}",
        )
    df = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    p = df["p_run"]
    if family_adjust == "holm":
        df["p_holm"] = np.nan
        if p.notna().any():
            df.loc[p.notna(), "p_holm"] = holm(p[p.notna()].tolist())
        p = df["p_holm"]
    df["significant"] = p.notna() & (p < alpha)
    return df


def _mean_sd(mean: float, sd: float) -> str:
    return fixed(mean) + ("" if np.isnan(sd) else f" ± {sd:.2f}")


def format_comparisons(df: pd.DataFrame) -> str:
    """What ``ifir compare`` prints: a Markdown table, one line per row, then each row's note.

    Cells: ``mean ± run sd``, ``diff [95% interval]``, ``p_run`` ('n/a' without a test) and the
    design's ``min p``.
    """
    shown = pd.DataFrame(
        {
            "set": df["dataset"],
            "metric": df["metric"],
            "a - b": df["a"] + " - " + df["b"],
            "runs": [f"{x} / {y}" for x, y in zip(df["runs_a"], df["runs_b"])],
            "queries": df["n_queries"].astype(str),
            "a: mean ± sd": [_mean_sd(m, s) for m, s in zip(df["mean_a"], df["sd_a"])],
            "b: mean ± sd": [_mean_sd(m, s) for m, s in zip(df["mean_b"], df["sd_b"])],
            "diff [interval]": [
                f"{fixed(d)} [{fixed(lo)}, {fixed(hi)}]"
                for d, lo, hi in zip(df["diff"], df["ci_low"], df["ci_high"])
            ],
            "p run": ["n/a" if np.isnan(p) else f"{p:.3f}" for p in df["p_run"]],
            "min p": [f"{p:.3f}" for p in df["min_p"]],
        }
    )
    if "p_holm" in df.columns:
        shown["p Holm"] = ["n/a" if np.isnan(p) else f"{p:.3f}" for p in df["p_holm"]]
    lines = [
        markdown_table(shown),
        "",
        "diff = a - b; interval: 95% two-stage bootstrap over runs and queries; p run: exact "
        "permutation test over run means (Holm over the rows); min p: the smallest p these runs allow.",
    ]
    lines += [f"note ({r.dataset}, {r.metric}): {r.note}" for r in df.itertuples() if r.note]
    return "\n".join(lines)


def comparison_records(df: pd.DataFrame) -> list[dict]:
    """The rows as JSON-ready dicts (``ifir compare --json``): NaN becomes ``None``."""
    return json.loads(df.to_json(orient="records", double_precision=15))
