"""Figures about the process rather than the results: synthesis outcomes (d) and training loss (e).

Same style as ``figures`` (``figure_style``). Not handled here: result figures (``figures``),
saving (``figure_export``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figure_style import (
    BASE_FONT,
    COLUMN_WIDTH,
    OTHER_COLOR,
    PAGE_WIDTH,
    SMALL_FONT,
    STATUS_COLORS,
    TEMPLATE,
    _rank,
    mode_color,
    mode_dash,
    mode_label,
)
from .results import mode_order
from .summaries import smoothed_losses, synthesis_summary


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
    statuses = [s for s in STATUS_COLORS if s in set(t["by_type"]["status"])] + sorted(
        set(t["by_type"]["status"]) - set(STATUS_COLORS)
    )
    types = sorted(set(t["by_type"]["instruction_type"]))
    for st in statuses:
        n = (
            t["by_type"][t["by_type"]["status"] == st]
            .set_index("instruction_type")["n"]
            .reindex(types, fill_value=0)
        )
        fig.add_trace(
            go.Bar(
                y=types,
                x=n,
                orientation="h",
                name=st,
                legendgroup=st,
                marker_color=STATUS_COLORS.get(st, OTHER_COLOR),
            ),
            row=1,
            col=1,
        )
        b = t["by_backend"][t["by_backend"]["status"] == st]
        fig.add_trace(
            go.Bar(
                x=b["backend"],
                y=100 * b["share"],
                name=st,
                legendgroup=st,
                showlegend=False,
                marker_color=STATUS_COLORS.get(st, OTHER_COLOR),
                text=[f"{v:.0f}%" if v >= 8 else "" for v in 100 * b["share"]],
                textposition="inside",
                insidetextanchor="middle",
                textfont=dict(size=SMALL_FONT - 2, color="white"),
            ),
            row=2,
            col=1,
        )
    if len(t["lengths"]):
        fig.add_trace(
            go.Histogram(
                x=t["lengths"]["words"],
                showlegend=False,
                marker_color="#666666",
                xbins=dict(size=max(1, int(np.ceil(t["lengths"]["words"].max() / 15)))),
            ),
            row=1,
            col=2,
        )
    if len(t["verify"]):
        v = t["verify"]
        fig.add_trace(
            go.Bar(
                x=v["backend"],
                y=100 * v["rate"],
                showlegend=False,
                marker_color=STATUS_COLORS["accepted"],
                text=[f"{p}/{n}" for p, n in zip(v["passed"], v["n"])],
                textposition="outside",
                textfont=dict(size=SMALL_FONT - 2),
                cliponaxis=False,
            ),
            row=2,
            col=2,
        )
    else:
        # plotly.js draws no axes for a panel without a trace, and an annotation that refers to
        # undrawn axes falls back to the first panel: an invisible point keeps this panel's axes
        fig.add_trace(
            go.Scatter(x=[0], y=[0], mode="markers", opacity=0, showlegend=False, hoverinfo="skip"), 2, 2
        )
        panel = fig.get_subplot(2, 2)
        fig.update_xaxes(visible=False, row=2, col=2)
        fig.update_yaxes(visible=False, row=2, col=2)
        fig.add_annotation(
            text="no verification results",
            showarrow=False,
            xref=f"{panel.xaxis.plotly_name.replace('axis', '')} domain",
            yref=f"{panel.yaxis.plotly_name.replace('axis', '')} domain",
            x=0.5,
            y=0.5,
            font=dict(size=SMALL_FONT, color="#666666"),
        )
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
