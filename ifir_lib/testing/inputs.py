"""Small inputs for tests, benchmarks and smoke notebooks, built in one place (as mteb keeps its mock tasks).

- ``synthetic_followir``: a FollowIR-format set of any size (recombined template sentences: good
  for exercising code paths and timing, not for measuring quality);
- ``write_example_inputs``: made-up inputs for every figure (the model is called
  ``synthetic-example``, so a figure drawn from them says so);
- ``make_seed`` / ``write_seeds`` / ``write_beir``: valid seed rows and a tiny BEIR folder.

Nothing here is a result, and nothing here is used by the pipeline itself.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.config import PAPER_MODES
from ..core.run_folder import RunFolder
from ..evaluation.corpora import FollowIRData
from ..reporting.results import RESULT_COLUMNS

_TOPICS = [
    "solar panel subsidies",
    "coral reef bleaching",
    "antibiotic resistance",
    "rail freight strikes",
    "wildfire smoke exposure",
    "central bank interest rates",
    "youth football injuries",
    "plastic packaging bans",
    "measles vaccination campaigns",
    "offshore wind farms",
    "copper mining disputes",
    "river flood defences",
    "online gambling regulation",
    "heat pump installation",
    "organic dairy farming",
    "cyber attacks on hospitals",
]
_PLACES = ["Kenya", "Canada", "Japan", "Brazil", "Norway", "India", "Mexico", "Australia"]
_FILLER = [
    "Officials said further details would follow later in the week.",
    "The figures were compiled from several regional surveys.",
    "Critics argued that the measures came too late to matter.",
    "Local newspapers covered the story on their front pages.",
    "Analysts expect the debate to continue into next year.",
    "A spokesperson declined to comment on the allegations.",
    "The report cited interviews with more than forty residents.",
    "Several committees reviewed the evidence before the vote.",
]


def _topic_sentences(topic: str, place: str, rng: random.Random) -> list[str]:
    return [
        f"This article examines {topic} in {place}.",
        rng.choice(
            [
                f"Experts in {place} described recent trends in {topic}.",
                f"New data on {topic} was published by authorities in {place}.",
                f"Debate over {topic} has intensified across {place}.",
            ]
        ),
    ]


def synthetic_followir(
    n_queries: int = 4,
    n_docs: int = 40,
    n_candidates: int | None = None,
    rng_seed: int = 0,
    sentences: list[str] | None = None,
    sentences_per_doc: int = 3,
    name: str = "synthetic",
) -> FollowIRData:
    """A FollowIR-format set of any size, deterministic in ``rng_seed``.

    Query ``q`` asks about one topic; its original instruction accepts any country, the changed
    one only ``place(q)``. Each query owns a few on-topic documents (graded 1-2 under the
    original instruction); those about another country are the qrel diff (0 under the changed
    instruction). Other documents are off-topic. Each document is 2 topical sentences plus
    ``sentences_per_doc`` sentences drawn from ``sentences`` (default: a small built-in set),
    so a large corpus is recombined from a small one. ``n_candidates`` (default: all) documents
    per query form ``top_ranked``; a query's own documents are always among them.
    ``synthetic_followir(2, 10)`` -> 2 queries, 10 documents, 10 candidates each.
    """
    rng = random.Random(rng_seed)
    pool = list(sentences or _FILLER)
    n_own = max(3, min(8, n_docs // (2 * max(n_queries, 1))))
    if n_queries * n_own > n_docs:
        raise ValueError(f"n_docs={n_docs} is too small for {n_queries} queries (need {n_queries * n_own})")
    corpus, queries, qrels_og, qrels_changed, own = {}, {}, {}, {}, {}
    width = len(str(n_docs))
    doc_ids = [f"d{i:0{width}d}" for i in range(n_docs)]
    rng.shuffle(ids := list(doc_ids))
    for qi in range(n_queries):
        qid = f"q{qi + 1}"
        topic = _TOPICS[qi % len(_TOPICS)] + (
            "" if qi < len(_TOPICS) else f" (series {qi // len(_TOPICS) + 1})"
        )
        place = _PLACES[qi % len(_PLACES)]
        queries[qid] = {
            "text": f"What has been reported about {topic}?",
            "instruction_og": f"A relevant document discusses {topic} in any country.",
            "instruction_changed": f"A relevant document discusses {topic} and must be about {place}; "
            f"documents about other countries are not relevant.",
        }
        own[qid] = ids[qi * n_own : (qi + 1) * n_own]
        qrels_og[qid], qrels_changed[qid] = {}, {}
        for j, did in enumerate(own[qid]):
            here = place if j % 2 == 0 else rng.choice([p for p in _PLACES if p != place])
            body = _topic_sentences(topic, here, rng) + rng.sample(pool, min(sentences_per_doc, len(pool)))
            corpus[did] = {"title": f"{topic.capitalize()} in {here}", "text": " ".join(body)}
            grade = 2 if j % 3 == 0 else 1
            qrels_og[qid][did] = grade
            qrels_changed[qid][did] = grade if here == place else 0
        # one judged non-relevant document, as TREC qrels have
        qrels_og[qid][ids[(qi * n_own + n_own) % n_docs]] = 0
    for did in doc_ids:
        if did not in corpus:
            k = rng.randrange(len(_TOPICS))
            body = [f"A short note on {_TOPICS[k]} in {rng.choice(_PLACES)}."] + rng.sample(
                pool, min(sentences_per_doc + 1, len(pool))
            )
            corpus[did] = {"title": "", "text": " ".join(body)}
    corpus = {d: corpus[d] for d in doc_ids}
    top_ranked = {}
    for qid in queries:
        k = n_docs if n_candidates is None else min(n_candidates, n_docs)
        others = rng.sample([d for d in doc_ids if d not in set(own[qid])], max(0, k - len(own[qid])))
        cands = own[qid][:k] + others
        rng.shuffle(cands)
        top_ranked[qid] = cands
    return FollowIRData(name, corpus, queries, qrels_og, qrels_changed, top_ranked, [])


# mode -> (mean p-MRR, FollowIR Score) the made-up results scatter around
_EXAMPLE_EFFECTS = {
    "base": (-4, 40),
    "ins-orig": (2, 45),
    "ins-dv": (6, 44),
    "all-orig": (1, 47),
    "all-dv": (7, 47),
}
_EXAMPLE_DATASETS = ("robust04", "news21", "core17")


def _example_results(rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """Rows of ``results.csv`` and ``results_per_query.csv``: two seeds per mode of ``_EXAMPLE_EFFECTS``."""
    res, pq = [], []
    for mode, (pmrr, score) in _EXAMPLE_EFFECTS.items():
        for s in (0, 1):
            run_id = f"example-{mode}-s{s}"
            common = {
                "run_id": run_id,
                "model": "synthetic-example",
                "mode": mode,
                "rng_seed": s,
                "git_commit": "example",
                "timestamp": "2026-01-01T00:00:00Z",
                "prompts": "model",
                "plan": "",
                "backend": "torch",
                "data_sha": "",  # made-up sets: no content to digest
                "run_sha": "",  # and no run folders
            }
            for d in _EXAMPLE_DATASETS:
                q = rng.normal(pmrr, 20, size=12).clip(-100, 100)
                for i, v in enumerate(q):
                    pq.append(
                        {
                            "run_id": run_id,
                            "dataset": d,
                            "metric": "p_mrr",
                            "query_id": f"{d}-{i}",
                            "value": round(float(v), 3),
                        }
                    )
                m = float(q.mean())
                res.append(
                    {
                        **common,
                        "dataset": d,
                        "metric": "p_mrr",
                        "value": m,
                        "ci_low": m - 8,
                        "ci_high": m + 8,
                        "n_queries": len(q),
                    }
                )
            sc = score + float(rng.normal(0, 1))
            res.append(
                {
                    **common,
                    "dataset": "followir",
                    "metric": "score",
                    "value": sc,
                    "ci_low": sc - 3,
                    "ci_high": sc + 3,
                    "n_queries": 36,
                }
            )
    return res, pq


def _write_example_run_config(d: Path, mode: str, s: int) -> None:
    """The run record of one made-up training run (mode, rng seed, config)."""
    RunFolder(d).write(
        {"mode": mode, "rng_seed": s, "config": {"rng_seed": s, "base_model": "synthetic-example"}}
    )


def _write_example_runs(runs: Path, rng: np.random.Generator) -> None:
    """``runs/<mode>-s<seed>/``: a run config and a decaying train log per paper mode, seeds 0 and 1."""
    for mode in PAPER_MODES:
        for s in (0, 1):
            d = runs / f"{mode}-s{s}"
            d.mkdir(parents=True, exist_ok=True)
            _write_example_run_config(d, mode, s)
            start = 3.0 + rng.normal(0, 0.1)
            lines = [
                {
                    "step": t,
                    "epoch": t / 40,
                    "loss": float(start * math.exp(-t / 15) + 0.5 + rng.normal(0, 0.05)),
                    "learning_rate": 3e-5,
                }
                for t in range(2, 42, 2)
            ]
            RunFolder(d).train_log.write_text("".join(json.dumps(r) + "\n" for r in lines))


def _write_example_synthesis(path: Path, rng: np.random.Generator) -> None:
    """60 made-up synthesis rows, alternating backends, mostly accepted."""
    types = ("exclusion", "timeframe", "geography", "audience", "format")
    with open(path, "w") as fh:
        for i in range(60):
            backend = ("template", "openai")[i % 2]
            status = rng.choice(["accepted", "declined", "rejected", "failed"], p=[0.7, 0.15, 0.1, 0.05])
            rev = (
                " ".join(["word"] * int(rng.integers(8, 40))) if status in ("accepted", "rejected") else None
            )
            fh.write(
                json.dumps(
                    {
                        "key": f"s{i}#0",
                        "seed_id": f"s{i}",
                        "negative_index": 0,
                        "backend": backend,
                        "model": "example",
                        "status": str(status),
                        "reversal": rev,
                        "instruction_type": types[i % len(types)],
                        "verify_flip": bool(rng.random() < 0.8) if status == "accepted" else None,
                    }
                )
                + "\n"
            )


def write_example_inputs(root: str | Path, rng_seed: int = 0) -> dict[str, Path]:
    """Write made-up inputs for every figure under ``root``: ``results.csv``, ``results_per_query.csv``,
    ``runs/`` (train logs) and ``synthesis.jsonl``. The model is called ``synthetic-example`` so
    a figure drawn from them says so; the numbers mean nothing.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(rng_seed)  # one stream, drawn in this order: results, runs, synthesis
    res, pq = _example_results(rng)
    pd.DataFrame(res)[RESULT_COLUMNS].to_csv(root / "results.csv", index=False)
    pd.DataFrame(pq).to_csv(root / "results_per_query.csv", index=False)
    runs = root / "runs"
    _write_example_runs(runs, rng)
    _write_example_synthesis(root / "synthesis.jsonl", rng)
    return {
        "root": root,
        "results": root / "results.csv",
        "per_query": root / "results_per_query.csv",
        "runs": runs,
        "synthesis": root / "synthesis.jsonl",
    }


TOPICS = [
    "solar panels",
    "migraine treatment",
    "coral reefs",
    "urban cycling",
    "sourdough baking",
    "lithium mining",
    "sleep apnea",
    "glacier retreat",
    "jazz history",
    "wildfire smoke",
]
PLACES = ["Germany", "Spain", "Kenya", "Chile", "Japan", "Canada"]


def make_seed(i: int, negatives: int = 2, reference: bool = True) -> dict:
    """A small valid seed (schema of ``ifir_lib.seeds.schema``) with distinct, readable texts."""
    topic = TOPICS[i % len(TOPICS)]
    place = lambda k: PLACES[(i + k) % len(PLACES)]  # noqa: E731
    seed = {
        "id": f"seed-{i:04d}",
        "query": f"{topic} research {i}",
        "instruction": f"Only consider studies conducted in {place(0)}.",
        "instruction_type": "geography",
        "positive": {
            "id": f"pos-{i:04d}",
            "text": f"A field study in {place(0)} examined {topic} over five years.",
        },
        "instruction_negatives": [
            {
                "id": f"neg-{i:04d}-{k}",
                "text": f"Researchers in {place(k + 1)} report new findings on {topic}.",
            }
            for k in range(negatives)
        ],
        "hard_negatives": [
            {"id": f"hard-{i:04d}-{k}", "text": f"An unrelated note number {k} about kitchen tiles."}
            for k in range(2)
        ],
    }
    if reference:
        seed["reference_reversal"] = f"Focus on work from {place(1)}; leave out studies from {place(0)}."
    return seed


def write_seeds(path, n: int, **kw):
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(make_seed(i, **kw)) + "\n")
    return path


def write_beir(
    folder: str | Path, corpus: dict[str, str], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> Path:
    """A BEIR-style folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, **(t if isinstance(t, dict) else {"title": "", "text": t})}) + "\n"
            for d, t in corpus.items()
        )
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, ds in qrels.items() for d, s in ds.items())
    )
    return folder
