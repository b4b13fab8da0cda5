"""Saving figures: LaTeX-safe names, real PNG/SVG/HTML through kaleido and Chrome, make_all_figures, the CLI."""

import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from ifir_lib.cli import main
from ifir_lib.reporting import figures as F
from ifir_lib.reporting import style as ST
from ifir_lib.testing.inputs import write_example_inputs


def _png_header(path):
    """(width, height) of a real PNG, read by Pillow."""
    with Image.open(path) as im:
        assert im.format == "PNG"
        return im.size


def _png_pixels(path):
    """The PNG's pixels as an (h, w, c) uint8 array."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_save_figure_rejects_names_latex_cannot_include(tmp_path):
    fig = F.fig_loss_curves(pd.DataFrame({"run": ["r"], "mode": ["ins-dv"], "step": [1], "loss": [1.0]}))
    with pytest.raises(ValueError, match="lowercase"):
        F.save_figure(fig, tmp_path, "Fig A", formats=("html",))
    assert F.save_figure(fig, tmp_path, "fig_a", formats=("html",)) == [tmp_path / "fig_a.html"]


@pytest.mark.slow
def test_make_all_figures_renders_real_png_svg_html(tmp_path):
    """Through kaleido and Chromium: valid PNGs at 3x the layout size, not blank; SVG and HTML parse."""
    ex = write_example_inputs(tmp_path / "in")
    paths = F.make_all_figures(ex["results"], tmp_path / "out", ex["per_query"], ex["runs"], ex["synthesis"])
    names = {p.stem for p in paths}
    assert names == set(F.FIGURE_NAMES.values()) and len(paths) == 3 * len(names)
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000, p
    sizes = {p.stem: _png_header(p) for p in paths if p.suffix == ".png"}
    tradeoff_height = F.TRADEOFF_HEIGHT[2]  # our panel over the paper's
    assert sizes["fig_pmrr_vs_score"] == (ST.COLUMN_WIDTH * ST.PNG_SCALE, tradeoff_height * ST.PNG_SCALE)
    assert sizes["fig_synthesis_stats"][0] == ST.PAGE_WIDTH * ST.PNG_SCALE
    px = _png_pixels(tmp_path / "out" / "fig_pmrr_by_config.png")
    assert px.shape[:2] == sizes["fig_pmrr_by_config"][::-1]
    rgb = px[..., :3].astype(float)
    assert rgb.std() > 20  # not blank
    assert (rgb.reshape(-1, 3) > 245).all(axis=1).mean() > 0.5  # white page, ink on it
    packed = (px[..., 0].astype(np.int64) << 16) | (px[..., 1].astype(np.int64) << 8) | px[..., 2]  # 0xRRGGBB
    for c in ("ins-dv", "all-dv"):  # the config colours were drawn
        assert (packed == int(ST.MODE_COLORS[c][1:], 16)).sum() > 1000, c
    svg = ET.parse(tmp_path / "out" / "fig_pmrr_vs_score.svg").getroot()
    assert svg.tag.endswith("svg") and "p-MRR" in (tmp_path / "out" / "fig_pmrr_vs_score.svg").read_text()
    assert (tmp_path / "out" / "plotly.min.js").exists()  # HTML pages open offline


def test_make_all_figures_skips_absent_inputs_with_a_note(tmp_path, capsys):
    ex = write_example_inputs(tmp_path / "in")
    paths = F.make_all_figures(
        ex["results"], tmp_path / "out", per_query_csv=tmp_path / "nope.csv", formats=("html",)
    )
    assert sorted(p.name for p in paths) == ["fig_pmrr_by_config.html", "fig_pmrr_vs_score.html"]
    out = capsys.readouterr().out
    for name in ("fig_per_query_pmrr", "fig_synthesis_stats", "fig_loss_curves"):
        assert f"skipped {name}" in out


def test_cli_figures(tmp_path, capsys):
    ex = write_example_inputs(tmp_path / "in")
    rc = main(
        [
            "figures",
            "--results",
            str(ex["results"]),
            "--out",
            str(tmp_path / "out"),
            "--runs",
            str(ex["runs"]),
            "--formats",
            "html",
        ]
    )
    assert rc == 0 and (tmp_path / "out" / "fig_loss_curves.html").exists()
    assert (tmp_path / "out" / "fig_per_query_pmrr.html").exists()  # the sibling results_per_query.csv
    assert "fig_pmrr_by_config.html" in capsys.readouterr().out
    assert main(["figures", "--results", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "results file not found" in capsys.readouterr().err
