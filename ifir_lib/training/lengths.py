"""What training reads of its examples: each text as token ids, its prompt first, cut at the
training length (``TrainConfig.max_seq_length``; docs/method.md §3).

Two texts that differ can read the same once cut: a seed's two views when the instruction and
its reversal differ only past the cut (a long narrative, or a query prompt that fills the length),
so the dual view trains one input with swapped labels. ``warn_cut_alike`` names them before a run
trains, as the evaluation names FollowIR queries whose two instructions read the same
(``evaluation.evaluator.changes_cut_off``). Examples given as a list are checked; a streamed Arrow
set is not. Not handled here: building the examples (``trainsets``), training (``trainer``).
"""

from __future__ import annotations

import logging

from ..core.models import format_query, prompt_name

log = logging.getLogger(__name__)


def read_ids(model, texts, kind: str) -> dict[str, tuple] | None:
    """``{text: its token ids}`` for each distinct text as ``model`` reads it in training (its
    stored prompt for ``kind`` first, cut at its ``max_seq_length``); None without a tokenizer."""
    tok = getattr(model, "tokenizer", None)
    if tok is None or not callable(tok):
        return None
    unique = list(dict.fromkeys(texts))
    prompt = (getattr(model, "prompts", None) or {}).get(prompt_name(model, kind)) or ""
    ids = tok([prompt + t for t in unique], truncation=True, max_length=model.max_seq_length)["input_ids"]
    return {t: tuple(x) for t, x in zip(unique, ids)}


def views_read_same(model, examples) -> list[str]:
    """The groups (seed ids) of ``examples`` with two views whose queries (``query + " " +
    instruction``) differ as text but read the same to ``model`` once cut."""
    queries: dict[str, set[str]] = {}
    for e in examples:
        queries.setdefault(e["group"], set()).add(format_query(e["query"], e["instruction"]))
    several = {g: q for g, q in queries.items() if len(q) > 1}
    ids = read_ids(model, [t for q in several.values() for t in q], "query")
    if ids is None:
        return []
    return sorted(g for g, q in several.items() if len({ids[t] for t in q}) < len(q))


def warn_cut_alike(model, examples) -> list[str]:
    """Warn about the seeds whose views read the same once cut at the training length (none: no
    warning); returns their ids. A list of examples only (a streamed Arrow set is not checked)."""
    if not isinstance(examples, list):
        return []
    same = views_read_same(model, examples)
    if same:
        log.warning(
            "%d seeds have two views (query + instruction) that read the same once cut at the training "
            "length, %d tokens (query prompt included): each trains one input with swapped labels. "
            "Train with a longer max_seq_length, shorter instructions or a shorter query_prompt: %s",
            len(same),
            model.max_seq_length,
            _preview(same),
        )
    return same


def _preview(ids, n: int = 5) -> str:
    return ", ".join(ids[:n]) + (" ..." if len(ids) > n else "")
