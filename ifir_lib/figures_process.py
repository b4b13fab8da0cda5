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
    mode_color,
    mode_label,
)
from .results import mode_order
from .summaries import synthesis_summary


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
        fig.add_annotation(
            text="no verification results",
            showarrow=False,
            xref="x4 domain",
            yref="y4 domain",
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
    fig.update_yaxes(title_text="% of rows", range=[0, 100], row=2, col=1)
    fig.update_yaxes(title_text="% verified", range=[0, 115], tickvals=[0, 25, 50, 75, 100], row=2, col=2)
    return fig


def fig_loss_curves(logs: pd.DataFrame) -> go.Figure:
    """(e) Training loss per step, one line per run coloured by its mode (seeds share a colour)."""
    if logs.empty:
        raise ValueError("no training log lines with a loss")
    fig = go.Figure()
    shown = set()
    for mode in mode_order(logs["mode"]):
        for run, g in logs[logs["mode"] == mode].groupby("run", sort=True):
            g = g.sort_values("step")
            fig.add_trace(
                go.Scatter(
                    x=g["step"],
                    y=g["loss"],
                    mode="lines+markers" if len(g) < 15 else "lines",
                    name=mode_label(mode),
                    legendgroup=mode,
                    showlegend=mode not in shown,
                    line=dict(color=mode_color(mode), width=2),
                    marker=dict(size=6),
                    hovertemplate=f"{run}<br>step %{{x}}: %{{y:.4f}}<extra></extra>",
                )
            )
            shown.add(mode)
    fig.update_layout(
        template=TEMPLATE, width=COLUMN_WIDTH, height=400, xaxis_title="step", yaxis_title="training loss"
    )
    return fig
