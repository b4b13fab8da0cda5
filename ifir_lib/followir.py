"""FollowIR-format folders in the original layout (REFERENCE.md §2): read, check, write.

Layout::

    corpus.jsonl              {"_id", "title", "text"}
    queries.jsonl             {"_id", "text", "instruction_og", "instruction_changed", ...}
    qrels_og/test.jsonl       {"query-id", "corpus-id", "score"}   graded 0/1/2
    qrels_changed/test.jsonl  {"query-id", "corpus-id", "score"}
    top_ranked.jsonl          {"qid", "pid"}                        one row per candidate

Problems that mteb tolerates (qrels naming unknown documents, a query without a changed
instruction, an empty candidate list, a query without og or changed qrels) are collected in
``FollowIRData.problems`` with counts, logged as warnings, and the affected queries are dropped,
never scored as zero; candidates missing from the corpus are reported and ignored. A malformed
line raises ``DataError`` naming file and line.
``synthetic_followir`` builds a set of any size from a seed (tests, benchmarks); its text is
recombined template sentences, good for exercising code paths and timing, not for measuring
quality. Not handled here: encoding or scoring (``evaluate``).
"""
from __future__ import annotations

import collections
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from .config import FOLLOWIR_DIR
from .errors import DataError, read_jsonl

log = logging.getLogger(__name__)

Qrels = dict[str, dict[str, int]]


@dataclass
class FollowIRData:
    name: str
    corpus: dict[str, dict]                 # doc id -> {"title", "text"}
    queries: dict[str, dict]                # qid -> {"text", "instruction_og", "instruction_changed"}
    qrels_og: Qrels
    qrels_changed: Qrels
    top_ranked: dict[str, list[str]]        # qid -> candidate doc ids (the reranking pool)
    problems: list[str] = field(default_factory=list)

    @property
    def qrel_diff(self) -> dict[str, list[str]]:
        """Docs relevant under the original instruction but not under the changed one."""
        out = {}
        for qid, og in self.qrels_og.items():
            ch = self.qrels_changed.get(qid, {})
            diff = sorted(d for d, s in og.items() if s > 0 and ch.get(d, 0) <= 0)
            if diff:
                out[qid] = diff
        return out


def _preview(ids, n: int = 5) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (" ..." if len(ids) > n else "")


def _need(row, keys, path, n):
    for k in keys:
        if k not in row or row[k] is None:
            raise DataError(path, n, "missing", k)


def _load_qrels(path: Path) -> Qrels:
    qrels: Qrels = collections.defaultdict(dict)
    for n, row in read_jsonl(path):
        _need(row, ("query-id", "corpus-id", "score"), path, n)
        try:
            score = int(float(row["score"]))
        except (TypeError, ValueError):
            raise DataError(path, n, f"not a number: {row['score']!r}", "score") from None
        qrels[str(row["query-id"])][str(row["corpus-id"])] = score
    return dict(qrels)


def load_followir(folder: str | Path = FOLLOWIR_DIR, *, unknown_qrels: str = "exclude") -> FollowIRData:
    """Load and check a FollowIR-format folder; see the module docstring for what is dropped.

    ``unknown_qrels`` says what to do with a query whose qrels name documents missing from the
    corpus: ``"exclude"`` (default) drops the query with a warning; ``"keep"`` keeps the
    judgments, which then count as relevant-but-unretrievable (trec_eval's convention, and what
    mteb does with such qrels).
    """
    if unknown_qrels not in ("exclude", "keep"):
        raise ValueError(f"unknown_qrels must be 'exclude' or 'keep', not {unknown_qrels!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a directory (expected a FollowIR-format folder)")
    corpus = {}
    cpath = folder / "corpus.jsonl"
    for n, row in read_jsonl(cpath):
        _need(row, ("_id", "text"), cpath, n)
        if not isinstance(row["text"], str):
            raise DataError(cpath, n, "must be a string", "text")
        corpus[str(row["_id"])] = {"title": row.get("title") or "", "text": row["text"]}
    queries = {}
    qpath = folder / "queries.jsonl"
    for n, row in read_jsonl(qpath):
        _need(row, ("_id", "text", "instruction_og"), qpath, n)
        for k in ("text", "instruction_og"):
            if not isinstance(row[k], str):
                raise DataError(qpath, n, "must be a string", k)
        queries[str(row["_id"])] = {"text": row["text"], "instruction_og": row["instruction_og"],
                                   "instruction_changed": row.get("instruction_changed") or ""}
    qrels_og = _load_qrels(folder / "qrels_og" / "test.jsonl")
    qrels_changed = _load_qrels(folder / "qrels_changed" / "test.jsonl")
    top = collections.defaultdict(list)
    tpath = folder / "top_ranked.jsonl"
    for n, row in read_jsonl(tpath):
        _need(row, ("qid", "pid"), tpath, n)
        pids = row["pid"] if isinstance(row["pid"], list) else [row["pid"]]
        top[str(row["qid"])].extend(str(p) for p in pids)

    problems = []
    def drop(qids, why):
        qids = [q for q in qids if q in queries]
        if qids:
            problems.append(f"{len(qids)} queries {why}: {_preview(qids)}")
            for q in qids:
                queries.pop(q, None)

    unknown = collections.Counter()
    for qrels in (qrels_og, qrels_changed):
        for qid, docs in qrels.items():
            if qid in queries:
                unknown[qid] += sum(1 for d in docs if d not in corpus)
    unknown = +unknown  # drop zero counts
    if unknown:
        what = f"{sum(unknown.values())} qrels name documents not in the corpus (in {len(unknown)} queries)"
        if unknown_qrels == "exclude":
            drop(list(unknown), f"have qrels naming unknown documents ({what}); excluded")
        else:
            problems.append(f"{what}; kept as relevant but unretrievable")
    not_in_corpus = collections.Counter(q for q, ps in top.items() if q in queries for p in ps if p not in corpus)
    if not_in_corpus:
        problems.append(f"{sum(not_in_corpus.values())} candidates in top_ranked are not in the corpus "
                        f"(in {len(not_in_corpus)} queries: {_preview(not_in_corpus)}); those candidates are ignored")
    drop([q for q, v in queries.items() if not v["instruction_changed"].strip()], "have no changed instruction; excluded")
    drop([q for q in queries if not [p for p in top.get(q, []) if p in corpus]], "have an empty candidate list; excluded")
    drop([q for q in queries if not qrels_og.get(q)], "have no og qrels; excluded")
    # mteb drops a query without judgments, so its changed run would vanish and p-MRR skip it
    drop([q for q in queries if not qrels_changed.get(q)], "have no changed qrels; excluded")
    top_ranked = {q: list(dict.fromkeys(p for p in top[q] if p in corpus)) for q in queries}
    for p in problems:
        log.warning("%s: %s", folder, p)
    return FollowIRData(folder.name, corpus, queries, {q: qrels_og[q] for q in queries},
                        {q: qrels_changed.get(q, {}) for q in queries}, top_ranked, problems)


def write_followir(data: FollowIRData, folder: str | Path) -> Path:
    """Write ``data`` in the original layout (used to build the bundled set and benchmarks)."""
    folder = Path(folder)
    (folder / "qrels_og").mkdir(parents=True, exist_ok=True)
    (folder / "qrels_changed").mkdir(parents=True, exist_ok=True)
    def dump(path, rows):
        with open(path, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    dump(folder / "corpus.jsonl", ({"_id": d, **v} for d, v in data.corpus.items()))
    dump(folder / "queries.jsonl", ({"_id": q, **v} for q, v in data.queries.items()))
    for sub, qrels in (("qrels_og", data.qrels_og), ("qrels_changed", data.qrels_changed)):
        dump(folder / sub / "test.jsonl", ({"query-id": q, "corpus-id": d, "score": s}
                                           for q, docs in qrels.items() for d, s in docs.items()))
    dump(folder / "top_ranked.jsonl", ({"qid": q, "pid": p} for q, ps in data.top_ranked.items() for p in ps))
    return folder


# --------------------------------------------------------------------------------------------
# Synthetic sets (tests and benchmarks)

_TOPICS = ["solar panel subsidies", "coral reef bleaching", "antibiotic resistance", "rail freight strikes",
           "wildfire smoke exposure", "central bank interest rates", "youth football injuries",
           "plastic packaging bans", "measles vaccination campaigns", "offshore wind farms",
           "copper mining disputes", "river flood defences", "online gambling regulation",
           "heat pump installation", "organic dairy farming", "cyber attacks on hospitals"]
_PLACES = ["Kenya", "Canada", "Japan", "Brazil", "Norway", "India", "Mexico", "Australia"]
_FILLER = ["Officials said further details would follow later in the week.",
           "The figures were compiled from several regional surveys.",
           "Critics argued that the measures came too late to matter.",
           "Local newspapers covered the story on their front pages.",
           "Analysts expect the debate to continue into next year.",
           "A spokesperson declined to comment on the allegations.",
           "The report cited interviews with more than forty residents.",
           "Several committees reviewed the evidence before the vote."]


def _topic_sentences(topic: str, place: str, rng: random.Random) -> list[str]:
    return [f"This article examines {topic} in {place}.",
            rng.choice([f"Experts in {place} described recent trends in {topic}.",
                        f"New data on {topic} was published by authorities in {place}.",
                        f"Debate over {topic} has intensified across {place}."])]


def synthetic_followir(n_queries: int = 4, n_docs: int = 40, n_candidates: int | None = None, seed: int = 0,
                       sentences: list[str] | None = None, sentences_per_doc: int = 3,
                       name: str = "synthetic") -> FollowIRData:
    """A FollowIR-format set of any size, deterministic in ``seed``.

    Query ``q`` asks about one topic; its original instruction accepts any country, the changed
    one only ``place(q)``. Each query owns a few on-topic documents (graded 1-2 under the
    original instruction); those about another country are the qrel diff (0 under the changed
    instruction). Other documents are off-topic. Each document is 2 topical sentences plus
    ``sentences_per_doc`` sentences drawn from ``sentences`` (default: a small built-in set),
    so a large corpus is recombined from a small one. ``n_candidates`` (default: all) documents
    per query form ``top_ranked``; a query's own documents are always among them.
    ``synthetic_followir(2, 10)`` -> 2 queries, 10 documents, 10 candidates each.
    """
    rng = random.Random(seed)
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
        topic = _TOPICS[qi % len(_TOPICS)] + ("" if qi < len(_TOPICS) else f" (series {qi // len(_TOPICS) + 1})")
        place = _PLACES[qi % len(_PLACES)]
        queries[qid] = {"text": f"What has been reported about {topic}?",
                        "instruction_og": f"A relevant document discusses {topic} in any country.",
                        "instruction_changed": f"A relevant document discusses {topic} and must be about {place}; "
                                               f"documents about other countries are not relevant."}
        own[qid] = ids[qi * n_own:(qi + 1) * n_own]
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
            body = [f"A short note on {_TOPICS[k]} in {rng.choice(_PLACES)}."] + rng.sample(pool, min(sentences_per_doc + 1, len(pool)))
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
