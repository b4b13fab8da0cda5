"""Paper figures: plotly Figures drawn from tidy DataFrames, their captions, and the files they are saved as.

Inputs are the tidy DataFrames of ``results`` (the results and per-query tables, train logs,
synthesis rows) and the published numbers of arXiv 2604.18845, Tables 1-2 (``load_published``).
Every figure uses the ``ifir`` template, one colour per mode and labels in words (``style``:
"all-MiniLM-L6-v2", "bundled set v1", one named metric per axis); modes are compared within a
backbone. In reading order:

- result figures: (a) ``fig_metrics_by_mode`` p-MRR and Score per mode, the paper's values in
  their own panel; (b) ``fig_tradeoff`` p-MRR against Score; (c) ``fig_per_query`` the
  per-query distribution and bootstrap CIs. Error bars are 95% intervals when per-query scores
  are given (``summaries.summarize``: the experiment's two-stage bootstrap over runs and
  queries); every value axis, ours and the paper's, starts at 0;
- process figures, about how the training data and models came about: (d)
  ``fig_synthesis_stats`` synthesis outcomes per instruction type and backend; (e)
  ``fig_loss_curves`` training loss;
- captions: every figure function stores a one-paragraph caption (what is plotted, what the
  marks are, which interval) in ``fig.layout.meta``; ``caption_for`` returns it;
- saving: ``save_figure`` writes PDF and SVG (print), PNG (scale 3, screens) and HTML under
  LaTeX-safe names, and ``<name>.caption.txt`` beside them. Static formats go through kaleido
  and a Chrome (``make setup`` provides one; ``BROWSER_PATH`` overrides where it is found); HTML
  pages share one ``plotly.min.js`` and need neither;
- rebuilding: ``make_all_figures`` redraws every figure whose input files exist.

Not handled here: metrics or their CIs (``evaluation``, ``stats``), the numbers behind each
figure (``summaries``), table I/O (``results``), and Chrome itself (set-up installs it; HTML
output works without it).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..core.errors import FigureExportError
from ..core.progress import progress
from .results import (
    is_aggregate,
    load_per_query,
    load_published,
    load_results,
    load_synthesis_rows,
    load_train_logs,
    mode_order,
    panel_members,
    panel_sets,
    warn_once,
    warnings_once,
)
from .style import (
    BASE_FONT,
    COLUMN_WIDTH,
    OTHER_COLOR,
    PAGE_WIDTH,
    PAPER_BACKBONES,
    PAPER_SOURCE,
    PNG_SCALE,
    PUBLISHED_METRICS,
    SMALL_FONT,
    STATUS_COLORS,
    TEMPLATE,
    _facet_layout,
    _legend_above_titles,
    _legend_marker,
    _rank,
    axis_title,
    backbone_label,
    dataset_label,
    is_followir,
    metric_label,
    mode_color,
    mode_dash,
    mode_label,
    take_spare_styles,
)
from .summaries import (
    interval_phrase,
    labelled_backbones,
    metric_sets,
    per_query_summary,
    smoothed_losses,
    summarize,
    synthesis_summary,
)

log = logging.getLogger(__name__)
TRADEOFF_HEIGHT = {1: 500, 2: 900}  # px, by number of panels (ours; ours over the paper's)
BACKBONE_SYMBOLS = ("circle", "triangle-up", "hexagon", "star", "cross")  # our backbones in (b)
INK = "#222222"  # error bars, outlines, the paper's markers
ZERO_LINE = dict(color="#888888", width=1)
PAPER_PANEL = f"{PAPER_SOURCE}, FollowIR"  # the paper's panel title in (a) and (b)
PAPER_MARKERS = ", ".join(f"{symbol}: {name}" for name, (_, symbol) in PAPER_BACKBONES.items())
PAPER_WORDS = (
    f"as published by {PAPER_SOURCE}, Tables 1-2 (open markers; {PAPER_MARKERS}), on their own axes "
    "since the paper's backbones, benchmark and Score differ from ours; the paper gives no intervals"
)
FORMATS = ("pdf", "svg", "png", "html")  # print, print, screens, interactive (extra)

# ---- pieces the figures share --------------------------------------------------------------------


def _labelled(results: pd.DataFrame, runs_dir=None) -> pd.DataFrame:
    """``results`` with backbones in words (``summaries.labelled_backbones``); its custom modes take
    their colour and dash (``style.take_spare_styles``), the same in every figure after."""
    take_spare_styles(results["mode"])
    return labelled_backbones(results, runs_dir)


def _paper_values(published: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    if published is None or metric not in PUBLISHED_METRICS:
        return pd.DataFrame(columns=["backbone", "mode", "value"])
    p = published[published["metric"] == PUBLISHED_METRICS[metric]]
    return p[p["backbone"].isin(PAPER_BACKBONES)][["backbone", "mode", "value"]]


def _published_or_default(published):
    if isinstance(published, str) and published == "default":
        return load_published()
    return published


def _paper_title(metric: str) -> str:
    """Axis title for the paper's values, named on FollowIR: ``'FollowIR Score (×100)'`` (the
    panel's title names the source)."""
    return axis_title(metric, ["followir"])


def _zero_range(values, pad: float = 0.12) -> list[float]:
    """An axis range from 0 (lower for negative values) that holds ``values`` with ``pad`` of the
    span as room: ``[4, 8]`` -> ``[0, 8.96]``; ``[-2, 8]`` -> ``[-3.2, 9.2]``. Markers, unlike
    bars, do not pull plotly's axis to 0, and a cut axis makes small differences look large."""
    v = [float(x) for x in values if pd.notna(x)]
    lo, hi = min([0.0, *v]), max([0.0, *v])
    room = pad * ((hi - lo) or 1.0)
    return [lo - room if lo < 0 else 0.0, hi + room]


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
            fig.add_trace(_legend_marker(f"{label} (published)", symbol, INK, open_=True, group=bb))


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


def _set_phrase(sets: Sequence[str]) -> str:
    """Where a value comes from, in words: one set -> its label; FollowIR's collections -> 'FollowIR'
    (their mean is its aggregate); else ``'mean over bundled set v1, bundled set v2'``."""
    if len(sets) == 1:
        return dataset_label(sets[0])
    if sets and all(is_followir(s) for s in sets):
        return "FollowIR"
    return "mean over " + _and([dataset_label(s) for s in sets])


def _on(phrase: str) -> str:
    """``'FollowIR'`` -> ``'on FollowIR'``; ``'mean over A and B'`` -> ``'on the mean over A and B'``."""
    return f"on the {phrase}" if phrase.startswith("mean over") else f"on {phrase}"


def _panels_words(panels: Sequence[tuple[str, str]]) -> str:
    """``[(b, v1), (b, v2)]`` -> ``'b on bundled set v1 and bundled set v2'``: sets grouped by backbone."""
    by: dict[str, list[str]] = {}
    for backbone, dset in panels:
        by.setdefault(backbone, []).append(dataset_label(dset))
    return "; ".join(f"{b} on {_and(sets)}" for b, sets in by.items())


def _and(words: Sequence[str]) -> str:
    """``['a'] -> 'a'``, ``['a', 'b', 'c'] -> 'a, b and c'``."""
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _runs_words(summaries: Sequence[pd.DataFrame]) -> str:
    """How many runs each mode's mean averages: ``'2 runs per mode'``, or per mode when they
    differ, as a range when they differ between panels (``'Ins-DV 2-3 (by panel)'``: the largest
    alone overstated the panels with fewer)."""
    runs: dict[str, set[int]] = {}
    for sm in summaries:
        for mode, n in zip(sm["mode"], sm["n_runs"]):
            runs.setdefault(mode, set()).add(int(n))
    if len(set().union(*runs.values())) == 1:  # one count, every mode and panel
        (n,) = set().union(*runs.values())
        return f"{n} run{'s' if n > 1 else ''} per mode"

    def count(ns: set[int]) -> str:
        return str(min(ns)) if len(ns) == 1 else f"{min(ns)}-{max(ns)} (by panel)"

    return "runs per mode: " + ", ".join(f"{mode_label(m)} {count(runs[m])}" for m in mode_order(runs))


def _interval_words(parts: Sequence[tuple[str, pd.DataFrame]]) -> str:
    """The error bars of ``(what, summary)`` parts in one sentence, naming each kind of interval
    (``summaries.interval_phrase``) and, when kinds differ, where each is drawn: by mode when the
    kind depends on the mode alone (``'Error bars: 95% bootstrap CI over queries for Base; 95%
    two-stage ... for Ins-DV'``), else by part (``what``) when a kind covers whole parts (``'...
    for p-MRR; ... for FollowIR Score'``), else both (``'... for Ins-DV in p-MRR on core17 and every
    mode in news21'``); the scope is never empty. A summary with several backbones names them."""
    several = any("backbone" in sm.columns and sm["backbone"].nunique() > 1 for _, sm in parts)
    by: dict[str, dict[str, dict]] = {}  # phrase -> {what: {mode key: None}}, insertion-ordered
    modes_of: dict[str, dict] = {}  # what -> its mode keys
    for what, sm in parts:
        backbones = sm["backbone"] if several else [None] * len(sm)
        for kind, n, mode, bb in zip(sm["error"], sm["n_runs"], sm["mode"], backbones):
            modes_of.setdefault(what, {})[(bb, mode)] = None
            by.setdefault(interval_phrase(kind, n), {}).setdefault(what, {})[(bb, mode)] = None
    if len(by) <= 1:
        return f"Error bars: {next(iter(by))}." if by else "No error bars."
    items = [f"{phrase} for {_interval_scope(by, phrase, modes_of)}" for phrase in by]
    return "Error bars: " + "; ".join(items) + "."


def _mode_words(keys) -> str:
    """``[(None, 'base'), (None, 'ins-dv')]`` -> ``'Base and Ins-DV'``; with backbones ``'Base (b)'``."""
    backbones = list(dict.fromkeys(b for b, _ in keys))
    order = {m: i for i, m in enumerate(mode_order({m for _, m in keys}))}
    keys = sorted(keys, key=lambda k: (backbones.index(k[0]), order[k[1]]))
    return _and([mode_label(m) + (f" ({b})" if b is not None else "") for b, m in keys])


def _interval_scope(by: dict[str, dict[str, dict]], phrase: str, modes_of: dict[str, dict]) -> str:
    """Where the interval ``phrase`` is drawn, in words (``_interval_words``)."""
    mine = by[phrase]
    keys = {k for modes in mine.values() for k in modes}
    if all(
        not keys & {k for modes in other.values() for k in modes} for p, other in by.items() if p != phrase
    ):
        return _mode_words(keys)  # each mode has one kind wherever it is drawn
    whole = [w for w, modes in mine.items() if len(modes) == len(modes_of[w])]
    if len(whole) == len(mine):
        return _and(whole)  # each part has one kind for every mode: name the parts alone
    groups: dict[tuple, list[str]] = {}  # the modes of a part (none: all of them) -> parts
    for w, modes in mine.items():
        groups.setdefault(() if w in whole else tuple(modes), []).append(w)
    return " and ".join(
        f"{_mode_words(modes) if modes else 'every mode'} in {_and(ws)}" for modes, ws in groups.items()
    )


def _with_caption(fig: go.Figure, caption: str) -> go.Figure:
    """Store ``caption`` (one paragraph) with the figure, for ``caption_for`` and ``save_figure``."""
    fig.update_layout(meta=dict(caption=" ".join(caption.split())))
    return fig


# ---- result figures: (a) metrics by mode ---------------------------------------------------------


def _panel_sets(results: pd.DataFrame, dataset: str | None) -> list[str]:
    """The evaluation sets that get a column in (a): ``dataset`` alone when given; else every set,
    FollowIR's collections standing under their aggregate row when there is one
    (``results.panel_sets``). Example: ``followir, core17, followir_mini`` -> ``[followir,
    followir_mini]``."""
    return [dataset] if dataset is not None else panel_sets(results["dataset"].astype(str))


def _panel_data(frame: pd.DataFrame, dset: str, every) -> pd.DataFrame:
    """The rows of ``frame`` a panel of ``dset`` reads: its own, and an aggregate's collections
    (``results.panel_members``: a metric without an aggregate row is their mean)."""
    return frame[frame["dataset"].astype(str).isin(panel_members(dset, every))]


def _panel_summary(results, per_query, metric, backbone, dset, error, n_boot) -> pd.DataFrame:
    """(a) One panel's numbers: each mode's mean over runs and error bar (``summarize``)."""
    every = results["dataset"].astype(str).unique()
    part = _panel_data(results, dset, every)
    if per_query is not None:
        per_query = _panel_data(per_query, dset, every)
    sm = summarize(part, metric, None, error, per_query, n_boot)
    return sm[sm["backbone"] == backbone].reset_index(drop=True)


def _mode_bars(sm: pd.DataFrame, modes: list[str], where: str) -> go.Bar:
    """(a) One panel's bars: a mode's mean over runs, with its error bar, at its slot in ``modes``."""
    lo, hi = sm["mean"] - sm["err_minus"], sm["mean"] + sm["err_plus"]
    return go.Bar(
        x=[modes.index(k) for k in sm["mode"]],
        y=sm["mean"],
        width=0.62,
        showlegend=False,
        marker=dict(color=[mode_color(k) for k in sm["mode"]], line=dict(width=0)),
        error_y=_error_bars(sm["err_plus"], sm["err_minus"], width=5),
        hovertext=[
            f"{mode_label(m)}: {v:.2f} [{a:.2f}, {b:.2f}], mean of {n} run{'s' if n > 1 else ''}"
            for m, v, a, b, n in zip(sm["mode"], sm["mean"], lo, hi, sm["n_runs"])
        ],
        hovertemplate=f"%{{hovertext}}<extra>{where}</extra>",
    )


def _add_paper_markers(fig: go.Figure, paper: pd.DataFrame, modes: list[str], row: int, col: int) -> None:
    """(a) The paper's values of one metric: an open marker per mode, shape = backbone, the
    backbones side by side within the mode's slot."""
    offsets = {"gte-multilingual-mlm-base": -0.12, "bge-m3-retromae": 0.12}
    for bb, g in paper.groupby("backbone"):
        g = g[g["mode"].isin(modes)]
        fig.add_trace(
            go.Scatter(
                x=[modes.index(k) + offsets[bb] for k in g["mode"]],
                y=g["value"],
                mode="markers",
                showlegend=False,
                legendgroup=bb,
                marker=dict(
                    symbol=PAPER_BACKBONES[bb][1], size=11, color="white", line=dict(color=INK, width=2)
                ),
                hovertemplate=f"%{{y:.2f}}<extra>paper: {PAPER_SOURCE}, {PAPER_BACKBONES[bb][0]}</extra>",
            ),
            row=row,
            col=col,
        )


def _draw_ours(fig, sm: pd.DataFrame, row: int, col: int, where: str, title: str | None) -> list[str]:
    """(a) One of our panels: bars, mode axis (only modes with a value), y axis from 0; the modes drawn."""
    modes = mode_order(sm["mode"])
    if not modes:
        _add_panel_note(fig, "no values", row, col)
        return modes
    fig.add_trace(_mode_bars(sm, modes, where), row=row, col=col)
    _mode_axis(fig, modes, row=row, col=col)
    fig.update_yaxes(title_text=title, rangemode="tozero", row=row, col=col)
    return modes


def _draw_paper(fig, paper: pd.DataFrame, metric: str, row: int, col: int) -> list[str]:
    """(a) The paper's panel of one metric: its modes only, its own y axis (right) from 0."""
    modes = mode_order(paper["mode"])
    if not modes:
        _add_panel_note(fig, "not published", row, col)
        return modes
    _add_paper_markers(fig, paper, modes, row=row, col=col)
    _mode_axis(fig, modes, row=row, col=col)
    # the paper's axis on the right, clear of our panels; from 0, as ours: its ~20 FollowIR Score
    # on an axis from 19.5 made differences of 1 point look large
    fig.update_yaxes(
        title_text=_paper_title(metric), side="right", range=_zero_range(paper["value"]), row=row, col=col
    )
    return modes


def _hide_repeated_ticks(fig: go.Figure, drawn: dict[tuple[int, int], list[str]], n_rows: int) -> None:
    """Mode names once per column, at the bottom, where the panel below shows the same modes."""
    for (r, c), modes in drawn.items():
        if r < n_rows and modes and drawn.get((r + 1, c)) == modes:
            fig.update_xaxes(showticklabels=False, row=r, col=c)


def _panel_name(name: str, panel: tuple[str, str], panels, n_metrics: int) -> str:
    """(a) A panel in words, one name per panel so the caption can tell error bars apart by
    panel: its metric (when several), set (when several) and backbone (when several), e.g.
    ``'core17'``, ``'p-MRR on core17'``, ``'p-MRR on core17 for minilm'``."""
    several_sets, several_backbones = (len({p[i] for p in panels}) > 1 for i in (1, 0))
    words = [name] if n_metrics > 1 or not several_sets else []
    words += [f"on {dataset_label(panel[1])}" if words else dataset_label(panel[1])] if several_sets else []
    words += [f"for {panel[0]}"] if several_backbones else []
    return " ".join(words)


def _by_mode_caption(metrics, panels, names, cells, has_paper: bool) -> str:
    """(a) The caption: what each row plots, where, what bars and error bars are, the paper's panel."""
    rows = ["top", "bottom"] if len(metrics) == 2 else [f"row {i}" for i in range(1, len(metrics) + 1)]
    what = _and(
        [
            f"{_and([names[(m, p)] for p in panels])} (×100{', ' + rows[i] + ' row' if len(metrics) > 1 else ''})"
            for i, m in enumerate(metrics)
        ]
    )
    where = _panels_words(panels)
    parts = [
        (_panel_name(names[(m, p)], p, panels, len(metrics)), cells[(m, p)]) for m in metrics for p in panels
    ]
    return (
        f"Each training mode's {what}, for {where}. "
        f"Bars: the mean over each mode's runs ({_runs_words([sm for _, sm in parts])}). "
        f"{_interval_words(parts)} "
        + (f"Right-hand panel: FollowIR p-MRR and Score {PAPER_WORDS}. " if has_paper else "")
        + "Every value axis starts at 0."
    )


@warnings_once()
def fig_metrics_by_mode(
    results: pd.DataFrame,
    metrics: Sequence[str] = ("p_mrr", "score"),
    published: pd.DataFrame | str | None = "default",
    dataset: str | None = None,
    error: str = "auto",
    per_query: pd.DataFrame | None = None,
    n_boot: int = 2000,
) -> go.Figure:
    """(a) One row per metric; one column per backbone and evaluation set, each bar a mode (mean
    over runs, error bar per ``summarize``: with ``per_query`` scores, a 95% interval); then, on
    its own y axis, a column with the paper's Table 1/2 FollowIR values (diamond =
    gte-multilingual-mlm-base, square = bge-m3-retromae).

    Each panel shows only the modes it has values for, and names its metric: ``score`` is MAP@1000
    on a bundled set and the paper's FollowIR Score on FollowIR (``style.metric_label``); the
    paper's backbones and benchmark differ from ours, so its values get their own panel, whose
    axis starts at 0 as ours do. ``dataset`` keeps one set; by default an aggregate row
    (``followir``, ``mean``...) stands for its collections. The caption is in ``caption_for(fig)``.
    """
    published = _published_or_default(published)
    metrics = [m for m in metrics if (results["metric"] == m).any()]
    if not metrics:
        raise ValueError("none of the requested metrics is in the results table")
    results = _labelled(results)
    # backbones in label order, as ``ifir table`` lists its blocks (and (b) maps its symbols)
    panels = [
        (b, d) for b in sorted(set(results["backbone"]), key=str) for d in _panel_sets(results, dataset)
    ]
    cells = {
        (m, p): _panel_summary(results, per_query, m, *p, error, n_boot) for m in metrics for p in panels
    }
    names = {(m, p): metric_label(m, metric_sets(results, m, p[1])) for m in metrics for p in panels}
    paper = {m: _paper_values(published, m) for m in metrics}
    has_paper = any(len(p) for p in paper.values())
    n_cols = len(panels) + has_paper
    # three or more columns share a page: each title on two lines, so neighbours do not run together
    sep = "<br>" if n_cols > 2 else ", "
    titles = [f"{b}{sep}{dataset_label(d)}" for b, d in panels] + (
        [PAPER_PANEL.replace(", ", sep)] if has_paper else []
    )
    fig = make_subplots(
        rows=len(metrics), cols=n_cols, vertical_spacing=0.1, horizontal_spacing=0.07, column_titles=titles
    )
    drawn = {}
    for r, m in enumerate(metrics, 1):
        for c, p in enumerate(panels, 1):
            # name the axis where its metric differs from the panel to its left (MAP@1000 | FollowIR Score)
            title = (
                f"{names[(m, p)]} (×100)" if c == 1 or names[(m, p)] != names[(m, panels[c - 2])] else None
            )
            drawn[(r, c)] = _draw_ours(fig, cells[(m, p)], r, c, f"{p[0]}, {dataset_label(p[1])}", title)
        if has_paper:
            drawn[(r, n_cols)] = _draw_paper(fig, paper[m], m, r, n_cols)
        if m == "p_mrr":
            fig.add_hline(y=0, line=ZERO_LINE, row=r, col="all")
    _hide_repeated_ticks(fig, drawn, len(metrics))
    # bars are ours; only the paper's markers need a legend (a grey "ours" swatch read as Base)
    _add_paper_legend(fig, {b for p in paper.values() for b in p["backbone"]})
    fig.update_layout(
        template=TEMPLATE,
        width=min(PAGE_WIDTH, COLUMN_WIDTH * n_cols),
        height=120 + 300 * len(metrics),
    )
    _facet_layout(fig, n_cols)
    if n_cols > 2:
        _legend_above_titles(fig, 125)  # room for the two-line titles
    return _with_caption(fig, _by_mode_caption(metrics, panels, names, cells, has_paper))


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
                    hovertemplate=f"{backbone}, {mode_label(r['mode'])}<br>%{{x:.2f}}, %{{y:.2f}}<extra></extra>",
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
                hovertemplate=f"paper: {PAPER_SOURCE}, {label}, %{{text}}<br>%{{x:.2f}}, %{{y:.2f}}<extra></extra>",
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
            fig.add_trace(_legend_marker(backbone, symbol, "#666666"))
    _add_paper_legend(fig, set(paper["backbone"]))


def _where(results: pd.DataFrame, metrics: Sequence[str], dataset: str | None) -> str:
    """(b) The sets behind each axis in words: ``'on FollowIR'``, or ``'p-MRR on A; MAP@1000 on B'``."""
    phrases = {m: _set_phrase(metric_sets(results, m, dataset)) for m in metrics}
    if len(set(phrases.values())) == 1:
        return _on(next(iter(phrases.values())))
    return "; ".join(
        f"{metric_label(m, metric_sets(results, m, dataset))} {_on(w)}" for m, w in phrases.items()
    )


def _tradeoff_caption(results, s, paper, dataset, x_metric, y_metric, backbones) -> str:
    """(b) The caption: the two metrics, the marks, the interval, the paper's panel."""
    x_name, y_name = (metric_label(m, metric_sets(results, m, dataset)) for m in (x_metric, y_metric))
    cols = ["backbone", "mode", "n_runs", "error"]
    sx = s[[c + ("_x" if c in ("n_runs", "error") else "") for c in cols]].set_axis(cols, axis=1)
    sy = s[[c + ("_y" if c in ("n_runs", "error") else "") for c in cols]].set_axis(cols, axis=1)
    shapes = ", shape = backbone" if len(backbones) > 1 else ""
    return (
        f"{y_name} (×100) against {x_name} (×100) for {_and(backbones)} "
        f"{_where(results, (x_metric, y_metric), dataset)}: one filled marker per training mode "
        f"(colour{shapes}) at the mean over its runs ({_runs_words([sx, sy])}). "
        f"{_interval_words([(f'{y_name}, vertical', sy), (f'{x_name}, horizontal', sx)])} "
        + (
            "Lower panel: FollowIR p-MRR against FollowIR Score, each marker outlined in its mode's "
            f"colour, {PAPER_WORDS}. "
            if len(paper)
            else ""
        )
        + "Every axis starts at 0."
    )


@warnings_once()
def fig_tradeoff(
    results: pd.DataFrame,
    published: pd.DataFrame | str | None = "default",
    dataset: str | None = None,
    x_metric: str = "score",
    y_metric: str = "p_mrr",
    error: str = "auto",
    per_query: pd.DataFrame | None = None,
    n_boot: int = 2000,
) -> go.Figure:
    """(b) p-MRR against Score: one filled point per (backbone, mode) with error bars on both
    axes (``summarize``: with ``per_query`` scores, 95% intervals); below it, in its own panel,
    the paper's Table 1/2 FollowIR values as open markers in the same colours (shape = backbone).

    The two panels have their own axes for the reason ``fig_metrics_by_mode`` gives: the
    paper's Score is FollowIR's (about 20), ours the bundled set's MAP (about 80). Both panels'
    axes start at 0, so neither makes a small difference look large.
    """
    published = _published_or_default(published)
    results = _labelled(results)
    sx, sy = (summarize(results, m, dataset, error, per_query, n_boot) for m in (x_metric, y_metric))
    s = sx.merge(sy, on=["backbone", "mode"], suffixes=("_x", "_y"))
    if s.empty:
        raise ValueError(f"no run has both {x_metric} and {y_metric}")
    backbones = sorted(set(s["backbone"]), key=str)  # one order, so one symbol, in every figure
    px_, py_ = _paper_values(published, x_metric), _paper_values(published, y_metric)
    paper = px_.merge(py_, on=["backbone", "mode"], suffixes=("_x", "_y"))
    n_rows = 2 if len(paper) else 1
    where = _where(results, (x_metric, y_metric), dataset).removeprefix("on the ").removeprefix("on ")
    ours_title = f"{', '.join(backbones)}, {where}"
    fig = make_subplots(
        rows=n_rows, cols=1, vertical_spacing=0.16, subplot_titles=(ours_title, PAPER_PANEL)[:n_rows]
    )
    fig.add_hline(y=0, line=ZERO_LINE, row="all", col=1)
    _add_tradeoff_ours(fig, s, backbones)
    _add_tradeoff_paper(fig, paper)
    _add_tradeoff_legend(fig, s, paper, backbones)
    for metric, update in ((x_metric, fig.update_xaxes), (y_metric, fig.update_yaxes)):
        update(
            title_text=axis_title(metric, metric_sets(results, metric, dataset)), rangemode="tozero", row=1
        )
        if n_rows == 2:
            axis = "value_x" if metric == x_metric else "value_y"
            update(title_text=_paper_title(metric), range=_zero_range(paper[axis]), row=2, col=1)
    fig.update_layout(template=TEMPLATE, width=COLUMN_WIDTH, height=TRADEOFF_HEIGHT[n_rows])
    if n_rows == 2:  # legend at the top of the canvas, clear of the panel title (4 rows of it)
        _legend_above_titles(fig, 175)
    return _with_caption(fig, _tradeoff_caption(results, s, paper, dataset, x_metric, y_metric, backbones))


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
        name="mean, 95% bootstrap CI over queries",
        legendgroup="ci",
        marker=dict(symbol="diamond", size=11, color=INK, line=dict(color="white", width=1)),
        error_y=_error_bars(cm["ci_high"] - cm["mean"], cm["mean"] - cm["ci_low"], thickness=2.5, width=7),
        customdata=cm["n"],
        hovertemplate="mean %{y:.2f} over %{customdata} queries<extra></extra>",
    )


def _without_aggregates(per_query: pd.DataFrame) -> pd.DataFrame:
    """Per-query rows of the collections only, when there are any: an aggregate set (``followir``)
    repeats its collections' queries as ``'<set>/<query>'``, which would count each query twice."""
    agg = per_query["dataset"].map(is_aggregate).astype(bool)
    return per_query[~agg] if (~agg).any() else per_query


def _sets_every_mode_has(points: pd.DataFrame) -> dict[str, set[str]]:
    """``{backbone: the sets every one of its modes has per-query values on}`` for the backbones
    where some mode has fewer (empty: none): a mode averaged over the sets its runs have stood
    beside one averaged over others, as if they were one measurement. One warning names the sets
    left out; a backbone with no set common to all its modes is left as it is (the caption names
    every set)."""
    out, said = {}, []
    for backbone, part in points.groupby("backbone", sort=False):
        cells = part.groupby("mode", sort=False)["dataset"].agg(lambda d: set(d.astype(str)))
        every = set.intersection(*cells)
        if (left := set.union(*cells) - every) and every:
            out[str(backbone)] = every
            said.append(f"{', '.join(sorted(left))} ({backbone})")
    if said:
        warn_once(
            log,
            "figure (c) leaves out set(s) %s: not every mode has per-query values there, and each mode's "
            "box is read over the same sets",
            "; ".join(said),
        )
    return out


def _per_query_caption(
    points: pd.DataFrame, cis: pd.DataFrame, metric: str, n_boot: int, backbones: list[str]
) -> str:
    sets = list(dict.fromkeys(points["dataset"].astype(str)))
    name = metric_label(metric, sets)
    strata = ", queries resampled within each set" if len(sets) > 1 else ""
    weights = " (sets weighted equally)" if len(sets) > 1 else ""
    short = cis[cis["runs"] < cis["runs_in_table"]]
    fewer = "; ".join(f"{mode_label(r.mode)}: {r.runs} of its {r.runs_in_table}" for r in short.itertuples())
    runs = f"the mode's runs with per-query scores ({fewer})" if fewer else "the mode's runs"
    return (
        f"Per-query {name} (×100) of each training mode, for {_and(backbones)} on "
        f"{_and([dataset_label(s) for s in sets])}: each dot is one query (its value averaged over "
        f"{runs}), the box its quartiles and median. Black diamonds and whiskers: the mean "
        f"over queries{weights} and its 95% bootstrap CI over queries (percentile, {n_boot} "
        f"resamples{strata})."
    )


@warnings_once()
def fig_per_query(
    per_query: pd.DataFrame, results: pd.DataFrame, metric: str = "p_mrr", n_boot: int = 2000, seed: int = 0
) -> go.Figure:
    """(c) Per-query distribution per mode (box + every query as a dot, averaged over seeds),
    with the mean and its percentile-bootstrap 95% CI (black diamond and whiskers), both
    stratified by dataset (``per_query_summary``). Each backbone's column shows its own modes."""
    results = _labelled(results)
    per_query = _without_aggregates(per_query)
    points, cis = per_query_summary(per_query, results, metric, n_boot, seed)
    if points.empty:
        raise ValueError(f"no per-query {metric} values match a run in the results table")
    if common := _sets_every_mode_has(points):  # backbone -> its sets, where a mode lacks some
        runs = results[["run_id", "backbone"]].astype(str).drop_duplicates("run_id")
        backbone = per_query["run_id"].astype(str).map(dict(zip(runs["run_id"], runs["backbone"])))
        keep = [b not in common or d in common[b] for b, d in zip(backbone, per_query["dataset"].astype(str))]
        points, cis = per_query_summary(per_query[keep], results, metric, n_boot, seed)
    backbones = sorted(set(points["backbone"]), key=str)
    fig = make_subplots(
        rows=1,
        cols=len(backbones),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        column_titles=backbones if len(backbones) > 1 else None,
    )
    for c, backbone in enumerate(backbones, 1):
        pm = points[points["backbone"] == backbone]
        modes = mode_order(pm["mode"])
        xpos = {k: i for i, k in enumerate(modes)}
        for mode in modes:
            fig.add_trace(_query_box(pm[pm["mode"] == mode]["value"], mode, xpos[mode]), row=1, col=c)
        fig.add_trace(_ci_markers(cis[cis["backbone"] == backbone], xpos, showlegend=c == 1), row=1, col=c)
        # numeric x with at least 4 slots' room: one mode alone would otherwise get a page-wide box;
        # six labels touch at column width
        pad = max(0, 4 - len(modes)) / 2
        _mode_axis(fig, modes, row=1, col=c, pad=pad, tickangle=30 if len(modes) * len(backbones) > 5 else 0)
    if metric == "p_mrr":
        fig.add_hline(y=0, line=ZERO_LINE)
    sets = list(dict.fromkeys(points["dataset"].astype(str)))
    fig.update_yaxes(title_text=axis_title(metric, sets, prefix="per-query "), row=1, col=1)
    fig.update_layout(
        template=TEMPLATE, width=min(PAGE_WIDTH, COLUMN_WIDTH * len(backbones)), height=440, boxmode="overlay"
    )
    _facet_layout(fig, len(backbones))
    return _with_caption(fig, _per_query_caption(points, cis, metric, n_boot, backbones))


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


def _synthesis_caption(t: dict[str, pd.DataFrame]) -> str:
    n = int(t["by_type"]["n"].sum())
    backends = list(dict.fromkeys(t["by_backend"]["backend"]))
    return (
        f"Synthesis outcomes of {n} seed rows, {len(backends)} synthesis backend"
        f"{'s' if len(backends) > 1 else ''} ({_and(backends)}). Top left: seed rows per "
        "instruction type, stacked by outcome (accepted, declined, rejected, failed). Top right: the "
        "length in words of each generated reversal. Bottom left: each outcome's share of a "
        "backend's rows, labelled from 8%. Bottom right: the share of accepted reversals whose flip "
        "the embedder verified, passed/n above each bar. Counts and shares of every row, not "
        "estimates from a sample: no intervals."
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
    else:
        _add_panel_note(fig, "no reversals", row=1, col=2)
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
    return _with_caption(fig, _synthesis_caption(t))


# ---- process figures: (e) loss curves ------------------------------------------------------------


def _integer_step(span: float, target: int = 6) -> int:
    """A tick spacing of 1, 2 or 5 x 10^k steps giving about ``target`` ticks over ``span``, at
    least 1, so no tick falls between two steps: 1 -> 1, 38 -> 10, 1000 -> 200."""
    raw = max(span / target, 1.0)
    mag = 10 ** math.floor(math.log10(raw))
    return int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def _smoothing_words(smooth: pd.DataFrame, short: bool = False) -> str:
    """What the bold lines are, true for the windows used: ``'mean over runs, centred 5-point
    rolling mean'`` (``short``: ``'5-point rolling mean'``, for the legend); a mode too short to
    smooth (window 1) is named as such."""
    window = smooth.groupby("mode", sort=False)["window"].first()
    runs = smooth.groupby("mode", sort=False)["n_runs"].max()
    smoothed = sorted(int(w) for w in set(window) if w > 1)
    rough = [mode_label(m) for m, w in window.items() if w <= 1]
    if short:
        what = f"{'/'.join(map(str, smoothed))}-point rolling mean" if smoothed else "not smoothed"
        return what + (f" ({_and(rough)}: none)" if smoothed and rough else "")
    mean = "mean over runs" if (runs > 1).any() else "each mode's loss"
    if not smoothed:
        return f"{mean}, not smoothed (too few logged steps)"
    return f"{mean}, centred {'/'.join(map(str, smoothed))}-point rolling mean (fewer points at the ends)" + (
        f"; {_and(rough)} not smoothed (too few logged steps)" if rough else ""
    )


def _loss_caption(logs: pd.DataFrame, smooth: pd.DataFrame) -> str:
    backbones = sorted({backbone_label(m) for m in logs.get("model", pd.Series(dtype=str)).dropna()})
    on = f" (backbone {_and(backbones)})" if backbones else ""
    runs = smooth.groupby("mode", sort=False)["n_runs"].max().reset_index()
    return (
        f"Training loss per logged step of each training mode{on}. Faint thin lines: each run's raw "
        f"loss; bold lines: {_smoothing_words(smooth)}; "
        f"{_runs_words([runs])}. Modes differ by colour and dash. No intervals: every run is drawn."
    )


def fig_loss_curves(logs: pd.DataFrame, window: int | None = None) -> go.Figure:
    """(e) Training loss per step: each run's raw loss as a faint thin line, and per mode the
    loss averaged over the mode's runs and smoothed by a centred rolling mean of ``window``
    logged steps (``summaries.smoothed_losses``; None: about a fifth of the run; never more
    points than the curve has, so the legend's "n-point" is true) as a bold line. Steps are
    integers, and so are the ticks. No markers; modes differ by colour and dash (``mode_dash``),
    so greyscale print still works."""
    if logs.empty:
        raise ValueError("no training log lines with a loss")
    take_spare_styles(logs["mode"])
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
                    hovertemplate=f"{mode_label(mode)}, run {run}<br>step %{{x}}: %{{y:.4f}}<extra></extra>",
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
    steps = logs["step"].astype(float)
    fig.update_layout(
        template=TEMPLATE,
        width=COLUMN_WIDTH,
        height=440,
        # whole steps only: plotly's own ticks fall at 1.5 on a 2-step run
        xaxis=dict(
            title="training step",
            tickmode="linear",
            tick0=0,
            dtick=_integer_step(steps.max() - steps.min()),
            tickformat="d",
        ),
        yaxis_title="training loss",
        # 60 px legend samples, so that each mode's dash pattern shows
        legend=dict(
            title=dict(text=f"bold: {_smoothing_words(smooth, short=True)}; faint: each run", side="top"),
            title_font_size=SMALL_FONT,
            itemwidth=60,
        ),
        yaxis_rangemode="tozero",
    )
    return _with_caption(fig, _loss_caption(logs, smooth))


# ---- captions ------------------------------------------------------------------------------------

FIGURE_NAMES = {
    "a": "fig_pmrr_by_config",
    "b": "fig_pmrr_vs_score",
    "c": "fig_per_query_pmrr",
    "d": "fig_synthesis_stats",
    "e": "fig_loss_curves",
}


def _stored_caption(fig: go.Figure) -> str | None:
    meta = fig.layout.meta
    return meta.get("caption") if isinstance(meta, dict) else None


def _draw(name: str, results, per_query, logs, synthesis, published) -> go.Figure:
    """The figure ``name`` (a value of ``FIGURE_NAMES``) from in-memory inputs; a ``ValueError``
    names the input it lacks."""
    needs = {
        FIGURE_NAMES["a"]: (
            "results",
            lambda: fig_metrics_by_mode(results, published=published, per_query=per_query),
        ),
        FIGURE_NAMES["b"]: (
            "results",
            lambda: fig_tradeoff(results, published=published, per_query=per_query),
        ),
        FIGURE_NAMES["c"]: ("results and per_query", lambda: fig_per_query(per_query, results)),
        FIGURE_NAMES["d"]: ("synthesis", lambda: fig_synthesis_stats(synthesis)),
        FIGURE_NAMES["e"]: ("logs", lambda: fig_loss_curves(logs)),
    }
    if name not in needs:
        raise ValueError(f"unknown figure {name!r}; use one of {', '.join(needs)}")
    what, draw = needs[name]
    given = dict(results=results, per_query=per_query, logs=logs, synthesis=synthesis)
    missing = [k for k in given if k in what.split(" and ") and given[k] is None]
    if missing:
        raise ValueError(f"{name} is drawn from {what}: pass {', '.join(missing)}")
    return draw()


def caption_for(
    figure: go.Figure | str,
    results: pd.DataFrame | None = None,
    *,
    per_query: pd.DataFrame | None = None,
    logs: pd.DataFrame | None = None,
    synthesis: list[dict] | pd.DataFrame | None = None,
    published: pd.DataFrame | str | None = "default",
) -> str:
    """A figure's caption, one paragraph: what is plotted, what the marks are, which interval.

    ``figure`` is a figure drawn here (its function stored the caption) or a name of
    ``FIGURE_NAMES`` with the inputs it is drawn from (``results``, ``per_query`` for the 95%
    intervals, ``logs``, ``synthesis``). Example: ``caption_for(fig_metrics_by_mode(results))``
    or ``caption_for('fig_pmrr_by_config', results, per_query=pq)`` -> ``'p-MRR (×100, top row)
    and ... Error bars: 95% two-stage bootstrap interval over runs and queries ...'``.
    """
    if isinstance(figure, str):
        figure = _draw(figure, results, per_query, logs, synthesis, published)
    caption = _stored_caption(figure)
    if caption is None:
        raise ValueError(
            "this figure carries no caption: draw it with a function of ifir_lib.reporting.figures"
        )
    return caption


# ---- saving: PDF/SVG/PNG through kaleido and Chrome, HTML without, a caption file beside ---------

_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(
            f"figure name {name!r}: use lowercase letters, digits, '_' or '-' (LaTeX \\includegraphics-safe)"
        )


def _write_static(items: list[tuple[go.Figure, Path]]) -> None:
    """Render PDF/SVG/PNG files in one Chromium session (kaleido starts one browser per call, ~3 s)."""
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
    with progress(total=len(files), desc="export PDF/SVG/PNG", unit="file", delay=0) as bar:
        _write_images(figs, files, scale=scales, width=widths, height=heights)
        bar.update(len(files))


def _write_images(figs, files, **sizes) -> None:
    """``pio.write_images``; a Chrome that is found but closes as it starts (seen on a loaded
    2-core machine) is tried once more; no Chrome, or a second failure, is a ``FigureExportError``
    that says which, with kaleido's own words."""
    from choreographer.browsers import BrowserClosedError, BrowserFailedError

    for attempt in (1, 2):
        with _browser_stderr() as said:
            try:
                pio.write_images(figs, files, **sizes)
                return
            except (BrowserFailedError, BrowserClosedError) as e:
                failed = e
                _wait_for_lines(said)
            except RuntimeError as e:
                if "chrome" in str(e).lower():
                    raise FigureExportError(
                        "static export needs Chrome or Chromium for kaleido: `apt-get install -y chromium` "
                        "(Debian's /usr/bin/chromium is found automatically) or set BROWSER_PATH to a Chrome "
                        f"binary; formats=('html',) needs neither ({type(e).__name__}: {_first_line(e)})"
                    ) from e
                raise
        chrome = " | ".join(said[-4:]) or "nothing on stderr"
        if attempt == 2:
            raise FigureExportError(
                f"static export: Chrome started but closed twice ({type(failed).__name__}: "
                f"{_first_line(failed)}); Chrome said: {chrome}. formats=('html',) needs no Chrome"
            ) from failed
        log.warning("static export: Chrome closed as it started (Chrome said: %s); trying once more", chrome)


def _wait_for_lines(lines: list[str], seconds: float = 1.0) -> None:
    """Give choreographer's reader thread up to ``seconds`` to log what a Chrome that has just
    closed wrote to stderr (it reads the pipe apart from the error that reports the close)."""
    deadline = time.monotonic() + seconds
    while not lines and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def _browser_stderr():
    """The lines Chrome writes to stderr while kaleido runs it (choreographer logs them to the
    ``browser_proc`` logger at DEBUG), kept so that a failed start can say why. Only records the
    logger would have passed before reach the usual handlers: Chrome's chatter stays out of the
    output."""
    lines: list[str] = []
    logger = logging.getLogger("browser_proc")
    level, propagate, shown = logger.level, logger.propagate, logger.getEffectiveLevel()

    class Keep(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if not text.startswith("wrapper CLI"):  # choreographer's own echo of the command line
                lines.append(text[:300])
            if propagate and record.levelno >= shown and logger.parent is not None:
                logger.parent.handle(record)

    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _first_line(e: Exception) -> str:
    """The first line of an error's first non-empty argument (kaleido's are long), or its type."""
    text = next((str(a) for a in e.args if str(a).strip()), str(e)).strip()
    return text.splitlines()[0][:200] if text else "no message"


def _save_many(figs: dict[str, go.Figure], out_dir: str | Path, formats: Sequence[str]) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bad = set(formats) - set(FORMATS)
    if bad:
        raise ValueError(f"unknown format(s) {sorted(bad)}; use {', '.join(FORMATS)}")
    written, static = [], []
    for name, fig in figs.items():
        _check_name(name)
        _remove_other_formats(out_dir, name, formats)
        for fmt in formats:
            path = out_dir / f"{name}.{fmt}"
            if fmt == "html":
                # one plotly.min.js next to the pages: they open offline without a 4 MB copy each
                fig.write_html(path, include_plotlyjs="directory", full_html=True)
            else:
                static.append((fig, path))
            written.append(path)
        caption = _stored_caption(fig)
        if caption:
            path = out_dir / f"{name}.caption.txt"
            path.write_text(caption + "\n", encoding="utf-8")
            written.append(path)
    _write_static(static)
    return written


def save_figure(
    fig: go.Figure, out_dir: str | Path, name: str, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Write ``out_dir/name.{pdf,svg,png,html}`` (PNG at scale 3) and, for a figure drawn here,
    ``out_dir/name.caption.txt`` (``caption_for``); return the paths.

    ``name`` must be LaTeX-friendly (``fig_pmrr_by_config``). Static formats go through kaleido
    and Chromium (``BROWSER_PATH`` overrides where Chromium is found).
    """
    return _save_many({name: fig}, out_dir, formats)


# ---- rebuilding every figure from files ----------------------------------------------------------


def _synthesis_paths(synthesis_path) -> list:
    if synthesis_path is None:
        return []
    return [synthesis_path] if isinstance(synthesis_path, (str, Path)) else list(synthesis_path)


@warnings_once()
def make_all_figures(
    results_csv: str | Path,
    out_dir: str | Path,
    per_query_csv: str | Path | None = None,
    runs_dir: str | Path | None = None,
    synthesis_path: str | Path | Sequence[str | Path] | None = None,
    formats: Sequence[str] = FORMATS,
    rows: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    log_runs: Sequence[str | Path] | None = None,
) -> list[Path]:
    """Rebuild every figure whose inputs exist, each with its caption file; print a note for each
    one skipped. ``rows`` selects the results rows drawn and ``log_runs`` the run folders whose
    loss curves (e) are drawn (an experiment: its plan's finished runs, the ones its tables read;
    None: every ``train_log.jsonl`` under ``runs_dir``).

    Example: only ``results_csv`` -> (a) and (b), with 95% intervals and (c) when the sibling
    ``<stem>_per_query.csv`` that ``evaluate`` writes exists (or ``per_query_csv`` is given);
    ``synthesis_path`` (one file, or several to compare backends) -> (d); ``runs_dir`` -> (e).
    Returns the written paths (figures, then ``<name>.caption.txt``).
    """
    results = load_results(results_csv)
    if rows is not None:
        results = rows(results)
    results.attrs["path"] = str(results_csv)  # errors name the file (``results.runs_to_read``)
    results = _labelled(results, runs_dir)
    published = load_published()
    if per_query_csv is None:
        # ``evaluate.append_results`` writes per-query scores next to the table: results_per_query.csv
        per_query_csv = Path(results_csv).with_name(f"{Path(results_csv).stem}_per_query.csv")

    def absent(p):
        return p is None or not Path(p).exists()

    per_query = None if absent(per_query_csv) else load_per_query(per_query_csv)
    figs: dict[str, go.Figure] = {}
    metrics = set(results["metric"])
    if metrics & {"p_mrr", "score"}:
        figs[FIGURE_NAMES["a"]] = fig_metrics_by_mode(results, published=published, per_query=per_query)
    else:
        print(f"skipped {FIGURE_NAMES['a']}: results have neither p_mrr nor score")
    if {"p_mrr", "score"} <= metrics:
        figs[FIGURE_NAMES["b"]] = fig_tradeoff(results, published=published, per_query=per_query)
    else:
        print(f"skipped {FIGURE_NAMES['b']}: results need both p_mrr and score")
    if per_query is None:
        print(f"skipped {FIGURE_NAMES['c']}: no per-query file ({per_query_csv})")
    else:
        figs[FIGURE_NAMES["c"]] = fig_per_query(per_query, results)
    synth = _synthesis_paths(synthesis_path)
    missing = [str(p) for p in synth if absent(p)]
    if not synth or missing:
        print(f"skipped {FIGURE_NAMES['d']}: no synthesis file ({', '.join(missing) or None})")
    else:
        figs[FIGURE_NAMES["d"]] = fig_synthesis_stats(load_synthesis_rows(synth))
    logs = None if absent(runs_dir) else load_train_logs(runs_dir, only=log_runs)
    if logs is None or logs.empty:
        print(f"skipped {FIGURE_NAMES['e']}: no train_log.jsonl under {runs_dir}")
    else:
        figs[FIGURE_NAMES["e"]] = fig_loss_curves(logs)
    _remove_skipped(out_dir, [n for n in FIGURE_NAMES.values() if n not in figs])
    return _save_many(figs, out_dir, formats)


def _remove_other_formats(out_dir: Path, name: str, formats: Sequence[str]) -> None:
    """Remove ``name``'s files in the formats not written now: an HTML page of an earlier table
    stayed beside the new SVG and caption (``--formats svg`` into a reused folder)."""
    old = [out_dir / f"{name}.{fmt}" for fmt in FORMATS if fmt not in formats]
    if gone := [p for p in old if p.exists()]:
        for p in gone:
            p.unlink()
        print(
            f"removed {', '.join(p.name for p in gone)} from {out_dir}: an earlier table's, in a format not written now"
        )


def _remove_skipped(out_dir: str | Path, names: Sequence[str]) -> None:
    """Remove an earlier run's files of the figures skipped now (``<name>.*``, captions included),
    saying which: left beside the new ones, they were listed with them (made-up example figures
    from a notebook run before its inputs existed, or figure (c) of another table)."""
    out_dir = Path(out_dir)
    for name in names:
        old = sorted(out_dir.glob(f"{name}.*")) if out_dir.is_dir() else []
        for f in old:
            f.unlink()
        if old:
            print(
                f"removed {len(old)} earlier file(s) of {name} from {out_dir}: this run has no input for it"
            )
