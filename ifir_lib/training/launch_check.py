"""Check a multi-GPU launch file against a ``TrainConfig`` before GPU hours are spent.

Reads the three kinds of file that ``launch/`` ships, as text (neither accelerate's launcher nor
DeepSpeed is imported, so this runs anywhere):

- an accelerate config (YAML): ``distributed_type`` MULTI_GPU (DDP) or DEEPSPEED;
  ``num_processes`` must equal the world size; ``mixed_precision`` must match ``cfg.bf16``;
- a DeepSpeed config (JSON, alone or named by the YAML's ``deepspeed_config_file``): ZeRO stage
  0-2; ``bf16``, ``gradient_clipping``, ``train_micro_batch_size_per_gpu``, ``train_batch_size``
  and ``gradient_accumulation_steps`` must be ``"auto"`` (the trainer fills them from the config)
  or equal to what the config says;
- a torchrun shell script: ``--nnodes`` x ``--nproc-per-node`` must equal the world size (shell
  defaults such as ``${NNODES:-2}`` are resolved, the environment first), and the ``ifir train``
  flags it passes must not change the config being checked.

Each problem becomes one line ``file:line: field 'x': what is wrong``; all of them are raised
together as one ``ConfigError``. Gradient accumulation must be 1: it would not add in-batch
documents to the contrastive loss (docs/method.md §3). Not handled here: launching, FSDP, ZeRO-3
(refused), estimates of steps or memory (``dry_run``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import shlex
from pathlib import Path

from ..core.config import MODES, PRESET_ALIASES, PRESET_NAMES
from ..core.errors import ConfigError, DataError
from .flags import TRAIN_CONFIG_FLAGS
from .trainer import TrainConfig, as_mnrl, mode_config

# sentence-transformers#3173: DeepSpeed ZeRO-2 reduces each parameter's gradient once per
# backward, while GradCache accumulates it over mini-batches ("Gradient computed twice for this
# partition"); https://github.com/huggingface/sentence-transformers/issues/3173
ZERO2_GRADCACHE = (
    "ZeRO-2 with GradCache mini-batches (mini_batch_size={mb}) is reported to fail with 'Gradient "
    "computed twice for this partition' (https://github.com/huggingface/sentence-transformers/issues/3173);"
    " a 305M encoder needs no sharding: prefer DDP (launch/accelerate_ddp_8gpu.yaml)"
)


def _line_of(text: str, field: str) -> int | None:
    """1-based line of ``field`` in ``text``: each dotted part (``zero_optimization.stage``) as a
    YAML ``key:`` or JSON ``"key":``, searched from the line of the part before it."""
    lines, at = text.splitlines(), 0
    for part in field.split("."):
        pat = re.compile(rf'(^|\s|\{{|,)"?{re.escape(part)}"?\s*:')
        at = next((i for i in range(at, len(lines)) if pat.search(lines[i])), None)
        if at is None:
            return None
    return at + 1


class _Report:
    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.checked: list[str] = []

    def _line(self, field: str, key: str | None) -> int | None:
        line = _line_of(self.text, key or field)
        if line is None:  # a shell script: the first line, not a comment, that holds the word
            line = next(
                (
                    i
                    for i, ln in enumerate(self.text.splitlines(), 1)
                    if key and key in ln and not ln.lstrip().startswith("#")
                ),
                None,
            )
        return line

    def fail(self, field: str, message: str, key: str | None = None):
        self.errors.append(str(DataError(self.path, self._line(field, key), message, field)))

    def note(self, field: str, message: str, key: str | None = None):
        """A line for the ``warnings``, where a field cannot be checked: not a refusal."""
        self.warnings.append(str(DataError(self.path, self._line(field, key), message, field)))

    def expect(self, field: str, value, wanted, what: str):
        """``value`` must be ``"auto"`` or ``wanted`` (``what`` names where ``wanted`` comes from)."""
        self.checked.append(field)
        if value == "auto" or value == wanted:
            return
        self.fail(field, f'{value!r} but {what} is {wanted!r} (use "auto" or {wanted!r})')


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the launch config ({e.strerror})") from None


def check_launch_file(path: str | Path, cfg, world_size: int | None = None) -> dict:
    """Validate the launch file ``path`` against ``cfg`` and ``world_size`` (``None``: take the
    file's); returns ``{"file", "kind", "world_size", ..., "checked", "warnings"}``."""
    path = Path(path)
    text = _read(path)
    rep = _Report(path, text)
    if path.suffix in (".yaml", ".yml"):
        out = _check_accelerate(rep, cfg, world_size)
    elif path.suffix == ".json":
        out = {"kind": "deepspeed", "world_size": world_size or 1}
        out.update(_check_deepspeed(rep, cfg, out["world_size"]))
    elif path.suffix == ".sh" or text.startswith("#!"):
        out = _check_torchrun(rep, cfg, world_size)
    else:
        raise ConfigError(
            f"{path}: unknown launch config; expected an accelerate .yaml, a DeepSpeed .json or a .sh"
        )
    if rep.errors:
        raise ConfigError("launch config does not match the training config:\n" + "\n".join(rep.errors))
    return {"file": str(path), **out, "checked": rep.checked, "warnings": rep.warnings}


def _world(rep: _Report, field: str, found: int, world_size: int | None, key: str | None = None) -> int:
    rep.checked.append(field)
    if world_size is not None and found != world_size:
        rep.fail(field, f"{found} processes but --world-size is {world_size}", key)
    return found


def _precision(rep: _Report, field: str, value, cfg):
    rep.checked.append(field)
    wanted = "bf16" if cfg.bf16 else "no"
    if str(value).lower() != wanted:
        rep.fail(field, f"{value!r} but the training config has bf16={cfg.bf16} (use {wanted!r})")


def _check_accelerate(rep: _Report, cfg, world_size: int | None) -> dict:
    import yaml

    try:
        doc = yaml.safe_load(rep.text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise DataError(rep.path, mark.line + 1 if mark else None, f"not valid YAML ({e})") from None
    if not isinstance(doc, dict):
        raise DataError(rep.path, None, "an accelerate config is a YAML mapping")
    kind = doc.get("distributed_type")
    if kind not in ("MULTI_GPU", "DEEPSPEED"):
        rep.fail("distributed_type", f"{kind!r}; ifir trains with MULTI_GPU (DDP) or DEEPSPEED (ZeRO 0-2)")
    if doc.get("use_cpu"):
        rep.fail("use_cpu", "true: a multi-GPU launch must not run on the CPU")
    procs, machines = doc.get("num_processes"), doc.get("num_machines", 1)
    if not isinstance(procs, int) or procs < 1:
        rep.fail("num_processes", f"{procs!r}; set the total number of processes (GPUs over all machines)")
        procs = world_size or 1
    _world(rep, "num_processes", procs, world_size)
    if not isinstance(machines, int) or machines < 1 or procs % machines:
        rep.fail("num_machines", f"{machines!r} does not divide num_processes={procs}")
    elif not 0 <= doc.get("machine_rank", 0) < machines:
        rep.fail("machine_rank", f"{doc.get('machine_rank')!r} is not in 0 .. {machines - 1}")
    out = {"kind": "accelerate", "distributed_type": kind, "world_size": procs, "nodes": machines}
    if "mixed_precision" in doc or kind != "DEEPSPEED":
        _precision(rep, "mixed_precision", doc.get("mixed_precision", "no"), cfg)
    if kind == "DEEPSPEED":
        ds = doc.get("deepspeed_config") or {}
        ds_file = ds.get("deepspeed_config_file")
        if ds_file:
            # accelerate refuses these next to a DeepSpeed file: they belong in the JSON
            for key in ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "mixed_precision"):
                if key in ds:
                    rep.fail(
                        f"deepspeed_config.{key}",
                        "set it in the DeepSpeed JSON, not next to deepspeed_config_file",
                    )
            ds_path = Path(ds_file)
            if not ds_path.is_absolute() and not ds_path.exists():
                ds_path = (
                    rep.path.parent / ds_path.name if (rep.path.parent / ds_path.name).exists() else ds_path
                )
            if not ds_path.exists():
                rep.fail(
                    "deepspeed_config.deepspeed_config_file", f"{ds_file} not found", "deepspeed_config_file"
                )
            else:
                sub = _Report(ds_path, _read(ds_path))
                out.update(_check_deepspeed(sub, cfg, procs))
                rep.errors += sub.errors
                rep.warnings += sub.warnings
                rep.checked += [f"{ds_path}:{c}" for c in sub.checked]
        else:  # inline settings, as `accelerate config` writes them without a JSON
            stage = ds.get("zero_stage", 0)
            out["zero_stage"] = _zero_stage(rep, "deepspeed_config.zero_stage", stage, cfg, "zero_stage")
            rep.expect(
                "deepspeed_config.gradient_clipping",
                ds.get("gradient_clipping", "auto"),
                cfg.max_grad_norm,
                "max_grad_norm",
            )
            rep.expect(
                "deepspeed_config.gradient_accumulation_steps",
                ds.get("gradient_accumulation_steps", 1),
                1,
                "gradient accumulation",
            )
    return out


def _zero_stage(rep: _Report, field: str, stage, cfg, key: str) -> int:
    rep.checked.append(field)
    if stage not in (0, 1, 2):
        rep.fail(
            field,
            f"{stage!r}; use 0, 1 or 2 (ZeRO-3 shards parameters, which a 305M encoder does not need, "
            "and is untested with gradient caching)",
            key,
        )
    elif stage == 2 and cfg.mini_batch_size:
        rep.warnings.append(f"{rep.path}: {ZERO2_GRADCACHE.format(mb=cfg.mini_batch_size)}")
    return stage


def _check_deepspeed(rep: _Report, cfg, world_size: int) -> dict:
    try:
        doc = json.loads(rep.text)
    except json.JSONDecodeError as e:
        raise DataError(rep.path, e.lineno, f"not valid JSON ({e.msg})") from None
    zero = doc.get("zero_optimization") or {}
    stage = _zero_stage(rep, "zero_optimization.stage", zero.get("stage", 0), cfg, "stage")
    bf16 = (doc.get("bf16") or {}).get("enabled", False)
    rep.expect("bf16.enabled", bf16, cfg.bf16, "the training config's bf16")
    if (doc.get("fp16") or {}).get("enabled") not in (None, False, "auto"):
        rep.fail("fp16.enabled", "true; the workbench trains in bf16 or fp32")
    rep.expect("gradient_clipping", doc.get("gradient_clipping", "auto"), cfg.max_grad_norm, "max_grad_norm")
    rep.expect(
        "gradient_accumulation_steps",
        doc.get("gradient_accumulation_steps", "auto"),
        1,
        "gradient accumulation (it adds no in-batch documents)",
    )
    rep.expect(
        "train_micro_batch_size_per_gpu",
        doc.get("train_micro_batch_size_per_gpu", "auto"),
        cfg.batch_size,
        "batch_size",
    )
    rep.expect(
        "train_batch_size",
        doc.get("train_batch_size", "auto"),
        cfg.batch_size * world_size,
        f"batch_size x world size ({cfg.batch_size} x {world_size})",
    )
    params = (doc.get("optimizer") or {}).get("params") or {}
    for key, wanted in (("lr", cfg.learning_rate), ("weight_decay", cfg.weight_decay)):
        if key in params:
            rep.expect(f"optimizer.params.{key}", params[key], wanted, key.replace("lr", "learning_rate"))
    return {"zero_stage": stage, "bf16": bf16}


def _shell_vars(text: str) -> dict[str, str | None]:
    """``NAME=${ENV:-default}`` / ``NAME=value`` assignments, resolved as bash would (env first);
    ``None`` for a value the script requires from the environment (``${ENV:?msg}``) and lacks."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$", line)
        if not m:
            continue
        name, rhs = m.group(1), m.group(2).strip().strip("\"'")
        ref = re.fullmatch(r"\$\{(\w+)(?::([-?])(.*))?\}", rhs)
        if ref:
            env, op, default = ref.groups()
            out[name] = os.environ.get(env) or (default if op == "-" else None)
        else:
            out[name] = rhs
    return out


def _check_torchrun(rep: _Report, cfg, world_size: int | None) -> dict:
    opts, rest = _torchrun_command(rep)
    counts = {}
    for flag in ("--nnodes", "--nproc-per-node"):
        raw = opts.get(flag, "1")
        if raw is None or not raw.isdigit():
            rep.fail(
                flag,
                f"{raw!r}; needs a fixed number (a default like ${{NNODES:-2}}) to be checked",
                flag.lstrip("-"),
            )
            counts[flag] = 1
        else:
            counts[flag] = int(raw)
    procs = counts["--nnodes"] * counts["--nproc-per-node"]
    _world(rep, "--nnodes x --nproc-per-node", procs, world_size, "torchrun")
    raw = [w for w, _ in rest]
    if raw[:2] != ["ifir_lib", "train"] and not (
        raw[:1] and raw[0].endswith("ifir") and raw[1:2] == ["train"]
    ):
        rep.fail("torchrun", f"runs {' '.join(raw[:2])!r}; expected `-m ifir_lib train` (or `ifir train`)")
    preset = _check_train_flags(rep, cfg, rest)
    return {"kind": "torchrun", "world_size": procs, "nodes": counts["--nnodes"], "preset": preset}


def _torchrun_command(rep: _Report) -> tuple[dict[str, str | None], list[tuple[str, str | None]]]:
    """``(torchrun options with shell variables expanded (None: unknown), the words after them as
    (word, expanded word or None))``; a bare ``"$@"``/``"$*"`` (the caller's flags) is left out."""
    joined = re.sub(r"\\\n", " ", rep.text)
    cmd = next((ln for ln in joined.splitlines() if re.match(r"\s*(exec\s+)?torchrun\b", ln)), None)
    if cmd is None:
        raise DataError(rep.path, None, "no torchrun command found")
    vars_ = _shell_vars(rep.text)

    def expand(word: str) -> str | None:
        def sub(m):
            v = vars_.get(m.group(1) or m.group(2), os.environ.get(m.group(1) or m.group(2)))
            if v is None:
                raise KeyError(m.group(0))
            return v

        try:
            return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, word)
        except KeyError:
            return None

    args = shlex.split(cmd, comments=True)
    opts: dict[str, str | None] = {}
    i, rest = 1, []
    while i < len(args):
        a = args[i]
        if a in ("-m", "--module", "--") or not a.startswith("-"):
            rest = args[i + 1 :] if a.startswith("-") else args[i:]
            rest = rest[1:] if rest[:1] == ["--"] else rest  # `-m -- ifir_lib`: '--' ends torchrun's options
            break
        key, eq, val = a.partition("=")
        if not eq:
            i += 1
            val = args[i] if i < len(args) else ""
        opts[key.replace("_", "-")] = expand(val)
        i += 1
    return opts, [(w, expand(w)) for w in rest if w not in ("$@", "$*")]


# ``ifir train``'s options, read as its own parser reads them (abbreviations too): its config
# flags (``TRAIN_CONFIG_FLAGS``, the table the CLI builds them from) and the others, taken and
# left. tests/training/test_launch_check.py checks that this knows every option ``ifir train``
# has, with the same type, dest, choices and (where they make the config) default.
_OTHER_FLAGS = {"--reversals": str, "--curation": str, "--budget": int, "--out": str}
_OTHER_FLAGS.update(
    {"--narrative-share": float, "--report-to": str, "--world-size": int, "--launch-config": str}
)


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ifir train", add_help=False)
    p.add_argument("--seeds", "--data")
    for flag, typ in _OTHER_FLAGS.items():
        p.add_argument(flag, type=None if typ is str else typ)
    for flag in ("--keep-checkpoints", "--dry-run", "--no-co-batch"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--preset", choices=[*PRESET_NAMES, *PRESET_ALIASES])
    p.add_argument("--mode", choices=MODES, default="ins-dv")
    p.add_argument("--loss", choices=("relation", "mnrl"), default="relation")
    p.add_argument("--base-model")
    p.add_argument("--rng-seed", type=int, default=0)
    for field, typ in TRAIN_CONFIG_FLAGS:
        p.add_argument("--" + field.replace("_", "-"), type=typ)
    return p


def _known_words(parser, words: list[tuple[str, str | None]]) -> tuple[list[str], dict[str, str]]:
    """The expanded ``words``, less each one holding a shell variable that cannot be resolved and
    the flag it is the value of; returns ``(words left, {dropped flag: its dest})``."""
    kept: list[str] = []
    dropped: dict[str, str] = {}

    def dest(flag: str) -> str:
        acts = parser._option_string_actions
        hits = [a for o, a in acts.items() if o == flag] or [a for o, a in acts.items() if o.startswith(flag)]
        return hits[0].dest if len({a.dest for a in hits}) == 1 else "?"

    for word, value in words:
        if value is not None:
            kept.append(value)
        elif word.startswith("-"):  # --flag=$UNSET
            dropped[word] = dest(word.partition("=")[0])
        elif kept and kept[-1].startswith("-") and "=" not in kept[-1]:
            flag = kept.pop()
            dropped[flag] = dest(flag)
    return kept, dropped


_WHOLE_CONFIG = ("preset", "mode", "loss")  # flags that set every field


def _script_config(rep: _Report, words) -> tuple[TrainConfig | None, str, set[str]]:
    """The config that ``ifir train`` builds from the script's ``words`` (after ``train``, as
    ``(word, expanded)``), the preset, and the fields a flag set from an unresolved shell variable
    leaves not checkable (each given a warning line); ``None`` when the flags do not parse."""
    parser, err = _train_parser(), io.StringIO()
    known, dropped = _known_words(parser, words)
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    unchecked: set[str] = set()
    for flag, dest in dropped.items():
        dest = "co_batch_views" if dest == "no_co_batch" else dest
        hit = fields if dest in _WHOLE_CONFIG else [dest] if dest in fields else []
        for field in hit:
            rep.note(
                field, f"not checkable: the script's {flag} is a shell variable not resolved here", "train"
            )
        unchecked.update(hit)
    try:
        with contextlib.redirect_stderr(err):
            a = parser.parse_args(known)
    except SystemExit:
        said = (err.getvalue().strip().splitlines() or ["?"])[-1]
        rep.fail("train", f"`ifir train` refuses the script's flags: {said}", "train")
        return None, "?", unchecked
    preset = a.preset or "paper"  # what ``ifir train`` takes on a GPU node without --preset
    try:
        cfg = TrainConfig.preset(
            preset,
            rng_seed=a.rng_seed,
            base_model=a.base_model,
            co_batch_views=False if a.no_co_batch else None,
            **{f: getattr(a, f) for f, _ in TRAIN_CONFIG_FLAGS},
        )
    except ConfigError as e:
        rep.fail("--preset", str(e), "preset")
        return None, preset, unchecked
    cfg = mode_config(cfg, a.mode)
    return (as_mnrl(cfg) if a.loss == "mnrl" else cfg), preset, unchecked


def _check_train_flags(rep: _Report, cfg, rest: list[str]) -> str:
    """Compare every field of the config ``ifir train`` builds from the script's flags (preset,
    config flags, ``--rng-seed``, ``--no-co-batch``, ``--mode``, ``--loss``, ``--base-model``) with
    ``cfg``; returns the preset. Only seven flags were read and ten fields compared, so a script
    training another rng seed, lr schedule, batching or loss passed the dry run."""
    theirs, preset, unchecked = _script_config(rep, rest[2:])
    if theirs is None:
        return preset
    for field in (f.name for f in dataclasses.fields(TrainConfig) if f.name not in unchecked):
        rep.checked.append(field)
        if getattr(theirs, field) != getattr(cfg, field):
            rep.fail(
                field,
                f"the script trains with {getattr(theirs, field)!r} (--preset {preset} and its flags) "
                f"but this dry run checks {getattr(cfg, field)!r}",
                "train",
            )
    return preset
