"""Stand-ins for a model and for evaluation results, with values known in advance.

- ``FakeEncoder``: a SentenceTransformer stand-in whose vectors (and so cosine scores) are fixed;
- ``flip_encoder``: a ``FakeEncoder`` under which a seed's reversal flips the ranking;
- ``fake_result`` / ``results_frame``: an ``EvalResult`` and a checked results table from a few numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ifir_lib.core.models import format_query
from ifir_lib.evaluation.evaluator import EvalResult
from ifir_lib.reporting.results import check_results


class FakeEncoder:
    """A stand-in for a SentenceTransformer with vectors known in advance; records what it encoded.

    With a ``table`` (text -> vector) each text gets its vector, normalised, so every cosine score
    is known; without one a text becomes ``(length, number of 'a's)``, unnormalised.
    ``FakeEncoder().encode(["aa", "b"]) -> [[2, 2], [1, 0]]``.
    """

    prompts: dict = {}

    def __init__(self, table: dict | None = None):
        self.table, self.seen = table, []

    def encode(self, texts, **kw):
        self.seen += list(texts)
        if self.table is None:
            return np.array([[len(t), t.count("a")] for t in texts], dtype=np.float32)
        v = np.array([self.table[t] for t in texts], dtype=float)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def flip_encoder(seed: dict, reversal: str) -> FakeEncoder:
    """A ``FakeEncoder`` under which P+ wins under I and N* (negative 0) wins under ``reversal``."""
    return FakeEncoder(
        {
            format_query(seed["query"], seed["instruction"]): [1, 0],
            format_query(seed["query"], reversal): [0, 1],
            seed["positive"]["text"]: [0.9, 0.1],
            seed["instruction_negatives"][0]["text"]: [0.1, 0.9],
        }
    )


def fake_result(dataset: str, values: list[float], metric: str = "p_mrr") -> EvalResult:
    """An ``EvalResult`` with per-query ``values`` (``q0, q1, ...``), their mean and a min-max "CI"."""
    pq = {metric: {f"q{i}": v for i, v in enumerate(values)}}
    return EvalResult(
        dataset, "m", {metric: sum(values) / len(values)}, {metric: (min(values), max(values))}, pq
    )


def results_frame(rows: list[dict]) -> pd.DataFrame:
    """A checked results table from partial rows (model ``m``, rng_seed 0, dataset ``d`` by default)."""
    base = {"model": "m", "rng_seed": 0, "dataset": "d", "ci_low": np.nan, "ci_high": np.nan}
    return check_results(pd.DataFrame([{**base, **r} for r in rows]))
