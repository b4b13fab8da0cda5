"""Paper figures: plotly Figures drawn from tidy DataFrames, and the files they are saved as.

Inputs are the tidy DataFrames of ``results`` (the results and per-query tables, train logs,
synthesis rows) and the published numbers of arXiv 2604.18845, Tables 1-2 (``load_published``).
Every figure uses the ``ifir`` template and one colour per mode (``style``); modes are compared
within a backbone. In reading order:

- result figures: (a) ``fig_metrics_by_mode`` p-MRR and Score per mode, the paper's values in
  their own panel; (b) ``fig_tradeoff`` p-MRR against Score; (c) ``fig_per_query`` the
  per-query distribution and bootstrap CIs;
- process figures, about how the training data and models came about: (d)
  ``fig_synthesis_stats`` synthesis outcomes per instruction type and backend; (e)
  ``fig_loss_curves`` training loss;
- saving: ``save_figure`` writes PNG (scale 3), SVG, PDF and HTML files under LaTeX-safe names.
  Static formats go through kaleido and a Chrome (``make setup`` provides one; ``BROWSER_PATH``
  overrides where it is found); HTML pages share one ``plotly.min.js`` and need neither;
- rebuilding: ``make_all_figures`` redraws every figure whose input files exist.

Not handled here: metrics or their CIs (``evaluation``, ``stats``), the numbers behind each
figure (``summaries``), table I/O (``results``), figure captions (they belong in the paper's
LaTeX), and Chrome itself (set-up installs it; HTML output works without it).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..core.errors import FigureExportError
from ..core.progress import progress
from .results import (
    AGGREGATE_DATASETS,
    add_backbone,
    load_per_query,
    load_published,
    load_results,
    load_synthesis_rows,
    load_train_logs,
    mode_order,
)
from .style import (
    BASE_FONT,
    COLUMN_WIDTH,
    METRIC_LABELS,
    OTHER_COLOR,
    PAGE_WIDTH,
    PAPER_BACKBONES,
    PNG_SCALE,
    PUBLISHED_METRICS,
    SMALL_FONT,
    STATUS_COLORS,
    TEMPLATE,
    _facet_layout,
    _legend_above_titles,
    _legend_marker,
    _rank,
    _short_model,
    mode_color,
    mode_dash,
    mode_label,
)
from .summaries import per_query_summary, smoothed_losses, summarize, synthesis_summary

TRADEOFF_HEIGHT = {1: 500, 2: 900}  # px, by number of panels (ours; ours over the paper's)
BACKBONE_SYMBOLS = ("circle", "triangle-up", "hexagon", "star", "cross")  # our backbones in (b)
INK = "#222222"  # error bars, outlines, the paper's markers
ZERO_LINE = dict(color="#888888", width=1)

# ---- pieces the figures share --------------------------------------------------------------------


def _paper_values(published: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    if published is None or metric not in PUBLISHED_METRICS:
        return pd.DataFrame(columns=["backbone", "mode", "value"])
    p = published[published["metric"] == PUBLISHED_METRICS[metric]]
    return p[p["backbone"].isin(PAPER_BACKBONES)][["backbone", "mode", "value"]]


def _published_or_default(published):
    if isinstance(published, str) and published == "default":
        return load_published()
    return published


def _ours_title(metric: str, prefix: str = "") -> str:
    """Axis title for our values: ``'p-MRR (×100)'``; ``prefix='per-query '`` -> ``'per-query p-MRR (×100)'``."""
    return f"{prefix}{METRIC_LABELS.get(metric, metric)} (×100)"


def _paper_title(metric: str) -> str:
    """Axis title for the paper's values: ``'paper: FollowIR Score'``."""
    return f"paper: FollowIR {METRIC_LABELS.get(metric, metric)}"


def _error_bars(plus, minus, color: str = INK, thickness: float = 1.5, width: int = 3) -> dict:
    """Asymmetric error bars (``error_x``/``error_y``): ``plus`` above, ``minus`` below each point."""
    return dict(
        type="data",
        symmetric=False,
        array=plus,
        arrayminus=minus,
        color=color,
        thickness=thickness,
        width=width,
    )


def _mode_axis(fig: go.Figure, modes: list[str], row: int, col: int, pad: float = 0, **kw) -> None:
    """A numeric x axis with one slot per mode (``modes[i]`` at ``x = i``), labelled with the
    modes' names, ``pad`` empty slots' worth of room either side."""
    fig.update_xaxes(
        tickvals=list(range(len(modes))),
        ticktext=[mode_label(k) for k in modes],
        range=[-0.6 - pad, len(modes) - 0.4 + pad],
        row=row,
        col=col,
        **kw,
    )


def _add_paper_legend(fig: go.Figure, backbones: Collection[str]) -> None:
    """One open legend marker per paper backbone in ``backbones``, in ``PAPER_BACKBONES`` order."""
    for bb, (label, symbol) in PAPER_BACKBONES.items():
        if bb in backbones:
            fig.add_trace(_legend_marker(f"{label} (paper)", symbol, INK, open_=True, group=bb))


# ---- result figures: (a) metrics by mode ---------------------------------------------------------


def _panel_sets(results: pd.DataFrame, dataset: str | None) -> list[str]:
    """The evaluation sets that get a column in (a): ``dataset`` alone when given; else the
    aggregate rows (``followir``, ``mean``...) when there are any, as they stand for their
    collections; else every set. Example: ``followir, core17, robust04`` -> ``[followir]``."""
    sets = [dataset] if dataset is not None else list(dict.fromkeys(results["dataset"].astype(str)))
    return [d for d in sets if d.lower() in AGGREGATE_DATASETS] or sets


def _mode_bars(
    results: pd.DataFrame, metric: str, backbone: str, dset: str, xpos: dict, error: str
) -> go.Bar:
    """(a) One panel's bars: a mode's mean over seeds, with its error bar (``summarize``)."""
    # an aggregate panel stands for its collections: a metric without an aggregate row
    # (p-MRR is often stored per collection) is their mean (``per_run``)
    agg = dset.lower() in AGGREGATE_DATASETS
    sm = summarize(results if agg else results[results["dataset"].astype(str) == dset], metric, None, error)
    sm = sm[sm["backbone"] == backbone]
    return go.Bar(
        x=[xpos[k] for k in sm["mode"]],
        y=sm["mean"],
        width=0.62,
        showlegend=False,
        marker=dict(color=[mode_color(k) for k in sm["mode"]], line=dict(width=0)),
        error_y=_error_bars(sm["err_plus"], sm["err_minus"], width=5),
        customdata=np.stack([sm["n_runs"], sm["error"]], axis=-1) if len(sm) else None,
        hovertemplate="%{y:.2f} (n seeds %{customdata[0]}, bar: %{customdata[1]})<extra>"
        + f"{_short_model(backbone)} · {dset}</extra>",
    )


def _add_paper_markers(fig: go.Figure, paper: pd.DataFrame, xpos: dict, row: int, col: int) -> None:
    """(a) The paper's values of one metric: an open marker per mode, shape = backbone, the
    backbones side by side within the mode's slot."""
    offsets = {"gte-multilingual-mlm-base": -0.12, "bge-m3-retromae": 0.12}
    for bb, g in paper.groupby("backbone"):
        g = g[g["mode"].isin(xpos)]
        fig.add_trace(
            go.Scatter(
                x=[xpos[k] + offsets[bb] for k in g["mode"]],
                y=g["value"],
                mode="markers",
                showlegend=False,
                legendgroup=bb,
                marker=dict(
                    symbol=PAPER_BACKBONES[bb][1], size=11, color="white", line=dict(color=INK, width=2)
                ),
                hovertemplate="%{y:.2f}<extra>paper (FollowIR), " + bb + "</extra>",
            ),
            row=row,
            col=col,
        )


def fig_metrics_by_mode(
    results: pd.DataFrame,
    metrics: Sequence[str] = ("p_mrr", "score"),
    published: pd.DataFrame | str | None = "default",
    dataset: str | None = None,
    error: str = "auto",
) -> go.Figure:
    """(a) One row per metric; one column per backbone and evaluation set, each bar a mode (mean
    over seeds, error bar per ``summarize``); then, on its own y axis, a column with the paper's
    Table 1/2 FollowIR values (diamond = gte-multilingual-mlm-base, square = bge-m3-retromae).

    The paper's backbones and benchmark differ from ours, and its Score is FollowIR's (about 20)
    where ours is the bundled set's MAP (about 80): the separate panel shows the published
    direction of each mode without putting the two scales on one axis. ``dataset`` keeps one set;
    by default an aggregate row (``followir``, ``mean``...) stands for its collections.
    """
    published = _published_or_default(published)
    metrics = [m for m in metrics if (results["metric"] == m).any()]
    if not metrics:
        raise ValueError("none of the requested metrics is in the results table")
    results = add_backbone(results)
    panels = [(b, d) for b in dict.fromkeys(results["backbone"]) for d in _panel_sets(results, dataset)]
    first = _paper_values(published, metrics[0])  # its modes get slots, its backbones a legend
    has_paper = any(not _paper_values(published, m).empty for m in metrics)
    modes = mode_order(set(results["mode"]) | set(first["mode"]))
    xpos = {c: i for i, c in enumerate(modes)}
    titles = [f"{_short_model(b)} · {d}" for b, d in panels] + (["paper · FollowIR"] if has_paper else [])
    n_cols = len(titles)
    fig = make_subplots(
        rows=len(metrics),
        cols=n_cols,
        shared_xaxes=True,
        vertical_spacing=0.08,
        horizontal_spacing=0.07,
        column_titles=titles,
    )
    for r, metric in enumerate(metrics, 1):
        for c, (backbone, dset) in enumerate(panels, 1):
            fig.add_trace(_mode_bars(results, metric, backbone, dset, xpos, error), row=r, col=c)
            fig.update_yaxes(title_text=_ours_title(metric) if c == 1 else None, row=r, col=c)
        if has_paper:
            _add_paper_markers(fig, _paper_values(published, metric), xpos, row=r, col=n_cols)
            # the paper's axis on the right, clear of our panels
            fig.update_yaxes(title_text=_paper_title(metric), side="right", row=r, col=n_cols)
        for c in range(1, n_cols + 1):
            _mode_axis(fig, modes, row=r, col=c)
        if metric == "p_mrr":
            fig.add_hline(y=0, line=ZERO_LINE, row=r, col="all")
    # bars are ours; only the paper's markers need a legend (a grey "ours" swatch read as Base)
    _add_paper_legend(fig, set(first["backbone"]) if has_paper else ())
    fig.update_layout(
        template=TEMPLATE,
        width=min(PAGE_WIDTH, COLUMN_WIDTH * n_cols),
        height=120 + 300 * len(metrics),
    )
    _facet_layout(fig, n_cols)
    return fig


# ---- result figures: (b) p-MRR against Score -----------------------------------------------------


def _add_tradeoff_ours(fig: go.Figure, s: pd.DataFrame, backbones: list[str]) -> None:
    """(b) Our points, in the top panel: colour = mode, shape = backbone, error bars both ways."""
    for i, backbone in enumerate(backbones):
        for _, r in s[s["backbone"] == backbone].iterrows():
            color = mode_color(r["mode"])
            fig.add_trace(
                go.Scatter(
                    x=[r["mean_x"]],
                    y=[r["mean_y"]],
                    mode="markers",
                    name=mode_label(r["mode"]),
                    legendgroup=r["mode"],
                    showlegend=i == 0,
                    legendrank=_rank(r["mode"]),
                    marker=dict(
                        symbol=BACKBONE_SYMBOLS[i % len(BACKBONE_SYMBOLS)],
                        size=13,
                        color=color,
                        line=dict(color=INK, width=1),
                    ),
                    error_x=_error_bars([r["err_plus_x"]], [r["err_minus_x"]], color),
                    error_y=_error_bars([r["err_plus_y"]], [r["err_minus_y"]], color),
                    hovertemplate=f"{_short_model(backbone)}, {mode_label(r['mode'])}<br>%{{x:.2f}}, %{{y:.2f}}<extra></extra>",
                ),
                row=1,
                col=1,
            )


def _add_tradeoff_paper(fig: go.Figure, paper: pd.DataFrame) -> None:
    """(b) The paper's points, in the bottom panel: open markers, outline = mode, shape = backbone."""
    for bb, g in paper.groupby("backbone"):
        label, symbol = PAPER_BACKBONES[bb]
        fig.add_trace(
            go.Scatter(
                x=g["value_x"],
                y=g["value_y"],
                mode="markers",
                showlegend=False,
                legendgroup=bb,
                marker=dict(
                    symbol=symbol,
                    size=12,
                    color="white",
                    line=dict(color=[mode_color(c) for c in g["mode"]], width=2.5),
                ),
                text=[mode_label(c) for c in g["mode"]],
                hovertemplate="paper, " + label + ", %{text}<br>%{x:.2f}, %{y:.2f}<extra></extra>",
            ),
            row=2,
            col=1,
        )


def _add_tradeoff_legend(fig: go.Figure, s: pd.DataFrame, paper: pd.DataFrame, backbones: list[str]) -> None:
    """(b) Legend entries no drawn point provides: modes only the paper has, our backbones'
    shapes (when there are several), the paper's backbones."""
    # paper points are coloured by mode too: name every mode colour, drawn by us or not
    for mode in mode_order(set(paper["mode"]) - set(s["mode"])):
        fig.add_trace(
            _legend_marker(mode_label(mode), "circle", mode_color(mode), group=mode, rank=_rank(mode))
        )
    if len(backbones) > 1:
        for i, backbone in enumerate(backbones):
            symbol = BACKBONE_SYMBOLS[i % len(BACKBONE_SYMBOLS)]
            fig.add_trace(_legend_marker(_short_model(backbone), symbol, "#666666"))
    _add_paper_legend(fig, set(paper["backbone"]))


def fig_tradeoff(
    results: pd.DataFrame,
    published: pd.DataFrame | str | None = "default",
    dataset: str | None = None,
    x_metric: str = "score",
    y_metric: str = "p_mrr",
    error: str = "auto",
) -> go.Figure:
    """(b) p-MRR against Score: one filled point per (backbone, mode) with error bars on both
    axes; below it, in its own panel, the paper's Table 1/2 FollowIR values as open markers in
    the same colours (shape = backbone).

    The two panels have their own axes for the reason ``fig_metrics_by_mode`` gives: the
    paper's Score is FollowIR's (about 20), ours the bundled set's MAP (about 80), and one axis
    for both would squeeze our points into a corner.
    """
    published = _published_or_default(published)
    sx, sy = summarize(results, x_metric, dataset, error), summarize(results, y_metric, dataset, error)
    s = sx.merge(sy, on=["backbone", "mode"], suffixes=("_x", "_y"))
    if s.empty:
        raise ValueError(f"no run has both {x_metric} and {y_metric}")
    backbones = list(dict.fromkeys(s["backbone"]))
    px_, py_ = _paper_values(published, x_metric), _paper_values(published, y_metric)
    paper = px_.merge(py_, on=["backbone", "mode"], suffixes=("_x", "_y"))
    sets = list(dict.fromkeys(results["dataset"].astype(str)))
    where = dataset or (sets[0] if len(sets) == 1 else "mean over sets")
    ours_title = f"{', '.join(_short_model(b) for b in backbones)} · {where}"
    n_rows = 2 if len(paper) else 1
    fig = make_subplots(
        rows=n_rows,
        cols=1,
        vertical_spacing=0.16,
        subplot_titles=(ours_title, "paper · FollowIR")[:n_rows],
    )
    fig.add_hline(y=0, line=ZERO_LINE, row="all", col=1)
    _add_tradeoff_ours(fig, s, backbones)
    _add_tradeoff_paper(fig, paper)
    _add_tradeoff_legend(fig, s, paper, backbones)
    fig.update_xaxes(title_text=_ours_title(x_metric), row=1, col=1)
    fig.update_yaxes(title_text=_ours_title(y_metric), row=1, col=1)
    if n_rows == 2:
        fig.update_xaxes(title_text=_paper_title(x_metric), row=2, col=1)
        fig.update_yaxes(title_text=_paper_title(y_metric), row=2, col=1)
    fig.update_layout(template=TEMPLATE, width=COLUMN_WIDTH, height=TRADEOFF_HEIGHT[n_rows])
    if n_rows == 2:  # legend at the top of the canvas, clear of the panel title (4 rows of it)
        _legend_above_titles(fig, 175)
    return fig


# ---- result figures: (c) per query ---------------------------------------------------------------


def _query_box(values: pd.Series, mode: str, x: int) -> go.Box:
    """(c) One mode's per-query values: a box, and every query as a jittered dot."""
    return go.Box(
        y=values,
        x=[x] * len(values),
        name=mode_label(mode),
        showlegend=False,
        marker=dict(color=mode_color(mode), size=5, opacity=0.6),
        line=dict(color=mode_color(mode), width=1.5),
        fillcolor="rgba(255,255,255,0)",
        boxpoints="all",
        jitter=0.5,
        pointpos=0,
        width=0.6,
        hoveron="points",
    )


def _ci_markers(cis: pd.DataFrame, xpos: dict, showlegend: bool) -> go.Scatter:
    """(c) Each mode's mean and its bootstrap CI: black diamonds with whiskers, modes in paper order."""
    cm = cis.set_index("mode").loc[mode_order(cis["mode"])].reset_index()
    return go.Scatter(
        x=[xpos[k] for k in cm["mode"]],
        y=cm["mean"],
        mode="markers",
        showlegend=showlegend,
        name="mean, 95% bootstrap CI",
        legendgroup="ci",
        marker=dict(symbol="diamond", size=11, color=INK, line=dict(color="white", width=1)),
        error_y=_error_bars(cm["ci_high"] - cm["mean"], cm["mean"] - cm["ci_low"], thickness=2.5, width=7),
        customdata=cm["n"],
        hovertemplate="mean %{y:.2f} over %{customdata} queries<extra></extra>",
    )


def fig_per_query(
    per_query: pd.DataFrame, results: pd.DataFrame, metric: str = "p_mrr", n_boot: int = 2000, seed: int = 0
) -> go.Figure:
    """(c) Per-query distribution per mode (box + every query as a dot, averaged over seeds),
    with the mean and its percentile-bootstrap 95% CI (black diamond and whiskers), both
    stratified by dataset (``per_query_summary``)."""
    points, cis = per_query_summary(per_query, results, metric, n_boot, seed)
    if points.empty:
        raise ValueError(f"no per-query {metric} values match a run in the results table")
    backbones = list(dict.fromkeys(points["backbone"]))
    fig = make_subplots(
        rows=1,
        cols=len(backbones),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        column_titles=[_short_model(m) for m in backbones] if len(backbones) > 1 else None,
    )
    modes = mode_order(points["mode"])
    xpos = {k: i for i, k in enumerate(modes)}
    # numeric x with at least 4 slots: one mode alone would otherwise get a page-wide box
    pad = max(0, 4 - len(modes)) / 2
    for c, backbone in enumerate(backbones, 1):
        pm = points[points["backbone"] == backbone]
        for mode in mode_order(pm["mode"]):
            fig.add_trace(_query_box(pm[pm["mode"] == mode]["value"], mode, xpos[mode]), row=1, col=c)
        fig.add_trace(_ci_markers(cis[cis["backbone"] == backbone], xpos, showlegend=c == 1), row=1, col=c)
        # six labels touch at column width
        _mode_axis(fig, modes, row=1, col=c, pad=pad, tickangle=30 if len(modes) * len(backbones) > 5 else 0)
    if metric == "p_mrr":
        fig.add_hline(y=0, line=ZERO_LINE)
    fig.update_yaxes(title_text=_ours_title(metric, prefix="per-query "), row=1, col=1)
    fig.update_layout(
        template=TEMPLATE, width=min(PAGE_WIDTH, COLUMN_WIDTH * len(backbones)), height=440, boxmode="overlay"
    )
    _facet_layout(fig, len(backbones))
    return fig


# ---- process figures: (d) synthesis outcomes -----------------------------------------------------


def _status_order(statuses: Collection[str]) -> list[str]:
    """The statuses present, known ones in ``STATUS_COLORS`` order, then any others sorted.
    Example: ``{'failed', 'zzz', 'accepted', 'odd'}`` -> ``['accepted', 'failed', 'odd', 'zzz']``."""
    present = set(statuses)
    return [s for s in STATUS_COLORS if s in present] + sorted(present - set(STATUS_COLORS))


def _add_status_bars(fig: go.Figure, by_type: pd.DataFrame, by_backend: pd.DataFrame) -> None:
    """(d) Per status, stacked: seed rows per instruction type (top left) and the share of rows
    per backend (bottom left, labelled when 8% or more); one legend entry per status."""
    types = sorted(set(by_type["instruction_type"]))
    for st in _status_order(by_type["status"]):
        color = STATUS_COLORS.get(st, OTHER_COLOR)
        n = by_type[by_type["status"] == st].set_index("instruction_type")["n"].reindex(types, fill_value=0)
        fig.add_trace(
            go.Bar(y=types, x=n, orientation="h", name=st, legendgroup=st, marker_color=color), row=1, col=1
        )
        b = by_backend[by_backend["status"] == st]
        fig.add_trace(
            go.Bar(
                x=b["backend"],
                y=100 * b["share"],
                name=st,
                legendgroup=st,
                showlegend=False,
                marker_color=color,
                text=[f"{v:.0f}%" if v >= 8 else "" for v in 100 * b["share"]],
                textposition="inside",
                insidetextanchor="middle",
                textfont=dict(size=SMALL_FONT - 2, color="white"),
            ),
            row=2,
            col=1,
        )


def _add_panel_note(fig: go.Figure, text: str, row: int, col: int) -> None:
    """An empty panel: no axes, ``text`` in its middle."""
    # plotly.js draws no axes for a panel without a trace, and an annotation that refers to
    # undrawn axes falls back to the first panel: an invisible point keeps this panel's axes
    fig.add_trace(
        go.Scatter(x=[0], y=[0], mode="markers", opacity=0, showlegend=False, hoverinfo="skip"), row, col
    )
    panel = fig.get_subplot(row, col)
    fig.update_xaxes(visible=False, row=row, col=col)
    fig.update_yaxes(visible=False, row=row, col=col)
    fig.add_annotation(
        text=text,
        showarrow=False,
        xref=f"{panel.xaxis.plotly_name.replace('axis', '')} domain",
        yref=f"{panel.yaxis.plotly_name.replace('axis', '')} domain",
        x=0.5,
        y=0.5,
        font=dict(size=SMALL_FONT, color="#666666"),
    )


def _add_verified(fig: go.Figure, verify: pd.DataFrame) -> None:
    """(d) Bottom right: the share of verified flips per backend, ``passed/n`` over each bar."""
    if not len(verify):
        _add_panel_note(fig, "no verification results", row=2, col=2)
        return
    fig.add_trace(
        go.Bar(
            x=verify["backend"],
            y=100 * verify["rate"],
            showlegend=False,
            marker_color=STATUS_COLORS["accepted"],
            text=[f"{p}/{n}" for p, n in zip(verify["passed"], verify["n"])],
            textposition="outside",
            textfont=dict(size=SMALL_FONT - 2),
            cliponaxis=False,
        ),
        row=2,
        col=2,
    )


def fig_synthesis_stats(rows: list[dict] | pd.DataFrame) -> go.Figure:
    """(d) Four panels: outcome per instruction type, reversal lengths, outcome shares per
    backend (declined and rejected rates), verification pass rate per backend. Two columns wide."""
    t = synthesis_summary(rows)
    fig = make_subplots(
        rows=2,
        cols=2,
        vertical_spacing=0.2,
        horizontal_spacing=0.2,
        subplot_titles=("Instruction types", "Reversal length", "Outcome by backend", "Verified flips"),
    )
    # subplot titles: lift them off full-height bars (the 100% stacks touch the panel top)
    fig.update_annotations(font=dict(size=BASE_FONT), yshift=10)
    _add_status_bars(fig, t["by_type"], t["by_backend"])
    if len(t["lengths"]):
        words = t["lengths"]["words"]
        fig.add_trace(
            go.Histogram(
                x=words,
                showlegend=False,
                marker_color="#666666",
                xbins=dict(size=max(1, int(np.ceil(words.max() / 15)))),
            ),
            row=1,
            col=2,
        )
    _add_verified(fig, t["verify"])
    fig.update_layout(
        barmode="stack",
        template=TEMPLATE,
        width=PAGE_WIDTH,
        height=760,
        legend=dict(y=1.07),
        margin=dict(t=70),
    )
    fig.update_xaxes(title_text="seed rows", row=1, col=1)
    fig.update_xaxes(title_text="words in reversal", row=1, col=2)
    fig.update_yaxes(title_text="reversals", row=1, col=2)
    fig.update_xaxes(title_text="synthesis backend", row=2, col=1)
    fig.update_xaxes(title_text="synthesis backend", row=2, col=2)
    fig.update_yaxes(title_text="% of rows", range=[0, 100], row=2, col=1)
    fig.update_yaxes(title_text="% verified", range=[0, 115], tickvals=[0, 25, 50, 75, 100], row=2, col=2)
    return fig


# ---- process figures: (e) loss curves ------------------------------------------------------------


def fig_loss_curves(logs: pd.DataFrame, window: int | None = None) -> go.Figure:
    """(e) Training loss per step: each run's raw loss as a faint thin line, and per mode the
    loss averaged over the mode's runs and smoothed by a centred rolling mean of ``window``
    logged steps (``summaries.smoothed_losses``; None: about a fifth of the run) as a bold line.
    No markers; modes differ by colour and dash (``mode_dash``), so greyscale print still works."""
    if logs.empty:
        raise ValueError("no training log lines with a loss")
    fig = go.Figure()
    for mode in mode_order(logs["mode"]):
        for run, g in logs[logs["mode"] == mode].groupby("run", sort=True):
            g = g.sort_values("step")
            fig.add_trace(
                go.Scatter(
                    x=g["step"],
                    y=g["loss"],
                    mode="lines",
                    name=f"{mode_label(mode)} (raw)",
                    legendgroup=mode,
                    showlegend=False,
                    opacity=0.25,
                    line=dict(color=mode_color(mode), width=1),
                    hovertemplate=f"{run}<br>step %{{x}}: %{{y:.4f}}<extra></extra>",
                )
            )
    smooth = smoothed_losses(logs, window)
    for mode, g in smooth.groupby("mode", sort=False):
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["smoothed"],
                mode="lines",
                name=mode_label(mode),
                legendgroup=mode,
                legendrank=_rank(mode),
                line=dict(color=mode_color(mode), width=3, dash=mode_dash(mode)),
                customdata=g[["n_runs", "window"]],
                hovertemplate=f"{mode_label(mode)}<br>step %{{x}}: %{{y:.4f}}"
                + " (mean of %{customdata[0]} runs, rolling over %{customdata[1]} points)<extra></extra>",
            )
        )
    windows = sorted(set(smooth["window"]))
    what = f"{'/'.join(map(str, windows))}-point rolling mean"
    fig.update_layout(
        template=TEMPLATE,
        width=COLUMN_WIDTH,
        height=440,
        xaxis_title="training step",
        yaxis_title="training loss",
        # 60 px legend samples, so that each mode's dash pattern shows
        legend=dict(
            title=dict(text=f"bold: {what}; faint: each run", side="top"),
            title_font_size=SMALL_FONT,
            itemwidth=60,
        ),
        yaxis_rangemode="tozero",
    )
    return fig


# ---- saving: PNG/SVG/PDF through kaleido and Chrome, HTML without --------------------------------

_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(
            f"figure name {name!r}: use lowercase letters, digits, '_' or '-' (LaTeX \\includegraphics-safe)"
        )


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
    # one kaleido call renders them all, so the bar moves once, at the end; it shows what is running
    try:
        with progress(total=len(files), desc="export PNG/SVG", unit="file", delay=0) as bar:
            pio.write_images(figs, files, scale=scales, width=widths, height=heights)
            bar.update(len(files))
    except RuntimeError as e:
        if "chrome" in str(e).lower():
            raise FigureExportError(
                "static export needs Chrome or Chromium for kaleido: `apt-get install -y chromium` "
                "(Debian's /usr/bin/chromium is found automatically) or set BROWSER_PATH to a Chrome "
                "binary; formats=('html',) needs neither"
            ) from e
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


def save_figure(
    fig: go.Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "svg", "html")
) -> list[Path]:
    """Write ``out_dir/name.{png,svg,html}`` (PNG at scale 3); return the paths.

    ``name`` must be LaTeX-friendly (``fig_pmrr_by_config``). Static formats go through kaleido
    and Chromium (``BROWSER_PATH`` overrides where Chromium is found).
    """
    return _save_many({name: fig}, out_dir, formats)


# ---- rebuilding every figure from files ----------------------------------------------------------

FIGURE_NAMES = {
    "a": "fig_pmrr_by_config",
    "b": "fig_pmrr_vs_score",
    "c": "fig_per_query_pmrr",
    "d": "fig_synthesis_stats",
    "e": "fig_loss_curves",
}


def make_all_figures(
    results_csv: str | Path,
    out_dir: str | Path,
    per_query_csv: str | Path | None = None,
    runs_dir: str | Path | None = None,
    synthesis_path: str | Path | Sequence[str | Path] | None = None,
    formats: Sequence[str] = ("png", "svg", "html"),
) -> list[Path]:
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
        figs[FIGURE_NAMES["a"]] = fig_metrics_by_mode(results, published=published)
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
    synth = (
        []
        if synthesis_path is None
        else [synthesis_path]
        if isinstance(synthesis_path, (str, Path))
        else list(synthesis_path)
    )
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
