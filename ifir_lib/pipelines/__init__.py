"""Stage 7, pipelines: the drivers. The command line, the notebooks and the benches call these;
nothing else drives training or evaluation.

- ``train``: ``train_modes``, the one driver of training (one run per mode, resumable).
- ``evaluate``: ``evaluate_models``, the one driver of evaluation (models x sets -> results table).
- ``demo``: ``run_demo``, every stage on the bundled data (``make demo``).
- ``experiment``: ``run_experiment`` (or ``run_commands``/``collect`` for a scheduler), Ins-DV
  against its controls over several rng_seeds, on any inputs (``make experiment``);
  ``plan``: the experiment's plan file and its hash; ``experiment_report``: its summary.
- ``registry``: ``runs_table``, every run and evaluation under a folder (``ifir runs``).
- ``bundle``: statistics and validation of the bundled data (``ifir data stats|validate``).
- ``chain``: the notebooks' one output folder (``chain_folder``, ``Chain``): where each notebook
  writes, what the next one reads or falls back to; ``evaluate_chain`` for notebook 04.

Reads and writes what the stages do: seeds, reversals, run folders, results tables, figures.
Imports: every earlier stage.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "train_modes": "train",
        "evaluate_models": "evaluate",
        **dict.fromkeys(["DemoConfig", "run_demo"], "demo"),
        **dict.fromkeys(["ExperimentConfig", "run_experiment", "collect", "run_commands"], "experiment"),
        **dict.fromkeys(["runs_table", "format_runs"], "registry"),
        **dict.fromkeys(["data_stats", "validate_bundle"], "bundle"),
    },
)
