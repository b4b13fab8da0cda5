"""Evaluation stage: FollowIR p-MRR / MAP@1000 / nDCG@5 and general retrieval nDCG@10 by our code.

One result type (``EvalResult``, metrics x100 with 95% bootstrap intervals and per-query scores):

1. ``evaluate_followir(model, folder)``: a FollowIR-format folder in the original layout
   (docs/method.md §5), scored by our code. Each query's ``top_ranked`` candidates are reranked by
   cosine similarity twice, with ``query + " " + instruction_og`` and with
   ``... + instruction_changed`` (``models.format_query``, the model's stored prompts). p-MRR
   (``metrics``) compares the two runs on the qrel-diff documents; MAP@1000 and nDCG@5 come
   from pytrec_eval on the og run against the og qrels (the paper's Score; mteb 1.x loaded the
   two qrels swapped, so never take "changed" qrels for it).
2. ``evaluate_beir(model, folder)``: full-corpus dense retrieval nDCG@10 on a BEIR folder.

``prompts='model'`` (default) encodes with the model's stored query / document prompts;
``'benchmark'`` with the prompts the benchmark's own scripts apply (``tasks.PROMPT_RULES``:
FollowIR as mteb 2.x does it, which for our models' ``query`` / ``document`` prompts is the same;
a BEIR folder is not placed and falls back to the stored prompts). Every unique text is encoded
once per model and prompts, and cached on disk (``embed_cache``: the fingerprint covers the
prompts in use).
``backend`` (``'torch'`` default, ``'torch-bf16'``, ``'onnx'``, ``'onnx-int8'``, ``'openvino'``,
``'openvino-bf16'``) picks the encoder: PyTorch fp32 or bf16, or the same model's transformer
exported to ONNX and run by ONNX Runtime or OpenVINO
(``backends``); the cache keys on it.
``ranking_table`` is the notebook's ranking explorer.

Not handled here: metric formulas (``metrics``), statistics (``stats``), named mteb tasks
(``mteb_glue``, which builds on this module), the results table (``results``), training.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.errors import DataError
from ..core.models import (
    format_document,
    format_query,
    load_model,
    model_fingerprint,
    using_prompts,
)
from . import metrics as M
from .backends import backend_label, encoder_for, is_encoder, unwrap_encoder
from .corpora import FollowIRData, content_digest, load_beir, load_followir, preview_ids, score_metric_for
from .embed_cache import encode_cached, token_ids
from .stats import bootstrap_ci
from .tasks import FOLLOWIR_TASK_TYPE, prompts_for

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """One model on one dataset. ``metrics``, ``ci`` and ``per_query`` are x100.

    ``per_query[metric]`` is ``{qid: value}`` over the queries that metric averages (p-MRR:
    queries with changed documents). ``runs`` holds the rankings (``"og"`` / ``"changed"`` for
    FollowIR, ``"run"`` for retrieval), keyed by base query id, scores as floats.
    """

    dataset: str
    model: str
    metrics: dict[str, float]
    ci: dict[str, tuple[float, float]]
    per_query: dict[str, dict[str, float]]
    runs: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict, repr=False)
    source: str = "ifir"  # "ifir" (our code) or "mteb"
    fingerprint: str = ""
    problems: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    qrel_diff: dict[str, list[str]] = field(default_factory=dict, repr=False)
    score_metric: str | None = None
    data: FollowIRData | None = field(default=None, repr=False)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    prompts: str = "model"  # ``--prompts``: "model" or "benchmark" (``tasks.prompts_for``)
    backend: str = "torch"  # the encoder (``backends.backend_label``: ``onnx-int8@32`` at batch 32)
    data_sha: str = ""  # the evaluated set's ``corpora.content_digest`` when known up front (BEIR)

    def digest(self) -> str:
        """The evaluated set's ``corpora.content_digest`` (the results' ``data_sha``): ``data_sha``, else
        computed from ``data`` only when asked (``evaluate_models`` passes the one it already has);
        ``''`` for a named task."""
        return self.data_sha or (content_digest(self.data) if self.data is not None else "")

    @property
    def n_queries(self) -> dict[str, int]:
        return {m: len(v) for m, v in self.per_query.items()}

    def summary(self) -> dict:
        """Flat JSON-able dict: ``{"dataset", "model", "p_mrr", "p_mrr_ci_low", "p_mrr_ci_high", ...}``."""
        out = {"dataset": self.dataset, "model": self.model, "source": self.source, "prompts": self.prompts}
        for m, v in self.metrics.items():
            lo, hi = self.ci.get(m, (float("nan"), float("nan")))
            out.update(
                {
                    m: _r(v),
                    f"{m}_ci_low": _r(lo),
                    f"{m}_ci_high": _r(hi),
                    f"{m}_n_queries": len(self.per_query.get(m, {})),
                }
            )
        if self.score_metric:
            out["score_metric"] = self.score_metric
        if self.backend != "torch":
            out["backend"] = self.backend
        if self.problems:
            out["problems"] = self.problems
        return out

    def table(self):
        """The metrics as a small DataFrame for reading: one row per metric with its 95% interval
        and query count, values rounded to 2 places (x100)."""
        import pandas as pd

        rows = [
            {
                "dataset": self.dataset,
                "metric": m,
                "value": v,
                "ci_low": self.ci.get(m, (np.nan, np.nan))[0],
                "ci_high": self.ci.get(m, (np.nan, np.nan))[1],
                "queries": len(self.per_query.get(m, {})),
            }
            for m, v in self.metrics.items()
        ]
        return pd.DataFrame(rows).round(2)


FollowIRResult = EvalResult  # the name the brief and the notebooks use for FollowIR results


def _r(x: float) -> float | None:
    return None if x is None or x != x else round(float(x), 4)


def _with_ci(
    res: EvalResult, bootstrap: int, rng_seed: int, strata: Mapping[str, str] | None = None
) -> EvalResult:
    for m, pq in res.per_query.items():
        qids = list(pq)
        s = [strata[q] for q in qids] if strata else None
        res.ci[m] = bootstrap_ci([pq[q] for q in qids], n_boot=bootstrap, rng_seed=rng_seed, strata=s)
    return res


def _resolve_model(model, name: str | None = None):
    """``(SentenceTransformer, name)`` from a name/path, or from a loaded model (named by ``name``,
    else its model card)."""
    if isinstance(model, (str, Path)):
        return load_model(str(model)), name or str(model)
    card = getattr(model, "model_card_data", None)
    name = name or getattr(card, "base_model", None) or getattr(card, "model_name", None)
    return model, str(name or type(model).__name__)


# --------------------------------------------------------------------------------------------
# 1. FollowIR-format folders, our code


def _topk(doc_ids: list[str], scores: np.ndarray, k: int) -> dict[str, float]:
    if len(doc_ids) > k:  # mteb keeps only the top_k (1000) reranked candidates per query
        keep = np.argpartition(-scores, k - 1)[:k]
        doc_ids, scores = [doc_ids[i] for i in keep], scores[keep]
    return dict(zip(doc_ids, scores.tolist()))


def score_followir(data: FollowIRData, qv: np.ndarray, docs: np.ndarray, pos: dict, top_k: int = 1000):
    """``(og_run, changed_run)`` from vectors: ``qv`` holds every query with its og instruction, then
    every query with its changed one (``data.queries`` order); row ``pos[doc_id]`` of ``docs`` is
    that document's vector."""
    qids = list(data.queries)
    og, ch = {}, {}
    for i, q in enumerate(qids):
        cands = data.top_ranked[q]
        sims = docs[[pos[d] for d in cands]] @ np.stack([qv[i], qv[len(qids) + i]], axis=1)  # (n_cand, 2)
        og[q] = _topk(cands, sims[:, 0], top_k)
        ch[q] = _topk(cands, sims[:, 1], top_k)
    return og, ch


def rerank_followir(
    model,
    data: FollowIRData,
    *,
    batch_size: int = 32,
    cache=True,
    top_k: int = 1000,
    fingerprint: str | None = None,
) -> tuple[dict, dict, dict[str, float]]:
    """Rerank each query's candidates with the og and the changed instruction.

    Returns ``(og_run, changed_run, timings)``; runs are ``{qid: {doc_id: cosine}}``. The
    candidate documents are encoded once (shared by both runs); queries of both runs in one call.
    ``model`` may be an ``onnx_backend.OnnxEncoder`` (the cache then keys on its backend).
    """
    t0 = time.perf_counter()
    qids = list(data.queries)
    q_texts = [format_query(data.queries[q]["text"], data.queries[q]["instruction_og"]) for q in qids] + [
        format_query(data.queries[q]["text"], data.queries[q]["instruction_changed"]) for q in qids
    ]
    doc_ids = list(dict.fromkeys(d for q in qids for d in data.top_ranked[q]))
    fp = fingerprint or (model_fingerprint(model) if cache else None)
    docs = encode_cached(
        model,
        [format_document(data.corpus[d]) for d in doc_ids],
        "document",
        batch_size=batch_size,
        cache=cache,
        fingerprint=fp,
    )  # (n_docs, dim)
    qv = encode_cached(
        model, q_texts, "query", batch_size=batch_size, cache=cache, fingerprint=fp
    )  # (2 n_q, dim)
    t1 = time.perf_counter()
    og, ch = score_followir(data, qv, docs, {d: i for i, d in enumerate(doc_ids)}, top_k)
    return og, ch, {"encode_s": t1 - t0, "score_s": time.perf_counter() - t1}


def followir_per_query(
    og_run, changed_run, qrels_og, qrel_diff, score_metric: str = "map_at_1000"
) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value x100}}`` for p_mrr, map_at_1000, ndcg_at_5 and score (= ``score_metric``)."""
    trec = M.trec_per_query(og_run, qrels_og, ("map_at_1000", "ndcg_at_5"))
    pq = {"p_mrr": M.p_mrr_per_query(og_run, changed_run, qrel_diff), **trec}
    pq = {m: {q: 100 * v for q, v in d.items()} for m, d in pq.items()}
    pq["score"] = dict(pq[score_metric])
    return pq


def _warn_if_not_cosine(model, name: str) -> None:
    """This engine ranks by cosine (normalised vectors); a model that declares another similarity
    (``dot``, as TAS-B-like backbones do) is ranked by it under ``--engine mteb``: the two engines'
    numbers then differ (p-MRR -5.03 vs -3.96 on bundled v1 for a dot-product MiniLM)."""
    sim = getattr(model, "similarity_fn_name", None)
    normalised = any(type(m).__name__ == "Normalize" for m in getattr(model, "_modules", {}).values())
    if sim not in (None, "cosine") and not (sim == "dot" and normalised):  # on unit vectors dot is cosine
        log.warning(
            "%s declares similarity %r; this engine ranks by cosine (mteb's engine by %r): "
            "their numbers differ, so compare rows of one engine",
            name,
            sim,
            sim,
        )


def same_once_read(model, pairs: Mapping[str, tuple[str, str]], prompt: str | None = None) -> list[str]:
    """The ids of ``pairs`` (``{qid: (og text, changed text)}``, as the model is given them) whose
    two texts are one once the model has read them (``prompt``, else its stored query prompt,
    first; cut at its ``max_seq_length``). ``[]`` without a tokenizer."""
    qids = list(pairs)
    og = token_ids(model, [pairs[q][0] for q in qids], "query", prompt) or []
    changed = token_ids(model, [pairs[q][1] for q in qids], "query", prompt) or []
    return [q for q, a, b in zip(qids, og, changed) if a == b]


def changes_cut_off(model, data: FollowIRData) -> list[str]:
    """Queries whose og and changed texts are the same once the model has read them (prompt
    included, cut at its ``max_seq_length``): the changed sentence lies past what it reads, so
    both runs are one ranking and p-MRR is 0 by construction. ``[]`` without a tokenizer."""
    q = data.queries
    pairs = {
        i: (format_query(v["text"], v["instruction_og"]), format_query(v["text"], v["instruction_changed"]))
        for i, v in q.items()
    }
    return same_once_read(model, pairs)


def warn_changes_cut_off(model, data: FollowIRData, name: str) -> list[str]:
    """``changes_cut_off`` as a warning and a problem line (``[]`` when none): the queries stay in
    the mean, as mteb keeps them, but a reader learns that their 0 says nothing of the model."""
    return warn_same_once_read(model, data.name, changes_cut_off(model, data), len(data.queries))


def warn_same_once_read(model, set_name: str, same: list[str], n_queries: int) -> list[str]:
    """The warning and problem line for the queries ``same`` of ``n_queries`` that read the same
    with both instructions (``[]`` when none): p-MRR 0 by construction, kept in the mean."""
    if not same:
        return []
    n = getattr(model, "max_seq_length", None)
    problem = (
        f"{len(same)} of {n_queries} queries read the same with both instructions once cut at "
        f"the model's {n} tokens (the change lies past them, or there is none): p-MRR 0 by "
        f"construction, kept in the mean: {preview_ids(same)}"
    )
    log.warning("%s: %s", set_name, problem)
    return [problem]


def evaluate_followir(
    model,
    folder,
    *,
    batch_size: int = 32,
    cache=True,
    bootstrap: int = 1000,
    rng_seed: int = 0,
    score_metric: str | None = None,
    top_k: int = 1000,
    name: str | None = None,
    prompts: str = "model",
    backend: str = "torch",
) -> EvalResult:
    """Evaluate ``model`` (name, path or SentenceTransformer) on a FollowIR-format folder.

    Returns p-MRR, MAP@1000, nDCG@5 and ``score`` (x100) with 95% bootstrap intervals over
    queries (``bootstrap`` resamples, ``rng_seed``). ``name`` labels a loaded model. ``score`` is the paper's per-dataset Score:
    nDCG@5 for News21-like names, MAP@1000 otherwise (override with ``score_metric``).
    ``folder`` may also be a loaded ``FollowIRData``. Problems in the data (see
    ``corpora.load_followir``) are warned about and listed in ``result.problems``.
    ``prompts``: ``'model'`` or ``'benchmark'``; ``backend``: ``'torch'``, ``'torch-bf16'``, ``'onnx'``,
    ``'onnx-int8'``, ``'openvino'`` or ``'openvino-bf16'`` (module docstring; an ONNX export is made
    once per model and reused).
    """
    t0 = time.perf_counter()
    data = folder if isinstance(folder, FollowIRData) else load_followir(folder)
    if not data.queries:
        raise DataError(
            getattr(folder, "name", folder), None, "no evaluable queries left " + "; ".join(data.problems)
        )
    given, (model, backend) = model, unwrap_encoder(model, backend)  # an encoder's rows carry its backend
    model, name = _resolve_model(model, name)
    _warn_if_not_cosine(model, name)
    # an encoder given encodes as it is (its own export and settings); ``name``: a run's folder
    encoder = given if is_encoder(given) else encoder_for(model, backend, source=name)
    used = prompts_for(model, "followir", prompts, task_name=data.name, task_type=FOLLOWIR_TASK_TYPE)
    with using_prompts(model, used):
        fp = model_fingerprint(model)
        cut = warn_changes_cut_off(model, data, name)
        og, ch, timings = rerank_followir(
            encoder, data, batch_size=batch_size, cache=cache, top_k=top_k, fingerprint=fp
        )
    sm = score_metric or score_metric_for(data.name)
    pq = followir_per_query(og, ch, data.qrels_og, data.qrel_diff, sm)
    if not pq["p_mrr"]:
        log.warning("%s: no query has changed (qrel-diff) documents; p-MRR is undefined (nan)", data.name)
    res = EvalResult(
        data.name,
        name,
        {m: M.mean(v) for m, v in pq.items()},
        {},
        pq,
        {"og": og, "changed": ch},
        fingerprint=fp,
        problems=list(data.problems) + cut,
        qrel_diff=data.qrel_diff,
        score_metric=sm,
        data=data,
        qrels=data.qrels_og,
        prompts=prompts,
        backend=backend_label(backend, batch_size),
    )
    _with_ci(res, bootstrap, rng_seed)
    res.timings = {**timings, "total_s": time.perf_counter() - t0}
    return res


# --------------------------------------------------------------------------------------------
# 2. BEIR-style folders: full-corpus dense retrieval


def dense_retrieve(
    model,
    corpus: dict,
    queries: dict,
    *,
    top_k: int = 1000,
    batch_size: int = 32,
    cache=True,
    fingerprint: str | None = None,
    chunk: int = 50_000,
) -> dict[str, dict[str, float]]:
    """Exact cosine search over the whole corpus: ``{qid: {doc_id: score}}`` (top ``top_k``)."""
    doc_ids, qids = list(corpus), list(queries)
    fp = fingerprint or (model_fingerprint(model) if cache else None)
    dv = encode_cached(
        model,
        [format_document(corpus[d]) for d in doc_ids],
        "document",
        batch_size=batch_size,
        cache=cache,
        fingerprint=fp,
    )
    qv = encode_cached(
        model,
        [format_query(queries[q], None) for q in qids],
        "query",
        batch_size=batch_size,
        cache=cache,
        fingerprint=fp,
    )
    k = min(top_k, len(doc_ids))
    best_s = np.full((len(qids), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(qids), 0), dtype=np.int64)
    for start in range(0, len(doc_ids), chunk):
        s = qv @ dv[start : start + chunk].T  # (n_q, chunk)
        idx = (
            np.argpartition(-s, min(k, s.shape[1]) - 1, axis=1)[:, :k]
            if s.shape[1] > k
            else np.tile(np.arange(s.shape[1]), (len(qids), 1))
        )
        best_s = np.concatenate([best_s, np.take_along_axis(s, idx, 1)], axis=1)
        best_i = np.concatenate([best_i, idx + start], axis=1)
        if best_s.shape[1] > k:
            keep = np.argpartition(-best_s, k - 1, axis=1)[:, :k]
            best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return {q: {doc_ids[j]: float(v) for j, v in zip(best_i[n], best_s[n])} for n, q in enumerate(qids)}


# what ``evaluate_beir`` takes besides ``split``: the same options as ``evaluate_followir``
BEIR_OPTIONS = dict(
    batch_size=32,
    cache=True,
    bootstrap=1000,
    rng_seed=0,
    top_k=1000,
    name=None,
    prompts="model",
    backend="torch",
)


def evaluate_beir(model, folder, *, split: str = "test", **options) -> EvalResult:
    """nDCG@10 (x100, pytrec_eval ``ndcg_cut_10``, as mteb) of full-corpus dense retrieval on a BEIR folder.

    ``options`` (``BEIR_OPTIONS``): ``batch_size``, ``cache``, ``bootstrap``, ``rng_seed``,
    ``top_k``, ``name``, ``prompts``, ``backend``, as for ``evaluate_followir`` (a BEIR folder has no placed
    benchmark rule: ``'benchmark'`` falls back to the stored prompts, with a warning).
    """
    unknown = set(options) - set(BEIR_OPTIONS)
    if unknown:
        raise TypeError(f"evaluate_beir got unknown options {sorted(unknown)}")
    o = {**BEIR_OPTIONS, **options}
    t0 = time.perf_counter()
    corpus, queries, qrels = load_beir(folder, split)
    data_sha = content_digest((corpus, queries, qrels))  # what ``evaluate_models`` records for the folder
    given, (model, o["backend"]) = model, unwrap_encoder(model, o["backend"])  # rows carry its backend
    model, name = _resolve_model(model, o["name"])
    encoder = given if is_encoder(given) else encoder_for(model, o["backend"], source=name)
    with using_prompts(model, prompts_for(model, "beir-folder", o["prompts"], task_name=Path(folder).name)):
        fp = model_fingerprint(model)
        run = dense_retrieve(
            encoder,
            corpus,
            queries,
            top_k=o["top_k"],
            batch_size=o["batch_size"],
            cache=o["cache"],
            fingerprint=fp,
        )
    pq = {
        "ndcg_at_10": {
            q: 100 * v for q, v in M.trec_per_query(run, qrels, ["ndcg_at_10"])["ndcg_at_10"].items()
        }
    }
    res = EvalResult(
        Path(folder).name,
        name,
        {m: M.mean(v) for m, v in pq.items()},
        {},
        pq,
        {"run": run},
        fingerprint=fp,
        qrels=qrels,
        prompts=o["prompts"],
        backend=backend_label(o["backend"], o["batch_size"]),
        data_sha=data_sha,
    )
    _with_ci(res, o["bootstrap"], o["rng_seed"])
    res.timings = {"total_s": time.perf_counter() - t0}
    return res


# --------------------------------------------------------------------------------------------
# notebook helpers: ranking explorer, comparison table


def ranking_table(result: EvalResult, qid: str, *, top: int | None = 20, text_chars: int = 80):
    """One query's og and changed rankings side by side, as a DataFrame (one row per document).

    Rows: the top ``top`` documents of either run plus every changed (qrel-diff) document,
    ordered by og rank. Columns: ``doc_id, og_rank, changed_rank, moved`` (og_rank -
    changed_rank: > 0 moved up under the changed instruction), ``og_score, changed_score,
    rel_og, rel_changed, changed_doc`` (in the qrel diff), ``p_mrr_doc`` (the document's p-MRR
    x100: > 0 when it moved down, as it should) and ``p_mrr_contribution`` (its share of the
    query's p-MRR, ``p_mrr_doc / n_changed``; the column sums to the query's p-MRR), ``text``.
    """
    import pandas as pd

    if "og" not in result.runs or qid not in result.runs["og"] or qid not in result.runs["changed"]:
        raise KeyError(f"query {qid!r} is not in both runs of {result.dataset}")
    og, ch = result.runs["og"][qid], result.runs["changed"][qid]
    r_og, r_ch = M.ranks(og), M.ranks(ch)
    diff = list(result.qrel_diff.get(qid, []))
    docs = (
        set(diff)
        | {d for d, r in r_og.items() if top is None or r <= top}
        | {d for d, r in r_ch.items() if top is None or r <= top}
    )
    data = result.data
    qog = data.qrels_og.get(qid, {}) if data else result.qrels.get(qid, {})
    qch = data.qrels_changed.get(qid, {}) if data else {}
    rows = []
    for d in docs:
        ro, rc = r_og.get(d, len(og) + 1), r_ch.get(d, len(ch) + 1)
        s = 100 * M.rank_score(ro, rc) if d in diff else float("nan")
        text = ""
        if data and d in data.corpus:
            text = format_document(data.corpus[d])[:text_chars]
        rows.append(
            {
                "doc_id": d,
                "og_rank": ro,
                "changed_rank": rc,
                "moved": ro - rc,
                "og_score": og.get(d),
                "changed_score": ch.get(d),
                "rel_og": qog.get(d, 0),
                "rel_changed": qch.get(d, 0) if data else None,
                "changed_doc": d in diff,
                "p_mrr_doc": s,
                "p_mrr_contribution": s / len(diff) if d in diff else float("nan"),
                "text": text,
            }
        )
    return pd.DataFrame(rows).sort_values(["og_rank", "doc_id"]).reset_index(drop=True)
