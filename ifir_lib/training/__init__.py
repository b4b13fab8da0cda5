"""Stage 4, training: fine-tune a bi-encoder on one mode's matched-budget training set.

Reads: seeds (``seeds``), reversals (a synthesis JSONL, or the seeds' reference reversals),
curation decisions (``curation``). Writes: one run folder per run (``core.run_folder``: the
SentenceTransformer model, the run record, training logs, checkpoints, TensorBoard events).

- ``trainsets``: the examples of each mode (Ins-orig, Ins-DV, All-orig, All-DV and the
  ablations) at matched budgets, with relation labels (``build_trainset``); reversal files.
- ``examples_arrow``: examples streamed to a memory-mapped Arrow file at paper scale.
- ``samplers``: batches that keep (or, as an ablation, split) a seed's two views.
- ``loss``: ``RelationInfoNCELoss``, InfoNCE over a deduplicated, relation-labelled batch.
- ``trainer``: ``TrainConfig`` with its presets and ``train`` (one run into one folder; resumes).
- ``lengths``: what training reads of each example once cut at its length (views that read the same).
- ``heldout``: held-out seeds that score checkpoints for early stopping.
- ``tracking``: the JSONL training log and TensorBoard / W&B / MLflow.
- ``dry_run`` and ``launch_check``: estimates and launch-file checks before GPU hours are spent.
- ``flags``: ``ifir train``'s config flags, one table for the command line and ``launch_check``.
- ``explain``: notebook 03's worked example, one tiny batch's relation matrix and loss.

The one driver of training is ``pipelines.train.train_modes``. Imports: ``core``, ``seeds``,
``synthesis`` (template reversals), ``curation``.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["TrainSet", "build_trainset", "load_reversals", "load_trainset", "save_trainset"], "trainsets"
        ),
        **dict.fromkeys(["DualViewBatchSampler", "SingleViewBatchSampler"], "samplers"),
        "RelationInfoNCELoss": "loss",
        **dict.fromkeys(["TrainConfig", "TrainResult", "TRAIN_PRESETS", "train", "mode_config"], "trainer"),
        **dict.fromkeys(["split_heldout", "heldout_scores", "HeldOutEvaluator"], "heldout"),
        "dry_run": "dry_run",
        "check_launch_file": "launch_check",
    },
)
