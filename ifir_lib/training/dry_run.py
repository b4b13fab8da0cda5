"""``ifir train --dry-run``: validate a config against its examples and estimate steps, tokens and memory.

Runs without a GPU and without loading the model's weights (only its config, when local), so a
paper-scale job can be checked on a laptop before GPU hours are spent. With a launch file
(``launch/``: accelerate YAML, DeepSpeed JSON, torchrun script) it also checks that the launch
agrees with the config (``launch_check``). The numbers are estimates, not measurements
(``bench/gpu_check.py`` measures). Not handled here: training.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.errors import ConfigError
from ..core.models import format_query, resolve_model
from .launch_check import check_launch_file
from .trainer import TrainConfig
from .trainsets import to_dataset

KNOWN_PARAMS = {
    "gte-multilingual-base": 305e6,
    "gte-multilingual-mlm-base": 305e6,
    "bge-m3": 568e6,
    "minilm": 22.7e6,
    "all-minilm-l6-v2": 22.7e6,
    "all-mpnet-base-v2": 109e6,
}


def _backbone_shape(name: str) -> dict | None:
    """hidden size, layers, heads and parameter count from a local config, or known sizes."""
    try:
        from transformers import AutoConfig

        path = resolve_model(name)
        if Path(path).exists():
            cfg = AutoConfig.from_pretrained(path)
            h, L, a, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.vocab_size
            params = v * h + cfg.max_position_embeddings * h + L * (12 * h * h + 13 * h)
            return {"hidden": h, "layers": L, "heads": a, "params": params}
    except Exception:  # offline hub name: fall through to the table
        pass
    key = name.lower().split("/")[-1]
    if key in KNOWN_PARAMS:
        n = KNOWN_PARAMS[key]
        h, L, a = (768, 12, 12) if n > 5e7 else (384, 6, 12)
        return {"hidden": h, "layers": L, "heads": a, "params": n}
    return None


def dry_run(
    cfg: TrainConfig,
    examples: list[dict],
    world_size: int | None = 1,
    launch_config: str | Path | None = None,
) -> dict:
    """Validate ``cfg`` against ``examples`` and estimate steps, tokens and peak GPU memory.

    ``launch_config``: a launch file checked against ``cfg`` and ``world_size`` (``None``: the
    file's own process count); its report is under ``"launch"``.

    Tokens are estimated as 1.3 x words, capped at ``max_seq_length``. Memory follows
    Korthikanti et al. (arXiv 2205.05198): 16 bytes per parameter for fp32 weights, gradients
    and Adam, plus activations ``s*b*h*(34 + 5*a*s/h)`` bytes per layer for the live mini-batch
    (only layer boundaries kept under gradient checkpointing). An estimate, not a measurement.
    """
    if not len(examples):  # every mean and step count below divides by it
        raise ConfigError("dry run: no training examples to estimate; check the seeds, reversals and budget")
    to_dataset(examples[:1], cfg.num_negatives, with_labels=False)  # checks negatives count
    launch = None
    if launch_config:
        launch = check_launch_file(launch_config, cfg, world_size)
        world_size = launch["world_size"]
    world_size = world_size or 1

    def toks(text):
        return min(cfg.max_seq_length, int(len(text.split()) * 1.3) + 2)

    q_tok = [toks(format_query(e["query"], e["instruction"])) for e in examples]
    d_tok = [toks(p["text"]) for e in examples for p in (e["positive"], *e["negatives"][: cfg.num_negatives])]
    per_step = cfg.batch_size * world_size
    steps_per_epoch = math.ceil(len(examples) / per_step)
    steps = cfg.max_steps if cfg.max_steps > 0 else math.ceil(cfg.epochs * steps_per_epoch)
    epochs = steps / steps_per_epoch
    tokens_per_epoch = sum(q_tok) + sum(d_tok)
    out = {
        "examples": len(examples),
        "world_size": world_size,
        "effective_batch": per_step,
        "steps_per_epoch": steps_per_epoch,
        "steps": steps,
        "epochs": round(epochs, 3),
        "texts_per_step": per_step * (2 + cfg.num_negatives),
        "tokens_per_epoch": tokens_per_epoch,
        "tokens_total": int(tokens_per_epoch * epochs),
        "mean_query_tokens": round(sum(q_tok) / len(q_tok), 1),
        "mean_doc_tokens": round(sum(d_tok) / len(d_tok), 1),
    }
    shape = _backbone_shape(cfg.base_model)
    if shape:
        h, L, a = shape["hidden"], shape["layers"], shape["heads"]
        s = cfg.max_seq_length
        b = min(cfg.mini_batch_size or per_step * (2 + cfg.num_negatives), per_step * (2 + cfg.num_negatives))
        layer = s * b * h * (34 + 5 * a * s / h)  # bytes in 16-bit
        if not cfg.bf16:
            layer *= 2
        act = (L * s * b * h * 2 + layer) if cfg.gradient_checkpointing else L * layer
        static = 16 * shape["params"]
        out.update(
            {
                "params": int(shape["params"]),
                "est_static_gb": round(static / 2**30, 2),
                "est_activation_gb": round(act / 2**30, 2),
                "est_peak_gb": round((static + act) / 2**30, 2),
            }
        )
    if launch:
        out["launch"] = launch
    return out
