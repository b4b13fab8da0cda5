"""Figures: summaries on hand-made tables, the published numbers, and real PNG/SVG renders."""
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pandas as pd
import pytest

from ifir_lib import figure_export as X
from ifir_lib import figure_style as ST
from ifir_lib import figures_process as P
from ifir_lib import results as R
from ifir_lib import summaries as S
from ifir_lib.config import PUBLISHED_RESULTS_PATH
from ifir_lib.testing import write_example_inputs
from ifir_lib import figures as F
from ifir_lib.errors import DataError


def _results(rows):
    base = {"model": "m", "rng_seed": 0, "dataset": "d", "ci_low": np.nan, "ci_high": np.nan}
    return R.check_results(pd.DataFrame([{**base, **r} for r in rows]))


def _png_header(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _png_pixels(path):
    """Decode an 8-bit RGB/RGBA PNG with zlib + numpy (no Pillow in the venv); returns (h, w, c).

    Chromium writes every row with the Up filter, which numpy does in one step; Average and
    Paeth rows fall back to a plain loop (slow, but correct).
    """
    data = path.read_bytes()
    pos, idat = 8, b""
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    c = 4 if ctype == 6 else 3
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), dtype=np.uint8)
    prev = np.zeros(w * c, dtype=np.uint8)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:]
        if f == 0:
            cur = line.copy()
        elif f == 1:  # Sub: running sum per channel, mod 256
            cur = (np.cumsum(line.reshape(w, c).astype(np.int64), axis=0) % 256).astype(np.uint8).reshape(-1)
        elif f == 2:  # Up
            cur = line + prev
        else:
            cur = np.zeros_like(line)
            for i in range(w * c):
                a = int(cur[i - c]) if i >= c else 0
                b, cc = int(prev[i]), int(prev[i - c]) if i >= c else 0
                if f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - cc
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                cur[i] = (int(line[i]) + pred) % 256
        out[y], prev = cur, cur
    return out.reshape(h, w, c)


# ---- published numbers -----------------------------------------------------------------------

def test_published_results_are_tables_1_and_2():
    pub = R.load_published()
    assert len(pub) == 2 * 4 * 6 and list(pub.columns) == ["backbone", "mode", "metric", "value", "source"]
    v = pub.set_index(["backbone", "mode", "metric"])["value"]
    gte, bge = "gte-multilingual-mlm-base", "bge-m3-retromae"
    # the headline: FollowIR p-MRR 5.21 -> 7.57 (Ins-orig -> Ins-DV, gte)
    assert v[gte, "ins-orig", "followir_p_mrr"] == 5.21 and v[gte, "ins-dv", "followir_p_mrr"] == 7.57
    assert v[gte, "all-orig", "infosearch_keyword_p_mrr"] == -49.65      # the data-mixing collapse
    assert v[gte, "all-dv", "mair_instructir_ndcg_at_10"] == 90.74
    assert v[bge, "all-dv", "followir_p_mrr"] == 13.92 and v[bge, "ins-dv", "followir_score"] == 19.76
    assert v[bge, "all-orig", "infosearch_length_p_mrr"] == -27.08 and v[bge, "ins-orig", "mair_ifeval_ndcg_at_10"] == 27.12
    assert set(pub[pub.backbone == gte]["source"]) == {"Zeng et al. 2026, arXiv 2604.18845, Table 1"}
    assert set(pub[pub.backbone == bge]["source"]) == {"Zeng et al. 2026, arXiv 2604.18845, Table 2"}
    first = PUBLISHED_RESULTS_PATH.read_text().splitlines()[0]
    assert first.startswith("#") and "arXiv 2604.18845" in first  # provenance line


# ---- pure summaries --------------------------------------------------------------------------

def test_summarize_spread_over_seeds_and_ci_for_one_run():
    res = _results([
        {"run_id": "a0", "mode": "ins-dv", "rng_seed": 0, "metric": "p_mrr", "value": 4.0},
        {"run_id": "a1", "mode": "ins-dv", "rng_seed": 1, "metric": "p_mrr", "value": 6.0},
        {"run_id": "b0", "mode": "ins-orig", "metric": "p_mrr", "value": 2.0, "ci_low": 1.0, "ci_high": 3.5},
    ])
    s = S.summarize(res, "p_mrr").set_index("mode")
    assert list(s.index) == ["ins-orig", "ins-dv"]                       # paper order, not file order
    assert (s.loc["ins-dv", "mean"], s.loc["ins-dv", "err_minus"], s.loc["ins-dv", "err_plus"]) == (5.0, 1.0, 1.0)
    assert s.loc["ins-dv", "error"] == "spread" and s.loc["ins-dv", "n_runs"] == 2
    assert (s.loc["ins-orig", "err_minus"], s.loc["ins-orig", "err_plus"]) == (2.0 - 1.0, 3.5 - 2.0)
    assert s.loc["ins-orig", "error"] == "ci"
    assert np.isnan(S.summarize(res, "p_mrr", error="ci").set_index("mode").loc["ins-dv", "err_plus"])  # no CI given


def test_per_run_prefers_an_aggregate_dataset_else_averages():
    rows = [{"run_id": "r", "mode": "base", "metric": "p_mrr", "dataset": d, "value": v}
            for d, v in (("robust04", 3.0), ("news21", 6.0), ("core17", 9.0))]
    assert S.per_run(_results(rows), "p_mrr")["value"].tolist() == [(3.0 + 6.0 + 9.0) / 3]
    rows.append({"run_id": "r", "mode": "base", "metric": "p_mrr", "dataset": "all", "value": 5.5})
    assert S.per_run(_results(rows), "p_mrr")["value"].tolist() == [5.5]
    assert S.per_run(_results(rows), "p_mrr", dataset="core17")["value"].tolist() == [9.0]


def test_per_query_summary_averages_seeds_then_datasets():
    res = _results([{"run_id": r, "mode": "ins-dv", "rng_seed": i, "metric": "p_mrr", "value": 0.0} for i, r in enumerate(("a", "b"))])
    pq = pd.DataFrame([
        {"run_id": "a", "dataset": "big", "metric": "p_mrr", "query_id": "q1", "value": 10.0},
        {"run_id": "b", "dataset": "big", "metric": "p_mrr", "query_id": "q1", "value": 20.0},
        {"run_id": "a", "dataset": "big", "metric": "p_mrr", "query_id": "q2", "value": 30.0},
        {"run_id": "b", "dataset": "big", "metric": "p_mrr", "query_id": "q2", "value": 30.0},
        {"run_id": "a", "dataset": "small", "metric": "p_mrr", "query_id": "q1", "value": -40.0},
        {"run_id": "a", "dataset": "other", "metric": "map_at_1000", "query_id": "q9", "value": 99.0},
        {"run_id": "zz", "dataset": "big", "metric": "p_mrr", "query_id": "q1", "value": 99.0},  # not in results
    ])
    points, cis = S.per_query_summary(pq, res, n_boot=200)
    assert sorted(points["value"]) == [-40.0, (10 + 20) / 2, 30.0]
    row = cis.iloc[0]
    assert row["n"] == 3 and row["mean"] == ((15 + 30) / 2 + -40) / 2  # mean of per-dataset means
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]


def test_synthesis_summary_counts_rates_and_lengths():
    rows = [{"key": "a", "seed_id": "a", "backend": "x", "status": "accepted", "reversal": "one two three", "instruction_type": "t", "verify_flip": True},
            {"key": "b", "seed_id": "b", "backend": "x", "status": "accepted", "reversal": "one two", "instruction_type": "t", "verify_flip": False},
            {"key": "c", "seed_id": "c", "backend": "x", "status": "declined", "reversal": None, "instruction_type": "u"},
            {"key": "d", "seed_id": "d", "backend": "y", "status": "rejected", "reversal": "bad", "instruction_type": "u"}]
    t = S.synthesis_summary(rows)
    share = t["by_backend"].set_index(["backend", "status"])["share"]
    assert share["x", "declined"] == 1 / 3 and share["y", "rejected"] == 1.0
    assert sorted(t["lengths"]["words"]) == [1, 2, 3]
    assert t["verify"].set_index("backend").loc["x", "rate"] == 1 / 2 and "y" not in set(t["verify"]["backend"])


def test_trained_runs_are_grouped_under_their_backbone(tmp_path):
    """``evaluate`` records a trained run by its folder; ifir_run.json names the backbone."""
    import json
    run = tmp_path / "runs" / "ins-dv-s0"
    run.mkdir(parents=True)
    (run / "ifir_run.json").write_text(json.dumps({"mode": "ins-dv", "rng_seed": 0, "config": {"base_model": "minilm", "rng_seed": 0}}))
    res = _results([{"run_id": "a", "model": "minilm", "mode": "base", "metric": "p_mrr", "value": -5.0},
                    {"run_id": "b", "model": str(run), "mode": "ins-dv", "metric": "p_mrr", "value": 2.0},
                    {"run_id": "c", "model": "/elsewhere/ins-dv-s0", "mode": "ins-dv", "rng_seed": 1, "metric": "p_mrr", "value": 4.0}])
    assert R.add_backbone(res)["backbone"].tolist() == ["minilm", "minilm", "/elsewhere/ins-dv-s0"]
    moved = R.add_backbone(res, runs_dir=tmp_path / "runs")                # found by folder name under --runs
    assert moved["backbone"].tolist() == ["minilm"] * 3
    s = S.summarize(moved, "p_mrr").set_index("mode")
    assert set(s["backbone"]) == {"minilm"} and s.loc["ins-dv", "mean"] == 3.0 and s.loc["ins-dv", "n_runs"] == 2
    fig = F.fig_metrics_by_mode(moved, metrics=("p_mrr",), published=None)
    assert fig.layout.width == ST.COLUMN_WIDTH                               # one panel, not one per run folder


def test_load_results_names_a_missing_column(tmp_path):
    p = tmp_path / "r.csv"
    pd.DataFrame({"run_id": ["a"], "model": ["m"], "mode": ["base"], "metric": ["p_mrr"], "value": [1]}).to_csv(p, index=False)
    with pytest.raises(DataError, match="rng_seed, dataset"):
        R.load_results(p)


# ---- figure objects --------------------------------------------------------------------------

def test_every_figure_uses_the_template_and_one_colour_per_config(tmp_path):
    ex = write_example_inputs(tmp_path)
    res = R.load_results(ex["results"])
    a = F.fig_metrics_by_mode(res)
    bars = [t for t in a.data if t.type == "bar"]
    assert len(bars) == 2                                              # p-MRR and Score rows
    for t in bars:
        labels = [ST.MODE_ORDER[int(x)] for x in t.x]
        assert list(t.marker.color) == [ST.MODE_COLORS[c] for c in labels]
    paper = [t for t in a.data if t.type == "scatter" and t.x is not None and len(t.x) and t.x[0] is not None]
    assert sorted(round(y, 2) for t in paper[:2] for y in t.y) == sorted([5.21, 7.57, 5.27, 8.30, 9.40, 11.47, 8.84, 13.92])
    b = F.fig_tradeoff(res)
    pq = F.fig_per_query(R.load_per_query(ex["per_query"]), res, n_boot=200)
    d = P.fig_synthesis_stats(R.load_synthesis_rows(ex["synthesis"]))
    e = P.fig_loss_curves(R.load_train_logs(ex["runs"]))
    for fig in (a, b, pq, d, e):
        assert fig.layout.template.layout.font.size == ST.BASE_FONT     # the "ifir" template is applied
        assert fig.layout.width in (ST.COLUMN_WIDTH, ST.PAGE_WIDTH)
    ours = {t.name: t.marker.color for t in b.data if t.type == "scatter" and t.showlegend is not False and t.name in ST.MODE_LABELS.values()}
    assert ours == {ST.MODE_LABELS[c]: ST.MODE_COLORS[c] for c in ST.MODE_ORDER}
    assert {t.name: t.line.color for t in e.data if t.showlegend} == {ST.MODE_LABELS[c]: ST.MODE_COLORS[c] for c in ST.MODE_ORDER[1:]}
    assert len([t for t in e.data]) == 8                              # 4 configs x 2 seeds, one line each


def test_save_figure_rejects_names_latex_cannot_include(tmp_path):
    fig = P.fig_loss_curves(pd.DataFrame({"run": ["r"], "mode": ["ins-dv"], "step": [1], "loss": [1.0]}))
    with pytest.raises(ValueError, match="lowercase"):
        X.save_figure(fig, tmp_path, "Fig A", formats=("html",))
    assert X.save_figure(fig, tmp_path, "fig_a", formats=("html",)) == [tmp_path / "fig_a.html"]


# ---- files on disk -----------------------------------------------------------------------------

@pytest.mark.slow
def test_make_all_figures_renders_real_png_svg_html(tmp_path):
    """Through kaleido and Chromium: valid PNGs at 3x the layout size, not blank; SVG and HTML parse."""
    ex = write_example_inputs(tmp_path / "in")
    paths = X.make_all_figures(ex["results"], tmp_path / "out", ex["per_query"], ex["runs"], ex["synthesis"])
    names = {p.stem for p in paths}
    assert names == set(X.FIGURE_NAMES.values()) and len(paths) == 3 * len(names)
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000, p
    sizes = {p.stem: _png_header(p) for p in paths if p.suffix == ".png"}
    assert sizes["fig_pmrr_vs_score"] == (ST.COLUMN_WIDTH * ST.PNG_SCALE, 500 * ST.PNG_SCALE)
    assert sizes["fig_synthesis_stats"][0] == ST.PAGE_WIDTH * ST.PNG_SCALE
    px = _png_pixels(tmp_path / "out" / "fig_pmrr_by_config.png")
    assert px.shape[:2] == sizes["fig_pmrr_by_config"][::-1]
    rgb = px[..., :3].astype(float)
    assert rgb.std() > 20                                              # not blank
    assert (rgb.reshape(-1, 3) > 245).all(axis=1).mean() > 0.5         # white page, ink on it
    packed = (px[..., 0].astype(np.int64) << 16) | (px[..., 1].astype(np.int64) << 8) | px[..., 2]  # 0xRRGGBB
    for c in ("ins-dv", "all-dv"):                                     # the config colours were drawn
        assert (packed == int(ST.MODE_COLORS[c][1:], 16)).sum() > 1000, c
    svg = ET.parse(tmp_path / "out" / "fig_pmrr_vs_score.svg").getroot()
    assert svg.tag.endswith("svg") and "p-MRR" in (tmp_path / "out" / "fig_pmrr_vs_score.svg").read_text()
    assert (tmp_path / "out" / "plotly.min.js").exists()               # HTML pages open offline


def test_make_all_figures_skips_absent_inputs_with_a_note(tmp_path, capsys):
    ex = write_example_inputs(tmp_path / "in")
    paths = X.make_all_figures(ex["results"], tmp_path / "out", per_query_csv=tmp_path / "nope.csv", formats=("html",))
    assert sorted(p.name for p in paths) == ["fig_pmrr_by_config.html", "fig_pmrr_vs_score.html"]
    out = capsys.readouterr().out
    for name in ("fig_per_query_pmrr", "fig_synthesis_stats", "fig_loss_curves"):
        assert f"skipped {name}" in out


def test_cli_figures(tmp_path, capsys):
    from ifir_lib.cli import main

    ex = write_example_inputs(tmp_path / "in")
    rc = main(["figures", "--results", str(ex["results"]), "--out", str(tmp_path / "out"), "--runs", str(ex["runs"]),
               "--formats", "html"])
    assert rc == 0 and (tmp_path / "out" / "fig_loss_curves.html").exists()
    assert (tmp_path / "out" / "fig_per_query_pmrr.html").exists()   # the sibling results_per_query.csv
    assert "fig_pmrr_by_config.html" in capsys.readouterr().out
    assert main(["figures", "--results", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "results file not found" in capsys.readouterr().err
