"""Stage 3, curation: look at the reversals and decide which ones training may use.

Reads: seeds and a synthesis file (``synthesis``), optionally a model for the dual-view scores.
Writes: an append-only curation JSONL, one row per click (key, decision, comment, and what was
judged: backend, model, a hash of the reversal text; the last decision per key and text wins),
which ``ifir train --curation`` and ``pipelines.train.train_modes`` honour for that text only.

- ``decisions``: the one reader, writer and applier of curation decisions (``CurationStore``,
  ``load_decisions``, ``decision_for``, ``CurationCheck``).
- ``tables``: the explorer's pure parts (the example table, filters, word diff of I and I',
  the example card, a model's scores under both views), unit-tested without a browser.
- ``widgets``: ``Explorer``, the ipywidgets front end of notebook 02.

Imports: ``core``, ``seeds``, ``synthesis``.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "CurationCheck",
                "CurationStore",
                "Decisions",
                "decision_for",
                "load_decisions",
                "reversal_hash",
            ],
            "decisions",
        ),
        **dict.fromkeys(
            ["build_examples", "filter_examples", "readable_table", "render_example", "word_diff_html"],
            "tables",
        ),
        **dict.fromkeys(["Explorer", "load_for_inspection"], "widgets"),
    },
)
