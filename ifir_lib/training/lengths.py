"""What training reads of its examples: each text as token ids, its prompt first, cut at the
training length (``TrainConfig.max_seq_length``; docs/method.md §3).

Two texts that differ can read the same once cut: a seed's two views when the instruction and
its reversal differ only past the cut (a long narrative, or a query prompt that fills the length),
so the dual view trains one input with swapped labels; a positive and one of its negatives when
they differ only past the cut (one source's long header in front of both), so the loss ranks a
vector above itself. ``warn_cut_alike`` names them before a run
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
    if not unique:  # a tokenizer called on no text fails
        return {}
    prompt = (getattr(model, "prompts", None) or {}).get(prompt_name(model, kind)) or ""
    ids = tok([prompt + t for t in unique], truncation=True, max_length=model.max_seq_length)["input_ids"]
    return {t: tuple(x) for t, x in zip(unique, ids)}


def views_read_same(model, examples) -> list[str]:
    """The groups (seed ids) of ``examples`` with two views whose queries (``query + " " +
    instruction``) differ as text but read the same to ``model`` once cut. An example without a
    ``group`` (made by hand, for the mnrl loss) has no views to compare and is skipped."""
    queries: dict[str, set[str]] = {}
    for e in examples:
        if "group" in e:
            queries.setdefault(e["group"], set()).add(format_query(e["query"], e["instruction"]))
    several = {g: q for g, q in queries.items() if len(q) > 1}
    ids = read_ids(model, [t for q in several.values() for t in q], "query")
    if ids is None:
        return []
    return sorted(g for g, q in several.items() if len({ids[t] for t in q}) < len(q))


def positives_read_as_negatives(model, examples, num_negatives: int | None = None) -> list[str]:
    """The ids of ``examples`` whose positive differs as text from one of its negatives that train
    (the first ``num_negatives``, as ``trainsets.to_dataset`` keeps; None: all) but reads the same
    to ``model`` once cut (document prompt first)."""
    negatives = [e["negatives"][:num_negatives] for e in examples]
    texts = [p["text"] for e, negs in zip(examples, negatives) for p in (e["positive"], *negs)]
    ids = read_ids(model, texts, "document")
    if ids is None:
        return []
    out = []
    for e, negs in zip(examples, negatives):
        pos = e["positive"]["text"]
        if any(n["text"] != pos and ids[n["text"]] == ids[pos] for n in negs):
            out.append(e["id"])
    return sorted(out)


def warn_cut_alike(model, examples, num_negatives: int | None = None) -> list[str]:
    """Warn about the seeds whose views read the same once cut at the training length, and the
    examples whose positive reads as one of the negatives that train (the first ``num_negatives``)
    (none: no warning); returns the seeds' ids. A list of examples only (a streamed Arrow set is
    not checked)."""
    if not isinstance(examples, list):
        return []
    alike = positives_read_as_negatives(model, examples, num_negatives)
    if alike:
        log.warning(
            "%d examples have a positive that reads the same as one of their negatives once cut at the "
            "training length, %d tokens (document prompt included): the loss ranks one input above "
            "itself. Train with a longer max_seq_length or passages that differ earlier: %s",
            len(alike),
            model.max_seq_length,
            _preview(alike),
        )
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
