"""Stage 0, core: what every stage shares. It reads and writes no data of its own.

- ``config``: paths of the bundled data, the modes and ablations, the query format, the one
  preset set {paper, cpu, smoke} and ``default_preset()``, the smoke switch, the git commit.
- ``errors``: the ``IfirError`` family; ``DataError`` names file, line and field.
- ``jsonl``: the one JSON Lines reader (streaming, reports a cut last line), writer and atomic write.
- ``locks``: one writer per output (``exclusive``), shared appends (``shared_append``).
- ``progress``: progress bars, none in CI logs.
- ``models``: model names, loading, the one place that formats queries and documents.
- ``run_folder``: ``RunFolder``, the only reader and writer of a training run's folder
  (the run record, training logs, checkpoints, lock), and the search for run folders.
- ``lazy``: how each stage's ``__init__`` re-exports its public names without importing them.

Imports: nothing from a later stage.
"""

from .lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "ConfigError",
                "DataError",
                "DatasetUnavailable",
                "IfirError",
                "NonFiniteLossError",
                "OutputLocked",
            ],
            "errors",
        ),
        **dict.fromkeys(
            [
                "MODES",
                "PAPER_MODES",
                "PRESET_NAMES",
                "SEEDS_PATH",
                "EVAL_SETS",
                "default_preset",
                "smoke_mode",
            ],
            "config",
        ),
        **dict.fromkeys(["read_jsonl", "write_jsonl", "append_jsonl", "atomic_write_text"], "jsonl"),
        **dict.fromkeys(["exclusive", "shared_append"], "locks"),
        "progress": "progress",
        **dict.fromkeys(["load_model", "build_model", "encode", "format_query", "format_document"], "models"),
        **dict.fromkeys(["RunFolder", "data_sources"], "run_folder"),
    },
)
