"""``ifir train``'s config flags: the one table that the command line builds its options from
and that the dry run reads a torchrun script's flags with (``launch_check``). Imports nothing
heavy, so the command line can build its parser without torch."""

from __future__ import annotations

# TrainConfig fields ``ifir train`` sets as --max-steps etc. (None, the default: the preset's)
TRAIN_CONFIG_FLAGS: tuple[tuple[str, type], ...] = (
    ("max_steps", int),
    ("epochs", float),
    ("batch_size", int),
    ("mini_batch_size", int),
    ("num_negatives", int),
    ("learning_rate", float),
    ("save_steps", int),
    ("train_top_layers", int),
    ("lr_schedule", str),
)
