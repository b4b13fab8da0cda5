"""The bundled data as a whole: statistics (``ifir data stats``) and validation (``ifir data validate``).

Checks what no single row can: unique passage ids across seeds, passage lengths, that every seed
carries what every mode needs, the reversal audit and phrasing-style shares, and that no text is
shared between training seeds and the evaluation sets. Not handled here: one seed's schema
(``seeds``), the evaluation layout (``corpora``).
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from pathlib import Path

from .config import FOLLOWIR_DIR, SEEDS_PATH
from .corpora import load_followir
from .seeds import INSTRUCTION_TYPES, load_seeds

_WORD = re.compile(r"\S+")


def passages_of(seed: dict) -> Iterable[dict]:
    yield seed["positive"]
    yield from seed["instruction_negatives"]
    yield from seed["hard_negatives"]


def data_stats(seeds_path: str | Path = SEEDS_PATH, followir_dir: str | Path = FOLLOWIR_DIR) -> dict:
    """Counts for ``ifir data stats``: seeds, types, domains, passages, eval queries and docs."""
    seeds = load_seeds(seeds_path)
    ev = load_followir(followir_dir)
    words = [len(_WORD.findall(p["text"])) for s in seeds for p in passages_of(s)]
    return {
        "seeds": len(seeds),
        "instruction_types": dict(sorted(collections.Counter(s["instruction_type"] for s in seeds).items())),
        "domains": dict(sorted(collections.Counter(s.get("domain", "unknown") for s in seeds).items())),
        "passages": len(words),
        "passage_words": {"min": min(words), "mean": round(sum(words) / len(words), 1), "max": max(words)},
        "instruction_negatives": sum(len(s["instruction_negatives"]) for s in seeds),
        "with_reference_reversal": sum(1 for s in seeds if s.get("reference_reversal")),
        "counterparts": len(seeds),
        "eval_queries": len(ev.queries),
        "eval_documents": len(ev.corpus),
        "eval_changed_documents": sum(len(v) for v in ev.qrel_diff.values()),
        "eval_min_pool": min(len(v) for v in ev.top_ranked.values()),
    }


def validate_bundle(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path = FOLLOWIR_DIR,
    min_words: int = 40,
    max_words: int = 120,
) -> list[str]:
    """Check the bundled data; return a list of problems (empty means valid).

    Checks: the seed schema, unique seed and passage ids, passage lengths, at least 3 hard
    negatives and a reference reversal per seed (what the DV and All-* configs need), and no
    passage text shared between the training seeds and the evaluation corpus.
    """
    problems = []
    seeds = load_seeds(seeds_path)  # schema + unique seed ids (raises on the first problem)
    pids: dict[str, str] = {}
    texts = set()
    for s in seeds:
        if len(s["hard_negatives"]) < 3:
            problems.append(f"{s['id']}: {len(s['hard_negatives'])} hard negatives (< 3)")
        if not s.get("reference_reversal"):
            problems.append(f"{s['id']}: no reference_reversal")
        if s["instruction_type"] not in INSTRUCTION_TYPES:
            problems.append(f"{s['id']}: unknown instruction_type {s['instruction_type']!r}")
        for p in passages_of(s):
            if p["id"] in pids:
                problems.append(f"{s['id']}: passage id {p['id']} also in {pids[p['id']]}")
            pids[p["id"]] = s["id"]
            n = len(_WORD.findall(p["text"]))
            if not min_words <= n <= max_words:
                problems.append(f"{s['id']}: passage {p['id']} has {n} words (want {min_words}-{max_words})")
            texts.add(p["text"].strip())
    ev = load_followir(followir_dir)
    for did, doc in ev.corpus.items():
        if doc["text"].strip() in texts:
            problems.append(f"eval doc {did} repeats a training passage")
        if did in pids:
            problems.append(f"eval doc id {did} collides with training passage id")
    problems += ev.problems
    return problems
