"""Instruction forms: a seed's short instructions and, when it has them, its narratives (docs/method.md §4).

The bundled seeds' instructions are short requests; most also carry TREC-style narratives of the
instruction, the reference reversal and the wording control (``seeds.schema.NARRATIVE_FIELDS``).

- ``forms(seed)``: the ``(I, I')`` pairs a seed has, short first (the held-out score pools them);
- ``in_form(seed, rev, share, rng_seed)``: the seed and its reversal in the form drawn for it. A
  ``share`` of the seeds with narratives is drawn into narrative form by a hash of ``rng_seed``
  and the seed id, so every mode puts the same seed in the same form and both views of a pair
  share it. A pair whose reversal is not the seed's reference one (synthesized, template) stays
  short, since no narrative of that reversal exists.

Not handled here: the seed schema (``seeds.schema``), training examples (``training.trainsets``).
"""

from __future__ import annotations

import hashlib

from .schema import NARRATIVE_FIELDS

NARRATIVE_SHARE = 0.5  # the default share of seeds with narratives that train in narrative form


def forms(seed: dict) -> list[tuple[str, str | None]]:
    """``(I, I')`` in each form the seed has: short, and narrative when it carries narratives."""
    out = [(seed["instruction"], seed.get("reference_reversal"))]
    if seed.get("narrative"):  # the three narratives come as a set (seeds.validate_seed)
        out.append((seed["narrative"], seed["reversal_narrative"]))
    return out


def drawn_narrative(seed: dict, share: float, rng_seed: int) -> bool:
    """Whether ``seed`` is drawn into narrative form (it has narratives and its hash of ``rng_seed``
    and id falls in ``share``), whatever its reversal: ``in_form`` keeps it short when its reversal
    has no narrative."""
    if share <= 0 or not all(seed.get(f) for f in NARRATIVE_FIELDS):
        return False
    draw = hashlib.sha256(f"form:{rng_seed}:{seed['id']}".encode()).digest()
    return int.from_bytes(draw[:8], "big") / 2**64 < share


def in_form(seed: dict, rev: dict | None, share: float, rng_seed: int) -> tuple[dict, dict | None, str]:
    """``(seed, reversal, form)``: the seed and its reversal in narrative form for a ``share`` of
    the seeds that have narratives and use their reference reversal, else unchanged (``short``)."""
    if not drawn_narrative(seed, share, rng_seed):
        return seed, rev, "short"
    if rev is not None and rev["reversal"] != seed.get("reference_reversal"):
        return seed, rev, "short"
    seed = {**seed, "instruction": seed["narrative"], "aug_instruction": seed["aug_narrative"]}
    return seed, (None if rev is None else {**rev, "reversal": seed["reversal_narrative"]}), "narrative"
