"""Notebook 01's worked example: the topic shortcut that polarity reversal attacks.

An off-the-shelf embedder scores a document by how well it matches the query's *topic*. Every
candidate of a seed is on topic, so the instruction barely moves the ranking: P+ ranks high under
I, and it still ranks high under the reversal I', where N* should win. ``topic_shortcut`` finds
such a seed in the bundled data and shows each candidate's score and rank under both
instructions (docs/method.md §1). Not handled here: scoring whole files (``verify``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.models import encode, format_document, format_query, load_model


@dataclass(frozen=True)
class ShortcutExample:
    """One seed's candidates under I and under I' (``table``), and what it shows (``summary``)."""

    seed: dict
    table: pd.DataFrame
    summary: str


def _candidates(seed: dict) -> list[tuple[str, dict]]:
    j = int(seed.get("reference_negative_index") or 0)
    out = [("P+ (relevant under I)", seed["positive"])]
    for i, d in enumerate(seed["instruction_negatives"]):
        out.append(("N* (relevant under I')" if i == j else "instruction negative", d))
    out += [("hard negative", d) for d in seed.get("hard_negatives", [])]
    return out


def _ranked(seed: dict, model) -> pd.DataFrame:
    cands = _candidates(seed)
    docs = encode(model, [format_document(d) for _, d in cands], "document")
    rows = []
    for view, instruction in (("I", seed["instruction"]), ("I'", seed["reference_reversal"])):
        q = encode(model, [format_query(seed["query"], instruction)], "query")[0]
        scores = docs @ q / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))
        order = (-scores).argsort(kind="stable")
        rank = np.empty(len(scores), dtype=int)
        rank[order] = np.arange(1, len(scores) + 1)
        rows.append((view, scores, rank))
    return pd.DataFrame(
        {
            "document": [role for role, _ in cands],
            "score under I": rows[0][1].round(3),
            "rank under I": rows[0][2],
            "score under I'": rows[1][1].round(3),
            "rank under I'": rows[1][2],
            "text": [format_document(d)[:90] for _, d in cands],
        }
    )


def topic_shortcut(seeds: list[dict], model="minilm", max_seeds: int = 40) -> ShortcutExample:
    """The first seed (of ``max_seeds`` with a reference reversal) where the model ranks P+ first
    under I *and* under I' (it ignores the reversal); if none does, the seed where P+ stays
    highest under I'. ``model``: a name for ``load_model`` or a loaded SentenceTransformer."""
    model = load_model(model) if isinstance(model, str) else model
    tried = [s for s in seeds if s.get("reference_reversal")][:max_seeds]
    if not tried:
        raise ValueError("no seed has a reference reversal")
    best = None
    for seed in tried:
        table = _ranked(seed, model)
        p = table.iloc[0]
        key = (p["rank under I"] == 1 and p["rank under I'"] == 1, -p["rank under I'"])
        if best is None or key > best[0]:
            best = (key, seed, table)
        if key[0]:
            break
    _, seed, table = best
    p, n = table.iloc[0], table[table.document.str.startswith("N*")].iloc[0]
    r_i, r_rev = "rank under I", "rank under I'"
    summary = (
        f"Seed {seed['id']}: under I the model ranks P+ {p[r_i]} and N* {n[r_i]}; under the reversal "
        f"I' it ranks P+ {p[r_rev]} and N* {n[r_rev]}, where N* should be first. The scores barely move: "
        "the model matches the topic both documents share and hardly reads the instruction."
    )
    return ShortcutExample(seed, table, summary)
