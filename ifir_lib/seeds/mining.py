"""``ifir mine-negatives``: hard negatives for each seed, mined from the pooled corpus of all seeds.

Every passage of every seed (positives, instruction negatives, hard negatives already written)
forms one pool, deduplicated by text. For each seed the bare query ranks the pool with an
embedder (dense cosine; ``minilm`` by default) and the top-ranked passages that survive three
filters become its ``hard_negatives``:

1. never the seed's own positive or instruction negatives (they are relevant to the bare query),
   nor those of another seed with the same query (``normalized_text``), relevant to it alike;
2. no near-duplicate of those (cosine >= ``dup_cosine`` to any of them);
3. no likely false negative: a candidate the query scores above ``max_rel`` x its score of the
   positive is skipped ("positive-aware" mining, Moreira et al., NV-Retriever, arXiv 2407.15831).

Without ``replace`` a seed keeps the hard negatives it holds (hand-picked ones too) and is topped
up to ``k``; seeds that already hold ``k`` are left as they are. ``replace=True`` mines ``k`` new
ones for every seed. Seeds the pool leaves short of ``k`` are counted (``short_of_k``) and warned
about. Not handled here: BM25, mining at Promptriever scale (encode in shards with ``embed_cache``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ConfigError
from ..core.jsonl import write_jsonl
from ..core.models import encode, load_model
from ..core.progress import progress
from .schema import load_seeds, normalized_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MiningConfig:
    """Settings of one mining run; ``k`` hard negatives per seed. ``dup_cosine``, ``max_rel`` and
    ``same_query_cosine`` are cosines of the ``embedder`` and were set with MiniLM (the default):
    another embedder may need others (with MiniLM, 0.9 merges one pair of distinct bundled
    questions, "car batteries" and "electric car batteries")."""

    k: int = 3
    embedder: str = "minilm"
    dup_cosine: float = 0.95
    max_rel: float = 0.95
    replace: bool = False
    batch_size: int = 64
    # seeds whose queries are this close are one query ("how to taper before a marathon" and "how do
    # I taper before a marathon?"): neither takes the other's positive or instruction negatives
    same_query_cosine: float = 0.9

    def __post_init__(self):
        """``k < 1`` took the whole pool (the loop stops at ``len == k``) and a ``max_rel`` outside
        (0, 1] turned the false-negative guard off (above 1) or kept nothing (at or below 0)."""
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(
                f"k (--k) must be a whole number >= 1 (hard negatives per seed), got {self.k!r}"
            )
        if not 0 < self.same_query_cosine <= 1:
            raise ConfigError(f"same_query_cosine must be in (0, 1], got {self.same_query_cosine!r}")
        if not 0 < self.max_rel <= 1:
            raise ConfigError(
                f"max_rel (--max-rel) must be in (0, 1] (a share of the positive's score), got {self.max_rel!r}"
            )


def mine_negatives(
    seeds: list[dict], cfg: MiningConfig = MiningConfig(), model=None
) -> tuple[list[dict], dict]:
    """``(seeds with hard_negatives filled, counts)``; the input rows are not modified."""
    model = model or load_model(cfg.embedder)
    pool, seen = [], {}
    for s in seeds:
        for p in (s["positive"], *s["instruction_negatives"], *s.get("hard_negatives", [])):
            if p["text"] not in seen:
                seen[p["text"]] = len(pool)
                pool.append(p)
    todo = [i for i, s in enumerate(seeds) if cfg.replace or len(s.get("hard_negatives") or []) < cfg.k]
    docs = encode(model, [p["text"] for p in pool], "document", batch_size=cfg.batch_size)  # (n_pool, dim)
    every_query = encode(model, [s["query"] for s in seeds], "query", batch_size=cfg.batch_size)
    queries = every_query[todo]  # (n_todo, dim)
    sims = queries @ docs.T  # (n_todo, n_pool) cosine
    out, counts = (
        [dict(s) for s in seeds],
        {"mined": len(todo), "skipped_duplicate": 0, "skipped_false_negative": 0},
    )
    same_query = same_query_passages(seeds, lambda p: seen[p["text"]])
    counts["near_same_query_seeds"] = 0
    short = []
    for row, i in progress(enumerate(todo), total=len(todo), desc="mine negatives", unit="seed"):
        s = seeds[i]
        kept = [] if cfg.replace else list(s.get("hard_negatives") or [])  # topped up, not replaced
        # its own passages and those of seeds with its query (or one worded a little otherwise),
        # the positive first: another seed's answer to the same question is no negative of it
        twins = [
            seeds[t] for t in np.flatnonzero(every_query @ queries[row] >= cfg.same_query_cosine) if t != i
        ]
        near_only = [t for t in twins if normalized_text(t["query"]) != normalized_text(s["query"])]
        counts["near_same_query_seeds"] += bool(near_only)
        own = list(
            dict.fromkeys(
                [
                    seen[s["positive"]["text"]],
                    *same_query[normalized_text(s["query"])],
                    *(
                        seen[p["text"]]
                        for t in near_only
                        for p in (t["positive"], *t["instruction_negatives"])
                    ),
                ]
            )
        )
        pos_score = sims[row, own[0]]
        near = (docs @ docs[own].T).max(axis=1) >= cfg.dup_cosine  # (n_pool,) near any own passage
        chosen = list(kept)
        relevant = set(own) | {seen[p["text"]] for p in kept}
        for j in np.argsort(-sims[row]):
            if len(chosen) >= cfg.k:
                break
            if j in relevant:
                continue
            if near[j]:
                counts["skipped_duplicate"] += 1
            elif sims[row, j] > cfg.max_rel * pos_score:
                counts["skipped_false_negative"] += 1
            else:
                chosen.append(pool[j])
        out[i]["hard_negatives"] = chosen
        if len(chosen) < cfg.k:
            short.append(s["id"])
    _warn_short(short, cfg.k, len(pool), counts)
    return out, counts


def _warn_short(short: list[str], k: int, pool_size: int, counts: dict) -> None:
    """Count (``short_of_k``) and warn about the seeds left with fewer than ``k`` hard negatives:
    the pool ran out after the filters, which a training set then pads at random."""
    counts["short_of_k"] = len(short)
    if short:
        log.warning(
            "%d seed(s) got fewer than k=%d hard negatives (the pool of %d passages ran out after the "
            "filters), e.g. %s: ask for a smaller --k or give more seeds",
            len(short),
            k,
            pool_size,
            ", ".join(short[:5]),
        )


def same_query_passages(seeds: Iterable[dict], key: Callable[[dict], Hashable]) -> dict[str, list]:
    """``{normalised query: key(p) for the positives and instruction negatives p of every seed with
    that query}``: another seed's answer to the same bare query is relevant to it too. Mining keys
    passages by pool position; training's random padding (``training.trainsets``) by their text."""
    out: dict[str, list] = {}
    for s in seeds:
        out.setdefault(normalized_text(s["query"]), []).extend(
            key(p) for p in (s["positive"], *s["instruction_negatives"])
        )
    return out


def mine_file(seeds_path: str | Path, out: str | Path, cfg: MiningConfig = MiningConfig()) -> dict:
    """Read seeds with the training stage's rules (``hard_negatives`` and ``instruction_type``
    optional), mine, write ``out`` atomically; returns the counts."""
    seeds = load_seeds(seeds_path, stage="train")
    mined, counts = mine_negatives(seeds, cfg)
    write_jsonl(out, mined)
    return {**counts, "seeds": len(mined), "out": str(out)}
