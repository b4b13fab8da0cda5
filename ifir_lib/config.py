"""Paths and names shared by every stage.

Only constants live here: where the bundled data is, which model alias means what, and the
query/document format that training and evaluation agree on. Stage settings live in each
stage's own frozen dataclass (see ``train.TrainConfig``, ``synthesize.SynthesisConfig``).
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
SEEDS_PATH = DATA_DIR / "seeds.jsonl"
FOLLOWIR_DIR = DATA_DIR / "followir_mini"
TEMPLATES_DIR = PACKAGE_DIR / "templates"
PUBLISHED_RESULTS_PATH = DATA_DIR / "published_results.csv"

# Repository root when running from a checkout (figures/ lives there); falls back to the CWD.
REPO_DIR = PACKAGE_DIR.parent if (PACKAGE_DIR.parent / "pyproject.toml").exists() else Path.cwd()
FIGURES_DIR = REPO_DIR / "figures"

# mteb joins query and instruction with one space (REFERENCE.md §2); we do the same everywhere.
QUERY_INSTRUCTION_SEP = " "

# Prompt names stored in every trained SentenceTransformer folder (``model.prompts``). mteb 2.x
# looks these names up too, so a model formats queries the same way in our code and in mteb.
QUERY_PROMPT_NAME = "query"
DOCUMENT_PROMPT_NAME = "document"

MODES = ("ins-orig", "ins-dv", "all-orig", "all-dv")


def cache_dir() -> Path:
    """Where embedding and LLM caches go (``IFIR_CACHE`` overrides ``~/.cache/ifir``)."""
    return Path(os.environ.get("IFIR_CACHE", Path.home() / ".cache" / "ifir"))


def smoke_mode() -> bool:
    """True when ``IFIR_SMOKE`` (or CI) asks every notebook and demo to finish in seconds."""
    return os.environ.get("IFIR_SMOKE", "") not in ("", "0") or os.environ.get("CI", "") not in ("", "0", "false")
