"""The hub benchmarks of the paper's Tables 1-2 as mteb tasks, by name: which task, which data, is it here.

``ifir evaluate --tasks paper`` runs ``PAPER_TASKS``, one per benchmark column (docs/method.md §5):
the three FollowIR tasks (mteb's own classes), InfoSearch Length and Keyword, and MAIR IFEval and
InstructIR (small mteb task classes defined here, following each benchmark's own loader and
scorer). ``PAPER_COLUMNS`` says which row of the tidy results table holds each column.

The file, in reading order:

1. **The paper's columns**: ``PAPER_TASKS``, ``PAPER_COLUMNS``, the hub repos and revisions, and
   ``get_paper_task(name, root)``, the task object for a name, reading local copies under ``root``.
2. **Shared by the wrapped tasks** (and by ``mteb_glue``'s local-folder tasks):
   ``task_metadata`` / ``instruction_task_metadata`` (a renamed copy of a real mteb task's
   metadata), ``task_instance`` (that metadata set on a subclass), ``default_test_split`` (mteb
   2.x's ``task.dataset`` layout) and ``og_changed_queries`` (mteb 2.x's FollowIR query schema).
3. **InfoSearch** (Zhou et al. 2024, arXiv 2410.23841): ``infosearch_task``, whose docstring says how
   the data is read and scored, as InfoSearch's own code does.
4. **MAIR** (Sun et al., EMNLP 2024, arXiv 2410.10127): ``mair_task``, likewise.
5. **Availability**: ``missing_datasets``, ``check_available``, ``prefetch``.
6. **Prompts** (``ifir evaluate --prompts model|benchmark``): ``PROMPT_RULES``, the one table of
   which prompts each benchmark family's own scripts encode with, ``task_family`` and
   ``prompts_for`` (the ``{"query", "document"}`` prompts one task is encoded with).

**Where the data comes from.** By default the hub repo through the ``datasets`` cache (``HF_HOME``).
With a data directory (``--data-dir DIR`` or ``IFIR_DATA_DIR=DIR``), a repo ``owner/name`` found at
``DIR/owner/name`` (what ``hf download owner/name --repo-type dataset --local-dir DIR/owner/name``
writes) is read from there instead: only the path given to ``load_dataset`` changes, the task's
loader and scoring do not (a copy that mteb's own loader reads has its qrels and top_ranked
rows checked first, ``check_mteb_copy``). A local copy's loads go through a ``datasets`` cache keyed by its
files (``local_datasets_cache``), and its rows record a digest of the files it reads
(``copy_digest``, the results' ``data_sha``). A task read from the hub records none: InfoSearch
Length and MAIR follow ``main``, so two hub reads months apart are not told apart.

**Offline checks.** ``missing_datasets(tasks)`` lists, one line per dataset repo, what is neither
a local copy nor in the cache while offline (or with the hub unreachable), with the command that
fetches it; it takes milliseconds instead of the retries ``datasets`` would spend. ``prefetch``
loads the tasks' data once, to fill a cache on a networked machine.

Not handled here: running tasks and local-folder tasks (``mteb_glue``); InfoSearch's reversed mode,
its WISE / SICR metrics (the paper reports p-MRR only) and its other four dimensions; MAIR's other
124 tasks, its reranking (RankGPT) and BM25 paths.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from ..core.digests import files_digest
from ..core.errors import ConfigError, DataError, DatasetUnavailable
from ..core.models import plain_prompt
from .corpora import FOLLOWIR_TASKS, Qrels, judgments, preview_ids

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# 1. the paper's columns

# task name -> (hub repo, revision). InfoSearch's own task file pins Length-v1 to d4915806..., which
# is a commit of jianqunZ/Language-v1 (a copy-paste slip upstream), so Length-v1 follows ``main``.
INFOSEARCH_DATASETS = {
    "InfoSearchLength": ("jianqunZ/Length-v1", "main"),
    "InfoSearchKeyword": ("jianqunZ/Clarity-v1", "4c1892c874d09877c00243fac16452f3353039aa"),
}
MAIR_QUERIES = "MAIR-Bench/MAIR-Queries"
MAIR_DOCS = "MAIR-Bench/MAIR-Docs"
MAIR_REVISION = "main"
# task name -> MAIR config (task) name
MAIR_TASKS = {"MAIR-IFEval": "IFEval", "MAIR-InstructIR": "InstructIR"}

DATA_DIR_ENV = "IFIR_DATA_DIR"
PAPER_TASKS = (*FOLLOWIR_TASKS, *INFOSEARCH_DATASETS, *MAIR_TASKS)
# paper column -> (dataset, metric) of its row in the results table (``results.RESULT_COLUMNS``)
PAPER_COLUMNS = {
    "FollowIR p-MRR": ("followir", "p_mrr"),
    "FollowIR Score": ("followir", "score"),
    "InfoSearch Length p-MRR": ("InfoSearchLength", "p_mrr"),
    "InfoSearch Keyword p-MRR": ("InfoSearchKeyword", "p_mrr"),
    "MAIR IFEval nDCG@10": ("MAIR-IFEval", "ndcg_at_10"),
    "MAIR InstructIR nDCG@10": ("MAIR-InstructIR", "ndcg_at_10"),
}


def data_dir(given: str | Path | None = None) -> Path | None:
    """``given``, else ``$IFIR_DATA_DIR``, else None; a given directory must exist."""
    d = given or os.environ.get(DATA_DIR_ENV)
    if not d:
        return None
    if not Path(d).is_dir():
        raise DataError(d, None, f"data directory does not exist (--data-dir / {DATA_DIR_ENV})")
    return Path(d)


def local_copy(repo: str, root: Path | None) -> str:
    """``root/owner/name`` when it exists (a local copy of hub repo ``owner/name``), else ``repo``."""
    if root is not None and (root / repo).is_dir():
        return str(root / repo)
    return repo


def get_paper_task(name: str, root: str | Path | None = None):
    """The task object for one of ``PAPER_TASKS`` (or any mteb name), reading local copies under ``root``.

    Returns None for a name that is neither a paper task nor has a local copy (``mteb.get_task``'s job).
    """
    root = data_dir(root)
    if name in INFOSEARCH_DATASETS:
        return infosearch_task(name, local_copy(INFOSEARCH_DATASETS[name][0], root))
    if name in MAIR_TASKS:
        return mair_task(name, local_copy(MAIR_QUERIES, root), local_copy(MAIR_DOCS, root))
    if root is None:
        return None
    import mteb

    try:
        task = mteb.get_task(name)
    except KeyError:
        return None
    path = local_copy(task.metadata.dataset["path"], root)
    if path == task.metadata.dataset["path"]:
        return task
    # mteb's own class, only the location changes; its loader keeps the last of repeated rows
    md = task.metadata.model_copy(update={"dataset": {**task.metadata.dataset, "path": path}}, deep=True)
    return local_task_instance(type(task), type(task).__name__, md, check=_rows_checked)


# ---------------------------------------------------------------------------------------------
# 2. shared by the wrapped tasks


def task_metadata(template: str, **update):
    """A deep copy of mteb task ``template``'s metadata for an English test split, with ``update`` set.

    ``update`` names metadata fields (``name``, ``description``, ``dataset``, ...); the citation is cleared.
    """
    import mteb

    base = {"eval_splits": ["test"], "eval_langs": ["eng-Latn"], "bibtex_citation": ""}
    return mteb.get_task(template).metadata.model_copy(update={**base, **update}, deep=True)


def instruction_task_metadata(
    template: str, *, name: str, description: str, reference: str, path: str, revision: str, main_score: str
):
    """A copy of mteb task ``template``'s metadata, renamed as English test-split instruction retrieval.

    ``path`` is the hub repo id or a local copy of it. Give the result to ``task_instance``:
    mteb's ``unload_data`` drops instance-level metadata.
    """
    return task_metadata(
        template,
        name=name,
        description=description,
        reference=reference,
        dataset={"path": path, "revision": revision},
        type="InstructionRetrieval",
        main_score=main_score,
    )


def local_paths(task) -> list[Path]:
    """The local copies a task reads (its dataset path, and MAIR's documents), [] for hub repos."""
    paths = [task.metadata.dataset.get("path"), getattr(task, "docs_path", None)]
    return [Path(p) for p in paths if p and Path(p).is_dir()]


def _copy_files(bases: Sequence[tuple[Path, Path]]) -> list[tuple[Path, Path]]:
    """``(copy, file)`` for every file under each ``(copy, folder)``, in name order, hidden ones
    (``.cache``, as ``hf download`` writes) left out."""
    return [
        (root, f)
        for root, base in bases
        for f in sorted(base.rglob("*"))
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts)
    ]


def _stat_key(files: list[tuple[Path, Path]]) -> str:
    """A digest of the files' places, names, sizes and modification times: it changes when a copy
    is edited, downloaded again or another copy is read (no byte is read)."""
    h = hashlib.sha256()
    for root, f in files:
        st = f.stat()
        h.update(f"{root.resolve()}\0{f.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def local_datasets_cache(paths: Sequence[Path]):
    """``datasets``' cache, for the loads inside, in a folder keyed by the local copies' files.

    ``datasets`` keys a local folder that declares ``configs:`` in its README by the folder's
    name and those configs only: an edited copy, a copy downloaded again (InfoSearch Length
    follows ``main``) or another copy of one repo was served from the first copy's cache, without
    a word. Nothing changes for hub repos (``paths`` empty)."""
    if not paths:
        yield
        return
    import datasets.config as dc

    before = dc.HF_DATASETS_CACHE
    dc.HF_DATASETS_CACHE = Path(before) / "ifir-local" / _stat_key(_copy_files([(p, p) for p in paths]))
    try:
        yield
    finally:
        dc.HF_DATASETS_CACHE = before


def _in_local_cache(method):
    """``method`` of a task (``load_data``, ``task_specific_scores``: mteb's FollowIR tasks read
    their qrel diff there) run under ``local_datasets_cache`` of the task's local copies."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with local_datasets_cache(local_paths(self)):
            return method(self, *args, **kwargs)

    return run


def local_task_instance(base: type, class_name: str, metadata, check=None, **attrs):
    """``task_instance`` for a task that reads hub repos, or local copies of them: its loads run
    under ``local_datasets_cache``; ``check`` wraps ``load_data`` first (``_rows_checked``)."""
    wrapped = {
        m: _in_local_cache(check(getattr(base, m)) if check and m == "load_data" else getattr(base, m))
        for m in ("load_data", "task_specific_scores")
        if hasattr(base, m)
    }
    return task_instance(base, class_name, metadata, **wrapped, **attrs)


def _rows_checked(load_data):
    """``load_data`` of an mteb task class reading a local copy, after ``check_mteb_copy``."""

    @functools.wraps(load_data)
    def run(self, *args, **kwargs):
        if not self.data_loaded:
            check_mteb_copy(self.metadata.dataset["path"], self)
        return load_data(self, *args, **kwargs)

    return run


def check_mteb_copy(path: str, task) -> None:
    """A local copy in mteb 2.x's layout, read by mteb's own loader, checked as our readers check:
    mteb's loader builds dicts, so a (query, document) judged twice kept its last grade and a
    query's candidates given on two rows kept the last list (its og and changed runs then
    reranked different pools), without a word. Each qrels config goes through
    ``corpora.judgments`` and each top_ranked config through ``unique_ids``: a ``DataError`` naming
    the config, split and row. Only what ``task`` scores is read (``scored_parts``: its eval
    splits of its eval subsets, as mteb's loader picks them): a split mteb never reads (a ``dev``
    beside ``test``) neither refuses nor slows the evaluation."""
    from datasets import get_dataset_config_names, load_dataset

    for config, split in scored_parts(path, task, get_dataset_config_names(path)):
        ds, kind = load_dataset(path, config, split=split), config.rsplit("-", 1)[-1]
        where = f"{path} [{config}, {split}, row]"
        if kind == "top_ranked":
            unique_ids(*_columns(ds, "query-id", "corpus-ids"), where, "query-id")
        elif {"query-id", "corpus-id", "score"} <= set(ds.column_names):
            rows = zip(*_columns(ds, "query-id", "corpus-id", "score"))
            judgments(((n, str(q), str(d), v) for n, (q, d, v) in enumerate(rows, 1)), where)


def scored_parts(path: str, task, configs: list[str]) -> list[tuple[str, str]]:
    """The (config, split) pairs of qrels and top_ranked that mteb's ``RetrievalDatasetLoader``
    reads for ``task``: per eval subset (``default`` unless multilingual), ``<subset>-qrels`` or
    ``default`` (else ``qrels``) and ``<subset>-top_ranked`` or ``top_ranked``; per eval split,
    that split, or a config's only split. A config without either is one mteb refuses itself."""
    from datasets import get_dataset_split_names

    subsets = list(task.hf_subsets) if task.metadata.is_multilingual else ["default"]
    out = []
    for subset in subsets:
        plain = subset == "default"
        qrels = ("default" if "default" in configs else "qrels") if plain else f"{subset}-qrels"
        for config in (qrels, "top_ranked" if plain else f"{subset}-top_ranked"):
            if config not in configs:
                continue
            names = get_dataset_split_names(path, config_name=config)
            for split in task.eval_splits:
                pick = split if split in names else names[0] if len(names) == 1 else None
                if pick is not None and (config, pick) not in out:
                    out.append((config, pick))
    return out


def _columns(ds, *names) -> list[list]:
    """Whole columns of a ``datasets.Dataset`` as lists, read from its Arrow table at once:
    ``ds[name]`` converts row by row, hundreds of times slower on 100k qrels rows."""
    return [ds.data.column(n).to_pylist() for n in names]


def copy_digest(task) -> str:
    """``''`` for a task read from the hub; for one read from a local copy (``--data-dir``), 16
    hex characters of the bytes of the files it reads (``_task_files``): the results'
    ``data_sha``, so two copies of one benchmark, or a copy edited between two runs, are not
    pooled as one set. Nothing is loaded: a GB of files hashes in seconds."""
    files = _task_files(task)
    if not files:
        return ""
    key = _stat_key(files)  # unchanged since the last digest in this process: reuse it
    if key not in _DIGESTS:
        _DIGESTS[key] = files_digest((str(f.relative_to(root)), f) for root, f in files)
    return _DIGESTS[key]


_DIGESTS: dict[str, str] = {}  # the files' stat key -> their bytes' digest, per process


def _task_files(task) -> list[tuple[Path, Path]]:
    """``(copy, file)`` for the files a local task reads, in name order: a MAIR task's own config
    folders (``<copy>/<config>/``: the other tasks' configs do not change its data), else every
    file of the copy but hidden ones (``.cache``)."""
    config = getattr(task, "mair_config", None)
    roots = local_paths(task)
    return _copy_files([(r, r / config if config and (r / config).is_dir() else r) for r in roots])


def task_instance(base: type, class_name: str, metadata, **attrs):
    """An instance of a new subclass ``class_name`` of ``base`` with ``metadata`` and ``attrs`` as class attributes.

    The metadata must be a class attribute: mteb's ``unload_data`` drops instance-level metadata.
    """
    return type(class_name, (base,), {"metadata": metadata, **attrs})()


def default_test_split(
    corpus, queries, relevant_docs: Qrels, top_ranked: dict[str, list[str]] | None
) -> dict:
    """mteb 2.x's ``task.dataset`` for one subset (``default``) and one split (``test``).

    ``corpus`` and ``queries`` are ``datasets.Dataset`` tables (``id``, ``text``, ...);
    ``top_ranked`` None means full-corpus retrieval, else each query's candidate ids.
    """
    split = {"corpus": corpus, "queries": queries, "relevant_docs": relevant_docs, "top_ranked": top_ranked}
    return {"default": {"test": split}}


def og_changed_queries(
    queries: dict[str, dict], qrels_og: Qrels, qrels_changed: Qrels
) -> tuple[dict[str, list[str]], Qrels]:
    """mteb 2.x's FollowIR query schema: each query twice, ``<qid>-og`` and ``<qid>-changed``.

    ``queries`` maps a qid to ``{"text", "instruction_og", "instruction_changed", ...}``. Returns the
    columns of mteb's queries table (``id``, ``text``, ``instruction``: mteb appends the instruction
    to the text, ``query + " " + instruction``) and the qrels under the new ids (og qrels under
    ``-og``, changed under ``-changed``, ``{}`` for a query without any), as integers.
    ``og_changed_queries({'q': {'text': 't', 'instruction_og': 'a', 'instruction_changed': 'b'}},
    {'q': {'d': 1.0}}, {})`` -> ``({'id': ['q-og', 'q-changed'], 'text': ['t', 't'],
    'instruction': ['a', 'b']}, {'q-og': {'d': 1}, 'q-changed': {}})``
    """
    cols: dict[str, list[str]] = {"id": [], "text": [], "instruction": []}
    qrels: Qrels = {}
    for qid, q in queries.items():
        for suffix, key, qr in (
            ("-og", "instruction_og", qrels_og),
            ("-changed", "instruction_changed", qrels_changed),
        ):
            cols["id"].append(qid + suffix)
            cols["text"].append(q["text"])
            cols["instruction"].append(q[key])
            qrels[qid + suffix] = {d: int(s) for d, s in qr.get(qid, {}).items()}
    return cols, qrels


# ---------------------------------------------------------------------------------------------
# 3. InfoSearch: Length and Keyword


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


def _qrels(path: str, config: str, revision: str) -> Qrels:
    """One qrels config's ``test`` split, checked as a FollowIR folder's qrels are
    (``corpora.judgments``: a fractional or non-numeric grade, or a pair judged twice with
    different grades, is a ``DataError`` naming the repo, config and row)."""
    from datasets import load_dataset

    ds = load_dataset(path, config, revision=revision)["test"]
    rows = zip(*_columns(ds, "query-id", "corpus-id", "score"))
    return judgments(
        ((n, str(q), str(d), v) for n, (q, d, v) in enumerate(rows, 1)), f"{path} [{config}, row]"
    )


def unique_ids(ids, contents, where: str, what: str = "id") -> None:
    """A ``DataError`` naming ``where`` and the row when an id repeats with other content (the
    later row silently replaced the earlier one); an exact repeat is harmless."""
    seen: dict[str, tuple[int, bytes]] = {}  # id -> (first row, a digest of its content: not the text)
    for n, (i, content) in enumerate(zip(ids, contents), 1):
        key, content = str(i), hashlib.blake2b(repr(content).encode(), digest_size=12).digest()
        if key in seen and seen[key][1] != content:
            raise DataError(
                where, n, f"duplicate {what} {key!r} (first on row {seen[key][0]}) with other content", what
            )
        seen.setdefault(key, (n, content))


def warn_unknown_documents(qrels: Qrels, corpus_ids, where: str) -> None:
    """One warning counting judgments that name no document of the corpus (kept, as the
    benchmark's own scorer keeps them: a relevant one lowers recall-based scores)."""
    known = set(map(str, corpus_ids))
    lost = sorted({(q, d) for q, docs in qrels.items() for d in docs if d not in known})
    if lost:
        log.warning(
            "%s: %d judgment(s) name documents not in the corpus, e.g. query %r document %r (kept, as "
            "the benchmark scores them)",
            where,
            len(lost),
            *lost[0],
        )


def warn_unpaired_queries(query_ids, qrels_og: Qrels, qrels_changed: Qrels, where: str) -> None:
    """One warning each, with a count and examples, for InfoSearch judgments that do not pair up:
    qrels naming a query not in the queries (ignored: ``'q2 '`` or ``'01'`` for ``q2`` / ``1``), and
    queries judged in qrels_og with no row in qrels_changed (no changed documents, so left out of
    p-MRR). Both left the mean without a word; a FollowIR folder reports them too. Queries
    without original qrels are dropped as InfoSearch drops them, and not named."""
    known = set(map(str, query_ids))
    for name, qrels in (("qrels_og", qrels_og), ("qrels_changed", qrels_changed)):
        strays = [q for q in qrels if q not in known]
        if strays:
            log.warning(
                "%s [%s]: %d judged queries are not in the queries (their judgments are ignored): %s",
                where,
                name,
                len(strays),
                preview_ids(map(repr, strays)),
            )
    alone = [q for q in qrels_og if q in known and q not in qrels_changed]
    if alone:
        log.warning(
            "%s [qrels_changed]: %d queries judged in qrels_og have no row here, so no changed "
            "documents: left out of p-MRR: %s",
            where,
            len(alone),
            preview_ids(map(repr, alone)),
        )


@functools.cache
def _infosearch_task_class():
    from datasets import Dataset, Value
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks import AbsTaskRetrieval

    class InfoSearchTask(AbsTaskRetrieval):
        """One InfoSearch dimension; subclasses set ``metadata`` (its ``dataset`` path may be a local copy)."""

        prompt_family = "infosearch"

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            path, rev = self.metadata.dataset["path"], self.metadata.dataset["revision"]
            corpus = _load(path, "corpus", rev).cast_column("_id", Value("string"))
            queries = _load(path, "queries", rev).cast_column("_id", Value("string"))
            unique_ids(corpus["_id"], zip(corpus["title"], corpus["text"]), f"{path} [corpus, row]")
            unique_ids(queries["_id"], queries, f"{path} [queries, row]")
            og, changed = _qrels(path, "qrels_og", rev), _qrels(path, "qrels_changed", rev)
            for name, qr in (("qrels_og", og), ("qrels_changed", changed)):
                warn_unknown_documents(qr, corpus["_id"], f"{path} [{name}]")
            warn_unpaired_queries(queries["_id"], og, changed, path)
            # as InfoSearch: queries without qrels are dropped
            cols, qrels = og_changed_queries({q["_id"]: q for q in queries if q["_id"] in og}, og, changed)
            self.qrel_diff = {q: d for q, d in negatives(og, changed).items() if d}
            corpus_ds = Dataset.from_dict(
                {"id": corpus["_id"], "title": corpus["title"], "text": corpus["text"]}
            )
            # full-corpus retrieval (no candidates), as InfoSearch
            self.dataset = default_test_split(corpus_ds, Dataset.from_dict(cols), qrels, None)
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            return evaluate_p_mrr_change(qrels, results, self.qrel_diff, self.k_values)

    return InfoSearchTask


def infosearch_task(name: str, path: str | None = None):
    """The mteb task ``name`` (``InfoSearchLength`` / ``InfoSearchKeyword``), reading ``path`` if given.

    ``path`` replaces the hub repo id (a local copy of the same repo); nothing else changes.

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
    """
    repo, rev = INFOSEARCH_DATASETS[name]
    dim = repo.split("/")[1].split("-")[0]
    about = f"InfoSearch {dim} dimension ({repo}): p-MRR of full-corpus retrieval"
    where = dict(path=str(path or repo), revision=rev, reference="https://github.com/EIT-NLP/InfoSearch")
    md = instruction_task_metadata(
        "Robust04InstructionRetrieval", name=name, description=about, main_score="p-MRR", **where
    )
    return local_task_instance(_infosearch_task_class(), f"InfoSearch_{name}", md)


# ---------------------------------------------------------------------------------------------
# 4. MAIR: IFEval and InstructIR


def docs_split(split: str) -> str:
    """MAIR's query split -> document split: ``'queries' -> 'docs'``, ``'format_12_queries' -> 'format_12_docs'``."""
    return "docs" if split == "queries" else split.replace("_queries", "_docs")


MAIR_SPLIT_SEP = "::"  # not '/': a '/' in a query id marks an aggregate's '<dataset>/<qid>' (stats.strata_of)


def mair_split_data(
    queries, docs, where: str = "MAIR"
) -> tuple[dict, dict, dict[str, dict[str, int]], dict | None]:
    """``(corpus, queries, qrels, top_ranked)`` from MAIR's query and document DatasetDicts.

    With one split, ids stay as they are and every query sees the whole pool (``top_ranked`` None).
    With several, ids become ``<split>::<id>`` and each query's candidates are its split's pool.
    Checked as the FollowIR readers check (``where`` names the data in errors): a document or
    query id repeated with other content, and a fractional or conflicting label, are a
    ``DataError``; labels naming no document of the split's pool draw one warning.
    """
    many = len(queries) > 1
    corpus, qs, qrels, top = {}, {}, {}, {}
    for split, rows in queries.items():
        pool = docs[docs_split(split)]

        def key(i, split=split):
            return f"{split}{MAIR_SPLIT_SEP}{i}" if many else str(i)

        unique_ids(pool["id"], pool["doc"], f"{where} [{docs_split(split)}, row]")
        unique_ids(rows["qid"], rows, f"{where} [{split}, row]", "qid")
        ids = [key(i) for i in pool["id"]]
        corpus.update(zip(ids, pool["doc"]))
        for n, r in enumerate(rows, 1):
            qid = key(r["qid"])
            qs[qid] = r["instruction"] + r["query"]  # sentence-transformers: prompt + text
            labels = ((n, qid, key(lab["id"]), lab["score"]) for lab in r["labels"])
            qrels[qid] = judgments(labels, f"{where} [{split}, row]").get(qid, {})
            top[qid] = ids
        split_qrels = {q: qrels[q] for q in map(key, rows["qid"])}
        warn_unknown_documents(split_qrels, ids, f"{where} [{split}]")
        warn_unjudged_queries(split_qrels, f"{where} [{split}]")
    return corpus, qs, qrels, top if many else None


def warn_unjudged_queries(qrels: Qrels, where: str) -> None:
    """One warning each, with a count and examples, for MAIR queries with no relevant label:
    labels all 0 (nDCG@10 0 by construction, kept in the mean) and no labels at all (left out of
    the mean). MAIR's own scorer (pytrec_eval over its labels) does the same, so the numbers stay
    the benchmark's; a FollowIR or BEIR folder names such queries too, where MAIR said nothing."""
    zero = [q for q, docs in qrels.items() if docs and max(docs.values()) <= 0]
    none = [q for q, docs in qrels.items() if not docs]
    n = len(qrels)
    if zero:
        log.warning(
            "%s: %d of %d queries have labels but none above 0: nDCG@10 0 by construction, kept "
            "in the mean (as MAIR scores them): %s",
            where,
            len(zero),
            n,
            preview_ids(map(repr, zero)),
        )
    if none:
        log.warning(
            "%s: %d of %d queries have no labels: left out of the mean (as MAIR scores them): %s",
            where,
            len(none),
            n,
            preview_ids(map(repr, none)),
        )


@functools.cache
def _mair_task_class():
    from datasets import Dataset, load_dataset
    from mteb.abstasks import AbsTaskRetrieval

    class MAIRTask(AbsTaskRetrieval):
        """One MAIR task; subclasses set ``metadata`` (queries repo), ``docs_path`` and ``mair_config``."""

        prompt_family = "mair"

        docs_path = MAIR_DOCS
        mair_config = None

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            rev = self.metadata.dataset["revision"]
            queries = load_dataset(self.metadata.dataset["path"], self.mair_config, revision=rev)
            docs = load_dataset(self.docs_path, self.mair_config, revision=rev)
            where = f"{self.metadata.dataset['path']} + {self.docs_path} ({self.mair_config})"
            corpus, qs, qrels, top = mair_split_data(queries, docs, where)
            self.dataset = default_test_split(
                Dataset.from_dict({"id": list(corpus), "text": list(corpus.values())}),
                Dataset.from_dict({"id": list(qs), "text": list(qs.values())}),
                qrels,
                top,
            )
            self.data_loaded = True

    return MAIRTask


def mair_task(name: str, queries_path: str | None = None, docs_path: str | None = None):
    """The mteb task ``name`` (``MAIR-IFEval`` / ``MAIR-InstructIR``), main score nDCG@10.

    ``queries_path`` / ``docs_path`` replace the two hub repo ids (local copies of the same repos).

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
    """
    config = MAIR_TASKS[name]
    about = f"MAIR task {config} ({MAIR_QUERIES} + {MAIR_DOCS}, config {config})"
    where = dict(
        path=str(queries_path or MAIR_QUERIES),
        revision=MAIR_REVISION,
        reference="https://github.com/sunnweiwei/MAIR",
    )
    md = instruction_task_metadata("SciFact", name=name, description=about, main_score="ndcg_at_10", **where)
    attrs = {"docs_path": str(docs_path or MAIR_DOCS), "mair_config": config}
    return local_task_instance(_mair_task_class(), f"MAIR_{config}", md, **attrs)


# ---------------------------------------------------------------------------------------------
# 5. availability: offline checks, prefetch


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


def task_repos(task) -> list[tuple[str, str | None, str | None]]:
    """``(path, revision, config)`` of every dataset repo ``task`` reads (MAIR: queries and docs)."""
    md = task.metadata.dataset
    config = getattr(task, "mair_config", None)
    out = [(md["path"], md.get("revision"), config)]
    if getattr(task, "docs_path", None):
        out.append((task.docs_path, md.get("revision"), config))
    return out


def _fetch_hint(repo: str, names: list[str]) -> str:
    big = " (the whole repo, several GB)" if repo == MAIR_DOCS else ""
    return (
        f"on a networked machine either run `hf download {repo} --repo-type dataset --local-dir DIR/{repo}`"
        f"{big} and pass --data-dir DIR (or {DATA_DIR_ENV}=DIR), or fill a cache with `HF_HOME=H python -c "
        f'"from ifir_lib.evaluation.tasks import prefetch; prefetch({names!r})"` and run with HF_HOME=H'
    )


def prefetch(names=("paper",), root: str | Path | None = None) -> None:
    """Load each task's data once (online: into the ``datasets`` cache of ``HF_HOME``); ``'paper'`` = all six.

    Loads what each task's own loader loads, and nothing more (MAIR: only the IFEval / InstructIR configs).
    """
    import mteb
    from datasets import load_dataset

    for n in dict.fromkeys(t for x in names for t in (PAPER_TASKS if x == "paper" else [x])):
        task = get_paper_task(n, root) or mteb.get_task(n)
        task.load_data()
        if n in FOLLOWIR_TASKS:  # mteb's FollowIR tasks read their qrel diff only when scoring
            md = task.metadata.dataset
            load_dataset(md["path"], "qrel_diff", split="qrel_diff", revision=md["revision"])


def missing_datasets(tasks) -> list[str]:
    """One line per dataset repo that ``tasks`` need and that cannot be loaded now (empty: all fine)."""
    import datasets

    need: dict[str, tuple[str | None, str | None, list[str]]] = {}
    for t in tasks:
        for path, rev, config in task_repos(t):
            need.setdefault(path, (rev, config, []))[2].append(t.metadata.name)
    why = "offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
    if not _offline() and any(not Path(p).exists() for p in need):
        if _hub_reachable():
            return []
        why = "the Hugging Face hub is unreachable"
        _go_offline()
    lines = []
    for path, (rev, config, names) in need.items():
        if Path(path).exists():
            continue
        try:
            configs = datasets.get_dataset_config_names(path, revision=rev)
            if config is not None and config not in configs:
                raise FileNotFoundError(config)
        except Exception as e:  # ConnectionError, FileNotFoundError, DatasetNotFoundError, ...
            what = f"{path}" + (f" (config {config})" if config else "") + f" (revision {str(rev)[:10]})"
            lines.append(
                f"{', '.join(names)}: dataset {what} is not in the local cache and {why}; "
                f"{_fetch_hint(path, names)} [{type(e).__name__}]"
            )
    return lines


def check_available(tasks) -> None:
    """Raise ``DatasetUnavailable`` naming every missing dataset, one line each, unless all are loadable."""
    lines = missing_datasets(tasks)
    if lines:
        first, rest = lines[0].split(": ", 1)
        raise DatasetUnavailable(first, None, rest + "".join("\n" + ln for ln in lines[1:]))


# ---------------------------------------------------------------------------------------------
# 6. prompts: what each benchmark's own scripts encode with (docs/method.md §5)

PROMPT_CHOICES = ("model", "benchmark")
FOLLOWIR_TASK_TYPE = "InstructionReranking"  # mteb 2.x's type of the FollowIR tasks (prompt lookup)
# how one side (query or document) gets its prompt under ``--prompts benchmark``
MTEB = "mteb"  # mteb 2.x's lookup in the model's stored prompts (``mteb_prompt``)
NONE = "none"  # no prompt passed: only sentence-transformers' default prompt, if the model names one
INSTRUCTION = "instruction"  # the instruction is the prompt: already in front of the query text, nothing else


@dataclass(frozen=True)
class PromptRule:
    """Which prompt the query and the document side get, and the public code that says so."""

    query: str
    document: str
    source: str
    placed: bool = True  # False: no benchmark script is known; the rule is a stated fallback


# THE table: benchmark family -> how its own scripts encode (repo + path of each script)
PROMPT_RULES = {
    "followir": PromptRule(
        MTEB,
        MTEB,
        "FollowIR's tasks are mteb's (Robust04/News21/Core17InstructionRetrieval); mteb 2.x joins query "
        "and instruction and looks prompts up by task/type/side (mteb/models/abs_encoder.py get_prompt_name)",
    ),
    "mteb": PromptRule(MTEB, MTEB, "other mteb tasks: mteb is their scorer (mteb/models/abs_encoder.py)"),
    "infosearch": PromptRule(
        NONE,
        NONE,
        "EIT-NLP/InfoSearch mteb_infosearch/mteb/evaluation/evaluators/RetrievalEvaluator.py: DRESModel "
        "encodes query + ' ' + instruction and title + ' ' + text with model.encode(texts), no prompt",
    ),
    "mair": PromptRule(
        INSTRUCTION,
        NONE,
        "sunnweiwei/MAIR mair.py eval_embedding: model.encode(query, prompt=instruction), model.encode(docs)",
    ),
    "beir-folder": PromptRule(
        MTEB,
        MTEB,
        "not placed: a BEIR-format folder names no benchmark, so no authors' script; falls back to the "
        "model's stored prompts (mteb's convention, = --prompts model)",
        placed=False,
    ),
}
UNPLACED = PromptRule(MTEB, MTEB, "not placed: unknown family; the model's stored prompts", placed=False)


def task_family(task) -> str:
    """The ``PROMPT_RULES`` family of an mteb task object: its ``prompt_family``, else by name
    (the FollowIR tasks, InfoSearch, MAIR), else ``'mteb'``. ``task_family(mteb.get_task('SciFact')) -> 'mteb'``"""
    family = getattr(task, "prompt_family", None)
    if family:
        return family
    name = task.metadata.name
    if name in FOLLOWIR_TASKS:
        return "followir"
    return "infosearch" if name in INFOSEARCH_DATASETS else "mair" if name in MAIR_TASKS else "mteb"


def mteb_prompt(prompts: dict, kind: str, task_name: str = "", task_type: str = "") -> str | None:
    """The stored prompt mteb 2.x + sentence-transformers apply to ``kind`` (``'query'``/``'document'``):
    mteb's order (``<task>-<kind>``, ``<task>``, ``<type>-<kind>``, ``<type>``, ``<kind>``), then
    ``encode_document``'s ``passage`` / ``corpus``; None when neither finds one.
    ``mteb_prompt({'query': 'q: ', 'T-query': 't: '}, 'query', 'T') -> 't: '``"""
    keys = [k for name in (task_name, task_type) if name for k in (f"{name}-{kind}", name)]
    keys += [kind, *(("passage", "corpus") if kind == "document" else ())]
    return next((prompts[k] for k in keys if prompts.get(k) is not None), None)


def _side(model, how: str, kind: str, task_name: str, task_type: str) -> str:
    if how == INSTRUCTION:
        return ""
    if how == MTEB:
        found = mteb_prompt(getattr(model, "prompts", None) or {}, kind, task_name, task_type)
        return plain_prompt(model) if found is None else found
    return plain_prompt(model)


def prompts_for(model, family: str, choice: str = "model", *, task_name: str = "", task_type: str = ""):
    """The prompts ``{"query": q, "document": d}`` one task of ``family`` is encoded with under
    ``choice`` (``'model'``: None, the model's stored prompts, unchanged); give it to
    ``models.using_prompts``. A family without a placed rule falls back to the model's stored
    prompts, with a warning.

    MiniLM with prompts ``{"query": "q: ", "document": "d: "}``: ``prompts_for(m, "mair", "benchmark")
    -> {"query": "", "document": ""}``; ``prompts_for(m, "followir", "benchmark") -> {"query": "q: ",
    "document": "d: "}``.
    """
    if choice not in PROMPT_CHOICES:
        raise ConfigError(f"prompts: unknown choice {choice!r}; choose from {', '.join(PROMPT_CHOICES)}")
    if choice == "model":
        return None
    rule = PROMPT_RULES.get(family, UNPLACED)
    if not rule.placed:
        log.warning("--prompts benchmark: %s (%s)", family, rule.source)
    return {
        "query": _side(model, rule.query, "query", task_name, task_type),
        "document": _side(model, rule.document, "document", task_name, task_type),
    }
