"""Notebook 05's reading of the results: one comparison in sentences a student can check against
the figure (the same means and error bars that ``summaries.summarize`` gives the figures).

With one run per mode the bars are 95% bootstrap intervals over queries: they say how much the
number would move with other queries, not with another training run (runs, not queries, are the
unit of replication; ``ifir experiment`` runs several). With several runs the bars span the runs.
"""

from __future__ import annotations

import pandas as pd

from .style import backbone_label, dataset_label, metric_label, mode_label
from .summaries import interval_phrase, summarize


def _describe(row: pd.Series) -> str:
    if row["error"] == "none":
        return f"{row['mean']:.2f} (no interval recorded)"
    lo, hi = row["mean"] - row["err_minus"], row["mean"] + row["err_plus"]
    return f"{row['mean']:.2f} ({interval_phrase(row['error'], int(row['n_runs']))}: {lo:.2f} to {hi:.2f})"


def _verdict(ra: pd.Series, rb: pd.Series) -> str:
    """What the two error bars say; with one missing they say nothing (NaN bounds compared as
    "do not overlap", which reads as a real difference)."""
    if "none" in (ra["error"], rb["error"]):
        return "with no interval recorded for one of them, the bars cannot be compared"
    overlap = (ra["mean"] - ra["err_minus"] <= rb["mean"] + rb["err_plus"]) and (
        rb["mean"] - rb["err_minus"] <= ra["mean"] + ra["err_plus"]
    )
    return (
        "the bars overlap, so these runs do not show a difference" if overlap else "the bars do not overlap"
    )


def read_results(
    results: pd.DataFrame,
    dataset: str,
    a: str = "ins-dv",
    b: str = "ins-orig",
    metric: str = "p_mrr",
    per_query: pd.DataFrame | None = None,
) -> str:
    """Sentences comparing modes ``a`` and ``b`` on one dataset and metric (x100), per backbone,
    with the error bars the figures draw (``summarize``; ``per_query`` enables the two-stage
    interval over runs and queries when modes have several runs)."""
    s = summarize(results, metric, dataset, per_query=per_query)
    name, where = metric_label(metric, [dataset]), dataset_label(dataset)
    if s.empty:
        return f"No {name} on {where} in the results table."
    out = []
    for backbone, g in s.groupby("backbone", sort=False):
        backbone = backbone_label(backbone)
        g = g.set_index("mode")
        if a not in g.index or b not in g.index:
            out.append(f"{backbone}: {mode_label(a)} or {mode_label(b)} has no {name} on {where} yet.")
            continue
        ra, rb = g.loc[a], g.loc[b]
        verdict = _verdict(ra, rb)
        runs = int(min(ra["n_runs"], rb["n_runs"]))
        caveat = (
            " With one run per mode this says nothing about another training run's result."
            if runs == 1
            else ""
        )
        out.append(
            f"On {where}, {backbone}: {mode_label(a)} reaches {name} {_describe(ra)}, {mode_label(b)} "
            f"{_describe(rb)}; the difference is {ra['mean'] - rb['mean']:+.2f} and {verdict}.{caveat}"
        )
    return "\n".join(out)
