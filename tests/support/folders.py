"""Model folders made from the packaged MiniLM for a test: ``raw_backbone``."""

from __future__ import annotations

import shutil
from pathlib import Path

from ifir_lib.core.models import resolve_model

RAW_FILES = ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt")


def raw_backbone(folder: Path) -> Path:
    """MiniLM as a raw transformers checkpoint: config, weights and tokenizer, no ``modules.json``
    (the weights are a link to the packaged file)."""
    folder.mkdir(parents=True)
    packaged = Path(resolve_model("minilm"))
    for name in RAW_FILES:
        shutil.copy(packaged / name, folder / name)
    (folder / "model.safetensors").symlink_to(packaged / "model.safetensors")
    return folder
