"""Stage 6, reporting: results tables, summaries, paper tables and figures.

Reads: results tables (``results.csv`` and its per-query sibling, appended to by
``pipelines.evaluate``), run folders (training logs, backbones), synthesis files, the paper's
published numbers (``ifir_lib/data/published_results.csv``). Writes: rows of the results table,
LaTeX/Markdown/CSV tables, figures (PNG, SVG, PDF, HTML).

- ``results``: the tidy results table: schema, appending (safe against concurrent writers),
  reading, per-query scores, training logs, the backbone of a run.
- ``summaries``: per run, per mode, per query, and comparisons with paired tests.
- ``comparisons``: modes over runs: run-level spread, two-stage intervals, run-level tests
  (``ifir compare``, the experiment's tables).
- ``tables``: the paper's Tables 1-2 layout, and the one Markdown table writer.
- ``style``: one colour per mode, the plotly template, sizes for a paper.
- ``figures``: functions from tidy DataFrames to plotly figures with captions, saving them (PDF,
  SVG, PNG, HTML), rebuilding all.
- ``reading``: a comparison in sentences with its intervals (notebook 05).

Imports: ``core``, ``synthesis`` (synthesis rows), ``evaluation`` (statistics).
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["load_results", "save_result", "load_per_query", "load_train_logs", "backbone_of"], "results"
        ),
        **dict.fromkeys(["summarize", "headline_table", "compare_results"], "summaries"),
        **dict.fromkeys(["mode_table", "compare_modes", "comparison_table"], "comparisons"),
        **dict.fromkeys(["build_table", "render", "markdown_table"], "tables"),
        **dict.fromkeys(["MODE_COLORS", "MODE_LABELS"], "style"),
        **dict.fromkeys(
            ["make_all_figures", "save_figure", "fig_metrics_by_mode", "fig_tradeoff"], "figures"
        ),
    },
)
