"""Figures: summaries on hand-made tables, the published numbers, and real PNG/SVG renders."""

import pandas as pd

from ifir_lib import figure_style as ST
from ifir_lib import figures as F
from ifir_lib import figures_process as P
from ifir_lib import results as R
from ifir_lib.config import PAPER_MODES
from ifir_lib.testing import write_example_inputs

# ---- published numbers -----------------------------------------------------------------------


# ---- pure summaries --------------------------------------------------------------------------


# ---- figure objects --------------------------------------------------------------------------


def test_every_figure_uses_the_template_and_one_colour_per_config(tmp_path):
    ex = write_example_inputs(tmp_path)
    res = R.load_results(ex["results"])
    a = F.fig_metrics_by_mode(res)
    bars = [t for t in a.data if t.type == "bar"]
    assert len(bars) == 2  # p-MRR and Score rows
    for t in bars:
        labels = [ST.MODE_ORDER[int(x)] for x in t.x]
        assert list(t.marker.color) == [ST.MODE_COLORS[c] for c in labels]
    paper = [t for t in a.data if t.type == "scatter" and t.x is not None and len(t.x) and t.x[0] is not None]
    assert sorted(round(y, 2) for t in paper[:2] for y in t.y) == sorted(
        [5.21, 7.57, 5.27, 8.30, 9.40, 11.47, 8.84, 13.92]
    )
    b = F.fig_tradeoff(res)
    pq = F.fig_per_query(R.load_per_query(ex["per_query"]), res, n_boot=200)
    d = P.fig_synthesis_stats(R.load_synthesis_rows(ex["synthesis"]))
    e = P.fig_loss_curves(R.load_train_logs(ex["runs"]))
    for fig in (a, b, pq, d, e):
        assert fig.layout.template.layout.font.size == ST.BASE_FONT  # the "ifir" template is applied
        assert fig.layout.width in (ST.COLUMN_WIDTH, ST.PAGE_WIDTH)
    ours = {
        t.name: t.marker.color
        for t in b.data
        if t.type == "scatter" and t.showlegend is not False and t.name in ST.MODE_LABELS.values()
    }
    shown = ("base", *PAPER_MODES)  # the modes the example inputs hold
    assert ours == {ST.MODE_LABELS[c]: ST.MODE_COLORS[c] for c in shown}
    assert {t.name: t.line.color for t in e.data if t.showlegend} == {
        ST.MODE_LABELS[c]: ST.MODE_COLORS[c] for c in PAPER_MODES
    }
    assert len([t for t in e.data]) == 8  # 4 configs x 2 seeds, one line each


# ---- files on disk -----------------------------------------------------------------------------


def test_paper_markers_have_their_own_axis_and_panels_name_the_set(tmp_path):
    """Our bundled sets' MAP (about 80) and the paper's FollowIR Score (about 20) never share an axis."""
    ex = write_example_inputs(tmp_path)
    res = R.load_results(ex["results"])
    two_sets = pd.concat([res.assign(dataset="followir_mini"), res.assign(dataset="followir_v2")])
    fig = F.fig_metrics_by_mode(two_sets, metrics=("score",))
    bar_axes = {t.yaxis for t in fig.data if t.type == "bar"}
    paper_axes = {
        t.yaxis for t in fig.data if t.type == "scatter" and t.hovertemplate and "paper" in t.hovertemplate
    }
    assert len(bar_axes) == 2 and len(paper_axes) == 1 and not bar_axes & paper_axes
    titles = [a.text for a in fig.layout.annotations]
    assert any(t.endswith("followir_mini") for t in titles) and any(t.endswith("followir_v2") for t in titles)
    assert "paper · FollowIR" in titles
