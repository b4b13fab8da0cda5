"""The one driver of evaluation: ``evaluate_models`` scores models on evaluation sets and appends
the results to a results table.

``ifir evaluate``, the demo, the experiment and notebook 04 all call it. For each model
(a label and a name or path) and each set (FollowIR-format folders, BEIR folders, named mteb
tasks) it runs our evaluator or mteb's (``engine``), and appends one row per metric to
``results_csv`` (``reporting.results``). Labels default to what the run folder records
(``RunFolder``: mode, rng_seed), else ``base`` and 0. Every row also records ``prompts``
(``'model'``: the model's stored query / document prompts on every set; ``'benchmark'``: each
benchmark's own rule, ``evaluation.tasks.PROMPT_RULES``) and ``plan`` (the experiment plan hash
the run belongs to, ``''`` outside an experiment). ``backend`` (``'torch'``, ``'torch-bf16'``,
``'onnx'``, ``'onnx-int8'``, ``'openvino'``, ``'openvino-bf16'``: ``evaluation.backends``) picks our evaluator's encoder and labels
every row (its ``backend`` column); mteb's engine and named tasks encode with PyTorch only. Example::

    evaluate_models({"minilm": "minilm"}, followir=[C.FOLLOWIR_DIR], results_csv="out/r.csv")
    -> {"minilm": [EvalResult(dataset='followir_mini', metrics={'p_mrr': -5.03, ...})]}

Every row also records ``data_sha``, a digest of the evaluated set's content
(``corpora.content_digest``; ``''`` for a named mteb task), and ``rng_seed`` as an integer.

Before any model loads, every output and input is checked, so a bad one fails in one line
within seconds: the results CSV and its per-query sibling can be written (``results.check_outputs``),
every named set exists, every FollowIR folder loads and passes ``corpora.load_followir``'s
checks (it is then scored from that load, not read twice), and so does every BEIR folder. A
table's rows name a set by its folder name, so these are refused too (``ConfigError``): two
sets that share a name in one call (a folder given twice is evaluated once, with a warning); a
folder named like a bundled set (``followir_mini``, ``followir_v2``) whose content is not the
bundled set's; a set whose name the results table already holds with another ``data_sha``; a
``run_id`` given for several models, or one the table already uses for another (model, mode,
rng_seed) or for a set evaluated again under it.
With ``skip_done``, a (model, mode, rng_seed, prompts, backend, folder, data_sha) already in the
table is not evaluated again (a row without a digest, from an older table, counts for any): a rerun
of the demo or the experiment resumes. Which rows scored the run now in a folder is
``registry.rows_of_run``, the rule ``ifir runs`` reads them by: rows that record another training
run (``run_sha``) than the folder's now (``RunFolder.identity``: another machine's run copied over
it) do not count, nor do rows without one written before a finished run folder's ``started``,
or more than 26 hours (``registry.CLOCK_SLACK``) before its ``finished`` time (they scored the
model that lived there before the run was trained again, or while it trained), so it is evaluated
again and readers take the later rows (``results.one_evaluation_per_run``). Rows that record the
folder's own run count whatever the clocks say (a record's naive local time read in another time
zone). Not handled here: the metrics (``evaluation.metrics``), the encoders
(``evaluation.evaluator``, ``evaluation.mteb_glue``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ..core import config as C
from ..core.errors import ConfigError, DataError
from ..core.models import load_model
from ..core.run_folder import RunFolder
from ..evaluation import mteb_glue
from ..evaluation.backends import backend_label, check_backend
from ..evaluation.corpora import content_digest, load_beir, load_followir
from ..evaluation.evaluator import EvalResult, evaluate_beir, evaluate_followir
from ..evaluation.tasks import PROMPT_CHOICES, copy_digest
from ..reporting.results import AGGREGATE_DATASETS, check_outputs, load_results, make_run_id, save_result
from ..reporting.tables import norm_name
from .registry import rows_of_run

ENGINES = ("ours", "mteb")

log = logging.getLogger(__name__)


def evaluate_models(
    models: Mapping[str, str | Path] | Sequence[str],
    *,
    followir: Sequence[str | Path] = (),
    beir: Sequence[str | Path] = (),
    tasks: Sequence[str] = (),
    data_dir: str | None = None,
    engine: str = "ours",
    results_csv: str | Path | None = None,
    mode: str | None = None,
    rng_seed: int | None = None,
    run_id: str | None = None,
    batch_size: int = 32,
    bootstrap: int = 1000,
    bootstrap_rng_seed: int | None = None,
    cache: bool = True,
    skip_done: bool = False,
    style: str | None = "line",
    prompts: str = "model",
    plan: str = "",
    backend: str = "torch",
) -> dict[str, list[EvalResult]]:
    """Evaluate every model on every set; returns ``{label: [EvalResult, ...]}``.

    ``models`` maps a label (the table's ``model`` column) to a name or path; a plain list uses
    each name as its label. ``mode``/``rng_seed`` label every model (default: its run record's).
    ``run_id`` names one model's run (an error with several models; default: a fresh id each).
    ``bootstrap_rng_seed`` draws the bootstrap resamples (default: the model's ``rng_seed``).
    ``style``: ``'line'`` prints one line per result, ``'table'`` every metric with its interval,
    None nothing. ``prompts`` (``'model'`` | ``'benchmark'``) and ``plan`` label every row (module docstring).
    ``backend``: the encoder of ``engine='ours'`` (``evaluation.backends.BACKENDS``).
    """
    _check_options(engine, prompts, backend, tasks, rng_seed)
    models = dict(models) if isinstance(models, Mapping) else {_label(m): m for m in models}
    if run_id is not None and len(models) > 1:
        raise ConfigError(
            f"run_id {run_id!r} given for {len(models)} models; a run id names one model's run "
            "(leave it out and each model gets its own)"
        )
    if results_csv is not None:  # an output that cannot be written fails before any work
        check_outputs(results_csv, prompts=prompts, plan=plan, backend=backend)
    named, followir, beir, loaded, digests = _check_sets(followir, beir, tasks, data_dir)
    table = _read_table(results_csv)  # read once, not per model
    if table is not None:
        _check_digests(table, results_csv, digests)
    done = _evaluated(table, plan) if skip_done else {}
    # label -> (labels, FollowIR folders, named tasks) still to evaluate
    said = Path(results_csv).name if style and results_csv is not None else None
    condition = (mode, rng_seed, prompts, backend_label(backend, batch_size))  # as its rows will say
    todo = {
        label: _todo(label, path, condition, followir, named, done, digests, said)
        for label, path in models.items()
    }
    if run_id is not None and table is not None:
        _check_run_id(table, results_csv, run_id, todo, beir)
    out = {}
    for label, (labels, folders, tasks_todo) in todo.items():
        if not (folders or beir or tasks_todo):
            continue
        seed = bootstrap_rng_seed if bootstrap_rng_seed is not None else labels["rng_seed"]
        options = dict(
            batch_size=batch_size, bootstrap=bootstrap, rng_seed=seed, prompts=prompts, backend=backend
        )
        sets = [f if engine == "mteb" else loaded[f] for f in folders]  # mteb's task records the folder
        results = _evaluate_one(str(models[label]), sets, beir, tasks_todo, engine, cache, options)
        rid = run_id or make_run_id(label, labels["mode"], labels["rng_seed"])
        run_sha = RunFolder(models[label]).identity()  # '' for a named model
        row = dict(run_id=rid, model=label, prompts=prompts, plan=plan, run_sha=run_sha, **labels)
        for r in results:
            if results_csv is not None:  # each row with its set's digest ('' for a named task)
                save_result(r, results_csv, data_sha=digests.get(r.dataset, ""), **row)
            if style:
                print(format_result(r, style=style, **labels))
        out[label] = results
    return out


def _check_sets(followir, beir, tasks, data_dir) -> tuple[list, list[Path], list[Path], dict, dict]:
    """``(named tasks, FollowIR folders, BEIR folders, {folder: FollowIRData}, {set name: data_sha})``
    once every set is found and checked: named tasks exist, folders load, each once, no two
    sets share a name, and none is named like a bundled set without being it."""
    named = [mteb_glue.get_task(n, data_dir) for n in mteb_glue.expand_task_names(list(tasks))]
    mteb_glue.check_available(named)  # one line per missing dataset
    followir, beir = _unique_sets(followir, beir, [t.metadata.name for t in named])
    loaded = {f: load_followir(f) for f in followir}  # bad data fails before any model loads, too
    digests = _digests(loaded, beir) | _task_digests(named)
    _check_bundled_names(loaded, beir, digests)
    return named, followir, beir, loaded, digests


def _check_options(engine: str, prompts: str, backend: str, tasks: Sequence[str], rng_seed) -> None:
    """An unknown engine or prompts choice, a backend that cannot run, or a random-seed label
    that is not an integer fail before any work, in one line."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if prompts not in PROMPT_CHOICES:
        raise ConfigError(f"prompts: unknown choice {prompts!r}; choose from {', '.join(PROMPT_CHOICES)}")
    _check_backend(backend, engine, tasks)
    if rng_seed is not None and not str(rng_seed).strip().removeprefix("-").isdigit():
        raise ConfigError(f"rng_seed: the table's random-seed label must be an integer, not {rng_seed!r}")


def _unique_sets(followir, beir, task_names) -> tuple[list[Path], list[Path]]:
    """The FollowIR and BEIR folders, each once: a folder given twice (``x`` and ``./x/``, or a
    link to it) is evaluated once, with a warning. Every set's rows are labelled by its name
    (the folder's, or the mteb task's), so two sets that share one are a ``ConfigError`` naming
    both: their rows would be read, and averaged, as one set's."""
    seen: dict[Path, tuple[str, Path]] = {}  # the folder itself -> (kind, as first given)
    kept: dict[str, list[Path]] = {"FollowIR": [], "BEIR": []}
    for kind, folders in (("FollowIR", followir), ("BEIR", beir)):
        for given in folders:
            if not Path(given).is_dir():  # bad paths fail before any model loads
                raise DataError(given, None, "not a directory (expected a FollowIR- or BEIR-format folder)")
            folder = Path(given) if Path(given).name not in ("", "..") else Path(os.path.abspath(given))
            real = folder.resolve()
            if seen.get(real, ("",))[0] == kind:
                log.warning("%s: given twice (as %s and %s); evaluated once", real, seen[real][1], given)
                continue
            seen.setdefault(real, (kind, folder))
            kept[kind].append(folder)
    names: dict[str, list[str]] = {}
    for kind, folders in kept.items():
        for folder in folders:
            names.setdefault(folder.name, []).append(f"{kind} folder {folder}")
    for task in task_names:
        names.setdefault(task, []).append(f"mteb task {task}")
    for name, sets in names.items():
        if len(sets) > 1:
            raise ConfigError(
                f"{' and '.join(sets)} share the name {name!r}, which labels their rows in the results "
                "table, so they would be read as one set; rename a folder"
            )
    return kept["FollowIR"], kept["BEIR"]


def _digests(loaded: dict, beir: Sequence[Path]) -> dict[str, str]:
    """``{set name: data_sha}`` of every folder (``corpora.content_digest`` of its loaded content;
    a BEIR folder is read here once more, so its bad data too fails before any model loads).
    A named mteb task has one only when read from a local copy (``_task_digests``)."""
    out = {Path(f).name: content_digest(data) for f, data in loaded.items()}
    return out | {Path(f).name: content_digest(load_beir(f)) for f in beir}


def _task_digests(named: Sequence) -> dict[str, str]:
    """``{task name: data_sha}`` of the named tasks read from a local copy (``--data-dir``;
    ``tasks.copy_digest``), and of the FollowIR aggregate when its three tasks all are. A task
    read from the hub has none (its revision is pinned, or the hub's ``main``: not checked)."""
    out = {t.metadata.name: sha for t in named if (sha := copy_digest(t))}
    if sha := mteb_glue.followir_digest(out):
        out["followir"] = sha
    return out


BUNDLED = {Path(p).name: (v, Path(p)) for v, p in C.EVAL_SETS.items()}  # folder name -> (v1, its folder)


def _reserved() -> dict[str, str]:
    """``{normalised name: what it names}`` of the sets only a named task may write: the paper's
    tasks (``tasks.PAPER_TASKS``, FollowIR's three among them) and the aggregate names that summaries
    read as an average over sets (``results.AGGREGATE_DATASETS``)."""
    out = {norm_name(n): f"the {n!r} set of the paper's tables" for n in mteb_glue.PAPER_TASKS}
    out |= {norm_name(n): f"{n!r}, which summaries read as an average over sets" for n in AGGREGATE_DATASETS}
    return {k: v for k, v in out.items() if k not in {norm_name(b) for b in BUNDLED}}


def _check_bundled_names(loaded: dict, beir: Sequence[Path], digests: dict[str, str]) -> None:
    """A folder named like a bundled set (``followir_mini``, ``followir_v2``) whose content is
    not the bundled set's is a ``ConfigError``: its rows would land in that set's columns. So is
    a folder named like one of the paper's sets or an aggregate (``followir``,
    ``InfoSearchLength``, ``mean``; case and punctuation aside): its rows would fill the paper's
    columns, beside the paper's numbers, or stand for every set in the summaries."""
    reserved = _reserved()
    for folder in [*loaded, *beir]:
        name = Path(folder).name
        if (what := reserved.get(norm_name(name))) is not None:
            raise ConfigError(f"{folder}: a folder named {name!r} would be read as {what}; rename the folder")
        if name not in BUNDLED:
            continue
        version, home = BUNDLED[name]
        if Path(folder).resolve() == home.resolve():
            continue
        if folder in loaded and home.is_dir() and content_digest(load_followir(home)) == digests[name]:
            continue  # an unchanged copy is the bundled set
        raise ConfigError(
            f"{folder}: named like bundled set {version} ({name}), but its content is not {home}'s; "
            f"its rows would be read as bundled {version}'s (ifir table's 'Bundled {version}' column): "
            "rename the folder"
        )


def _read_table(results_csv) -> pd.DataFrame | None:
    """The results table (``results.load_results``), or None when there is none yet."""
    if results_csv is None or not Path(results_csv).is_file() or Path(results_csv).stat().st_size == 0:
        return None
    return load_results(results_csv)


def _check_digests(table: pd.DataFrame, results_csv, digests: dict[str, str]) -> None:
    """A set whose name the table already holds with other content (another non-empty
    ``data_sha``) is a ``ConfigError`` naming the table, the set and the earlier run: the two
    would be read, and averaged, as one set. Rows without a digest (a table written before the
    column, a named mteb task) are unknown, so they are not compared."""
    for name, sha in digests.items():
        other = table[(table["dataset"] == name) & (table["data_sha"] != "") & (table["data_sha"] != sha)]
        if len(other):
            first = other.iloc[0]
            raise ConfigError(
                f"{results_csv}: set {name!r} is already there with other content (run {first['run_id']!r}, "
                f"data_sha {first['data_sha']}; this folder's is {sha}), and the two would be read as one "
                "set; rename the folder, or write to another --out"
            )


def _check_run_id(table: pd.DataFrame, results_csv, run_id: str, todo: dict, beir) -> None:
    """An explicit ``run_id`` the table already uses for another (model, mode, rng_seed), or for
    a set about to be evaluated again under it, is a ``ConfigError``: per-query scores are joined
    on (run_id, dataset), so one model's scores would be read as another's, or twice."""
    rows = table[table["run_id"] == str(run_id)]
    if not len(rows):
        return
    ((label, (labels, folders, tasks)),) = todo.items()  # one model (evaluate_models checks)
    mine = (str(label), str(labels["mode"]).lower(), str(labels["rng_seed"]))
    for theirs in rows[["model", "mode", "rng_seed"]].drop_duplicates().itertuples(index=False, name=None):
        if theirs != mine:
            raise ConfigError(
                f"{results_csv}: run_id {run_id!r} is already used there by model {theirs[0]!r} ({theirs[1]}, "
                f"rng_seed {theirs[2]}); a run id names one model's run: choose another --run-id, or "
                "leave it out for a fresh one"
            )
    again = sorted(
        set(rows["dataset"]) & {*(Path(f).name for f in [*folders, *beir]), *(t.metadata.name for t in tasks)}
    )
    if again:
        raise ConfigError(
            f"{results_csv}: run_id {run_id!r} already has rows for {', '.join(again)}, and a second "
            "evaluation under it would mix their per-query scores: choose another --run-id, or leave it "
            "out for a fresh one"
        )


def _check_backend(backend: str, engine: str, tasks: Sequence[str]) -> None:
    """An unknown backend, a missing onnxruntime, or an ONNX backend with mteb fail before any work."""
    check_backend(backend)
    if backend != "torch" and (engine == "mteb" or tasks):
        raise ConfigError(
            f"backend {backend!r} applies to our evaluator (--followir/--beir folders, --engine ours); "
            "mteb's engine and named --tasks encode with torch"
        )


def run_label(path: str | Path) -> str:
    """A trained run's label in the results table: its path from the checkout when it lies inside
    (``out/demo/models/ins-dv``: the same from ``make demo`` and from a notebook), else absolute.
    Two experiments' runs never share a label, and ``results.backbone_of`` finds the run record."""
    p = Path(path).resolve()
    return str(p.relative_to(C.REPO_DIR)) if p.is_relative_to(C.REPO_DIR) else str(p)


def labels_of(model: str | Path, mode: str | None = None, rng_seed=None) -> tuple[str, object]:
    """``(mode, rng_seed)`` that label ``model`` in the table: the given ones, else its run
    record's (``RunFolder``), else ``('base', 0)``; an integer rng_seed as an int (``'01'`` -> 1).
    An rng_seed that contradicts the run record is a ``ConfigError`` (one trained model under two
    rng_seeds would count as two runs, a spread that is not one); another mode draws a warning (a
    sweep's variant may be named on purpose). A run folder labelled ``base`` is an experiment's
    starting model, whatever it was trained as."""
    info = RunFolder(model).info() if mode != C.BASE_MODE else {}  # a trained run may be a base model
    recorded = info.get("rng_seed")
    if rng_seed is not None and recorded is not None and _seed_label(rng_seed) != _seed_label(recorded):
        raise ConfigError(
            f"{model}: its run record says rng_seed {recorded!r}, not {rng_seed!r}; leave --rng-seed out "
            "to label it from the record (one model under two rng_seeds would count as two runs)"
        )
    if mode and info.get("mode") and str(mode).lower() != str(info["mode"]).lower():
        log.warning(
            "%s: labelled %s, though its run record says %s (a variant named on purpose; otherwise "
            "leave --mode out)",
            model,
            mode,
            info["mode"],
        )
    mode = mode or info.get("mode") or C.BASE_MODE
    return mode, _seed_label(rng_seed if rng_seed is not None else info.get("rng_seed", 0))


def _seed_label(rng_seed):
    """An integer label as an int (``'01'`` -> 1), so one seed has one spelling in the table;
    anything else as given (``evaluate_models`` refuses it)."""
    if isinstance(rng_seed, str) and rng_seed.strip().removeprefix("-").isdigit():
        return int(rng_seed)
    return int(rng_seed) if isinstance(rng_seed, float) and rng_seed.is_integer() else rng_seed


def json_summary(results: list[EvalResult], **labels) -> dict:
    """What ``ifir evaluate --json`` prints: the FollowIR result's summary (else the first's) with
    ``labels`` (run_id, mode, rng_seed), and every result's under ``results`` when there are several."""
    primary = next((r for r in results if r.dataset == "followir"), results[0])
    out = {**primary.summary(), **labels}
    if len(results) > 1:
        out["results"] = [r.summary() for r in results]
    return out


def _evaluate_one(path, followir, beir, named, engine, cache, options) -> list[EvalResult]:
    """One model on the given sets: our evaluator (``engine='ours'``) or mteb's, same numbers;
    either names the queries whose instruction change the model cannot read."""
    try:
        model = load_model(path)
    except OSError as e:
        raise DataError(path, None, f"cannot load the model ({str(e).splitlines()[0][:200]})") from None
    kw = dict(options, name=path)
    mteb_kw = {k: v for k, v in kw.items() if k != "backend"}  # mteb encodes with torch (_check_backend)
    results = []
    for folder in followir:
        if engine == "mteb":
            results.append(
                mteb_glue.evaluate_mteb_task(model, mteb_glue.local_followir_task(folder), **mteb_kw)
            )
        else:
            results.append(evaluate_followir(model, folder, cache=cache, **kw))
    for folder in beir:
        if engine == "mteb":
            results.append(
                mteb_glue.evaluate_mteb_task(model, mteb_glue.local_retrieval_task(folder), **mteb_kw)
            )
        else:
            results.append(evaluate_beir(model, folder, cache=cache, **kw))
    if named:
        results += mteb_glue.evaluate_mteb(model, named, **mteb_kw)
    return results


def _todo(label, path, condition, followir, named, done, digests, table) -> tuple[dict, list, list]:
    """``(labels, FollowIR folders, named tasks)`` still to evaluate for one model: those not in
    the table for its labels and ``condition`` (mode, rng_seed, prompts, backend), or in it only
    from another run than the one in its folder now (``_done``); says which, naming ``table``
    (None: quiet). Rows recording a run (``run_sha``) of a folder that has no run record now (a
    model saved where a run was deleted) are kept as done, with a line naming the folder."""
    mode, rng_seed, prompts, backend = condition
    labels = dict(zip(("mode", "rng_seed"), labels_of(path, mode, rng_seed)))
    _warn_checkpoint(path, labels)
    _warn_unfinished(path, labels)
    key = (str(label), labels["mode"], str(labels["rng_seed"]), prompts, backend)
    run = RunFolder(path)
    info = run.info() if done else {}
    this = (info.get("finished"), run.identity() if done else "", info.get("started"))  # rows_of_run
    folders = [f for f in followir if not _done(done, key, f.name, digests, this)]
    said = f"  {labels['mode']:>9} rng_seed {labels['rng_seed']}"
    if len(folders) < len(followir) and table:
        print(f"{said}: already in {table}")
        skipped = [_rows(done, key, f.name, digests) for f in followir if f not in folders]
        if not this[1] and (shas := _run_shas([r for rows in skipped for r in rows])):
            print(
                f"{said}: its rows in {table} record run {', '.join(sorted(shas))}, and {path} holds no "
                "run record now; taken as that run's (delete the rows to evaluate it again)"
            )
    again = [r for f in folders for r in _rows(done, key, f.name, digests)]
    if again and table:
        why = (
            f"{path} holds another run than its rows in {table} (trained again or copied over since they were written)"
            if this[1] and _run_shas(again) - {this[1]}
            else f"its rows in {table} were written before or while {path} trained (by this machine's clock)"
        )
        print(f"{said}: {why}; evaluated again (the later rows are read)")
    tasks_todo = [t for t in named if not _done(done, key, t.metadata.name, digests, this)]
    return labels, folders, tasks_todo


def _warn_checkpoint(path, labels: dict) -> None:
    """Warn when ``path`` is a training checkpoint (``RUN/checkpoints/checkpoint-N``) of a run
    folder: it has no run record of its own, so its rows were labelled ``base``, rng_seed 0 (a
    second base model beside the real one), and it reads the training length (the record's
    ``trained_max_seq_length``: the config's ``max_seq_length`` capped to the backbone's positions;
    the config's for records before it), not the length the run's saved model reads, without a word."""
    p = Path(path).resolve()  # `checkpoint-2` given from inside RUN/checkpoints too
    run = RunFolder(p.parent.parent)
    if p.parent.name != "checkpoints" or not p.name.startswith("checkpoint-") or not run.is_run():
        return
    info = run.info()
    log.warning(
        "%s is a training checkpoint of the run %s (%s, rng_seed %s), not its saved model: it reads %s "
        "tokens (the training length) where the run's saved model reads %s; its rows are labelled %s, "
        "rng_seed %s (--mode and --rng-seed label them)",
        path,
        run.path,
        info.get("mode"),
        info.get("rng_seed"),
        info.get("trained_max_seq_length", (info.get("config") or {}).get("max_seq_length")),
        info.get("saved_max_seq_length", "its base model's length"),
        labels["mode"],
        labels["rng_seed"],
    )


def _warn_unfinished(path, labels: dict) -> None:
    """Warn when ``path`` is a run folder whose record's status is not ``finished`` (``running``,
    ``stopped: ...``, ``failed: ...``): what it holds is not the run's saved model (a save cut
    before ``modules.json``, an earlier run's model while it trains again, nothing yet), yet its
    rows were labelled as a finished run of its mode without a word. Not refused: a kept state
    may be evaluated on purpose."""
    run = RunFolder(path)
    status = run.info().get("status") if run.is_run() else "finished"
    if status != "finished":
        log.warning(
            "%s: its run record says status %r, not finished: what the folder holds is not that run's "
            "saved model (half saved, or an earlier model while it trains again); its rows are labelled "
            "%s, rng_seed %s as a finished run's would be",
            path,
            status,
            labels["mode"],
            labels["rng_seed"],
        )


def _evaluated(table: pd.DataFrame | None, plan: str = "") -> dict[tuple, dict[str, pd.DataFrame]]:
    """``{(model, mode, rng_seed, prompts, backend, dataset): {data_sha: rows}}`` (each row's
    ``timestamp`` and ``run_sha``) already in
    the table (empty when there is none); an older table without ``prompts`` / ``backend`` /
    ``data_sha`` reads as ``'model'`` / ``'torch'`` / ``''`` (``results.load_results``). Under an
    experiment's ``plan`` only its own rows count: its report reads only them, so a base row from
    a plain ``ifir evaluate`` (or another plan's collect) made the base model skipped for good and
    left out of every table."""
    if table is None:
        return {}
    if plan:
        table = table[table["plan"].astype(str) == plan]
    cols = ["model", "mode", "rng_seed", "prompts", "backend", "dataset", "data_sha"]
    done: dict[tuple, dict[str, pd.DataFrame]] = {}
    keyed = table[cols].astype(str).assign(timestamp=table["timestamp"], run_sha=table["run_sha"].astype(str))
    for (*key, sha), rows in keyed.groupby(cols, sort=False, dropna=False):
        done.setdefault(tuple(key), {})[sha] = rows[["timestamp", "run_sha"]]
    return done


def _label(model: str | Path) -> str:
    """A model's label in results.csv: a local folder with one spelling (``runs/ins-dv/`` and
    ``./runs/ins-dv`` are ``runs/ins-dv``, so ``skip_done`` finds its rows); a name as given."""
    return os.path.normpath(model) if Path(model).is_dir() else str(model)


def _rows(done: dict, key: tuple, name: str, digests: dict[str, str]) -> list[pd.DataFrame]:
    """The rows (``timestamp``, ``run_sha``) of the set ``name`` in the table for ``key``: with the
    same content digest, or with none (a row written before ``data_sha``: its content is unknown,
    so it is taken as this set's, and a resumed run goes on as it did)."""
    shas = done.get((*key, name), {})
    return [shas[s] for s in ("", digests.get(name, "")) if s in shas]


def _run_shas(rows: list[pd.DataFrame]) -> set[str]:
    """The runs (``run_sha``) that ``rows`` record, leaving out rows written before the column."""
    return {s for r in rows for s in r["run_sha"].astype(str)} - {"", "nan"}


def _done(done: dict, key: tuple, name: str, digests: dict[str, str], run: tuple) -> bool:
    """Whether the set ``name`` is in the table for ``key`` (``_rows``) by the run now at that
    path (``run``: its ``finished``, ``RunFolder.identity`` and ``started``): a row of it that
    scored this run (``registry.rows_of_run``, the rule ``ifir runs`` reads the rows by)."""
    finished, identity, started = run
    return any(rows_of_run(r, identity, finished, started).any() for r in _rows(done, key, name, digests))


def format_result(r: EvalResult, *, style: str = "line", mode: str = "", rng_seed: int = 0) -> str:
    """``'line'``: ``'     ins-dv rng_seed 0 followir_mini: p-MRR -4.64  MAP@1000 78.79  nDCG@5 68.16'``
    (FollowIR sets, named as in results.csv's ``dataset``; other sets list their metrics);
    ``'table'``: one line per metric with its 95% interval."""
    m = r.metrics
    if style == "line" and {"p_mrr", "map_at_1000", "ndcg_at_5"} <= set(m):
        return (
            f"  {mode:>9} rng_seed {rng_seed} {r.dataset}: p-MRR {m['p_mrr']:+.2f}  "
            f"MAP@1000 {m['map_at_1000']:.2f}  nDCG@5 {m['ndcg_at_5']:.2f}"
        )
    lines = []
    for name, v in m.items():
        lo, hi = r.ci.get(name, (float("nan"), float("nan")))
        ci = f" [{lo:6.2f}, {hi:6.2f}]" if lo == lo else ""
        lines.append(f"{r.dataset:>32} {name:>12} {v:7.2f}{ci}  n={len(r.per_query.get(name, {}))}")
    lines += [f"{r.dataset:>32} warning: {prob}" for prob in r.problems]
    return "\n".join(lines)
