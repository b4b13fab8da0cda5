"""Saving figures: PNG (scale 3), SVG, PDF and HTML files with LaTeX-safe names; rebuilding all of them.

Static formats go through kaleido and a Chrome (``make setup`` provides one; ``BROWSER_PATH``
overrides where it is found). HTML pages share one ``plotly.min.js`` and need neither. Not
handled here: drawing (``figures``, ``figures_process``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from .errors import FigureExportError
from .figure_style import COLUMN_WIDTH, PNG_SCALE
from .figures import fig_metrics_by_mode, fig_per_query, fig_tradeoff
from .figures_process import fig_loss_curves, fig_synthesis_stats
from .progress import progress
from .results import (
    add_backbone,
    load_per_query,
    load_published,
    load_results,
    load_synthesis_rows,
    load_train_logs,
)

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
