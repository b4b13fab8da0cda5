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

Before any model loads, every output and input is checked, so a bad one fails in one line
within seconds: the results CSV and its per-query sibling can be written (``results.check_outputs``),
every named set exists, every FollowIR folder loads and passes ``corpora.load_followir``'s
checks (it is then scored from that load, not read twice).
With ``skip_done``, a (model, mode, rng_seed, prompts, backend, folder) already in the table is not
evaluated again: a rerun of the demo or the experiment resumes. Not handled here: the metrics
(``evaluation.metrics``), the encoders (``evaluation.evaluator``, ``evaluation.mteb_glue``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core import config as C
from ..core.errors import ConfigError, DataError
from ..core.models import load_model
from ..core.run_folder import RunFolder
from ..evaluation import mteb_glue
from ..evaluation.backends import check_backend
from ..evaluation.corpora import load_followir
from ..evaluation.evaluator import EvalResult, evaluate_beir, evaluate_followir
from ..evaluation.tasks import PROMPT_CHOICES
from ..reporting.results import check_outputs, load_results, make_run_id, save_result

ENGINES = ("ours", "mteb")


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
    ``bootstrap_rng_seed`` draws the bootstrap resamples (default: the model's ``rng_seed``).
    ``style``: ``'line'`` prints one line per result, ``'table'`` every metric with its interval,
    None nothing. ``prompts`` (``'model'`` | ``'benchmark'``) and ``plan`` label every row (module docstring).
    ``backend``: the encoder of ``engine='ours'`` (``evaluation.backends.BACKENDS``).
    """
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if prompts not in PROMPT_CHOICES:
        raise ConfigError(f"prompts: unknown choice {prompts!r}; choose from {', '.join(PROMPT_CHOICES)}")
    _check_backend(backend, engine, tasks)
    models = dict(models) if isinstance(models, Mapping) else {str(m): m for m in models}
    if rng_seed is not None and not str(rng_seed).strip().removeprefix("-").isdigit():
        raise ConfigError(f"rng_seed: the table's random-seed label must be an integer, not {rng_seed!r}")
    if results_csv is not None:  # an output that cannot be written fails before any work
        check_outputs(results_csv, prompts=prompts, plan=plan, backend=backend)
    named = [mteb_glue.get_task(n, data_dir) for n in mteb_glue.expand_task_names(list(tasks))]
    mteb_glue.check_available(named)  # one line per missing dataset
    for folder in (*followir, *beir):  # bad paths fail before any model loads
        if not Path(folder).is_dir():
            raise DataError(folder, None, "not a directory (expected a FollowIR- or BEIR-format folder)")
    loaded = {f: load_followir(f) for f in followir}  # bad data fails before any model loads, too
    done = _evaluated(results_csv) if skip_done else set()  # the table is read once, not per model
    out = {}
    for label, path in models.items():
        labels = dict(zip(("mode", "rng_seed"), labels_of(path, mode, rng_seed)))
        seed = bootstrap_rng_seed if bootstrap_rng_seed is not None else labels["rng_seed"]
        options = dict(
            batch_size=batch_size, bootstrap=bootstrap, rng_seed=seed, prompts=prompts, backend=backend
        )
        key = (str(label), labels["mode"], str(labels["rng_seed"]), prompts, backend)
        todo = [f for f in followir if (*key, Path(f).name) not in done]
        if len(todo) < len(followir) and style:
            print(f"  {labels['mode']:>9} rng_seed {labels['rng_seed']}: already in {Path(results_csv).name}")
        tasks_todo = [t for t in named if (*key, t.metadata.name) not in done]  # a task's rows carry its name
        if not (todo or beir or tasks_todo):
            continue
        sets = [f if engine == "mteb" else loaded[f] for f in todo]  # mteb's task records the folder
        results = _evaluate_one(str(path), sets, beir, tasks_todo, engine, cache, options)
        rid = run_id or make_run_id(label, labels["mode"], labels["rng_seed"])
        for r in results:
            if results_csv is not None:
                save_result(r, results_csv, run_id=rid, model=label, prompts=prompts, plan=plan, **labels)
            if style:
                print(format_result(r, style=style, **labels))
        out[label] = results
    return out


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
    record's (``RunFolder``), else ``('base', 0)``."""
    info = RunFolder(model).info()
    mode = mode or info.get("mode") or C.BASE_MODE
    return mode, rng_seed if rng_seed is not None else info.get("rng_seed", 0)


def json_summary(results: list[EvalResult], **labels) -> dict:
    """What ``ifir evaluate --json`` prints: the FollowIR result's summary (else the first's) with
    ``labels`` (run_id, mode, rng_seed), and every result's under ``results`` when there are several."""
    primary = next((r for r in results if r.dataset == "followir"), results[0])
    out = {**primary.summary(), **labels}
    if len(results) > 1:
        out["results"] = [r.summary() for r in results]
    return out


def _evaluate_one(path, followir, beir, named, engine, cache, options) -> list[EvalResult]:
    """One model on the given sets: our evaluator (``engine='ours'``) or mteb's, same numbers."""
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


def _evaluated(results_csv) -> set[tuple[str, str, str, str, str, str]]:
    """``{(model, mode, rng_seed, prompts, backend, dataset)}`` already in the table (empty when
    there is none); an older table without ``prompts`` / ``backend`` reads as ``'model'`` /
    ``'torch'`` (``results.load_results``)."""
    if results_csv is None or not Path(results_csv).exists():
        return set()
    cols = ["model", "mode", "rng_seed", "prompts", "backend", "dataset"]
    return set(load_results(results_csv)[cols].astype(str).itertuples(index=False, name=None))


def format_result(r: EvalResult, *, style: str = "line", mode: str = "", rng_seed: int = 0) -> str:
    """``'line'``: ``'     ins-dv rng_seed 0: p-MRR -4.64  MAP@1000 78.79  nDCG@5 68.16'`` (FollowIR
    sets; other sets list their metrics); ``'table'``: one line per metric with its 95% interval."""
    m = r.metrics
    if style == "line" and {"p_mrr", "map_at_1000", "ndcg_at_5"} <= set(m):
        return (
            f"  {mode:>9} rng_seed {rng_seed}: p-MRR {m['p_mrr']:+.2f}  MAP@1000 {m['map_at_1000']:.2f}  "
            f"nDCG@5 {m['ndcg_at_5']:.2f}"
        )
    lines = []
    for name, v in m.items():
        lo, hi = r.ci.get(name, (float("nan"), float("nan")))
        ci = f" [{lo:6.2f}, {hi:6.2f}]" if lo == lo else ""
        lines.append(f"{r.dataset:>32} {name:>12} {v:7.2f}{ci}  n={len(r.per_query.get(name, {}))}")
    lines += [f"{r.dataset:>32} warning: {prob}" for prob in r.problems]
    return "\n".join(lines)
