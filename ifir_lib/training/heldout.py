"""A held-out slice of the training seeds, for early stopping (docs/method.md §6).

The slice is chosen by a hash of each seed id, independent of any ``rng_seed`` and of the seeds'
order, so every mode and every training seed stops on the same held-out seeds, and none of them
is trained on. Seeds that share a relevant passage or a question (a copy under another id, a
re-export with one character changed, a reversed twin: ``related_seeds``) stay on one side together.
``HeldOutEvaluator`` scores a model on three pairwise accuracies that need no reversal of the
mode being trained, and the trainer keeps the checkpoint where their mean is highest:

- ``orig_acc``: under ``q + I``, P+ above each instruction negative and each hard negative;
- ``rev_acc``: under ``q + I'`` (the seed's reference reversal), N* above P+ and above the
  other instruction negatives (both pooled over the short and the narrative form of seeds
  that carry narratives);
- ``query_acc``: under the bare query, P+ and the instruction negatives above each hard
  negative (topical retrieval must not be lost while instructions are learned).

Not handled here: the evaluation sets (``evaluate``), training (``train``).
"""

from __future__ import annotations

import hashlib

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from ..core.models import encode, format_query
from ..seeds.forms import forms
from ..seeds.schema import NARRATIVE_FIELDS, normalized_text, text_key


def _rank(seed_id: str) -> str:
    return hashlib.sha256(f"heldout:{seed_id}".encode()).hexdigest()


def split_heldout(seeds: list[dict], n: int) -> tuple[list[dict], list[dict]]:
    """``(train, heldout)``: the ``n`` seeds with the smallest id hash are held out.

    Related seeds (``related_seeds``: a shared relevant passage or question, however spelled and
    under whatever ids, a reversed twin included) form one group, ranked by its smallest id hash and held
    out whole when it fits in what is left of ``n``, else trained on whole: no held-out seed's
    positive or question is trained on, and the split does not depend on the seeds' order.
    Without such groups the split is the ``n`` smallest id hashes.
    Example: ``a`` and its re-export ``b`` (same query and positive), ``n=2``, ``a`` ranked first
    -> ``a`` and ``b`` held out.
    """
    if n <= 0:
        return list(seeds), []
    if n >= len(seeds):
        raise ValueError(f"cannot hold out {n} of {len(seeds)} seeds")
    groups: dict[str, list[str]] = {}
    for sid, root in related_seeds(seeds).items():
        groups.setdefault(root, []).append(sid)
    held: set[str] = set()
    for members in sorted(groups.values(), key=lambda ids: min(map(_rank, ids))):
        if len(held) + len(members) <= n:
            held.update(members)
        if len(held) == n:
            break
    return [s for s in seeds if s["id"] not in held], [s for s in seeds if s["id"] in held]


def shared_bare_queries(train: list[dict], held: list[dict]) -> list[tuple[dict, dict]]:
    """``[(training seed, held-out seed)]`` asking the same bare query (``normalized_text``): the
    split groups a question with its instructions only (``split_heldout`` is pinned as it is), so
    a mode with a bare-query view (All-orig) trains the question the held-out seed's ``query_acc``
    scores. ``pipelines.train`` warns of them when it builds such a mode. One pass over the seeds."""
    asked: dict[str, dict] = {}
    for s in held:
        asked.setdefault(normalized_text(s["query"]), s)
    return [(s, asked[q]) for s in train if (q := normalized_text(s["query"])) in asked]


# the instructions a seed trains or is scored under, each a question with a relevant passage
_QUESTIONS = ("instruction", "reference_reversal", "aug_instruction", "abstract_reversal", *NARRATIVE_FIELDS)


def _seed_keys(s: dict) -> list[bytes]:
    """Every passage relevant under one of ``s``'s views (P+ and N*) and every question it asks
    (its query with each instruction, reversals and narratives included)."""
    k = s.get("reference_negative_index", 0)
    relevant = [s["positive"]["text"]]
    if 0 <= k < len(s.get("instruction_negatives") or []):
        relevant.append(s["instruction_negatives"][k]["text"])
    asks = [s.get(f) for f in _QUESTIONS]
    return [text_key("positive", t) for t in relevant] + [
        text_key("question", s["query"], i) for i in asks if i
    ]


def related_seeds(seeds: list[dict]) -> dict[str, str]:
    """``{seed id: its group's root id}``, grouping seeds that share a relevant passage (P+ or N*)
    or a question (the query with any of its instructions, reversals and narratives), compared
    after ``normalized_text``: two exports of one seed set, a seed re-worded by one character, one
    question with two positives, and a seed's reversed twin (its I' as instruction, its N* as
    positive), which trained exactly the held-out seed's ``rev_acc`` and ``orig_acc`` pairs.
    Union-find over every key."""
    parent = {s["id"]: s["id"] for s in seeds}

    def root(x):
        while parent[x] != x:
            parent[x] = x = parent[parent[x]]
        return x

    first: dict[bytes, str] = {}  # a digest per key (``text_key``), not the texts
    for s in seeds:
        for key in _seed_keys(s):
            other = first.setdefault(key, s["id"])
            a, b = root(other), root(s["id"])
            if a != b:
                parent[b] = a
    return {sid: root(sid) for sid in parent}


def _pairwise(score_of, q: int, better: list[int], worse: list[int]) -> list[float]:
    return [float(score_of[q, b] > score_of[q, w]) for b in better for w in worse]


def heldout_scores(model, seeds: list[dict], batch_size: int = 64) -> dict[str, float]:
    """The three accuracies (in %) and their mean ``heldout_score`` for ``model`` on ``seeds``;
    ``orig_acc`` and ``rev_acc`` pool both instruction forms of seeds that have narratives."""
    queries, docs = [], {}
    for s in seeds:
        for p in (s["positive"], *s["instruction_negatives"], *s["hard_negatives"]):
            docs.setdefault(p["id"], p["text"])
        queries.append(s["query"])
        queries += [format_query(s["query"], i) for form in forms(s) for i in form if i]
    qi = {t: i for i, t in enumerate(dict.fromkeys(queries))}
    di = {d: i for i, d in enumerate(docs)}
    q_emb = encode(model, list(qi), "query", batch_size=batch_size)
    d_emb = encode(model, list(docs.values()), "document", batch_size=batch_size)
    sim = np.asarray(q_emb) @ np.asarray(d_emb).T
    acc = {"orig_acc": [], "rev_acc": [], "query_acc": []}
    for s in seeds:
        pos = di[s["positive"]["id"]]
        ins = [di[p["id"]] for p in s["instruction_negatives"]]
        hard = [di[p["id"]] for p in s["hard_negatives"]]
        acc["query_acc"] += _pairwise(sim, qi[s["query"]], [pos, *ins], hard)
        k = int(s.get("reference_negative_index") or 0)
        for instruction, reversal in forms(s):
            acc["orig_acc"] += _pairwise(sim, qi[format_query(s["query"], instruction)], [pos], ins + hard)
            if reversal:
                others = [pos] + [d for i, d in enumerate(ins) if i != k]
                acc["rev_acc"] += _pairwise(sim, qi[format_query(s["query"], reversal)], [ins[k]], others)
    out = {k: 100.0 * float(np.mean(v)) if v else float("nan") for k, v in acc.items()}
    out["heldout_score"] = float(np.nanmean(list(out.values())))
    return out


class HeldOutEvaluator(SentenceEvaluator):
    """The trainer's evaluator: ``heldout_scores`` on the held-out seeds; higher is better.

    ``read_length``: the ``max_seq_length`` the model is scored at (restored after), the one the
    run is saved with (``trainer.saved_length``): the model in training reads the training length,
    and a checkpoint picked on what that reads was judged on another model than the one saved and
    evaluated (a narrative pair read the same at 96 tokens and differed at 256). None: as it is."""

    def __init__(self, seeds: list[dict], name: str = "heldout", read_length: int | None = None):
        super().__init__()
        if not seeds:
            raise ValueError("HeldOutEvaluator needs at least one held-out seed")
        self.seeds, self.name, self.read_length = seeds, name, read_length
        self.primary_metric = "score"

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        training_length = model.max_seq_length
        model.max_seq_length = self.read_length or training_length
        try:
            scores = heldout_scores(model, self.seeds)
        finally:
            model.max_seq_length = training_length
        metrics = {k.removeprefix("heldout_"): v for k, v in scores.items()}
        return self.prefix_name_to_metrics(metrics, self.name)
