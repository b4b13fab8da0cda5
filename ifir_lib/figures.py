"""Paper figures: functions from tidy DataFrames to plotly Figures, one function that saves.

Inputs (values in the paper's units, x100, as the evaluation layer writes them):

- results table, one row per run x dataset x metric: ``run_id, model, config, seed, dataset,
  metric, value, ci_low, ci_high, n_queries, git_commit, timestamp`` (``load_results``);
- per-query table: ``run_id, dataset, metric, query_id, value`` (``load_per_query``);
- run folders holding ``train_log.jsonl`` and ``ifir_run.json`` (``load_train_logs``);
- synthesis rows (``key, seed_id, backend, status, reversal, instruction_type, verify_flip...``);
- the published numbers of arXiv 2604.18845, Tables 1-2 (``data/published_results.csv``).

Figures: (a) ``fig_metrics_by_config`` p-MRR and Score per config with the paper's values as
markers; (b) ``fig_tradeoff`` p-MRR vs Score; (c) ``fig_per_query`` per-query distribution and
bootstrap CIs; (d) ``fig_synthesis_stats``; (e) ``fig_loss_curves``. Every figure uses the
``ifir`` template and ``CONFIG_COLORS``, sized for a 3.5 in column (504 px = 3.5 in at 144 px/in,
so 1 pt = 2 px and the 20 px base font prints at 10 pt). ``save_figure`` writes PNG (scale 3),
SVG and HTML; ``make_all_figures`` rebuilds everything from files. Configs are compared within
a backbone: a trained run's ``model`` is its folder, whose ``ifir_run.json`` names the backbone
(``add_backbone``).

Not handled here: computing metrics or their CIs per run (``evaluate``, ``stats``), running
anything, figure captions (they belong in the paper's LaTeX), and Chromium itself (a system
package; HTML output works without it).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from .config import PUBLISHED_RESULTS_PATH
from .errors import DataError, read_jsonl
from .stats import bootstrap_ci, stratified_mean

# ---------------------------------------------------------------------------------------------
# Style: one colour per config (Okabe-Ito, colour-blind safe). Hue says Ins vs All, lightness
# says orig vs DV, so the two comparisons the paper makes read at a glance.

CONFIGS = ("base", "ins-orig", "ins-dv", "all-orig", "all-dv")
CONFIG_LABELS = {"base": "Base", "ins-orig": "Ins-orig", "ins-dv": "Ins-DV", "all-orig": "All-orig", "all-dv": "All-DV"}
CONFIG_COLORS = {"base": "#999999", "ins-orig": "#56B4E9", "ins-dv": "#0072B2", "all-orig": "#E69F00", "all-dv": "#D55E00"}
OTHER_COLOR = "#555555"  # a config outside CONFIGS (e.g. a "custom" training run)
# Synthesis statuses get hues the configs do not use, so no colour means two things.
STATUS_COLORS = {"accepted": "#009E73", "declined": "#CC79A7", "rejected": "#332288", "failed": "#BBBBBB"}
METRIC_LABELS = {"p_mrr": "p-MRR", "score": "Score", "map_at_1000": "MAP@1000", "ndcg_at_5": "nDCG@5", "ndcg_at_10": "nDCG@10"}
# our metric name -> the published column it is compared with (FollowIR, Tables 1-2)
PUBLISHED_METRICS = {"p_mrr": "followir_p_mrr", "score": "followir_score"}
PAPER_BACKBONES = {"gte-multilingual-mlm-base": ("gte-mlm-base", "diamond"), "bge-m3-retromae": ("bge-m3-retromae", "square")}
# dataset names that already hold an average over the FollowIR collections
AGGREGATE_DATASETS = {"all", "mean", "average", "overall", "followir"}

PX_PER_PT = 2                 # 504 px printed at 3.5 in
COLUMN_WIDTH = 504            # single column, 3.5 in
PAGE_WIDTH = 1008             # two columns, 7 in
PNG_SCALE = 3                 # 1512 px wide: ~430 dpi at 3.5 in
BASE_FONT = 10 * PX_PER_PT    # 10 pt
SMALL_FONT = 9 * PX_PER_PT    # legends, annotations: 9 pt
TEMPLATE = "ifir"
RESULT_COLUMNS = ("run_id", "model", "config", "seed", "dataset", "metric", "value")
OPTIONAL_RESULT_COLUMNS = ("ci_low", "ci_high", "n_queries", "git_commit", "timestamp")
PER_QUERY_COLUMNS = ("run_id", "dataset", "metric", "query_id", "value")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


def _register_template() -> None:
    if TEMPLATE in pio.templates:  # registered once per process; re-importing must not reset edits
        return
    axis = dict(showline=True, linecolor="#333333", linewidth=1.5, ticks="outside", tickcolor="#333333",
                showgrid=False, zeroline=False, automargin=True,
                # plotly's default axis title is 1.2x the base font; keep it at 10 pt like the rest
                title=dict(standoff=8, font=dict(size=BASE_FONT)),
                tickfont=dict(size=BASE_FONT - 2))
    pio.templates[TEMPLATE] = go.layout.Template(layout=dict(
        font=dict(family="Liberation Sans, Arial, Helvetica, sans-serif", size=BASE_FONT, color="#222222"),
        paper_bgcolor="white", plot_bgcolor="white", colorway=list(CONFIG_COLORS.values()),
        title=dict(font=dict(size=BASE_FONT + 2), x=0.0, xanchor="left", xref="paper", y=0.98, yanchor="top"),
        xaxis=axis, yaxis={**axis, "showgrid": True, "gridcolor": "#E6E6E6"},
        legend=dict(font=dict(size=SMALL_FONT), orientation="h", x=0.0, xanchor="left", y=1.0, yanchor="bottom",
                    bgcolor="rgba(255,255,255,0)", itemwidth=30, tracegroupgap=2),
        margin=dict(l=10, r=10, t=10, b=10), hoverlabel=dict(font=dict(size=SMALL_FONT)),
        bargap=0.25,
    ))


_register_template()


def config_color(config: str) -> str:
    return CONFIG_COLORS.get(config, OTHER_COLOR)


def config_label(config: str) -> str:
    return CONFIG_LABELS.get(config, config)


def _config_order(configs: Iterable[str]) -> list[str]:
    present = set(configs)
    return [c for c in CONFIGS if c in present] + sorted(present - set(CONFIGS))


def _short_model(name: str, n: int = 24) -> str:
    """``'/runs/x/minilm-ins-dv'`` -> ``'minilm-ins-dv'``; long names are cut to ``n`` chars."""
    name = str(name).rstrip("/").split("/")[-1]
    return name if len(name) <= n else name[: n - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Loading


def load_results(path: str | Path) -> pd.DataFrame:
    """Read the tidy results CSV; a missing column raises ``DataError`` naming it."""
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "results file not found")
    df = pd.read_csv(path)
    return check_results(df, path)


def check_results(df: pd.DataFrame, path: str | Path = "<results>") -> pd.DataFrame:
    missing = [c for c in RESULT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(path, None, f"missing column(s) {', '.join(missing)}; have {', '.join(map(str, df.columns))}")
    df = df.copy()
    for c in OPTIONAL_RESULT_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    df["config"] = df["config"].astype(str).str.lower()
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    for c in ("ci_low", "ci_high"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def backbone_of(model: str, runs_dir: str | Path | None = None) -> str:
    """The backbone a model was fine-tuned from: ``config.base_model`` of ``<model>/ifir_run.json``
    (or ``<runs_dir>/<folder name>/ifir_run.json`` when the table moved machines); a model
    without one (the untrained base) is its own backbone. ``'runs/ins-dv-s0' -> 'minilm'``.
    """
    candidates = [Path(str(model))]
    if runs_dir is not None:
        candidates.append(Path(runs_dir) / Path(str(model)).name)
    for run in candidates:
        try:
            return str(json.loads((run / "ifir_run.json").read_text())["config"]["base_model"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return str(model)


def add_backbone(results: pd.DataFrame, runs_dir: str | Path | None = None) -> pd.DataFrame:
    """Add a ``backbone`` column (``backbone_of`` each model) unless the table has one.

    ``evaluate`` records a trained run by its folder, so ``model`` differs per config; figures
    compare configs within a backbone, so they group by this column instead.
    """
    if "backbone" in results.columns:
        return results
    out = results.copy()
    lookup = {m: backbone_of(m, runs_dir) for m in out["model"].astype(str).unique()}
    out["backbone"] = out["model"].astype(str).map(lookup)
    return out


def load_per_query(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "per-query file not found")
    df = pd.read_csv(path, dtype={"query_id": str, "run_id": str})
    missing = [c for c in PER_QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(path, None, f"missing column(s) {', '.join(missing)}")
    return df


def load_published(path: str | Path = PUBLISHED_RESULTS_PATH) -> pd.DataFrame:
    """The paper's Tables 1-2 (``backbone, config, metric, value, source``); '#' lines are provenance."""
    return pd.read_csv(path, comment="#")


def load_train_logs(runs_dir: str | Path) -> pd.DataFrame:
    """Every ``train_log.jsonl`` under ``runs_dir`` as ``run, config, seed, model, step, epoch, loss``.

    The config is ``ifir_run.json``'s ``mode`` (the training set the run used); a log without
    ``ifir_run.json`` is labelled by its folder name.
    """
    rows = []
    for log in sorted(Path(runs_dir).rglob("train_log.jsonl")):
        run_dir = log.parent
        info = json.loads((run_dir / "ifir_run.json").read_text()) if (run_dir / "ifir_run.json").exists() else {}
        cfg = info.get("config") or {}
        for _, r in read_jsonl(log):
            if r.get("loss") is None:
                continue
            rows.append({"run": str(run_dir.relative_to(runs_dir)) if run_dir != Path(runs_dir) else run_dir.name,
                         "config": str(info.get("mode", run_dir.name)).lower(), "seed": cfg.get("seed"),
                         "model": cfg.get("base_model"), "step": r.get("step"), "epoch": r.get("epoch"),
                         "loss": float(r["loss"])})
    return pd.DataFrame(rows, columns=["run", "config", "seed", "model", "step", "epoch", "loss"])


def load_synthesis_rows(paths: str | Path | Sequence[str | Path]) -> list[dict]:
    """Rows of one or several synthesis outputs (``synthesize.load_synthesis``: one per key and
    file), so runs of different backends, which share keys, can be compared. Each needs a status."""
    from .synthesize import load_synthesis

    rows = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        for r in load_synthesis(path):
            if "status" not in r:
                raise DataError(path, None, f"row {r['key']!r} has no status", "status")
            rows.append(r)
    return rows


# ---------------------------------------------------------------------------------------------
# Summaries (pure, unit-tested)


def per_run(results: pd.DataFrame, metric: str, dataset: str | None = None) -> pd.DataFrame:
    """One row per run for ``metric``: ``run_id, backbone, config, seed, value, ci_low, ci_high``.

    ``dataset=None`` uses an aggregate dataset row (``all``, ``mean``, ``followir``...) when
    there is one, else the mean over the run's datasets, as FollowIR p-MRR is the mean over its
    three collections. Averaged CIs are the mean of the per-dataset bounds (wider than the CI
    of the average, so conservative).
    """
    results = add_backbone(results)
    d = results[results["metric"] == metric]
    if dataset is not None:
        d = d[d["dataset"] == dataset]
    else:
        agg = d[d["dataset"].astype(str).str.lower().isin(AGGREGATE_DATASETS)]
        if len(agg):
            d = agg
    if d.empty:
        return pd.DataFrame(columns=["run_id", "backbone", "config", "seed", "value", "ci_low", "ci_high"])
    return (d.groupby(["run_id", "backbone", "config", "seed"], dropna=False, sort=False)[["value", "ci_low", "ci_high"]]
             .mean().reset_index())


def summarize(results: pd.DataFrame, metric: str, dataset: str | None = None, error: str = "auto") -> pd.DataFrame:
    """Mean over seeds per ``(backbone, config)`` with an error bar.

    ``error='spread'``: min-max over seeds; ``'ci'``: the runs' mean ``ci_low``/``ci_high``;
    ``'auto'``: spread when a group has 2+ seeds, else the CI. Example: seeds with values 4 and 6
    -> mean 5, err_minus 1, err_plus 1, error 'spread'.
    Columns: ``backbone, config, mean, err_minus, err_plus, n_seeds, error``.
    """
    if error not in ("auto", "spread", "ci"):
        raise ValueError("error must be 'auto', 'spread' or 'ci'")
    runs = per_run(results, metric, dataset)
    out = []
    for (backbone, config), g in runs.groupby(["backbone", "config"], sort=False):
        mean = float(g["value"].mean())
        kind = ("spread" if len(g) > 1 else "ci") if error == "auto" else error
        if kind == "spread":
            lo, hi = float(g["value"].min()), float(g["value"].max())
        else:
            lo, hi = float(g["ci_low"].mean()), float(g["ci_high"].mean())
        # a missing CI draws no bar rather than a zero-width one that looks like certainty
        em = mean - lo if not math.isnan(lo) else np.nan
        ep = hi - mean if not math.isnan(hi) else np.nan
        out.append({"backbone": backbone, "config": config, "mean": mean, "err_minus": em, "err_plus": ep,
                    "n_seeds": len(g), "error": kind})
    df = pd.DataFrame(out, columns=["backbone", "config", "mean", "err_minus", "err_plus", "n_seeds", "error"])
    order = {c: i for i, c in enumerate(_config_order(df["config"]))}
    return df.sort_values(["backbone", "config"], key=lambda s: s.map(order) if s.name == "config" else s).reset_index(drop=True)


def per_query_summary(per_query: pd.DataFrame, results: pd.DataFrame, metric: str = "p_mrr",
                      n_boot: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-query values averaged over seeds, and per ``(backbone, config)`` mean with bootstrap CI.

    Runs are joined to the results table for their backbone and config. The mean and the
    percentile-bootstrap CI are stratified by dataset (``stats``): the mean of per-dataset means,
    as the FollowIR aggregate is formed, resampling queries within each dataset. Returns
    ``(points[backbone, config, dataset, query_id, value], cis[backbone, config, mean, ci_low, ci_high, n])``.
    """
    runs = add_backbone(results)[["run_id", "backbone", "config"]].drop_duplicates("run_id")
    pq = per_query[per_query["metric"] == metric].merge(runs, on="run_id", how="inner")
    points = (pq.groupby(["backbone", "config", "dataset", "query_id"], sort=False)["value"].mean().reset_index())
    cis = []
    for (backbone, config), g in points.groupby(["backbone", "config"], sort=False):
        v, strata = g["value"].to_numpy(), g["dataset"].astype(str).tolist()
        lo, hi = bootstrap_ci(v, n_boot=n_boot, seed=seed, strata=strata)
        cis.append({"backbone": backbone, "config": config, "mean": stratified_mean(v, strata), "ci_low": lo, "ci_high": hi, "n": len(g)})
    return points, pd.DataFrame(cis, columns=["backbone", "config", "mean", "ci_low", "ci_high", "n"])


def synthesis_summary(rows: list[dict] | pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Tables behind figure (d): status counts per instruction type and per backend, reversal
    lengths (words, non-empty reversals), verification pass rate per backend."""
    df = pd.DataFrame(rows).copy()
    for c, default in (("backend", "unknown"), ("instruction_type", "unknown"), ("reversal", None), ("verify_flip", None)):
        if c not in df.columns:
            df[c] = default
    df["backend"] = df["backend"].fillna("unknown").astype(str)
    df["instruction_type"] = df["instruction_type"].fillna("unknown").astype(str)
    by_type = df.groupby(["instruction_type", "status"]).size().rename("n").reset_index()
    by_backend = df.groupby(["backend", "status"]).size().rename("n").reset_index()
    by_backend["share"] = by_backend["n"] / by_backend.groupby("backend")["n"].transform("sum")
    rev = df[df["reversal"].notna() & (df["reversal"].astype(str).str.strip() != "")]
    lengths = pd.DataFrame({"backend": rev["backend"], "status": rev["status"],
                            "words": rev["reversal"].astype(str).str.split().str.len()})
    ver = df[df["verify_flip"].notna()]
    verify = (ver.groupby("backend")["verify_flip"].agg(passed=lambda s: int(s.astype(bool).sum()), n="size").reset_index())
    verify["rate"] = verify["passed"] / verify["n"]
    return {"by_type": by_type, "by_backend": by_backend, "lengths": lengths, "verify": verify}


# ---------------------------------------------------------------------------------------------
# Figures


def _rank(config: str) -> int:
    """Legend position: configs in paper order, whatever order the traces were drawn in."""
    return CONFIGS.index(config) if config in CONFIGS else len(CONFIGS)


def _legend_marker(name: str, symbol: str, color: str = "#666666", open_: bool = False, group: str | None = None,
                   rank: int = 100) -> go.Scatter:
    """A legend-only entry (no data), so legends can explain symbols separately from colours."""
    return go.Scatter(x=[None], y=[None], mode="markers", name=name, legendgroup=group or name, legendrank=rank,
                      marker=dict(symbol=symbol, size=12, color="white" if open_ else color,
                                  line=dict(color=color, width=2)), hoverinfo="skip")


def _facet_layout(fig: go.Figure, n_cols: int) -> None:
    """With one column per model, the legend goes to the top of the canvas so it cannot sit on
    the column titles (which plotly draws just above each panel)."""
    if n_cols > 1:
        fig.update_annotations(font=dict(size=BASE_FONT))
        fig.update_layout(legend=dict(yref="container", y=0.995, yanchor="top"), margin=dict(t=95))
    else:
        fig.update_layout(margin=dict(t=40))


def _paper_values(published: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    if published is None or metric not in PUBLISHED_METRICS:
        return pd.DataFrame(columns=["backbone", "config", "value"])
    p = published[published["metric"] == PUBLISHED_METRICS[metric]]
    return p[p["backbone"].isin(PAPER_BACKBONES)][["backbone", "config", "value"]]


def _published_or_default(published):
    if isinstance(published, str) and published == "default":
        return load_published()
    return published


def fig_metrics_by_config(results: pd.DataFrame, metrics: Sequence[str] = ("p_mrr", "score"),
                          published: pd.DataFrame | str | None = "default", dataset: str | None = None,
                          error: str = "auto") -> go.Figure:
    """(a) One panel per metric (rows) and backbone (columns): a bar per config (mean over seeds,
    error bar per ``summarize``), with the paper's Table 1/2 values as open markers
    (diamond = gte-multilingual-mlm-base, square = bge-m3-retromae).

    The paper's backbones and benchmark differ from ours; the markers show the published
    direction of each config, not numbers our runs should reproduce.
    """
    published = _published_or_default(published)
    metrics = [m for m in metrics if (results["metric"] == m).any()]
    if not metrics:
        raise ValueError("none of the requested metrics is in the results table")
    backbones = list(dict.fromkeys(add_backbone(results)["backbone"]))
    configs = _config_order(set(results["config"]) | set(_paper_values(published, metrics[0])["config"]))
    xpos = {c: i for i, c in enumerate(configs)}
    fig = make_subplots(rows=len(metrics), cols=len(backbones), shared_xaxes=True, vertical_spacing=0.08,
                        horizontal_spacing=0.06,
                        column_titles=[_short_model(m) for m in backbones] if len(backbones) > 1 else None)
    offsets = {"gte-multilingual-mlm-base": -0.17, "bge-m3-retromae": 0.17}
    for r, metric in enumerate(metrics, 1):
        s = summarize(results, metric, dataset, error)
        paper = _paper_values(published, metric)
        for c, backbone in enumerate(backbones, 1):
            sm = s[s["backbone"] == backbone]
            fig.add_trace(go.Bar(
                x=[xpos[k] for k in sm["config"]], y=sm["mean"], width=0.62, showlegend=False,
                marker=dict(color=[config_color(k) for k in sm["config"]], line=dict(width=0)),
                error_y=dict(type="data", symmetric=False, array=sm["err_plus"], arrayminus=sm["err_minus"],
                             color="#222222", thickness=1.5, width=5),
                customdata=np.stack([sm["n_seeds"], sm["error"]], axis=-1) if len(sm) else None,
                hovertemplate="%{y:.2f} (n seeds %{customdata[0]}, bar: %{customdata[1]})<extra>" + _short_model(backbone) + "</extra>",
            ), row=r, col=c)
            for bb, g in paper.groupby("backbone"):
                g = g[g["config"].isin(xpos)]
                _, symbol = PAPER_BACKBONES[bb]
                fig.add_trace(go.Scatter(
                    x=[xpos[k] + offsets[bb] for k in g["config"]], y=g["value"], mode="markers", showlegend=False,
                    legendgroup=bb, marker=dict(symbol=symbol, size=11, color="white", line=dict(color="#222222", width=2)),
                    hovertemplate="%{y:.2f}<extra>paper, " + bb + "</extra>"), row=r, col=c)
            fig.update_yaxes(title_text=f"{METRIC_LABELS.get(metric, metric)} (×100)" if c == 1 else None, row=r, col=c)
            fig.update_xaxes(tickvals=list(xpos.values()), ticktext=[config_label(k) for k in configs],
                             range=[-0.6, len(configs) - 0.4], row=r, col=c)
        if any(m == "p_mrr" for m in [metric]):
            fig.add_hline(y=0, line=dict(color="#888888", width=1), row=r, col="all")
    # bars are ours; only the paper's markers need a legend (a grey "ours" swatch read as Base)
    for bb, (label, symbol) in PAPER_BACKBONES.items():
        if not _paper_values(published, metrics[0]).query("backbone == @bb").empty:
            fig.add_trace(_legend_marker(f"{label} (paper)", symbol, "#222222", open_=True, group=bb))
    fig.update_layout(template=TEMPLATE, width=min(PAGE_WIDTH, COLUMN_WIDTH * len(backbones)),
                      height=120 + 300 * len(metrics))
    _facet_layout(fig, len(backbones))
    return fig


def fig_tradeoff(results: pd.DataFrame, published: pd.DataFrame | str | None = "default", dataset: str | None = None,
                 x_metric: str = "score", y_metric: str = "p_mrr", error: str = "auto") -> go.Figure:
    """(b) p-MRR against Score: one filled point per (backbone, config) with error bars on both
    axes; the paper's configs as open markers in the same colours (shape = backbone)."""
    published = _published_or_default(published)
    sx, sy = summarize(results, x_metric, dataset, error), summarize(results, y_metric, dataset, error)
    s = sx.merge(sy, on=["backbone", "config"], suffixes=("_x", "_y"))
    if s.empty:
        raise ValueError(f"no run has both {x_metric} and {y_metric}")
    model_symbols = ["circle", "triangle-up", "hexagon", "star", "cross"]
    backbones = list(dict.fromkeys(s["backbone"]))
    fig = go.Figure()
    fig.add_hline(y=0, line=dict(color="#888888", width=1))
    for i, backbone in enumerate(backbones):
        for _, r in s[s["backbone"] == backbone].iterrows():
            fig.add_trace(go.Scatter(
                x=[r["mean_x"]], y=[r["mean_y"]], mode="markers", name=config_label(r["config"]),
                legendgroup=r["config"], showlegend=i == 0, legendrank=_rank(r["config"]),
                marker=dict(symbol=model_symbols[i % len(model_symbols)], size=13, color=config_color(r["config"]),
                            line=dict(color="#222222", width=1)),
                error_x=dict(type="data", symmetric=False, array=[r["err_plus_x"]], arrayminus=[r["err_minus_x"]],
                             color=config_color(r["config"]), thickness=1.5, width=3),
                error_y=dict(type="data", symmetric=False, array=[r["err_plus_y"]], arrayminus=[r["err_minus_y"]],
                             color=config_color(r["config"]), thickness=1.5, width=3),
                hovertemplate=f"{_short_model(backbone)}, {config_label(r['config'])}<br>%{{x:.2f}}, %{{y:.2f}}<extra></extra>"))
    px_, py_ = _paper_values(published, x_metric), _paper_values(published, y_metric)
    paper = px_.merge(py_, on=["backbone", "config"], suffixes=("_x", "_y"))
    for bb, g in paper.groupby("backbone"):
        label, symbol = PAPER_BACKBONES[bb]
        fig.add_trace(go.Scatter(
            x=g["value_x"], y=g["value_y"], mode="markers", showlegend=False, legendgroup=bb,
            marker=dict(symbol=symbol, size=12, color="white", line=dict(color=[config_color(c) for c in g["config"]], width=2.5)),
            text=[config_label(c) for c in g["config"]],
            hovertemplate="paper, " + label + ", %{text}<br>%{x:.2f}, %{y:.2f}<extra></extra>"))
    # paper points are coloured by config too: name every config colour, drawn by us or not
    for config in _config_order(set(paper["config"]) - set(s["config"])):
        fig.add_trace(_legend_marker(config_label(config), "circle", config_color(config), group=config, rank=_rank(config)))
    if len(backbones) > 1:
        for i, backbone in enumerate(backbones):
            fig.add_trace(_legend_marker(_short_model(backbone), model_symbols[i % len(model_symbols)], "#666666"))
    for bb, (label, symbol) in PAPER_BACKBONES.items():
        if (paper["backbone"] == bb).any():
            fig.add_trace(_legend_marker(f"{label} (paper)", symbol, "#222222", open_=True, group=bb))
    fig.update_layout(template=TEMPLATE, width=COLUMN_WIDTH, height=500,
                      xaxis_title=f"{METRIC_LABELS.get(x_metric, x_metric)} (×100)",
                      yaxis_title=f"{METRIC_LABELS.get(y_metric, y_metric)} (×100)")
    return fig


def fig_per_query(per_query: pd.DataFrame, results: pd.DataFrame, metric: str = "p_mrr",
                  n_boot: int = 2000, seed: int = 0) -> go.Figure:
    """(c) Per-query distribution per config (box + every query as a dot, averaged over seeds),
    with the mean and its percentile-bootstrap 95% CI (black diamond and whiskers), both
    stratified by dataset (``per_query_summary``)."""
    points, cis = per_query_summary(per_query, results, metric, n_boot, seed)
    if points.empty:
        raise ValueError(f"no per-query {metric} values match a run in the results table")
    backbones = list(dict.fromkeys(points["backbone"]))
    fig = make_subplots(rows=1, cols=len(backbones), shared_yaxes=True, horizontal_spacing=0.04,
                        column_titles=[_short_model(m) for m in backbones] if len(backbones) > 1 else None)
    configs = _config_order(points["config"])
    xpos = {k: i for i, k in enumerate(configs)}
    # numeric x with at least 4 slots: one config alone would otherwise get a page-wide box
    pad = max(0, 4 - len(configs)) / 2
    for c, backbone in enumerate(backbones, 1):
        pm, cm = points[points["backbone"] == backbone], cis[cis["backbone"] == backbone]
        for config in _config_order(pm["config"]):
            v = pm[pm["config"] == config]["value"]
            fig.add_trace(go.Box(
                y=v, x=[xpos[config]] * len(v), name=config_label(config), showlegend=False,
                marker=dict(color=config_color(config), size=5, opacity=0.6), line=dict(color=config_color(config), width=1.5),
                fillcolor="rgba(255,255,255,0)", boxpoints="all", jitter=0.5, pointpos=0, width=0.6,
                hoveron="points"), row=1, col=c)
        cm = cm.set_index("config").loc[_config_order(cm["config"])].reset_index()
        fig.add_trace(go.Scatter(
            x=[xpos[k] for k in cm["config"]], y=cm["mean"], mode="markers", showlegend=c == 1,
            name="mean, 95% bootstrap CI", legendgroup="ci",
            marker=dict(symbol="diamond", size=11, color="#222222", line=dict(color="white", width=1)),
            error_y=dict(type="data", symmetric=False, array=cm["ci_high"] - cm["mean"], arrayminus=cm["mean"] - cm["ci_low"],
                         color="#222222", thickness=2.5, width=7),
            customdata=cm["n"], hovertemplate="mean %{y:.2f} over %{customdata} queries<extra></extra>"), row=1, col=c)
        fig.update_xaxes(tickvals=list(xpos.values()), ticktext=[config_label(k) for k in configs],
                         range=[-0.6 - pad, len(configs) - 0.4 + pad], row=1, col=c)
    if metric == "p_mrr":
        fig.add_hline(y=0, line=dict(color="#888888", width=1))
    fig.update_yaxes(title_text=f"per-query {METRIC_LABELS.get(metric, metric)} (×100)", row=1, col=1)
    fig.update_layout(template=TEMPLATE, width=min(PAGE_WIDTH, COLUMN_WIDTH * len(backbones)), height=440, boxmode="overlay")
    _facet_layout(fig, len(backbones))
    return fig


def fig_synthesis_stats(rows: list[dict] | pd.DataFrame) -> go.Figure:
    """(d) Four panels: outcome per instruction type, reversal lengths, outcome shares per
    backend (declined and rejected rates), verification pass rate per backend. Two columns wide."""
    t = synthesis_summary(rows)
    fig = make_subplots(rows=2, cols=2, vertical_spacing=0.2, horizontal_spacing=0.2,
                        subplot_titles=("Instruction types", "Reversal length", "Outcome by backend", "Verified flips"))
    # subplot titles: lift them off full-height bars (the 100% stacks touch the panel top)
    fig.update_annotations(font=dict(size=BASE_FONT), yshift=10)
    statuses = [s for s in STATUS_COLORS if s in set(t["by_type"]["status"])] + sorted(set(t["by_type"]["status"]) - set(STATUS_COLORS))
    types = sorted(set(t["by_type"]["instruction_type"]))
    for st in statuses:
        n = t["by_type"][t["by_type"]["status"] == st].set_index("instruction_type")["n"].reindex(types, fill_value=0)
        fig.add_trace(go.Bar(y=types, x=n, orientation="h", name=st, legendgroup=st,
                             marker_color=STATUS_COLORS.get(st, OTHER_COLOR)), row=1, col=1)
        b = t["by_backend"][t["by_backend"]["status"] == st]
        fig.add_trace(go.Bar(x=b["backend"], y=100 * b["share"], name=st, legendgroup=st, showlegend=False,
                             marker_color=STATUS_COLORS.get(st, OTHER_COLOR),
                             text=[f"{v:.0f}%" if v >= 8 else "" for v in 100 * b["share"]], textposition="inside",
                             insidetextanchor="middle", textfont=dict(size=SMALL_FONT - 2, color="white")), row=2, col=1)
    if len(t["lengths"]):
        fig.add_trace(go.Histogram(x=t["lengths"]["words"], showlegend=False, marker_color="#666666",
                                   xbins=dict(size=max(1, int(np.ceil(t["lengths"]["words"].max() / 15))))), row=1, col=2)
    if len(t["verify"]):
        v = t["verify"]
        fig.add_trace(go.Bar(x=v["backend"], y=100 * v["rate"], showlegend=False, marker_color=STATUS_COLORS["accepted"],
                             text=[f"{p}/{n}" for p, n in zip(v["passed"], v["n"])], textposition="outside",
                             textfont=dict(size=SMALL_FONT - 2), cliponaxis=False), row=2, col=2)
    else:
        fig.add_annotation(text="no verification results", showarrow=False, xref="x4 domain", yref="y4 domain",
                           x=0.5, y=0.5, font=dict(size=SMALL_FONT, color="#666666"))
    fig.update_layout(barmode="stack", template=TEMPLATE, width=PAGE_WIDTH, height=760,
                      legend=dict(y=1.07), margin=dict(t=70))
    fig.update_xaxes(title_text="seed rows", row=1, col=1)
    fig.update_xaxes(title_text="words in reversal", row=1, col=2)
    fig.update_yaxes(title_text="reversals", row=1, col=2)
    fig.update_yaxes(title_text="% of rows", range=[0, 100], row=2, col=1)
    fig.update_yaxes(title_text="% verified", range=[0, 115], tickvals=[0, 25, 50, 75, 100], row=2, col=2)
    return fig


def fig_loss_curves(logs: pd.DataFrame) -> go.Figure:
    """(e) Training loss per step, one line per run coloured by its config (seeds share a colour)."""
    if logs.empty:
        raise ValueError("no training log lines with a loss")
    fig = go.Figure()
    shown = set()
    for config in _config_order(logs["config"]):
        for run, g in logs[logs["config"] == config].groupby("run", sort=True):
            g = g.sort_values("step")
            fig.add_trace(go.Scatter(
                x=g["step"], y=g["loss"], mode="lines+markers" if len(g) < 15 else "lines",
                name=config_label(config), legendgroup=config, showlegend=config not in shown,
                line=dict(color=config_color(config), width=2), marker=dict(size=6),
                hovertemplate=f"{run}<br>step %{{x}}: %{{y:.4f}}<extra></extra>"))
            shown.add(config)
    fig.update_layout(template=TEMPLATE, width=COLUMN_WIDTH, height=400, xaxis_title="step", yaxis_title="training loss")
    return fig


# ---------------------------------------------------------------------------------------------
# Saving


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"figure name {name!r}: use lowercase letters, digits, '_' or '-' (LaTeX \\includegraphics-safe)")


def _write_static(items: list[tuple[go.Figure, Path]]) -> None:
    """Render PNG/SVG files in one Chromium session (kaleido starts one browser per call, ~3 s)."""
    if not items:
        return
    figs, files, scales, widths, heights = [], [], [], [], []
    for fig, path in items:
        figs.append(fig)
        files.append(path)
        scales.append(PNG_SCALE if path.suffix == ".png" else 1)
        widths.append(int(fig.layout.width or COLUMN_WIDTH))
        heights.append(int(fig.layout.height or 400))
    try:
        pio.write_images(figs, files, scale=scales, width=widths, height=heights)
    except RuntimeError as e:
        if "chrome" in str(e).lower():
            raise RuntimeError("static export needs Chrome or Chromium for kaleido: `apt-get install -y chromium` "
                               "(Debian's /usr/bin/chromium is found automatically) or set BROWSER_PATH to a Chrome "
                               "binary; formats=('html',) needs neither") from e
        raise


def _save_many(figs: dict[str, go.Figure], out_dir: str | Path, formats: Sequence[str]) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bad = set(formats) - {"png", "svg", "html", "pdf"}
    if bad:
        raise ValueError(f"unknown format(s) {sorted(bad)}; use png, svg, pdf or html")
    written, static = [], []
    for name, fig in figs.items():
        _check_name(name)
        for fmt in formats:
            path = out_dir / f"{name}.{fmt}"
            if fmt == "html":
                # one plotly.min.js next to the pages: they open offline without a 4 MB copy each
                fig.write_html(path, include_plotlyjs="directory", full_html=True)
            else:
                static.append((fig, path))
            written.append(path)
    _write_static(static)
    return written


def save_figure(fig: go.Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "svg", "html")) -> list[Path]:
    """Write ``out_dir/name.{png,svg,html}`` (PNG at scale 3); return the paths.

    ``name`` must be LaTeX-friendly (``fig_pmrr_by_config``). Static formats go through kaleido
    and Chromium (``BROWSER_PATH`` overrides where Chromium is found).
    """
    return _save_many({name: fig}, out_dir, formats)


FIGURE_NAMES = {"a": "fig_pmrr_by_config", "b": "fig_pmrr_vs_score", "c": "fig_per_query_pmrr",
                "d": "fig_synthesis_stats", "e": "fig_loss_curves"}


def make_all_figures(results_csv: str | Path, out_dir: str | Path, per_query_csv: str | Path | None = None,
                     runs_dir: str | Path | None = None, synthesis_path: str | Path | Sequence[str | Path] | None = None,
                     formats: Sequence[str] = ("png", "svg", "html")) -> list[Path]:
    """Rebuild every figure whose inputs exist; print a note for each one skipped.

    Example: only ``results_csv`` -> (a) and (b), plus (c) when the sibling
    ``<stem>_per_query.csv`` that ``evaluate`` writes exists (or ``per_query_csv`` is given);
    ``synthesis_path`` (one file, or several to compare backends) -> (d); ``runs_dir`` -> (e).
    Returns the written paths.
    """
    results = add_backbone(load_results(results_csv), runs_dir)
    published = load_published()
    if per_query_csv is None:
        # ``evaluate.append_results`` writes per-query scores next to the table: results_per_query.csv
        per_query_csv = Path(results_csv).with_name(f"{Path(results_csv).stem}_per_query.csv")
    figs: dict[str, go.Figure] = {}

    def absent(p):
        return p is None or not Path(p).exists()

    metrics = set(results["metric"])
    if metrics & {"p_mrr", "score"}:
        figs[FIGURE_NAMES["a"]] = fig_metrics_by_config(results, published=published)
    else:
        print(f"skipped {FIGURE_NAMES['a']}: results have neither p_mrr nor score")
    if {"p_mrr", "score"} <= metrics:
        figs[FIGURE_NAMES["b"]] = fig_tradeoff(results, published=published)
    else:
        print(f"skipped {FIGURE_NAMES['b']}: results need both p_mrr and score")
    if absent(per_query_csv):
        print(f"skipped {FIGURE_NAMES['c']}: no per-query file ({per_query_csv})")
    else:
        figs[FIGURE_NAMES["c"]] = fig_per_query(load_per_query(per_query_csv), results)
    synth = [] if synthesis_path is None else [synthesis_path] if isinstance(synthesis_path, (str, Path)) else list(synthesis_path)
    missing = [str(p) for p in synth if absent(p)]
    if not synth or missing:
        print(f"skipped {FIGURE_NAMES['d']}: no synthesis file ({', '.join(missing) or None})")
    else:
        figs[FIGURE_NAMES["d"]] = fig_synthesis_stats(load_synthesis_rows(synth))
    logs = None if absent(runs_dir) else load_train_logs(runs_dir)
    if logs is None or logs.empty:
        print(f"skipped {FIGURE_NAMES['e']}: no train_log.jsonl under {runs_dir}")
    else:
        figs[FIGURE_NAMES["e"]] = fig_loss_curves(logs)
    return _save_many(figs, out_dir, formats)


# ---------------------------------------------------------------------------------------------
# Example inputs (synthetic numbers for tests and the smoke notebook; never results)


def write_example_inputs(root: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write made-up inputs for every figure under ``root``: ``results.csv``, ``results_per_query.csv``,
    ``runs/`` (train logs) and ``synthesis.jsonl``. The model is called ``synthetic-example`` so
    a figure drawn from them says so; the numbers mean nothing.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    effect = {"base": (-4, 40), "ins-orig": (2, 45), "ins-dv": (6, 44), "all-orig": (1, 47), "all-dv": (7, 47)}
    datasets = ("robust04", "news21", "core17")
    res, pq = [], []
    for config, (pmrr, score) in effect.items():
        for s in (0, 1):
            run_id = f"example-{config}-s{s}"
            common = {"run_id": run_id, "model": "synthetic-example", "config": config, "seed": s,
                      "git_commit": "example", "timestamp": "2026-01-01T00:00:00Z"}
            for d in datasets:
                q = rng.normal(pmrr, 20, size=12).clip(-100, 100)
                for i, v in enumerate(q):
                    pq.append({"run_id": run_id, "dataset": d, "metric": "p_mrr", "query_id": f"{d}-{i}", "value": round(float(v), 3)})
                m = float(q.mean())
                res.append({**common, "dataset": d, "metric": "p_mrr", "value": m, "ci_low": m - 8, "ci_high": m + 8, "n_queries": len(q)})
            sc = score + float(rng.normal(0, 1))
            res.append({**common, "dataset": "followir", "metric": "score", "value": sc, "ci_low": sc - 3, "ci_high": sc + 3,
                        "n_queries": 36})
    cols = [*RESULT_COLUMNS, *OPTIONAL_RESULT_COLUMNS]
    pd.DataFrame(res)[cols].to_csv(root / "results.csv", index=False)
    pd.DataFrame(pq).to_csv(root / "results_per_query.csv", index=False)
    runs = root / "runs"
    for config in ("ins-orig", "ins-dv", "all-orig", "all-dv"):
        for s in (0, 1):
            d = runs / f"{config}-s{s}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "ifir_run.json").write_text(json.dumps({"mode": config, "config": {"seed": s, "base_model": "synthetic-example"}}))
            start = 3.0 + rng.normal(0, 0.1)
            lines = [{"step": t, "epoch": t / 40, "loss": float(start * math.exp(-t / 15) + 0.5 + rng.normal(0, 0.05)),
                      "learning_rate": 3e-5} for t in range(2, 42, 2)]
            (d / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    types = ("exclusion", "timeframe", "geography", "audience", "format")
    with open(root / "synthesis.jsonl", "w") as fh:
        for i in range(60):
            backend = ("template", "openai")[i % 2]
            status = rng.choice(["accepted", "declined", "rejected", "failed"], p=[0.7, 0.15, 0.1, 0.05])
            rev = " ".join(["word"] * int(rng.integers(8, 40))) if status in ("accepted", "rejected") else None
            fh.write(json.dumps({"key": f"s{i}#0", "seed_id": f"s{i}", "negative_index": 0, "backend": backend,
                                 "model": "example", "status": str(status), "reversal": rev,
                                 "instruction_type": types[i % len(types)],
                                 "verify_flip": bool(rng.random() < 0.8) if status == "accepted" else None}) + "\n")
    return {"root": root, "results": root / "results.csv", "per_query": root / "results_per_query.csv",
            "runs": runs, "synthesis": root / "synthesis.jsonl"}
