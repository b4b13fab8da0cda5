"""Evaluation stage: FollowIR p-MRR / MAP@1000 / nDCG@5, general retrieval nDCG@10, results table.

Three sources, one result type (``EvalResult``, metrics x100 with 95% bootstrap intervals and
per-query scores):

1. ``evaluate_followir(model, folder)``: a FollowIR-format folder in the original layout
   (REFERENCE.md §2), scored by our code. Each query's ``top_ranked`` candidates are reranked by
   cosine similarity twice, with ``query + " " + instruction_og`` and with
   ``... + instruction_changed`` (``models.format_query``, the model's stored prompts). p-MRR
   (``metrics``) compares the two runs on the qrel-diff documents; MAP@1000 and nDCG@5 come
   from pytrec_eval on the og run against the og qrels (the paper's Score; mteb 1.x loaded the
   two qrels swapped, so never take "changed" qrels for it).
2. ``evaluate_mteb(model, names)``: named mteb 2.x tasks (``followir`` = Robust04, News21,
   Core17) through ``mteb.evaluate``; the numbers are mteb's own, the intervals come from
   per-query scores of mteb's run.
3. ``evaluate_beir(model, folder)``: full-corpus dense retrieval nDCG@10 on a BEIR folder.

Every unique text is encoded once per model and cached on disk (``embed_cache``). Results go
to a tidy CSV that is only ever appended to (``append_results`` / ``load_results``), with
per-query scores in a sibling ``*_per_query.csv``. ``ranking_table`` is the notebook's
ranking explorer; ``compare_results`` the significance table.

Not handled here: metric formulas (``metrics``), statistics (``stats``), mteb glue
(``mteb_tasks``), training.
"""
from __future__ import annotations

import collections
import csv
import datetime
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from . import metrics as M
from .config import REPO_DIR
from .embed_cache import encode_cached
from .errors import DataError, read_jsonl
from .followir import FollowIRData, load_followir
from .models import format_document, format_query, load_model, model_fingerprint
from .stats import bootstrap_ci, stratified_mean

log = logging.getLogger(__name__)

RESULT_COLUMNS = ["run_id", "model", "config", "seed", "dataset", "metric", "value", "ci_low", "ci_high",
                  "n_queries", "git_commit", "timestamp"]
PER_QUERY_COLUMNS = ["run_id", "dataset", "metric", "query_id", "value"]
FOLLOWIR_METRICS = ("p_mrr", "map_at_1000", "ndcg_at_5", "score")


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
    source: str = "ifir"                      # "ifir" (our code) or "mteb"
    fingerprint: str = ""
    problems: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    qrel_diff: dict[str, list[str]] = field(default_factory=dict, repr=False)
    score_metric: str | None = None
    data: FollowIRData | None = field(default=None, repr=False)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)

    @property
    def n_queries(self) -> dict[str, int]:
        return {m: len(v) for m, v in self.per_query.items()}

    def summary(self) -> dict:
        """Flat JSON-able dict: ``{"dataset", "model", "p_mrr", "p_mrr_ci_low", "p_mrr_ci_high", ...}``."""
        out = {"dataset": self.dataset, "model": self.model, "source": self.source}
        for m, v in self.metrics.items():
            lo, hi = self.ci.get(m, (float("nan"), float("nan")))
            out.update({m: _r(v), f"{m}_ci_low": _r(lo), f"{m}_ci_high": _r(hi),
                        f"{m}_n_queries": len(self.per_query.get(m, {}))})
        if self.score_metric:
            out["score_metric"] = self.score_metric
        if self.problems:
            out["problems"] = self.problems
        return out


FollowIRResult = EvalResult   # the name the brief and the notebooks use for FollowIR results


def _r(x: float) -> float | None:
    return None if x is None or x != x else round(float(x), 4)


def _with_ci(res: EvalResult, bootstrap: int, seed: int, strata: Mapping[str, str] | None = None) -> EvalResult:
    for m, pq in res.per_query.items():
        qids = list(pq)
        s = [strata[q] for q in qids] if strata else None
        res.ci[m] = bootstrap_ci([pq[q] for q in qids], n_boot=bootstrap, seed=seed, strata=s)
    return res


def _resolve_model(model):
    if isinstance(model, (str, Path)):
        return load_model(str(model)), str(model)
    card = getattr(model, "model_card_data", None)
    name = getattr(model, "_ifir_name", None) or getattr(card, "base_model", None) or getattr(card, "model_name", None)
    return model, str(name or type(model).__name__)


# --------------------------------------------------------------------------------------------
# 1. FollowIR-format folders, our code


def _topk(doc_ids: list[str], scores: np.ndarray, k: int) -> dict[str, float]:
    if len(doc_ids) > k:   # mteb keeps only the top_k (1000) reranked candidates per query
        keep = np.argpartition(-scores, k - 1)[:k]
        doc_ids, scores = [doc_ids[i] for i in keep], scores[keep]
    return dict(zip(doc_ids, scores.tolist()))


def rerank_followir(model, data: FollowIRData, *, batch_size: int = 32, cache=True, top_k: int = 1000,
                    fingerprint: str | None = None) -> tuple[dict, dict, dict[str, float]]:
    """Rerank each query's candidates with the og and the changed instruction.

    Returns ``(og_run, changed_run, timings)``; runs are ``{qid: {doc_id: cosine}}``. The
    candidate documents are encoded once (shared by both runs); queries of both runs in one call.
    """
    t0 = time.perf_counter()
    qids = list(data.queries)
    q_texts = [format_query(data.queries[q]["text"], data.queries[q]["instruction_og"]) for q in qids] + \
              [format_query(data.queries[q]["text"], data.queries[q]["instruction_changed"]) for q in qids]
    doc_ids = list(dict.fromkeys(d for q in qids for d in data.top_ranked[q]))
    fp = fingerprint or (model_fingerprint(model) if cache else None)
    docs = encode_cached(model, [format_document(data.corpus[d]) for d in doc_ids], "document",
                         batch_size=batch_size, cache=cache, fingerprint=fp)           # (n_docs, dim)
    qv = encode_cached(model, q_texts, "query", batch_size=batch_size, cache=cache, fingerprint=fp)  # (2 n_q, dim)
    t1 = time.perf_counter()
    pos = {d: i for i, d in enumerate(doc_ids)}
    og, ch = {}, {}
    for i, q in enumerate(qids):
        cands = data.top_ranked[q]
        sims = docs[[pos[d] for d in cands]] @ np.stack([qv[i], qv[len(qids) + i]], axis=1)   # (n_cand, 2)
        og[q] = _topk(cands, sims[:, 0], top_k)
        ch[q] = _topk(cands, sims[:, 1], top_k)
    return og, ch, {"encode_s": t1 - t0, "score_s": time.perf_counter() - t1}


def followir_per_query(og_run, changed_run, qrels_og, qrel_diff, score_metric: str = "map_at_1000") -> dict[str, dict[str, float]]:
    """``{metric: {qid: value x100}}`` for p_mrr, map_at_1000, ndcg_at_5 and score (= ``score_metric``)."""
    trec = M.trec_per_query(og_run, qrels_og, ("map_at_1000", "ndcg_at_5"))
    pq = {"p_mrr": M.p_mrr_per_query(og_run, changed_run, qrel_diff), **trec}
    pq = {m: {q: 100 * v for q, v in d.items()} for m, d in pq.items()}
    pq["score"] = dict(pq[score_metric])
    return pq


def evaluate_followir(model, folder, *, batch_size: int = 32, cache=True, bootstrap: int = 1000, seed: int = 0,
                      score_metric: str | None = None, top_k: int = 1000) -> EvalResult:
    """Evaluate ``model`` (name, path or SentenceTransformer) on a FollowIR-format folder.

    Returns p-MRR, MAP@1000, nDCG@5 and ``score`` (x100) with 95% bootstrap intervals over
    queries (``bootstrap`` resamples, ``seed``). ``score`` is the paper's per-dataset Score:
    nDCG@5 for News21-like names, MAP@1000 otherwise (override with ``score_metric``).
    ``folder`` may also be a loaded ``FollowIRData``. Problems in the data (see
    ``followir.load_followir``) are warned about and listed in ``result.problems``.
    """
    from .mteb_tasks import score_metric_for

    t0 = time.perf_counter()
    data = folder if isinstance(folder, FollowIRData) else load_followir(folder)
    if not data.queries:
        raise DataError(getattr(folder, "name", folder), None, "no evaluable queries left " + "; ".join(data.problems))
    model, name = _resolve_model(model)
    fp = model_fingerprint(model)
    og, ch, timings = rerank_followir(model, data, batch_size=batch_size, cache=cache, top_k=top_k, fingerprint=fp)
    sm = score_metric or score_metric_for(data.name)
    pq = followir_per_query(og, ch, data.qrels_og, data.qrel_diff, sm)
    if not pq["p_mrr"]:
        log.warning("%s: no query has changed (qrel-diff) documents; p-MRR is undefined (nan)", data.name)
    res = EvalResult(data.name, name, {m: M.mean(v) for m, v in pq.items()}, {}, pq, {"og": og, "changed": ch},
                     fingerprint=fp, problems=list(data.problems), qrel_diff=data.qrel_diff, score_metric=sm,
                     data=data, qrels=data.qrels_og)
    _with_ci(res, bootstrap, seed)
    res.timings = {**timings, "total_s": time.perf_counter() - t0}
    return res


# --------------------------------------------------------------------------------------------
# 2. named mteb tasks (and local folders through mteb, for cross-checks)


def _split_suffix(run):
    og = {q[:-3]: d for q, d in run.items() if q.endswith("-og")}
    ch = {q[:-8]: d for q, d in run.items() if q.endswith("-changed")}
    return og, ch


def _qrel_diff_of(task) -> dict[str, list[str]]:
    if hasattr(task, "qrel_diff"):
        return task.qrel_diff
    from datasets import load_dataset   # the same call mteb's FollowIR tasks make (cached by then)

    md = task.metadata.dataset
    ds = load_dataset(md["path"], "qrel_diff", split="qrel_diff", revision=md["revision"])
    return {row["query-id"]: row["corpus-ids"] for row in ds}


def evaluate_mteb_task(model, task, *, batch_size: int = 32, bootstrap: int = 1000, seed: int = 0) -> EvalResult:
    """Run one mteb task (name or task object) through ``mteb.evaluate``; mteb's numbers, our CIs.

    FollowIR-type tasks (p-MRR in mteb's scores) report p_mrr, map_at_1000, ndcg_at_5 (og run vs
    og qrels) and score; retrieval tasks report ndcg_at_10; other tasks their main score
    (no interval). Per-query values are recomputed by ``metrics`` on mteb's own run and must
    agree with mteb's means (to mteb's 5-decimal rounding) or a warning says so.
    """
    from . import mteb_tasks

    t0 = time.perf_counter()
    if isinstance(task, str):
        task = mteb_tasks.get_task(task)
        mteb_tasks.check_task_available(task)
    model, mname = _resolve_model(model)
    out = mteb_tasks.run_mteb(model, task, batch_size=batch_size)
    s, run, qrels = out["scores"], out["run"], out["qrels"]
    tname = task.metadata.name
    if "p-MRR" in s:
        sm = mteb_tasks.score_metric_for(tname)
        reported = {"p_mrr": 100 * float(s["p-MRR"]), "map_at_1000": 100 * s["og"]["map_at_1000"],
                    "ndcg_at_5": 100 * s["og"]["ndcg_at_5"]}
        reported["score"] = reported[sm]
        og, ch = _split_suffix(run)
        qrels_og, _ = _split_suffix(qrels)
        diff = _qrel_diff_of(task)
        pq = followir_per_query(og, ch, qrels_og, diff, sm)
        res = EvalResult(tname, mname, reported, {}, pq, {"og": og, "changed": ch}, source="mteb",
                         qrel_diff=diff, score_metric=sm, qrels=qrels_og)
    elif run is not None and "ndcg_at_10" in s:
        pq = {"ndcg_at_10": {q: 100 * v for q, v in M.trec_per_query(run, qrels, ["ndcg_at_10"])["ndcg_at_10"].items()}}
        res = EvalResult(tname, mname, {"ndcg_at_10": 100 * s["ndcg_at_10"]}, {}, pq, {"run": run}, source="mteb",
                         qrels=qrels)
    else:
        res = EvalResult(tname, mname, {task.metadata.main_score: 100 * float(s["main_score"])}, {}, {}, source="mteb")
    for m, pqm in res.per_query.items():
        if m in res.metrics and pqm and abs(M.mean(pqm) - res.metrics[m]) > 1e-3:
            log.warning("%s %s: mteb reports %.4f, per-query mean of its run is %.4f", tname, m, res.metrics[m], M.mean(pqm))
    _with_ci(res, bootstrap, seed)
    res.timings = {"total_s": time.perf_counter() - t0}
    return res


def aggregate_followir(results: list[EvalResult], *, bootstrap: int = 1000, seed: int = 0,
                       name: str = "followir") -> EvalResult:
    """The paper's FollowIR summary: mean over datasets of p-MRR and of Score (REFERENCE.md §1).

    Per-query ids become ``'<dataset>/<qid>'``; intervals resample queries within each dataset.
    """
    pq: dict[str, dict[str, float]] = {}
    for m in ("p_mrr", "score"):
        pq[m] = {f"{r.dataset}/{q}": v for r in results for q, v in r.per_query.get(m, {}).items()}
    metrics = {m: float(np.mean([r.metrics[m] for r in results])) for m in ("p_mrr", "score")}
    res = EvalResult(name, results[0].model, metrics, {}, pq, source=results[0].source,
                     problems=[p for r in results for p in r.problems])
    for m, d in pq.items():
        if d and abs(stratified_mean(list(d.values()), [q.split("/")[0] for q in d]) - metrics[m]) > 1e-3:
            log.warning("aggregate %s: per-query mean differs from the mean of dataset means", m)
    return _with_ci(res, bootstrap, seed, strata={q: q.split("/", 1)[0] for d in pq.values() for q in d})


def evaluate_mteb(model, names, *, batch_size: int = 32, bootstrap: int = 1000, seed: int = 0) -> list[EvalResult]:
    """Evaluate named mteb tasks (``'followir'`` expands to its three); adds the FollowIR aggregate.

    Every task's dataset is checked first, so a missing one fails in milliseconds with one line
    (``mteb_tasks.DatasetUnavailable``) before any model time is spent.
    """
    from . import mteb_tasks

    tasks = [mteb_tasks.get_task(n) for n in mteb_tasks.expand_task_names(names)]
    for t in tasks:
        mteb_tasks.check_task_available(t)
    model, _ = _resolve_model(model)
    out = [evaluate_mteb_task(model, t, batch_size=batch_size, bootstrap=bootstrap, seed=seed) for t in tasks]
    fir = [r for r in out if r.dataset in mteb_tasks.FOLLOWIR_TASKS]
    if len(fir) == len(mteb_tasks.FOLLOWIR_TASKS):
        out.append(aggregate_followir(fir, bootstrap=bootstrap, seed=seed))
    return out


# --------------------------------------------------------------------------------------------
# 3. BEIR-style folders: full-corpus dense retrieval


def load_beir(folder: str | Path, split: str = "test") -> tuple[dict, dict, dict]:
    """``(corpus, queries, qrels)`` from ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv|.jsonl``.

    Queries without qrels are not evaluated (BEIR convention); qrels naming unknown documents
    or unknown queries exclude those queries with a warning giving counts.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a directory (expected a BEIR-style folder)")
    corpus, queries = {}, {}
    for n, row in read_jsonl(folder / "corpus.jsonl"):
        if "_id" not in row or not isinstance(row.get("text"), str):
            raise DataError(folder / "corpus.jsonl", n, "needs '_id' and a string 'text'")
        corpus[str(row["_id"])] = {"title": row.get("title") or "", "text": row["text"]}
    for n, row in read_jsonl(folder / "queries.jsonl"):
        if "_id" not in row or not isinstance(row.get("text"), str):
            raise DataError(folder / "queries.jsonl", n, "needs '_id' and a string 'text'")
        queries[str(row["_id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = collections.defaultdict(dict)
    tsv, jsl = folder / "qrels" / f"{split}.tsv", folder / "qrels" / f"{split}.jsonl"
    if tsv.exists():
        with tsv.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                parts = line.rstrip("\n").split("\t")
                if not line.strip() or (n == 1 and parts[0] in ("query-id", "query_id", "qid")):
                    continue
                if len(parts) < 3:
                    raise DataError(tsv, n, f"expected 3 tab-separated fields (query-id, corpus-id, score), got {len(parts)}")
                try:
                    qrels[parts[0]][parts[1]] = int(float(parts[2]))
                except ValueError:
                    raise DataError(tsv, n, f"not a number: {parts[2]!r}", "score") from None
    elif jsl.exists():
        for n, row in read_jsonl(jsl):
            try:
                qrels[str(row["query-id"])][str(row["corpus-id"])] = int(float(row["score"]))
            except KeyError as e:
                raise DataError(jsl, n, "missing", e.args[0]) from None
            except (TypeError, ValueError):
                raise DataError(jsl, n, f"not a number: {row['score']!r}", "score") from None
    else:
        raise DataError(tsv, None, f"file not found (nor {jsl.name})")
    bad_doc = sorted(q for q, d in qrels.items() if any(x not in corpus for x in d))
    bad_q = sorted(q for q in qrels if q not in queries)
    for ids, why in ((bad_q, "qrels name queries missing from queries.jsonl"),
                     (bad_doc, "have qrels naming documents missing from corpus.jsonl")):
        if ids:
            log.warning("%s: %d queries %s; excluded: %s", folder, len(ids), why, M._preview(ids))
    qrels = {q: d for q, d in qrels.items() if q not in set(bad_doc) | set(bad_q) and any(s > 0 for s in d.values())}
    if not qrels:
        raise DataError(folder, None, "no query has a relevant document in the qrels")
    return corpus, {q: queries[q] for q in qrels}, qrels


def dense_retrieve(model, corpus: dict, queries: dict, *, top_k: int = 1000, batch_size: int = 32, cache=True,
                   fingerprint: str | None = None, chunk: int = 50_000) -> dict[str, dict[str, float]]:
    """Exact cosine search over the whole corpus: ``{qid: {doc_id: score}}`` (top ``top_k``)."""
    doc_ids, qids = list(corpus), list(queries)
    fp = fingerprint or (model_fingerprint(model) if cache else None)
    dv = encode_cached(model, [format_document(corpus[d]) for d in doc_ids], "document", batch_size=batch_size,
                       cache=cache, fingerprint=fp)
    qv = encode_cached(model, [format_query(queries[q], None) for q in qids], "query", batch_size=batch_size,
                       cache=cache, fingerprint=fp)
    k = min(top_k, len(doc_ids))
    best_s = np.full((len(qids), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(qids), 0), dtype=np.int64)
    for start in range(0, len(doc_ids), chunk):
        s = qv @ dv[start:start + chunk].T                                  # (n_q, chunk)
        idx = np.argpartition(-s, min(k, s.shape[1]) - 1, axis=1)[:, :k] if s.shape[1] > k else np.tile(np.arange(s.shape[1]), (len(qids), 1))
        best_s = np.concatenate([best_s, np.take_along_axis(s, idx, 1)], axis=1)
        best_i = np.concatenate([best_i, idx + start], axis=1)
        if best_s.shape[1] > k:
            keep = np.argpartition(-best_s, k - 1, axis=1)[:, :k]
            best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return {q: {doc_ids[j]: float(v) for j, v in zip(best_i[n], best_s[n])} for n, q in enumerate(qids)}


def evaluate_beir(model, folder, *, batch_size: int = 32, cache=True, bootstrap: int = 1000, seed: int = 0,
                  split: str = "test", top_k: int = 1000) -> EvalResult:
    """nDCG@10 (x100, pytrec_eval ``ndcg_cut_10``, as mteb) of full-corpus dense retrieval on a BEIR folder."""
    t0 = time.perf_counter()
    corpus, queries, qrels = load_beir(folder, split)
    model, name = _resolve_model(model)
    fp = model_fingerprint(model)
    run = dense_retrieve(model, corpus, queries, top_k=top_k, batch_size=batch_size, cache=cache, fingerprint=fp)
    pq = {"ndcg_at_10": {q: 100 * v for q, v in M.trec_per_query(run, qrels, ["ndcg_at_10"])["ndcg_at_10"].items()}}
    res = EvalResult(Path(folder).name, name, {m: M.mean(v) for m, v in pq.items()}, {}, pq, {"run": run},
                     fingerprint=fp, qrels=qrels)
    _with_ci(res, bootstrap, seed)
    res.timings = {"total_s": time.perf_counter() - t0}
    return res


# --------------------------------------------------------------------------------------------
# results table (tidy CSV, append-only) and per-query sibling


def git_commit() -> str:
    """Short HEAD commit of the checkout, ``+dirty`` when tracked files changed; ``'unknown'`` outside git."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO_DIR), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def make_run_id(model: str, config: str, seed: int | str) -> str:
    """``make_run_id('runs/ins-dv', 'ins-dv', 1) -> 'ins-dv-ins-dv-s1-20260101T120000'`` (model folder name + time)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{Path(str(model)).name}-{config}-s{seed}-{stamp}"


def result_rows(result: EvalResult, *, run_id: str, model: str | None = None, config: str = "base",
                seed: int | str = 0, git: str | None = None, timestamp: str | None = None) -> list[dict]:
    """Rows for the results table, one per metric (x100, with the 95% interval)."""
    git = git or git_commit()
    timestamp = timestamp or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for m, v in result.metrics.items():
        lo, hi = result.ci.get(m, (float("nan"), float("nan")))
        rows.append({"run_id": run_id, "model": model or result.model, "config": config, "seed": seed,
                     "dataset": result.dataset, "metric": m, "value": v, "ci_low": lo, "ci_high": hi,
                     "n_queries": len(result.per_query.get(m, {})) or None, "git_commit": git, "timestamp": timestamp})
    return rows


def per_query_rows(result: EvalResult, *, run_id: str) -> list[dict]:
    """Rows for the per-query sibling file: ``run_id, dataset, metric, query_id, value``."""
    return [{"run_id": run_id, "dataset": result.dataset, "metric": m, "query_id": q, "value": v}
            for m, d in result.per_query.items() for q, v in d.items()]


def per_query_frame(result: EvalResult, *, run_id: str = "-"):
    """``per_query_rows`` as a DataFrame, for plotting one result's per-query distribution."""
    import pandas as pd

    return pd.DataFrame(per_query_rows(result, run_id=run_id), columns=PER_QUERY_COLUMNS)


def per_query_path(path: str | Path) -> Path:
    """``results.csv -> results_per_query.csv`` (same folder)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_per_query{path.suffix or '.csv'}")


def _append_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(encoding="utf-8", newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != columns:
            raise DataError(path, 1, f"header {header} does not match the expected columns {columns}; "
                                     "refusing to append (write to a new file)")
    with path.open("a", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="raise")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None or (isinstance(r.get(c), float) and r[c] != r[c]) else r[c])
                        for c in columns})


def append_results(path: str | Path, rows: list[dict], per_query: list[dict] | None = None) -> Path:
    """Append ``rows`` (``RESULT_COLUMNS``) to the results CSV, creating it with a header.

    Never overwrites: an existing file with other columns is an error. ``per_query`` rows go to
    ``per_query_path(path)``. Returns ``path``.
    """
    path = Path(path)
    missing = [c for c in RESULT_COLUMNS if any(c not in r for r in rows)]
    if missing:
        raise ValueError(f"result rows lack columns {missing}")
    _append_csv(path, RESULT_COLUMNS, rows)
    if per_query:
        _append_csv(per_query_path(path), PER_QUERY_COLUMNS, per_query)
    return path


def save_result(result: EvalResult, path: str | Path, *, run_id: str | None = None, model: str | None = None,
                config: str = "base", seed: int | str = 0) -> str:
    """Append one result (summary rows + per-query rows) to the table; returns the run_id used."""
    run_id = run_id or make_run_id(model or result.model, config, seed)
    append_results(path, result_rows(result, run_id=run_id, model=model, config=config, seed=seed),
                   per_query_rows(result, run_id=run_id))
    return run_id


def load_results(path: str | Path):
    """The results table as a DataFrame (``RESULT_COLUMNS``; value/ci as float, timestamp parsed)."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    df = pd.read_csv(path, dtype={"run_id": str, "model": str, "config": str, "seed": str, "dataset": str,
                                  "metric": str, "git_commit": str})
    missing = [c for c in RESULT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(path, 1, f"missing columns {missing}")
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce")
    df["n_queries"] = df["n_queries"].astype("Int64")
    return df


def load_per_query(path: str | Path):
    """The per-query sibling (pass the results path or the per-query path itself) as a DataFrame."""
    import pandas as pd

    path = Path(path)
    if not path.stem.endswith("_per_query"):
        path = per_query_path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    return pd.read_csv(path, dtype={"run_id": str, "dataset": str, "metric": str, "query_id": str})


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
    docs = set(diff) | {d for d, r in r_og.items() if top is None or r <= top} | \
        {d for d, r in r_ch.items() if top is None or r <= top}
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
        rows.append({"doc_id": d, "og_rank": ro, "changed_rank": rc, "moved": ro - rc, "og_score": og.get(d),
                     "changed_score": ch.get(d), "rel_og": qog.get(d, 0),
                     "rel_changed": qch.get(d, 0) if data else None, "changed_doc": d in diff,
                     "p_mrr_doc": s, "p_mrr_contribution": s / len(diff) if d in diff else float("nan"), "text": text})
    return pd.DataFrame(rows).sort_values(["og_rank", "doc_id"]).reset_index(drop=True)


def compare_results(results: Mapping[str, EvalResult], *, baseline: str, config: Mapping[str, str] | None = None,
                    **kwargs):
    """Several runs (``{label: EvalResult}``, same dataset) -> ``stats.results_table`` vs ``baseline``.

    Each label becomes the ``run_id``; keyword arguments go to ``stats.results_table``
    (``alpha``, ``test``, ``n``, ``seed``, ``metrics``, ``adjust``).
    """
    import pandas as pd

    from .stats import results_table

    rows, pq = [], []
    for label, r in results.items():
        rows += result_rows(r, run_id=label, config=(config or {}).get(label, label), git="-", timestamp="-")
        pq += per_query_rows(r, run_id=label)
    return results_table(pd.DataFrame(rows, columns=RESULT_COLUMNS), pd.DataFrame(pq, columns=PER_QUERY_COLUMNS),
                         baseline=baseline, **kwargs)
