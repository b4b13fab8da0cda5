"""MAIR (Sun et al., EMNLP 2024, arXiv 2410.10127) tasks as mteb 2.x tasks: IFEval and InstructIR.

The paper's Tables 1-2 report "MAIR IFEval nDCG@10" and "MAIR InstructIR nDCG@10" (docs/method.md §5).
"MAIR InstructIR" is MAIR's own ``InstructIR`` task (listed under Web / Doc in MAIR's README and
``config.py``), not mteb's ``InstructIR`` task (kaistAI's full benchmark, main score
robustness@10): the column is MAIR's and its metric is nDCG@10, MAIR's metric.

**Data, as MAIR's loader reads it** (``eval_embedding`` in https://github.com/sunnweiwei/MAIR/blob/main/mair.py):
``load_dataset('MAIR-Bench/MAIR-Queries', TASK)`` gives one or more splits of queries (``qid``,
``instruction``, ``query``, ``labels``: a list of ``{id, score}``); ``load_dataset('MAIR-Bench/MAIR-Docs',
TASK)`` gives the documents (``id``, ``doc``) of each query split: split ``queries`` -> ``docs``,
``<name>_queries`` -> ``<name>_docs`` (IFEval has one split per instruction type, each with its own
small pool of responses).

**Scoring, as MAIR's**: each query split retrieves from its own documents only; the query is
encoded with the instruction as the sentence-transformers prompt (``encode(query, prompt=instruction)``,
i.e. the text ``instruction + query``), documents without one; nDCG@10 per query from pytrec_eval
over the binary/graded labels; a task's score is the query-weighted mean over its splits (MAIR's
``print_results``), i.e. the mean over all its queries. Here the splits become one mteb task
whose queries are ranked against their own split's documents only (mteb's ``top_ranked``
candidates = that split's whole pool), so the mean over queries is MAIR's score. Differences:
mteb uses the model's similarity (cosine for sentence-transformers models; MAIR: inner product,
equal for normalised embeddings) and ranks every pool document (MAIR keeps the top 100, which
does not change nDCG@10).

Not handled here: MAIR's other 124 tasks; its reranking (RankGPT) and BM25 paths; data location
and availability (``paper_tasks``).
"""

from __future__ import annotations

import functools

from .task_metadata import instruction_task_metadata

MAIR_QUERIES = "MAIR-Bench/MAIR-Queries"
MAIR_DOCS = "MAIR-Bench/MAIR-Docs"
MAIR_REVISION = "main"
# task name -> MAIR config (task) name
MAIR_TASKS = {"MAIR-IFEval": "IFEval", "MAIR-InstructIR": "InstructIR"}


def docs_split(split: str) -> str:
    """MAIR's query split -> document split: ``'queries' -> 'docs'``, ``'format_12_queries' -> 'format_12_docs'``."""
    return "docs" if split == "queries" else split.replace("_queries", "_docs")


def mair_split_data(queries, docs) -> tuple[dict, dict, dict[str, dict[str, int]], dict | None]:
    """``(corpus, queries, qrels, top_ranked)`` from MAIR's query and document DatasetDicts.

    With one split, ids stay as they are and every query sees the whole pool (``top_ranked`` None).
    With several, ids become ``<split>/<id>`` and each query's candidates are its split's pool.
    """
    many = len(queries) > 1
    corpus, qs, qrels, top = {}, {}, {}, {}
    for split, rows in queries.items():
        pool = docs[docs_split(split)]

        def key(i, split=split):
            return f"{split}/{i}" if many else str(i)

        ids = [key(i) for i in pool["id"]]
        corpus.update(zip(ids, pool["doc"]))
        for r in rows:
            qid = key(r["qid"])
            qs[qid] = r["instruction"] + r["query"]  # sentence-transformers: prompt + text
            qrels[qid] = {key(lab["id"]): int(lab["score"]) for lab in r["labels"]}
            top[qid] = ids
    return corpus, qs, qrels, top if many else None


@functools.cache
def _task_class():
    from datasets import Dataset, load_dataset
    from mteb.abstasks import AbsTaskRetrieval

    class MAIRTask(AbsTaskRetrieval):
        """One MAIR task; subclasses set ``metadata`` (queries repo), ``docs_path`` and ``mair_config``."""

        docs_path = MAIR_DOCS
        mair_config = None

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            rev = self.metadata.dataset["revision"]
            queries = load_dataset(self.metadata.dataset["path"], self.mair_config, revision=rev)
            docs = load_dataset(self.docs_path, self.mair_config, revision=rev)
            corpus, qs, qrels, top = mair_split_data(queries, docs)
            self.dataset = {
                "default": {
                    "test": {
                        "corpus": Dataset.from_dict({"id": list(corpus), "text": list(corpus.values())}),
                        "queries": Dataset.from_dict({"id": list(qs), "text": list(qs.values())}),
                        "relevant_docs": qrels,
                        "top_ranked": top,
                    }
                }
            }
            self.data_loaded = True

    return MAIRTask


def mair_task(name: str, queries_path: str | None = None, docs_path: str | None = None):
    """The mteb task ``name`` (``MAIR-IFEval`` / ``MAIR-InstructIR``), main score nDCG@10.

    ``queries_path`` / ``docs_path`` replace the two hub repo ids (local copies of the same repos).
    """
    config = MAIR_TASKS[name]
    md = instruction_task_metadata(
        "SciFact",
        name=name,
        description=f"MAIR task {config} ({MAIR_QUERIES} + {MAIR_DOCS}, config {config})",
        reference="https://github.com/sunnweiwei/MAIR",
        path=str(queries_path or MAIR_QUERIES),
        revision=MAIR_REVISION,
        main_score="ndcg_at_10",
    )
    attrs = {"metadata": md, "docs_path": str(docs_path or MAIR_DOCS), "mair_config": config}
    return type(f"MAIR_{config}", (_task_class(),), attrs)()
