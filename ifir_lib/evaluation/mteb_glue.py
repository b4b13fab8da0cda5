"""mteb 2.x glue: local-file tasks in the FollowIR / BEIR schema, running named tasks.

``LocalFollowIRTask`` subclasses mteb's ``AbsTaskRetrieval`` (the class mteb 2.26's
``Robust04InstructionRetrieval`` & co. use) and feeds it a FollowIR-format folder in mteb 2.x's
own schema: each query appears twice, ``<qid>-og`` with the original instruction and
``<qid>-changed`` with the changed one, in the ``instruction`` column that mteb appends to the
query text (``query + " " + instruction``); qrels hold both (og qrels under ``-og``); both
share the ``top_ranked`` candidates; p-MRR comes from mteb's own ``evaluate_p_mrr_change``
with the folder's qrel diff, exactly as the FollowIR tasks compute it. So CI exercises mteb's
whole FollowIR code path (data schema, prompts, reranking, scoring) without the hub.

``LocalRetrievalTask`` does the same for a BEIR-style folder (full-corpus retrieval).

``evaluate_mteb(model, names)`` runs named tasks (``followir`` = Robust04, News21, Core17)
through ``mteb.evaluate``: the numbers are mteb's own, the intervals come from per-query scores
of mteb's run. ``prompts='benchmark'`` runs each task with the prompts its benchmark's own scripts
apply (``tasks.prompts_for``: InfoSearch none, MAIR the instruction and no document prompt),
set on the model for the length of the run (``models.using_prompts``); ``'model'`` (default)
leaves the model's stored prompts to mteb. Task names, local copies and offline checks come from ``tasks``. This module
depends on ``evaluator`` (the result type), never the reverse.

Not handled here: our own evaluation (``evaluator``) and metric definitions (``metrics``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
import warnings
from pathlib import Path

import numpy as np

from ..core.errors import DataError
from ..core.models import plain_prompt, using_prompts
from ..core.progress import progress, progress_enabled
from . import metrics as M
from .corpora import FOLLOWIR_TASKS, FollowIRData, content_digest, load_beir, load_followir, score_metric_for
from .evaluator import (
    EvalResult,
    _resolve_model,
    _with_ci,
    followir_per_query,
    same_once_read,
    warn_same_once_read,
)
from .stats import stratified_mean
from .tasks import (
    PAPER_TASKS,
    check_available,
    copy_digest,
    default_test_split,
    get_paper_task,
    local_datasets_cache,
    local_paths,
    mteb_prompt,
    og_changed_queries,
    prompts_for,
    task_family,
    task_instance,
    task_metadata,
)

log = logging.getLogger(__name__)


def expand_task_names(names: list[str] | str) -> list[str]:
    """``['followir', 'SciFact'] -> [Robust04..., News21..., Core17..., 'SciFact']`` (comma lists allowed).

    ``paper`` is the six columns of the paper's Tables 1-2 (``tasks.PAPER_TASKS``).
    """
    if isinstance(names, str):
        names = [names]
    out = []
    for item in names:
        for n in (x.strip() for x in item.split(",")):
            if n.lower() in ("followir", "paper"):
                out.extend(FOLLOWIR_TASKS if n.lower() == "followir" else PAPER_TASKS)
            elif n:
                out.append(n)
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------------------------
# local-file tasks


def _base_metadata(name: str, folder: Path, kind: str):
    """A copy of a real task's metadata (FollowIR: Robust04's) renamed and pointed at ``folder``."""
    if kind == "followir":
        template = "Robust04InstructionRetrieval"
        desc = f"FollowIR-format folder {folder} in mteb's InstructionReranking schema"
    else:
        template, desc = "SciFact", f"BEIR-style folder {folder}"
    return task_metadata(
        template,
        name=name,
        description=desc,
        reference=None,
        dataset={"path": str(folder), "revision": "local"},
    )


@functools.cache
def _task_classes():
    """The two task classes, built on first use so that importing this module doesn't import mteb."""
    from datasets import Dataset
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks import AbsTaskRetrieval

    def corpus_dataset(corpus):
        return Dataset.from_dict(
            {
                "id": list(corpus),
                "title": [d["title"] for d in corpus.values()],
                "text": [d["text"] for d in corpus.values()],
            }
        )

    class LocalFollowIRTask(AbsTaskRetrieval):
        """FollowIR folder in mteb 2.x's schema; subclasses set ``metadata`` and ``source``."""

        source = None
        prompt_family = "followir"

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            data = self.source if isinstance(self.source, FollowIRData) else load_followir(self.source)
            self.data_sha = content_digest(data)  # as ``evaluate_followir`` records the folder
            cols, qrels = og_changed_queries(data.queries, data.qrels_og, data.qrels_changed)
            # both runs of a query share its candidates
            top = {q + sfx: list(data.top_ranked[q]) for q in data.queries for sfx in ("-og", "-changed")}
            self.qrel_diff = data.qrel_diff
            self.dataset = default_test_split(
                corpus_dataset(data.corpus), Dataset.from_dict(cols), qrels, top
            )
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            # the same call as mteb's Robust04/News21/Core17InstructionRetrieval.task_specific_scores
            return evaluate_p_mrr_change(qrels, results, self.qrel_diff, self.k_values)

    class LocalRetrievalTask(AbsTaskRetrieval):
        """BEIR-style folder (full-corpus retrieval); subclasses set ``metadata`` and ``source``."""

        source = None
        prompt_family = "beir-folder"

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            corpus, queries, qrels = load_beir(self.source)
            self.data_sha = content_digest((corpus, queries, qrels))  # as ``evaluate_beir`` records it
            queries = Dataset.from_dict({"id": list(queries), "text": list(queries.values())})
            self.dataset = default_test_split(corpus_dataset(corpus), queries, qrels, None)
            self.data_loaded = True

    return LocalFollowIRTask, LocalRetrievalTask


def _make_task(base, name: str, folder: Path, kind: str, source):
    return task_instance(base, f"Local_{name}", _base_metadata(name, folder, kind), source=source)


def local_followir_task(data, name: str | None = None):
    """An mteb ``AbsTaskRetrieval`` (type InstructionReranking, main score p-MRR) over a FollowIR folder.

    ``data`` is a folder path or a loaded ``FollowIRData``; the task is named after the folder
    (as ``evaluate_followir`` names its result), unless ``name`` is given.
    """

    folder = Path(data.name) if isinstance(data, FollowIRData) else Path(data)
    return _make_task(_task_classes()[0], name or folder.name, folder, "followir", data)


def local_retrieval_task(folder: str | Path, name: str | None = None):
    """An mteb ``AbsTaskRetrieval`` (full-corpus retrieval, main score nDCG@10) over a BEIR-style folder."""
    folder = Path(folder)
    return _make_task(_task_classes()[1], name or folder.name, folder, "beir", folder)


# ---------------------------------------------------------------------------------------------
# named tasks: lookup, availability check, one mteb run


def check_task_available(task) -> None:
    """Raise ``DatasetUnavailable`` (one line per dataset) unless ``task``'s data can be loaded now.

    Offline (``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``) or with the hub unreachable, the
    dataset must be a local copy or in the local cache; the check takes milliseconds instead of
    the ~25 s of retries ``datasets`` would spend before failing (``tasks.missing_datasets``).
    """
    check_available([task])


def get_task(name: str, data_dir: str | Path | None = None):
    """``mteb.get_task`` (or a paper task, ``tasks``) with a one-line ``DataError`` for unknown names.

    With ``data_dir`` (or ``$IFIR_DATA_DIR``), a local copy of the task's hub repo there is read instead.
    """
    import mteb

    task = get_paper_task(name, data_dir)
    if task is not None:
        return task
    try:
        return mteb.get_task(name)
    except KeyError as e:
        raise DataError(name, None, f"not an mteb task name ({str(e).strip(chr(39))[:200]})") from None


def run_mteb(
    model, task, *, batch_size: int = 32, show_progress_bar: bool = False, prompts: str = "model"
) -> dict:
    """Run one mteb task with mteb 2.x's ``mteb.evaluate``; return ``{"scores", "run", "qrels",
    "queries", "query_prompt"}``.

    ``scores`` is mteb's score dict for the test split / default subset as mteb reports it
    (fractions, MAP/nDCG rounded to 5 decimals by mteb). ``run`` and ``qrels`` are what mteb
    scored, captured from ``task_specific_scores`` so per-query statistics use mteb's own run.
    mteb's result cache is bypassed (``cache=None``): a local task's name says nothing about
    its data, and a stale cached score must never be reported. ``prompts``: ``'model'`` or
    ``'benchmark'`` (``tasks.prompts_for`` for the task's family, ``tasks.task_family``);
    ``query_prompt``: the prompt mteb put before each query under them (``engine_query_prompt``).
    """
    import mteb

    captured = {}
    orig = task.task_specific_scores

    def capture(scores, qrels, results, hf_split, hf_subset):
        captured.update(run=results, qrels=qrels, split=hf_split, subset=hf_subset)
        captured["queries"] = _loaded_queries(task, hf_subset, hf_split)
        return orig(scores, qrels, results, hf_split=hf_split, hf_subset=hf_subset)

    md = task.metadata
    used = prompts_for(model, task_family(task), prompts, task_name=md.name, task_type=md.type)
    task.task_specific_scores = capture
    with warnings.catch_warnings(), using_prompts(model, used):
        captured["query_prompt"] = engine_query_prompt(model, task)
        # mteb 2.26 calls a sentence-transformers method that 6.x renamed; the FutureWarning is noise
        warnings.filterwarnings("ignore", category=FutureWarning)
        try:
            res = mteb.evaluate(
                model,
                task,
                cache=None,
                overwrite_strategy="always",
                show_progress_bar=show_progress_bar,
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": show_progress_bar},
            )
        finally:
            del task.task_specific_scores
    if res.exceptions:
        raise RuntimeError(f"mteb failed on {task.metadata.name}: {res.exceptions[0].exception}")
    tr = res.task_results[0]
    split = "test" if "test" in tr.scores else next(iter(tr.scores))
    scores = tr.scores[split][0]
    return {k: captured.get(k) for k in ("run", "qrels", "queries", "query_prompt")} | {"scores": scores}


def engine_query_prompt(model, task) -> str:
    """The prompt mteb 2.x (with sentence-transformers' ``encode_query``) puts before each query of
    ``task`` with the model's prompts as they are now: mteb's order (``tasks.mteb_prompt``: a
    ``<task>-query`` prompt before a plain ``query`` one), else the model's default prompt."""
    md = task.metadata
    found = mteb_prompt(getattr(model, "prompts", None) or {}, "query", md.name, md.type)
    return plain_prompt(model) if found is None else found


def _loaded_queries(task, subset: str, split: str):
    """The queries table mteb scored (``id``, ``text``, maybe ``instruction``), else None."""
    data = getattr(task, "dataset", None)
    try:
        return data[subset][split]["queries"]
    except (KeyError, TypeError):
        return None


def og_changed_texts(queries) -> dict[str, tuple[str, str]]:
    """``{qid: (og text, changed text)}`` of an mteb queries table in the ``<qid>-og`` /
    ``<qid>-changed`` schema, each text as mteb gives it to the model (``text + " " + instruction``,
    mteb's ``_combine_queries_with_instruction_text``); queries without a partner are left out."""
    if queries is None or not {"id", "text"} <= set(queries.column_names):
        return {}
    instr = queries["instruction"] if "instruction" in queries.column_names else [None] * len(queries)
    texts = {i: t + " " + x if x is not None else t for i, t, x in zip(queries["id"], queries["text"], instr)}
    return {
        q[: -len("-og")]: (t, texts[q[: -len("-og")] + "-changed"])
        for q, t in texts.items()
        if q.endswith("-og") and q[: -len("-og")] + "-changed" in texts
    }


# ---------------------------------------------------------------------------------------------
# results: mteb's numbers, per-query values and intervals from mteb's run (named or local tasks)


def _split_suffix(run):
    og = {q[:-3]: d for q, d in run.items() if q.endswith("-og")}
    ch = {q[:-8]: d for q, d in run.items() if q.endswith("-changed")}
    return og, ch


def _qrel_diff_of(task) -> dict[str, list[str]]:
    if hasattr(task, "qrel_diff"):
        return task.qrel_diff
    from datasets import load_dataset  # the same call mteb's FollowIR tasks make (cached by then)

    md = task.metadata.dataset
    with local_datasets_cache(local_paths(task)):  # a local copy's own cache, as its other loads
        ds = load_dataset(md["path"], "qrel_diff", split="qrel_diff", revision=md["revision"])
    return {row["query-id"]: row["corpus-ids"] for row in ds}


def _followir_result(task, mname: str, s: dict, run, qrels) -> EvalResult:
    """A FollowIR-type task's result from mteb's scores ``s`` and its ``-og`` / ``-changed`` run."""
    tname = task.metadata.name
    sm = score_metric_for(tname)
    reported = {
        "p_mrr": 100 * float(s["p-MRR"]),
        "map_at_1000": 100 * s["og"]["map_at_1000"],
        "ndcg_at_5": 100 * s["og"]["ndcg_at_5"],
    }
    reported["score"] = reported[sm]
    og, ch = _split_suffix(run)
    qrels_og, _ = _split_suffix(qrels)
    diff = _qrel_diff_of(task)
    pq = followir_per_query(og, ch, qrels_og, diff, sm)
    runs = {"og": og, "changed": ch}
    return EvalResult(
        tname, mname, reported, {}, pq, runs, source="mteb", qrel_diff=diff, score_metric=sm, qrels=qrels_og
    )


def evaluate_mteb_task(
    model,
    task,
    *,
    batch_size: int = 32,
    bootstrap: int = 1000,
    rng_seed: int = 0,
    name: str | None = None,
    prompts: str = "model",
) -> EvalResult:
    """Run one mteb task (name or task object) through ``mteb.evaluate``; mteb's numbers, our CIs.

    FollowIR-type tasks (p-MRR in mteb's scores) report p_mrr, map_at_1000, ndcg_at_5 (og run vs
    og qrels) and score; retrieval tasks report ndcg_at_10; every task also reports its main
    score when that is another metric (NevIR's paired_accuracy, InstructIR's robustness_at_10: no
    interval, ``metric_name``). Per-query values are recomputed by ``metrics`` on mteb's own run and must
    agree with mteb's means (to mteb's 5-decimal rounding) or a warning says so. ``prompts``:
    ``'model'`` or ``'benchmark'`` (``run_mteb``).
    """
    t0 = time.perf_counter()
    if isinstance(task, str):
        task = get_task(task)
        check_task_available(task)
    model, mname = _resolve_model(model, name)
    out = run_mteb(model, task, batch_size=batch_size, show_progress_bar=progress_enabled(), prompts=prompts)
    s, run, qrels = out["scores"], out["run"], out["qrels"]
    tname = task.metadata.name
    if "p-MRR" in s:
        res = _followir_result(task, mname, s, run, qrels)
        pairs = og_changed_texts(out["queries"])  # the model cannot tell the two instructions apart
        same = same_once_read(model, pairs, out["query_prompt"])  # as mteb read them: its prompt
        res.problems += warn_same_once_read(model, tname, same, len(pairs))
    elif run is not None and "ndcg_at_10" in s:
        pq = {
            "ndcg_at_10": {
                q: 100 * v for q, v in M.trec_per_query(run, qrels, ["ndcg_at_10"])["ndcg_at_10"].items()
            }
        }
        res = EvalResult(
            tname,
            mname,
            {"ndcg_at_10": 100 * s["ndcg_at_10"]},
            {},
            pq,
            {"run": run},
            source="mteb",
            qrels=qrels,
        )
    else:
        res = EvalResult(tname, mname, {}, {}, {}, source="mteb")
    _with_main_score(res, task.metadata.main_score, s)
    for m, pqm in res.per_query.items():
        if m in res.metrics and pqm and abs(M.mean(pqm) - res.metrics[m]) > 1e-3:
            log.warning(
                "%s %s: mteb reports %.4f, per-query mean of its run is %.4f",
                tname,
                m,
                res.metrics[m],
                M.mean(pqm),
            )
    _with_ci(res, bootstrap, rng_seed)
    res.timings, res.prompts = {"total_s": time.perf_counter() - t0}, prompts
    res.data_sha = task_digest(task)
    return res


def task_digest(task) -> str:
    """The results' ``data_sha`` of what ``task`` evaluated: a local folder's content digest (as
    ``evaluate_followir`` / ``evaluate_beir`` record it), a local copy's files' (``copy_digest``),
    ``''`` for a task read from the hub. Rows saved by hand (``save_result``) carried none, so an
    edited copy of a set under its name was read as that set."""
    return getattr(task, "data_sha", "") or copy_digest(task)


def followir_digest(digests: dict[str, str]) -> str:
    """The FollowIR aggregate's ``data_sha`` from its three tasks' (``{task name: data_sha}``), in
    ``FOLLOWIR_TASKS`` order; ``''`` unless all three are known."""
    if not all(digests.get(n) for n in FOLLOWIR_TASKS):
        return ""
    return hashlib.sha256("".join(digests[n] for n in FOLLOWIR_TASKS).encode()).hexdigest()[:16]


def metric_name(main_score: str) -> str:
    """An mteb main score's name as the results table spells metrics: ``'p-MRR' -> 'p_mrr'``,
    ``'paired_accuracy'`` and ``'ndcg_at_20'`` unchanged."""
    return main_score.lower().replace("-", "_").replace("@", "_at_")


def _with_main_score(res: EvalResult, main_score: str, scores: dict) -> None:
    """Add the task's own score (mteb's ``main_score``, x100) to ``res.metrics`` under
    ``metric_name`` when the metrics do not hold it yet: NevIR's paired accuracy, mteb's
    InstructIR robustness@10 and the IFIR tasks' nDCG@20 were dropped for the nDCG@10 beside them."""
    name = metric_name(main_score)
    if name not in res.metrics and scores.get("main_score") is not None:
        res.metrics[name] = 100 * float(scores["main_score"])


def aggregate_followir(
    results: list[EvalResult], *, bootstrap: int = 1000, rng_seed: int = 0, name: str = "followir"
) -> EvalResult:
    """The paper's FollowIR summary: mean over datasets of p-MRR and of Score (docs/method.md §5).

    Per-query ids become ``'<dataset>/<qid>'``; intervals resample queries within each dataset.
    """
    pq: dict[str, dict[str, float]] = {}
    for m in ("p_mrr", "score"):
        pq[m] = {f"{r.dataset}/{q}": v for r in results for q, v in r.per_query.get(m, {}).items()}
    metrics = {m: float(np.mean([r.metrics[m] for r in results])) for m in ("p_mrr", "score")}
    res = EvalResult(
        name,
        results[0].model,
        metrics,
        {},
        pq,
        source=results[0].source,
        problems=[p for r in results for p in r.problems],
        prompts=results[0].prompts,
        data_sha=followir_digest({r.dataset: r.data_sha for r in results}),
    )
    for m, d in pq.items():
        if d and abs(stratified_mean(list(d.values()), [q.split("/")[0] for q in d]) - metrics[m]) > 1e-3:
            log.warning("aggregate %s: per-query mean differs from the mean of dataset means", m)
    return _with_ci(res, bootstrap, rng_seed, strata={q: q.split("/", 1)[0] for d in pq.values() for q in d})


def evaluate_mteb(
    model,
    names,
    *,
    batch_size: int = 32,
    bootstrap: int = 1000,
    rng_seed: int = 0,
    name=None,
    data_dir=None,
    prompts: str = "model",
) -> list[EvalResult]:
    """Evaluate named mteb tasks (``'followir'``, ``'paper'`` expand) or task objects; adds the FollowIR aggregate.
    ``prompts``: ``'model'`` or ``'benchmark'``, per task (``run_mteb``).

    Every task's dataset is checked first, so missing ones fail in milliseconds with one line each
    (``DatasetUnavailable``) before any model time is spent.
    """
    names = [names] if isinstance(names, str) else list(names)
    tasks = [get_task(n, data_dir) for n in expand_task_names([n for n in names if isinstance(n, str)])]
    tasks += [t for t in names if not isinstance(t, str)]
    check_available(tasks)
    model, mname = _resolve_model(model, name)
    kw = dict(batch_size=batch_size, bootstrap=bootstrap, rng_seed=rng_seed, name=mname, prompts=prompts)
    out = [evaluate_mteb_task(model, t, **kw) for t in progress(tasks, desc="mteb tasks", unit="task")]
    fir = [r for r in out if r.dataset in FOLLOWIR_TASKS]
    if len(fir) == len(FOLLOWIR_TASKS):
        out.append(aggregate_followir(fir, bootstrap=bootstrap, rng_seed=rng_seed))
    return out
