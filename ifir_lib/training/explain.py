"""Notebook 03's worked example: one tiny dual-view batch, its relation matrix and its loss.

Two seeds, each in both views (query + I with P+ positive; query + I' with N* positive), built
by ``trainsets.build_trainset`` exactly as training builds them. The batch's documents are
deduplicated (a seed's two views share them), and the relation matrix says, for every query row
and every unique document, +1 (positive), -1 (negative) or 0 (not a candidate for that row).
The loss is ``RelationInfoNCELoss.info_nce`` on the base model's embeddings: each positive
competes with its own row's negatives (docs/method.md §3). The per-row terms are computed again
by hand from the score table, and their mean equals the library's loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.models import encode, format_document, format_query, load_model
from .trainsets import build_trainset, encode_ids

SIGN = {1: "+1", -1: "-1", 0: "·"}


@dataclass(frozen=True)
class TinyBatch:
    examples: list[dict]
    relations: pd.DataFrame  # rows: query views; columns: unique documents; +1 / -1 / ·
    scores: pd.DataFrame  # cosine / temperature, same shape
    row_loss: pd.Series  # -log softmax of each row's positive over its candidates, by hand
    loss: float  # RelationInfoNCELoss.info_nce on the same embeddings


VIEW = {"orig": "I", "dv": "I'"}


def _doc_names(examples: list[dict]) -> dict[str, str]:
    """Doc id -> "<seed> P+" / "<seed> N*" / "<seed> hard neg." (the seed whose row lists it first)."""
    names = {e["positive"]["id"]: f"{e['group']} {'P+' if e['view'] == 'orig' else 'N*'}" for e in examples}
    for e in examples:
        for n in e["negatives"]:
            names.setdefault(n["id"], f"{e['group']} hard neg.")
    return names


def tiny_batch(
    seeds: list[dict], model="minilm", num_negatives: int = 2, temperature: float = 0.02
) -> TinyBatch:
    """The Ins-DV batch of the first two seeds (two views each) with ``num_negatives`` negatives."""
    import torch

    from .loss import RelationInfoNCELoss

    model = load_model(model) if isinstance(model, str) else model
    two = [s for s in seeds if s.get("reference_reversal")][:2]
    ts = build_trainset("ins-dv", two, budget=4, num_negatives=num_negatives, rng_seed=0)
    examples = sorted(ts.examples, key=lambda e: (e["group"], e["view"] != "orig"))
    labels = torch.tensor(encode_ids([{**e, "negatives": e["negatives"][:num_negatives]} for e in examples]))
    first, rel = RelationInfoNCELoss.relation_matrix(labels[:, 2:])
    flat = [d for j in range(1 + num_negatives) for d in _column(examples, j)]  # column-major, as the loss
    docs = [flat[i] for i in first.tolist()]
    q = encode(model, [format_query(e["query"], e["instruction"]) for e in examples], "query")
    d = encode(model, [format_document(x) for x in docs], "document")
    loss_fn = RelationInfoNCELoss(model, temperature=temperature)
    loss = float(loss_fn.info_nce(torch.tensor(q), torch.tensor(d), rel, labels))
    rows = [f"{e['group']} · q + {VIEW[e['view']]}" for e in examples]
    names = _doc_names(examples)
    cols = [names[x["id"]] for x in docs]
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    scores = pd.DataFrame(cos / temperature, index=rows, columns=cols)
    relations = pd.DataFrame(rel.numpy(), index=rows, columns=cols)
    order = sorted(
        cols, key=lambda c: (c.split()[0], ["P+", "N*"].index(c.split()[1]) if " hard" not in c else 2)
    )
    scores, relations = scores.astype(float)[order], relations[order]
    return TinyBatch(examples, relations.map(SIGN.get), scores.round(1), _by_hand(scores, relations), loss)


def _column(examples: list[dict], j: int) -> list[dict]:
    return [e["positive"] if j == 0 else e["negatives"][j - 1] for e in examples]


def _by_hand(scores: pd.DataFrame, relations: pd.DataFrame) -> pd.Series:
    """Per row: log(exp(s_pos) + sum over negatives exp(s_neg)) - s_pos."""
    out = {}
    for row in scores.index:
        s, r = scores.loc[row].to_numpy(), relations.loc[row].to_numpy()
        pos = s[r == 1][0]
        out[row] = float(np.logaddexp.reduce(np.concatenate([[pos], s[r == -1]])) - pos)
    return pd.Series(out, name="loss")
