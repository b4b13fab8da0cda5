"""Ranking metrics as pure functions over ``{qid: {doc_id: score}}`` runs and qrels.

p-MRR is written by hand (no maintained library has it) with mteb 2.x's semantics
(``mteb/_evaluators/retrieval_metrics.py``: ``calculate_pmrr``, ``get_rank_from_dict``,
``rank_score``); MAP@1000 and nDCG@k come from ``pytrec_eval`` (trec_eval), exactly the
measures mteb asks it for (``map_cut_1000``, ``ndcg_cut_k``). Every function returns values as
fractions (0-1, p-MRR in [-1, 1]); the evaluation layer multiplies by 100 for reporting.

Runs here are keyed by the *base* query id (``"305"``), one run per instruction; mteb's
``-og`` / ``-changed`` suffixes live only in ``mteb_tasks``. Queries missing from a run are
skipped with a warning that gives counts, never scored as zero.

Not handled here: encoding, reranking (``evaluate``) and confidence intervals (``stats``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

log = logging.getLogger(__name__)

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

# our metric names -> trec_eval measure names (the names mteb also reports, with "_cut_" -> "_at_")
TREC_MEASURES = {"map_at_1000": "map_cut_1000", "ndcg_at_5": "ndcg_cut_5", "ndcg_at_10": "ndcg_cut_10"}


def _preview(ids: Iterable[str], n: int = 5) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (" ..." if len(ids) > n else "")


def ranks(doc_scores: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks, sorted by ``(score, doc_id)`` descending, mteb >= 2.19.5's tie-break.

    ``ranks({"a": 0.5, "b": 0.9, "c": 0.5}) -> {"b": 1, "c": 2, "a": 3}`` (tie: "c" > "a").
    """
    order = sorted(doc_scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return {doc: i + 1 for i, (doc, _) in enumerate(order)}


def rank_score(og_rank: int, new_rank: int) -> float:
    """p-MRR of one changed document (Weller et al. 2024, arXiv 2403.15246, eq. 1).

    The changed instruction makes the document non-relevant, so moving *down* is good:
    ``og_rank >= new_rank`` (moved up or stayed) -> ``(1/og)/(1/new) - 1 <= 0``;
    otherwise -> ``1 - (1/new)/(1/og) > 0``.
    ``rank_score(4, 1) -> 1/4 - 1 = -0.75``; ``rank_score(1, 4) -> 1 - 1/4 = 0.75``.
    """
    if og_rank >= new_rank:
        return (1 / og_rank) / (1 / new_rank) - 1
    return 1 - (1 / new_rank) / (1 / og_rank)


def p_mrr_per_doc(
    og_run: Run, changed_run: Run, qrel_diff: Mapping[str, Iterable[str]]
) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: rank_score}}`` for every changed (qrel-diff) document.

    A document missing from a run gets rank ``len(run[qid]) + 1``, as in mteb. A query absent
    from either run is skipped with one warning naming how many and which.
    """
    out: dict[str, dict[str, float]] = {}
    missing = []
    for qid, docs in qrel_diff.items():
        docs = list(docs)
        if not docs:
            continue
        if qid not in og_run or qid not in changed_run:
            missing.append(qid)
            continue
        r_og, r_new = ranks(og_run[qid]), ranks(changed_run[qid])
        n_og, n_new = len(og_run[qid]) + 1, len(changed_run[qid]) + 1
        out[qid] = {d: rank_score(r_og.get(d, n_og), r_new.get(d, n_new)) for d in docs}
    if missing:
        log.warning(
            "p-MRR: %d of %d queries with changed documents are missing from a run and are skipped: %s",
            len(missing),
            len(qrel_diff),
            _preview(missing),
        )
    return out


def p_mrr_per_query(
    og_run: Run, changed_run: Run, qrel_diff: Mapping[str, Iterable[str]]
) -> dict[str, float]:
    """Per-query p-MRR: the mean ``rank_score`` over the query's changed documents."""
    return {q: sum(v.values()) / len(v) for q, v in p_mrr_per_doc(og_run, changed_run, qrel_diff).items()}


def p_mrr(og_run: Run, changed_run: Run, qrel_diff: Mapping[str, Iterable[str]]) -> float:
    """p-MRR (fraction): mean over changed docs per query, then mean over queries.

    Identical runs give 0; it is not defined (``ValueError``) when no query has a changed
    document in both runs.
    """
    per_q = p_mrr_per_query(og_run, changed_run, qrel_diff)
    if not per_q:
        raise ValueError("p-MRR is undefined: no query has changed documents in both runs")
    return sum(per_q.values()) / len(per_q)


def trec_per_query(
    run: Run, qrels: Qrels, metrics: Iterable[str] = ("map_at_1000", "ndcg_at_5")
) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value}}`` from pytrec_eval for metric names in ``TREC_MEASURES``.

    Scored queries are those in both ``run`` and ``qrels`` (trec_eval's rule, and mteb's);
    qrels queries missing from the run are reported in one warning. Relevance >= 1 counts as
    relevant for MAP; nDCG uses the graded labels (Järvelin & Kekäläinen 2002).
    """
    import pytrec_eval

    metrics = list(metrics)
    measures = {TREC_MEASURES[m] for m in metrics}
    # pytrec_eval rejects empty dicts and wants plain str -> int / float
    qrels_ = {q: {d: int(s) for d, s in docs.items()} for q, docs in qrels.items() if docs}
    run_ = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if q in qrels_ and docs}
    missing = set(qrels_) - set(run_)
    if missing:
        log.warning(
            "%d of %d judged queries have no results in the run and are skipped: %s",
            len(missing),
            len(qrels_),
            _preview(missing),
        )
    if not run_:
        return {m: {} for m in metrics}
    scores = pytrec_eval.RelevanceEvaluator(qrels_, measures).evaluate(run_)
    return {m: {q: s[TREC_MEASURES[m]] for q, s in scores.items()} for m in metrics}


def mean(per_query: Mapping[str, float]) -> float:
    """Mean over queries; ``nan`` for an empty mapping (never a silent zero)."""
    return sum(per_query.values()) / len(per_query) if per_query else float("nan")
