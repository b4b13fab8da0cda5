"""What training reads of its examples: each text as token ids, its prompt first, cut at the
training length (``TrainConfig.max_seq_length``; docs/method.md §3).

Two texts that differ can read the same once cut: a seed's two views when the instruction and
its reversal differ only past the cut (a long narrative, or a query prompt that fills the length),
so the dual view trains one input with swapped labels; a positive and one of its negatives when
they differ only past the cut (one source's long header in front of both), so the loss ranks a
vector above itself. ``warn_cut_alike`` names them before a run
trains, as the evaluation names FollowIR queries whose two instructions read the same
(``evaluation.evaluator.changes_cut_off``). Examples given as a list are checked; a streamed Arrow
set is not. The check runs on rank 0 while other ranks wait, so its cost is bounded: each text is
kept as a 16-byte digest of its cut token ids (not the ids), tokenized in chunks, and above
``MAX_CHECKED`` examples only a fixed sample of that many (whole seeds, drawn with seed 0) is
checked, said in a log line ("checked N of M examples"). Not handled here: building the examples (``trainsets``), training (``trainer``).
"""

from __future__ import annotations

import hashlib
import logging
import random
from array import array

from ..core.models import format_query, prompt_name

log = logging.getLogger(__name__)

# examples checked at most; above it a fixed sample. Worst case (every passage distinct, 30
# negatives): ~620k texts, ~2.5 min on 2 cores, ~0.1 GiB of digests; bundled seeds: ~1 s per 2k
MAX_CHECKED = 20_000
_CHUNK = 1024  # texts tokenized per call


def read_ids(model, texts, kind: str) -> dict[str, bytes] | None:
    """``{text: a 16-byte digest of its token ids}`` for each distinct text as ``model`` reads it
    in training (its stored prompt for ``kind`` first, cut at its ``max_seq_length``), tokenized
    ``_CHUNK`` texts at a time; None without a tokenizer. Equal digests: the same ids."""
    tok = getattr(model, "tokenizer", None)
    if tok is None or not callable(tok):
        return None
    unique = list(dict.fromkeys(texts))
    if not unique:  # a tokenizer called on no text fails
        return {}
    prompt = (getattr(model, "prompts", None) or {}).get(prompt_name(model, kind)) or ""
    out = {}
    for i in range(0, len(unique), _CHUNK):
        part = unique[i : i + _CHUNK]
        ids = tok([prompt + t for t in part], truncation=True, max_length=model.max_seq_length)["input_ids"]
        out.update(
            (t, hashlib.blake2b(array("q", x).tobytes(), digest_size=16).digest()) for t, x in zip(part, ids)
        )
    return out


def checked_sample(examples: list, limit: int | None = None) -> list:
    """``examples``, or above ``limit`` (``MAX_CHECKED``) about that many of them: whole seeds (an
    example's ``group``, else its id) in an order drawn with seed 0 until ``limit`` is reached, so a
    seed's views stay together (the last seed is taken whole, past ``limit`` by at most its views)."""
    limit = MAX_CHECKED if limit is None else limit
    if len(examples) <= limit:
        return examples
    by_seed: dict[str, list] = {}
    for e in examples:
        by_seed.setdefault(e.get("group", e["id"]), []).append(e)
    keys = sorted(by_seed)
    random.Random(0).shuffle(keys)
    out: list = []
    for k in keys:
        if len(out) >= limit:
            break
        out.extend(by_seed[k])
    return out


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
    not checked). Above ``MAX_CHECKED`` examples a fixed sample is checked, said in each line."""
    if not isinstance(examples, list):
        return []
    checked = checked_sample(examples)
    of = (
        f" (checked {len(checked)} of {len(examples)} examples, a fixed sample)"
        if checked is not examples
        else ""
    )
    if of:
        log.info(
            "length check: checked %d of %d examples (a fixed sample above %d)",
            len(checked),
            len(examples),
            MAX_CHECKED,
        )
    alike = positives_read_as_negatives(model, checked, num_negatives)
    if alike:
        log.warning(
            "%d examples have a positive that reads the same as one of their negatives once cut at the "
            "training length, %d tokens (document prompt included)%s: the loss ranks one input above "
            "itself. Train with a longer max_seq_length or passages that differ earlier: %s",
            len(alike),
            model.max_seq_length,
            of,
            _preview(alike),
        )
    same = views_read_same(model, checked)
    if same:
        log.warning(
            "%d seeds have two views (query + instruction) that read the same once cut at the training "
            "length, %d tokens (query prompt included)%s: each trains one input with swapped labels. "
            "Train with a longer max_seq_length, shorter instructions or a shorter query_prompt: %s",
            len(same),
            model.max_seq_length,
            of,
            _preview(same),
        )
    return same


def _preview(ids, n: int = 5) -> str:
    return ", ".join(ids[:n]) + (" ..." if len(ids) > n else "")
