"""The paper's benchmark columns (Tables 1-2) by name: which task, which data, is the data here.

``ifir evaluate --tasks paper`` runs ``PAPER_TASKS``: the three FollowIR tasks (mteb's own classes),
InfoSearch Length and Keyword (``infosearch``) and MAIR IFEval and InstructIR (``mair``).
``PAPER_COLUMNS`` says which row of the tidy results table holds each column.

**Where the data comes from.** By default the hub repo through the ``datasets`` cache (``HF_HOME``).
With a data directory (``--data-dir DIR`` or ``IFIR_DATA_DIR=DIR``), a repo ``owner/name`` found at
``DIR/owner/name`` (what ``hf download owner/name --repo-type dataset --local-dir DIR/owner/name``
writes) is read from there instead: only the path given to ``load_dataset`` changes, the task's
loader and scoring do not.

**Offline checks.** ``missing_datasets(tasks)`` lists, one line per dataset repo, what is neither
a local copy nor in the cache while offline (or with the hub unreachable), with the command that
fetches it; it takes milliseconds instead of the retries ``datasets`` would spend. ``prefetch``
loads the tasks' data once, to fill a cache on a networked machine.

Not handled here: running tasks (``mteb_glue``), the task classes (``infosearch``, ``mair``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from .corpora import FOLLOWIR_TASKS
from .errors import DataError, DatasetUnavailable
from .infosearch import INFOSEARCH_DATASETS, infosearch_task
from .mair import MAIR_DOCS, MAIR_QUERIES, MAIR_TASKS, mair_task

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
    # mteb's own class, only the location changes (a subclass, as mteb drops instance metadata)
    md = task.metadata.model_copy(update={"dataset": {**task.metadata.dataset, "path": path}}, deep=True)
    return type(type(task).__name__, (type(task),), {"metadata": md})()


# ---------------------------------------------------------------------------------------------
# availability


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
        f'"from ifir_lib.paper_tasks import prefetch; prefetch({names!r})"` and run with HF_HOME=H'
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
