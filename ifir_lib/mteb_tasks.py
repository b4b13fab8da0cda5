"""mteb 2.x glue: local-file tasks in the FollowIR / BEIR schema, running named tasks, offline checks.

``LocalFollowIRTask`` subclasses mteb's ``AbsTaskRetrieval`` (the class mteb 2.26's
``Robust04InstructionRetrieval`` & co. use) and feeds it a FollowIR-format folder in mteb 2.x's
own schema: each query appears twice, ``<qid>-og`` with the original instruction and
``<qid>-changed`` with the changed one, in the ``instruction`` column that mteb appends to the
query text (``query + " " + instruction``); qrels hold both (og qrels under ``-og``); both
share the ``top_ranked`` candidates; p-MRR comes from mteb's own ``evaluate_p_mrr_change``
with the folder's qrel diff, exactly as the FollowIR tasks compute it. So CI exercises mteb's
whole FollowIR code path (data schema, prompts, reranking, scoring) without the hub.

``LocalRetrievalTask`` does the same for a BEIR-style folder (full-corpus retrieval).

Not handled here: our own evaluation (``evaluate``) and metric definitions (``metrics``).
"""
from __future__ import annotations

import functools
import logging
import os
import socket
import warnings
from pathlib import Path
from urllib.parse import urlparse

from .errors import DataError

log = logging.getLogger(__name__)

FOLLOWIR_TASKS = ("Robust04InstructionRetrieval", "News21InstructionRetrieval", "Core17InstructionRetrieval")
# the paper's Score per FollowIR dataset (REFERENCE.md §1): MAP@1000, but nDCG@5 on News21
SCORE_METRIC = {"Robust04InstructionRetrieval": "map_at_1000", "News21InstructionRetrieval": "ndcg_at_5",
                "Core17InstructionRetrieval": "map_at_1000"}


class DatasetUnavailable(DataError):
    """An mteb task's dataset is neither in the local HF cache nor downloadable right now."""


def score_metric_for(name: str) -> str:
    """``'News21InstructionRetrieval' -> 'ndcg_at_5'``; any other name (Robust04, Core17, a local set) -> MAP@1000."""
    return SCORE_METRIC.get(name, "ndcg_at_5" if "news21" in name.lower() else "map_at_1000")


def expand_task_names(names: list[str] | str) -> list[str]:
    """``['followir', 'SciFact'] -> [Robust04..., News21..., Core17..., 'SciFact']`` (comma lists allowed)."""
    if isinstance(names, str):
        names = [names]
    out = []
    for item in names:
        for n in (x.strip() for x in item.split(",")):
            if n.lower() == "followir":
                out.extend(FOLLOWIR_TASKS)
            elif n:
                out.append(n)
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------------------------
# local-file tasks


def _base_metadata(name: str, folder: Path, kind: str):
    """A copy of a real task's metadata (FollowIR: Robust04's) renamed and pointed at ``folder``."""
    import mteb

    if kind == "followir":
        md = mteb.get_task("Robust04InstructionRetrieval").metadata
        desc = f"FollowIR-format folder {folder} in mteb's InstructionReranking schema"
    else:
        md = mteb.get_task("SciFact").metadata
        desc = f"BEIR-style folder {folder}"
    return md.model_copy(update={"name": name, "description": desc, "reference": None,
                                 "dataset": {"path": str(folder), "revision": "local"},
                                 "bibtex_citation": "", "eval_splits": ["test"], "eval_langs": ["eng-Latn"]},
                         deep=True)


@functools.cache
def _task_classes():
    """The two task classes, built on first use so that importing this module doesn't import mteb."""
    from datasets import Dataset
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks import AbsTaskRetrieval

    from .evaluate import load_beir
    from .followir import FollowIRData, load_followir

    def corpus_dataset(corpus):
        return Dataset.from_dict({"id": list(corpus), "title": [d["title"] for d in corpus.values()],
                                  "text": [d["text"] for d in corpus.values()]})

    class LocalFollowIRTask(AbsTaskRetrieval):
        """FollowIR folder in mteb 2.x's schema; subclasses set ``metadata`` and ``source``."""
        source = None

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            data = self.source if isinstance(self.source, FollowIRData) else load_followir(self.source)
            ids, texts, instr, qrels, top = [], [], [], {}, {}
            for qid, q in data.queries.items():
                for suffix, key, qr in (("-og", "instruction_og", data.qrels_og),
                                        ("-changed", "instruction_changed", data.qrels_changed)):
                    ids.append(qid + suffix)
                    texts.append(q["text"])
                    instr.append(q[key])          # mteb appends it: query + " " + instruction
                    qrels[qid + suffix] = dict(qr.get(qid, {}))
                    top[qid + suffix] = list(data.top_ranked[qid])
            self.qrel_diff = data.qrel_diff
            queries = Dataset.from_dict({"id": ids, "text": texts, "instruction": instr})
            self.dataset = {"default": {"test": {"corpus": corpus_dataset(data.corpus), "queries": queries,
                                                 "relevant_docs": qrels, "top_ranked": top}}}
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            # the same call as mteb's Robust04/News21/Core17InstructionRetrieval.task_specific_scores
            return evaluate_p_mrr_change(qrels, results, self.qrel_diff, self.k_values)

    class LocalRetrievalTask(AbsTaskRetrieval):
        """BEIR-style folder (full-corpus retrieval); subclasses set ``metadata`` and ``source``."""
        source = None

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            corpus, queries, qrels = load_beir(self.source)
            queries = Dataset.from_dict({"id": list(queries), "text": list(queries.values())})
            self.dataset = {"default": {"test": {"corpus": corpus_dataset(corpus), "queries": queries,
                                                 "relevant_docs": qrels, "top_ranked": None}}}
            self.data_loaded = True

    return LocalFollowIRTask, LocalRetrievalTask


def _make_task(base, name: str, folder: Path, kind: str, source):
    # metadata must be a class attribute: mteb's ``unload_data`` drops instance-level metadata
    sub = type(f"Local_{name}", (base,), {"metadata": _base_metadata(name, folder, kind), "source": source})
    return sub()


def local_followir_task(data, name: str | None = None):
    """An mteb ``AbsTaskRetrieval`` (type InstructionReranking, main score p-MRR) over a FollowIR folder.

    ``data`` is a folder path or a loaded ``FollowIRData``; the task is named after the folder
    (as ``evaluate_followir`` names its result), unless ``name`` is given.
    """
    from .followir import FollowIRData

    folder = Path(data.name) if isinstance(data, FollowIRData) else Path(data)
    return _make_task(_task_classes()[0], name or folder.name, folder, "followir", data)


def local_retrieval_task(folder: str | Path, name: str | None = None):
    """An mteb ``AbsTaskRetrieval`` (full-corpus retrieval, main score nDCG@10) over a BEIR-style folder."""
    folder = Path(folder)
    return _make_task(_task_classes()[1], name or folder.name, folder, "beir", folder)


# ---------------------------------------------------------------------------------------------
# named tasks: availability check and running


def _offline() -> bool:
    import datasets.config
    import huggingface_hub.constants as hc

    return bool(datasets.config.HF_HUB_OFFLINE or hc.HF_HUB_OFFLINE)


def _hub_reachable(timeout: float = 2.0) -> bool:
    if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
        return True  # a proxy decides; don't second-guess it with a raw socket
    import huggingface_hub.constants as hc

    url = urlparse(hc.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _go_offline() -> None:
    """Switch this process's datasets / huggingface_hub to cache-only mode (no retry loops)."""
    import datasets.config
    import huggingface_hub.constants as hc

    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    hc.HF_HUB_OFFLINE = True


def check_task_available(task) -> None:
    """Raise ``DatasetUnavailable`` (one clear line) unless ``task``'s dataset can be loaded now.

    Offline (``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``) or with the hub unreachable, the
    dataset must be in the local cache; the check then takes milliseconds instead of the ~25 s
    of retries ``datasets`` would spend before failing.
    """
    import datasets

    md = task.metadata.dataset
    path, rev = md["path"], md.get("revision")
    if Path(path).exists():
        return
    why = "offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
    if not _offline():
        if _hub_reachable():
            return
        why = "the Hugging Face hub is unreachable"
        _go_offline()
    try:
        datasets.get_dataset_config_names(path, revision=rev)
    except Exception as e:  # ConnectionError, FileNotFoundError, DatasetNotFoundError, ...
        raise DatasetUnavailable(
            f"{task.metadata.name}", None,
            f"dataset {path} (revision {str(rev)[:10]}) is not in the local cache and {why}; "
            f"download it once online (python -c \"import mteb; mteb.get_task('{task.metadata.name}').load_data()\") "
            f"or point HF_HOME at a cache that has it [{type(e).__name__}]") from None


def get_task(name: str):
    """``mteb.get_task`` with a one-line ``DataError`` for unknown names."""
    import mteb

    try:
        return mteb.get_task(name)
    except KeyError as e:
        raise DataError(name, None, f"not an mteb task name ({str(e).strip(chr(39))[:200]})") from None


def run_mteb(model, task, *, batch_size: int = 32, show_progress_bar: bool = False) -> dict:
    """Run one mteb task with mteb 2.x's ``mteb.evaluate``; return ``{"scores", "run", "qrels"}``.

    ``scores`` is mteb's score dict for the test split / default subset as mteb reports it
    (fractions, MAP/nDCG rounded to 5 decimals by mteb). ``run`` and ``qrels`` are what mteb
    scored, captured from ``task_specific_scores`` so per-query statistics use mteb's own run.
    mteb's result cache is bypassed (``cache=None``): a local task's name says nothing about
    its data, and a stale cached score must never be reported.
    """
    import mteb

    captured = {}
    orig = task.task_specific_scores

    def capture(scores, qrels, results, hf_split, hf_subset):
        captured.update(run=results, qrels=qrels, split=hf_split, subset=hf_subset)
        return orig(scores, qrels, results, hf_split=hf_split, hf_subset=hf_subset)

    task.task_specific_scores = capture
    with warnings.catch_warnings():
        # mteb 2.26 calls a sentence-transformers method that 6.x renamed; the FutureWarning is noise
        warnings.filterwarnings("ignore", category=FutureWarning)
        try:
            res = mteb.evaluate(model, task, cache=None, overwrite_strategy="always", show_progress_bar=show_progress_bar,
                                encode_kwargs={"batch_size": batch_size, "show_progress_bar": show_progress_bar})
        finally:
            del task.task_specific_scores
    if res.exceptions:
        raise RuntimeError(f"mteb failed on {task.metadata.name}: {res.exceptions[0].exception}")
    tr = res.task_results[0]
    split = "test" if "test" in tr.scores else next(iter(tr.scores))
    scores = tr.scores[split][0]
    return {"scores": scores, "run": captured.get("run"), "qrels": captured.get("qrels")}
