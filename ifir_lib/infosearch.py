"""InfoSearch (Zhou et al. 2024, arXiv 2410.23841) as mteb 2.x tasks: the Length and Keyword dimensions.

The paper's Tables 1-2 report "InfoSearch Length p-MRR" and "InfoSearch Keyword p-MRR" (docs/method.md §5).
InfoSearch's keyword dimension is its ``Clarity-v1`` dataset ("the condition [keyword] which needs
to be exactly matched in the document", https://github.com/EIT-NLP/InfoSearch README).

**Data, as InfoSearch's own loader reads it** (``HFDataLoaderInstructions`` in
https://github.com/EIT-NLP/InfoSearch/blob/main/mteb_infosearch/build/lib/mteb/abstasks/AbsTaskInstructionRetrieval.py):
hub repos ``jianqunZ/Length-v1`` and ``jianqunZ/Clarity-v1``, JSON-lines files declared as configs
in the README: ``corpus`` (split ``corpus``: ``_id``, ``title``, ``text``), ``queries`` (split
``queries``: ``_id``, ``text``, ``instruction_og``, ``instruction_changed``, ``instruction_reversed``,
...), ``qrels_og`` / ``qrels_changed`` / ``qrels_reversed`` (split ``test``: ``query-id``,
``corpus-id``, ``score`` float). Queries without original qrels are dropped, as there.

**Scoring, as InfoSearch's** ``evaluate_change`` (``mteb_infosearch/mteb/evaluation/evaluators/utils.py``):
full-corpus retrieval (no candidate list) with ``query + " " + instruction``, once with the
original and once with the changed instruction; a document is a *negative* of a query when its
qrel differs between the two and is 0 under the changed instruction; p-MRR is FollowIR's rank
score of each negative (original run vs changed run), averaged per query, then over queries.
mteb's ``evaluate_p_mrr_change`` computes exactly that once the queries are ``<qid>-og`` /
``<qid>-changed`` and the negatives are the qrel diff, so the task reuses it. Two documented
differences: mteb breaks exact score ties by document id (InfoSearch by corpus order), and mteb
ranks with the model's own similarity (cosine for sentence-transformers models; InfoSearch's
evaluator takes ``cos_sim`` or ``dot`` as configured).

Not handled here: InfoSearch's reversed mode and its WISE / SICR metrics (the paper reports p-MRR
only); the other four dimensions; data location and availability (``paper_tasks``).
"""

from __future__ import annotations

import functools

from .task_metadata import instruction_task_metadata

# task name -> (hub repo, revision). InfoSearch's own task file pins Length-v1 to d4915806..., which
# is a commit of jianqunZ/Language-v1 (a copy-paste slip upstream), so Length-v1 follows ``main``.
INFOSEARCH_DATASETS = {
    "InfoSearchLength": ("jianqunZ/Length-v1", "main"),
    "InfoSearchKeyword": ("jianqunZ/Clarity-v1", "4c1892c874d09877c00243fac16452f3353039aa"),
}


def negatives(qrels_og: dict[str, dict[str, float]], qrels_changed: dict[str, dict[str, float]]):
    """InfoSearch's ``create_qrel_match`` negatives: judged under both, relevance changed, 0 when changed.

    ``negatives({'q': {'a': 1, 'b': 1, 'c': 0}}, {'q': {'a': 1, 'b': 0, 'c': 0}}) -> {'q': ['b']}``
    """
    out = {}
    for qid, docs in qrels_og.items():
        ch = qrels_changed.get(qid, {})
        out[qid] = [d for d, s in docs.items() if d in ch and ch[d] != s and ch[d] == 0]
    return out


def _load(path: str, config: str, revision: str):
    """One config's first split, as InfoSearch's loader takes it (``next(iter(ds.values()))``)."""
    from datasets import load_dataset

    ds = load_dataset(path, config, revision=revision)
    return next(iter(ds.values()))


def _qrels(path: str, config: str, revision: str) -> dict[str, dict[str, float]]:
    from datasets import Features, Value, load_dataset

    ds = load_dataset(path, config, revision=revision)["test"]
    ds = ds.cast(
        Features({"query-id": Value("string"), "corpus-id": Value("string"), "score": Value("float")})
    )
    out: dict[str, dict[str, float]] = {}
    for r in ds:
        out.setdefault(r["query-id"], {})[r["corpus-id"]] = float(r["score"])
    return out


@functools.cache
def _task_class():
    from datasets import Dataset, Value
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks import AbsTaskRetrieval

    class InfoSearchTask(AbsTaskRetrieval):
        """One InfoSearch dimension; subclasses set ``metadata`` (its ``dataset`` path may be a local copy)."""

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            path, rev = self.metadata.dataset["path"], self.metadata.dataset["revision"]
            corpus = _load(path, "corpus", rev).cast_column("_id", Value("string"))
            queries = _load(path, "queries", rev).cast_column("_id", Value("string"))
            og, changed = _qrels(path, "qrels_og", rev), _qrels(path, "qrels_changed", rev)
            ids, texts, instr, qrels = [], [], [], {}
            for q in queries:
                if q["_id"] not in og:  # as InfoSearch: queries without qrels are dropped
                    continue
                for suffix, key, qr in (
                    ("-og", "instruction_og", og),
                    ("-changed", "instruction_changed", changed),
                ):
                    ids.append(q["_id"] + suffix)
                    texts.append(q["text"])
                    instr.append(q[key])  # mteb joins query + " " + instruction, as InfoSearch's DRESModel
                    qrels[q["_id"] + suffix] = {d: int(s) for d, s in qr.get(q["_id"], {}).items()}
            self.qrel_diff = {q: d for q, d in negatives(og, changed).items() if d}
            corpus_ds = Dataset.from_dict(
                {"id": corpus["_id"], "title": corpus["title"], "text": corpus["text"]}
            )
            self.dataset = {
                "default": {
                    "test": {
                        "corpus": corpus_ds,
                        "queries": Dataset.from_dict({"id": ids, "text": texts, "instruction": instr}),
                        "relevant_docs": qrels,
                        "top_ranked": None,  # full-corpus retrieval, as InfoSearch
                    }
                }
            }
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            return evaluate_p_mrr_change(qrels, results, self.qrel_diff, self.k_values)

    return InfoSearchTask


def infosearch_task(name: str, path: str | None = None):
    """The mteb task ``name`` (``InfoSearchLength`` / ``InfoSearchKeyword``), reading ``path`` if given.

    ``path`` replaces the hub repo id (a local copy of the same repo); nothing else changes.
    """
    repo, rev = INFOSEARCH_DATASETS[name]
    dim = repo.split("/")[1].split("-")[0]
    md = instruction_task_metadata(
        "Robust04InstructionRetrieval",
        name=name,
        description=f"InfoSearch {dim} dimension ({repo}): p-MRR of full-corpus retrieval",
        reference="https://github.com/EIT-NLP/InfoSearch",
        path=str(path or repo),
        revision=rev,
        main_score="p-MRR",
    )
    # metadata must be a class attribute: mteb's ``unload_data`` drops instance-level metadata
    return type(f"InfoSearch_{name}", (_task_class(),), {"metadata": md})()
