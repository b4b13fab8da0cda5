"""Figures: the figure objects on the example inputs and hand-made tables, the helpers they share,
and one real SVG render."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from plotly.subplots import make_subplots

from ifir_lib.core.config import PAPER_MODES
from ifir_lib.reporting import figures as F
from ifir_lib.reporting import results as R
from ifir_lib.reporting import style as ST
from ifir_lib.reporting import summaries as S
from ifir_lib.testing.inputs import write_example_inputs


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
    d = F.fig_synthesis_stats(R.load_synthesis_rows(ex["synthesis"]))
    e = F.fig_loss_curves(R.load_train_logs(ex["runs"]))
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
    assert {t.name: t.line.color for t in e.data if t.showlegend is not False} == {
        ST.MODE_LABELS[c]: ST.MODE_COLORS[c] for c in PAPER_MODES
    }
    assert len(e.data) == 8 + 4  # 4 configs x 2 seeds raw, and one smoothed line per config


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
    titles = [a.text.replace("<br>", ", ") for a in fig.layout.annotations]
    assert any(t.endswith("bundled set v1") for t in titles) and any(
        t.endswith("bundled set v2") for t in titles
    )
    assert F.PAPER_PANEL in titles


def _logs(losses_by_run: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """``{(mode, run): [loss at step 1, 2, ...]}`` -> the table ``results.load_train_logs`` returns."""
    rows = [
        {"run": run, "mode": mode, "step": i + 1, "loss": v}
        for (mode, run), losses in losses_by_run.items()
        for i, v in enumerate(losses)
    ]
    return pd.DataFrame(rows)


def test_loss_curves_draw_a_smoothed_line_per_mode_over_faint_raw_lines_with_one_marker_convention():
    """Raw per-step losses jump (0.1 <-> 2.8), so each mode gets a centred rolling mean of the
    mean over its runs; the raw runs stay, faint. No trace has markers; modes differ by colour and dash."""
    jumpy = [2.8, 0.1, 2.5, 0.2, 2.0, 0.1, 1.8, 0.3, 1.5, 0.2, 1.2, 0.1, 1.0, 0.2, 0.9, 0.1, 0.8]
    logs = _logs(
        {
            ("ins-dv", "dv-s0"): jumpy,
            ("ins-dv", "dv-s1"): [v + 0.2 for v in jumpy],
            ("ins-orig", "orig-s0"): jumpy[::-1],
            ("all-dv", "all-s0"): jumpy[:5],  # a short run: few points used to switch markers on
        }
    )
    fig = F.fig_loss_curves(logs, window=5)
    smooth = [t for t in fig.data if t.showlegend is not False]
    raw = [t for t in fig.data if t.showlegend is False]
    assert sorted(t.name for t in smooth) == sorted(
        ST.MODE_LABELS[m] for m in ("ins-dv", "ins-orig", "all-dv")
    )
    assert len(raw) == 4  # one per run
    for t in fig.data:
        assert t.mode == "lines"  # the same convention for every mode: no markers at all
    for t in raw:
        mode = t.legendgroup
        assert t.line.color == ST.MODE_COLORS[mode] and t.opacity < 0.5 and t.line.width < 2
    for t in smooth:
        mode = t.legendgroup
        mean = logs[logs["mode"] == mode].groupby("step")["loss"].mean().to_numpy()
        # by hand: the mean of the points within 2 steps either side (fewer at the ends)
        expected = [mean[max(0, i - 2) : i + 3].mean() for i in range(len(mean))]
        assert list(t.x) == list(range(1, len(mean) + 1))
        assert list(t.y) == pytest.approx(expected, rel=1e-12)
        assert t.line.color == ST.MODE_COLORS[mode] and t.line.dash == ST.MODE_DASHES[mode]
        assert t.line.width > max(r.line.width for r in raw)
    assert len({t.line.dash for t in smooth}) == len(smooth)  # greyscale still tells modes apart
    dv = next(t for t in smooth if t.legendgroup == "ins-dv")
    assert max(dv.y[3:]) - min(dv.y[3:]) < (max(jumpy) - min(jumpy)) / 2  # smoother than the raw loss
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert "5-point rolling mean" in fig.layout.legend.title.text  # the figure says how it smooths


def test_every_mode_has_a_distinct_colour_and_dash():
    modes = ST.MODE_ORDER
    assert len({ST.mode_color(m) for m in modes}) == len(modes)
    assert len({ST.mode_dash(m) for m in modes if m != "base"}) == len(modes) - 1  # base has no loss curve
    # a researcher's variants: two learning rates were one grey, one solid line in (b) and (e)
    custom = ["ins-dv-bs32", "ins-dv-bs64", "ins-dv-ep1", "ins-dv-ep3", "ins-dv-lr1e-5", "ins-dv-lr1e-3"]
    ST.take_spare_styles(["ins-dv", *custom])  # as a figure builder does with the modes it draws
    assert len({ST.mode_color(m) for m in custom}) == len(custom)  # by name, 1 pair in 6 shared one
    assert not {ST.mode_color(m) for m in custom} & set(ST.MODE_COLORS.values())
    before = {m: (ST.mode_color(m), ST.mode_dash(m)) for m in custom}
    ST.take_spare_styles(["another", "ins-dv-bs32"])  # a later figure: the same styles, a new one added
    assert {m: (ST.mode_color(m), ST.mode_dash(m)) for m in custom} == before
    assert (ST.mode_color("another"), ST.mode_dash("another")) not in before.values()


def _no_verification_rows(tmp_path):
    rows = R.load_synthesis_rows(write_example_inputs(tmp_path)["synthesis"])
    return [{**r, "verify_flip": None} for r in rows]


def test_missing_verification_note_refers_to_the_verified_flips_panel(tmp_path):
    """plotly.js draws no axes for a panel without a trace; an annotation referring to them then
    lands on the first panel. The note must refer to panel (2, 2) and that panel must hold a trace."""
    fig = F.fig_synthesis_stats(_no_verification_rows(tmp_path))
    panel = fig.get_subplot(2, 2)
    x_id, y_id = panel.xaxis.plotly_name.replace("axis", ""), panel.yaxis.plotly_name.replace("axis", "")
    note = next(a for a in fig.layout.annotations if a.text == "no verification results")
    assert (note.xref, note.yref) == (f"{x_id} domain", f"{y_id} domain")
    assert any(t.xaxis == x_id and t.yaxis == y_id for t in fig.data)


def test_missing_verification_note_renders_inside_the_verified_flips_panel(tmp_path):
    """Through kaleido and Chromium: the note's centre in the SVG lies in the lower-right panel."""
    fig = F.fig_synthesis_stats(_no_verification_rows(tmp_path))
    svg, _caption = F.save_figure(fig, tmp_path / "out", "fig_synthesis_stats", formats=("svg",))
    root = ET.parse(svg).getroot()
    centre = None
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") == "annotation" and "no verification results" in "".join(g.itertext()):
            inner = next(c for c in g.iter() if c.get("class") == "annotation-text-g")
            centre = [
                float(v) for v in re.match(r"rotate\(0,([\d.]+),([\d.]+)\)", inner.get("transform")).groups()
            ]
    assert centre is not None, "the note was not drawn"
    w, h = fig.layout.width, fig.layout.height
    x_dom, y_dom = fig.layout.xaxis4.domain, fig.layout.yaxis4.domain
    # SVG y grows downwards; the panel spans the right 40% and the bottom 40% of the plot area
    assert centre[0] > w * x_dom[0] and centre[1] > h * (1 - y_dom[1])


def test_tradeoff_keeps_the_paper_values_on_their_own_axes(tmp_path):
    """Our Score is the bundled sets' MAP (about 80), the paper's FollowIR Score about 20: one axis
    for both squeezed our points into a corner."""
    res = R.load_results(write_example_inputs(tmp_path)["results"])
    fig = F.fig_tradeoff(res)
    ours = {(t.xaxis, t.yaxis) for t in fig.data if t.type == "scatter" and t.error_x.array is not None}
    paper = {
        (t.xaxis, t.yaxis)
        for t in fig.data
        if t.type == "scatter" and t.hovertemplate and t.hovertemplate.startswith("paper")
    }
    assert len(ours) == 1 and len(paper) == 1 and not ours & paper
    for axis in ("xaxis", "yaxis", "xaxis2", "yaxis2"):
        assert fig.layout[axis].title.text, axis
    fig1 = F.fig_tradeoff(res, published=None)
    assert {(t.xaxis, t.yaxis) for t in fig1.data if t.type == "scatter" and t.x[0] is not None} == {
        ("x", "y")
    }


def test_aggregate_panel_falls_back_to_the_mean_over_collections(tmp_path):
    """The example inputs store p-MRR per collection and Score as a ``followir`` aggregate row: the
    aggregate panel must still draw p-MRR (the mean over collections), not an empty row."""
    res = R.load_results(write_example_inputs(tmp_path)["results"])
    fig = F.fig_metrics_by_mode(res, published=None)
    pmrr = next(t for t in fig.data if t.type == "bar" and t.yaxis == "y")
    per_run = res[res["metric"] == "p_mrr"].groupby(["mode", "rng_seed"])["value"].mean()
    expected = per_run.groupby("mode").mean()
    got = {ST.MODE_ORDER[int(x)]: y for x, y in zip(pmrr.x, pmrr.y)}
    assert got.keys() == set(expected.index)
    assert got == pytest.approx(expected.to_dict())


def test_panel_sets_let_an_aggregate_row_stand_for_its_collections():
    res = pd.DataFrame({"dataset": ["core17", "FollowIR", "robust04", "core17"]})
    assert F._panel_sets(res, None) == ["FollowIR"]  # case-blind, as results.AGGREGATE_DATASETS
    assert F._panel_sets(res[res["dataset"] != "FollowIR"], None) == ["core17", "robust04"]
    assert F._panel_sets(res, "robust04") == ["robust04"]


def test_an_aggregate_stands_for_its_collections_only(tmp_path, caplog):
    """Beside ``followir``, a bundled set kept its own panel in no figure: (a) drew FollowIR alone,
    and a metric without an aggregate row was averaged over every set under FollowIR's name."""
    res = R.load_results(write_example_inputs(tmp_path)["results"])
    v1 = res[res["dataset"] == "core17"].assign(dataset="followir_mini", value=lambda d: d["value"] + 50)
    res = pd.concat([res, v1], ignore_index=True)
    assert F._panel_sets(res, None) == ["followir", "followir_mini"]
    fig = F.fig_metrics_by_mode(res, published=None, metrics=("p_mrr",))
    assert any("bundled set v1" in str(a.text) for a in fig.layout.annotations)
    bars = {t.xaxis: t for t in fig.data if t.type == "bar"}
    collections = res[res["dataset"].isin(["core17", "news21", "robust04"])]
    for part, axis in ((collections, "x"), (res[res["dataset"] == "followir_mini"], "x2")):
        runs = part.groupby(["mode", "rng_seed"])["value"].mean().groupby("mode").mean()
        got = {ST.MODE_ORDER[int(x)]: y for x, y in zip(bars[axis].x, bars[axis].y)}
        assert got == pytest.approx(runs.to_dict())
    # a run's one number (figure (b), headline_table) reads the aggregate, as the paper's, and names
    # the sets it leaves out (figure (a) draws them): its own row, or its collections' mean
    assert S.metric_sets(res, "score") == ["followir"]
    assert S.metric_sets(res, "p_mrr") == ["robust04", "news21", "core17"]
    assert S.metric_sets(res, "p_mrr", "followir_mini") == ["followir_mini"]
    S.headline_table(res, metrics=("p_mrr",))
    assert (
        "each run's one number (figure (b), headline_table) reads followir; followir_mini left out"
        in caplog.text
    )


def test_status_order_puts_known_statuses_in_colour_order_then_others_sorted():
    assert F._status_order(["zzz", "failed", "accepted", "odd", "accepted"]) == [
        "accepted",
        "failed",
        "odd",
        "zzz",
    ]
    assert F._status_order([]) == []


def test_mode_axis_pads_few_modes_and_error_bars_are_asymmetric():
    fig = make_subplots(rows=1, cols=1)
    F._mode_axis(fig, ["base", "ins-dv"], row=1, col=1, pad=1.0)
    assert list(fig.layout.xaxis.tickvals) == [0, 1]
    assert list(fig.layout.xaxis.ticktext) == ["Base", "Ins-DV"]
    assert list(fig.layout.xaxis.range) == [-1.6, 2.6]  # one empty slot either side
    bars = F._error_bars([2.0], [0.5], "#0072B2", width=5)
    assert bars["array"] == [2.0] and bars["arrayminus"] == [0.5] and not bars["symmetric"]
    assert (bars["color"], bars["thickness"], bars["width"]) == ("#0072B2", 1.5, 5)


def test_per_query_figure_reads_every_mode_over_the_same_sets(tmp_path, caplog):
    """A mode whose runs lack a set was averaged over the sets it has, beside modes averaged over
    more: the boxes and diamonds compared different measurements, under one caption."""
    ex = write_example_inputs(tmp_path)
    res, pq = R.load_results(ex["results"]), R.load_per_query(ex["per_query"])
    sets = list(dict.fromkeys(pq["dataset"]))
    dv = set(res.loc[res["mode"] == "ins-dv", "run_id"])
    lacking = pq[~(pq["run_id"].isin(dv) & (pq["dataset"] == sets[1]))]  # ins-dv lacks the second set
    with caplog.at_level("WARNING"):
        fig = F.fig_per_query(lacking, res, n_boot=50)
    assert f"figure (c) leaves out set(s) {sets[1]} (" in caplog.text
    boxes = [t for t in fig.data if t.type == "box"]
    full = F.fig_per_query(pq[pq["dataset"] != sets[1]], res, n_boot=50)
    assert [list(t.y) for t in boxes] == [list(t.y) for t in full.data if t.type == "box"]


def test_run_counts_that_differ_between_panels_are_a_range():
    """The caption gave each mode its largest run count over the panels: a panel of 2 runs read
    as one of 3."""
    a = pd.DataFrame({"mode": ["ins-dv", "ins-orig"], "n_runs": [3, 3]})
    b = pd.DataFrame({"mode": ["ins-dv", "ins-orig"], "n_runs": [2, 3]})
    assert F._runs_words([a, a]) == "3 runs per mode"
    assert F._runs_words([a, b]) == "runs per mode: Ins-orig 3, Ins-DV 2-3 (by panel)"


def test_a_figure_s_files_in_formats_not_written_now_are_removed(tmp_path, capsys):
    """``--formats svg`` into a reused folder left the earlier table's HTML page beside the new SVG."""
    for ext in ("html", "png", "svg", "caption.txt"):
        (tmp_path / f"fig_pmrr_by_config.{ext}").write_text("earlier")
    F._remove_other_formats(tmp_path, "fig_pmrr_by_config", ("svg",))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fig_pmrr_by_config.caption.txt",
        "fig_pmrr_by_config.svg",
    ]
    assert "removed fig_pmrr_by_config.png, fig_pmrr_by_config.html" in capsys.readouterr().out


def test_loss_curves_read_only_the_runs_given(tmp_path):
    """An experiment's collect draws the runs its tables read: a run killed after 2 steps added its
    partial curve to its mode's mean, under a caption counting it."""
    ex = write_example_inputs(tmp_path)
    every = R.load_train_logs(ex["runs"])
    runs = sorted({r for r in every["run"]})
    kept = [Path(ex["runs"]) / r for r in runs[:-1]]
    some = R.load_train_logs(ex["runs"], only=kept)
    assert set(some["run"]) == set(runs[:-1]) and len(some) < len(every)
    assert R.load_train_logs(ex["runs"], only=[]).empty


def test_backbones_follow_the_table_s_order_in_every_figure(tmp_path):
    """``ifir table`` lists backbones by label; the figures took the file's order (and (b) its
    symbols from it), so one backbone was first in one and second in the other."""
    res = R.load_results(write_example_inputs(tmp_path)["results"])
    two = pd.concat([res.assign(model="zeta-model"), res.assign(model="alpha-model")], ignore_index=True)
    two = two.assign(run_id=two["run_id"] + "-" + two["model"])
    fig = F.fig_metrics_by_mode(two, published=None, metrics=("p_mrr",))
    titles = [a.text for a in fig.layout.annotations if "model" in str(a.text)]
    assert titles and titles[0].startswith("alpha-model")
