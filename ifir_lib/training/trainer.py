"""Fine-tune a bi-encoder on one training set (Dual-View Training, arXiv 2604.18845; docs/method.md §3).

Queries are ``query + " " + instruction`` (the model's stored ``query`` prompt in front);
documents are encoded alone. The loss is ``RelationInfoNCELoss`` (temperature 0.02, in-batch
negatives off, documents deduplicated by id); ``DualViewBatchSampler`` keeps each seed's two
views in one batch. Training runs through ``SentenceTransformerTrainer``, so the same entry works
on one CPU, one GPU, and under ``torchrun`` / ``accelerate launch`` (DDP).

A run directory is a SentenceTransformer folder plus its provenance (``core.run_folder``: the
run record, training logs, checkpoints; ``RUN/tb/`` holds TensorBoard events, ``tracking``);
rerunning the same command resumes from the last checkpoint.

The one driver of training is ``pipelines.train.train_modes`` (the CLI, the demo, the notebook
and the experiment all call it). Not handled here: building examples (``trainsets``), batching
(``samplers``), the loss (``loss``), estimates without a GPU (``dry_run``), evaluation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.config import (
    ABLATIONS,
    DOCUMENT_PROMPT_NAME,
    QUERY_PROMPT_NAME,
    check_preset,
    default_preset,
    git_commit,
)
from ..core.errors import ConfigError, NonFiniteLossError
from ..core.locks import exclusive
from ..core.models import base_record, build_model, model_digest, model_fingerprint, resolve_model
from ..core.progress import progress_enabled
from ..core.run_folder import RUN_FILE, RunFolder
from ..seeds.schema import normalized_text
from .lengths import warn_cut_alike
from .samplers import (
    BATCH_ORDER,
    DualViewBatchSampler,
    ShuffledBatchSampler,
    SingleViewBatchSampler,
    sampler_epoch_callback,
)
from .trainsets import as_train_dataset

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Training settings. Defaults are the paper-scale run; see ``PRESETS`` for the small ones.

    Where the paper is silent (docs/method.md §3) we follow ArcticTraining's example: lr 3e-5,
    500 warmup then 1000 linear-decay steps, weight decay 0.01, gradient clipping at 10.
    """

    base_model: str = "Alibaba-NLP/gte-multilingual-base"
    pooling: str = "cls"  # ArcticTraining default; used when building from a raw backbone
    max_seq_length: int = 512
    temperature: float = 0.02
    num_negatives: int = 30  # hard negatives per query, 1-3 of them instruction negatives
    in_batch_negatives: bool = False
    batch_size: int = 256  # per device; gradient caching makes it affordable
    mini_batch_size: int | None = 32  # GradCache chunk; None = plain forward
    learning_rate: float = 3e-5
    warmup_steps: int = 500
    max_steps: int = 1500
    epochs: float = 1.0  # used when max_steps <= 0
    weight_decay: float = 0.01
    max_grad_norm: float = 10.0
    bf16: bool = True
    gradient_checkpointing: bool = True
    co_batch_views: bool = True
    eval_steps: int = 0  # > 0: score the held-out seeds every so many steps (logged)
    keep_best: bool = True  # with eval_steps: save the best held-out checkpoint; False: the final step
    early_stopping_patience: int = 0  # > 0: stop after this many evaluations without improvement
    save_max_seq_length: int | None = None  # stored with the trained model; None = the base model's own
    query_prompt: str = ""
    document_prompt: str = ""
    save_steps: int = 250
    save_total_limit: int = 2
    logging_steps: int = 10
    rng_seed: int = 0
    # Cheaper variants (docs/method.md §3): None trains every layer; k trains the top k only, with
    # documents' frozen lower layers computed once (``frozen.FrozenBottom``)
    train_top_layers: int | None = None
    lr_schedule: str = "linear"  # linear decay to 0; "wsd": warm up, hold, decay over the last 10%

    def __post_init__(self):
        if self.batch_size < 2:
            raise ConfigError("batch_size must be >= 2 (a dual-view pair needs two slots)")
        if self.mini_batch_size is not None and self.mini_batch_size < 1:
            raise ConfigError("mini_batch_size must be positive or None")
        if self.temperature <= 0:
            raise ConfigError("temperature must be positive")
        if self.num_negatives < 1:
            raise ConfigError("num_negatives must be >= 1")
        if self.max_steps <= 0 and self.epochs <= 0:
            raise ConfigError("set max_steps or epochs")
        if self.pooling not in ("cls", "mean", "lasttoken"):
            raise ConfigError(f"unknown pooling {self.pooling!r}")
        if self.early_stopping_patience > 0 and self.eval_steps <= 0:
            raise ConfigError("early_stopping_patience needs eval_steps > 0 (held-out evaluations)")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.lr_schedule == "wsd" and self.max_steps <= 0:
            raise ConfigError(
                "lr_schedule 'wsd' needs max_steps > 0 (its decay is the last 10% of the steps)"
            )
        if self.train_top_layers is not None and self.mini_batch_size is not None:
            raise ConfigError("train_top_layers needs mini_batch_size None (no gradient caching)")
        if self.early_stopping_patience > 0 and not self.keep_best:
            raise ConfigError("early_stopping_patience stops at the best checkpoint; it needs keep_best=True")

    def replace(self, **kw) -> TrainConfig:
        """A copy with ``kw`` changed; ``None`` values are ignored (unset CLI flags)."""
        return dataclasses.replace(self, **{k: v for k, v in kw.items() if v is not None})

    @classmethod
    def preset(cls, name: str | None = None, **overrides) -> TrainConfig:
        """``paper`` (the defaults), ``cpu`` (the demo on a laptop CPU: the PyPI MiniLM, short
        sequences) or ``smoke`` (a few steps, for tests and CI); None: ``default_preset()``.
        ``overrides`` change fields (None values are ignored). ``epochs`` given without
        ``max_steps`` sets the length (``max_steps`` 0: the preset's step count would win over it,
        as Hugging Face's Trainer lets ``max_steps`` win, and a plan saying 3 epochs trained 2);
        both given, with ``max_steps`` > 0, is a ``ConfigError``."""
        name = check_preset(name or default_preset(), "training")
        epochs, steps = overrides.get("epochs"), overrides.get("max_steps")
        if epochs is not None and steps is not None and steps > 0:
            raise ConfigError(
                f"epochs {epochs} and max_steps {steps} both given: max_steps would win; give one of them"
            )
        if epochs is not None and steps is None:
            overrides = {**overrides, "max_steps": 0}
        return cls(**TRAIN_PRESETS[name]).replace(**overrides)


LR_SCHEDULES = ("linear", "wsd")
WSD_DECAY_SHARE = 0.1

_CPU = dict(
    base_model="minilm",
    pooling="mean",
    bf16=False,
    gradient_checkpointing=False,
    mini_batch_size=None,
    num_negatives=3,
    learning_rate=5e-5,
    logging_steps=1,
)
TRAIN_PRESETS: dict[str, dict] = {
    "paper": {},
    "cpu": dict(
        _CPU,
        max_seq_length=128,
        batch_size=16,
        warmup_steps=2,
        max_steps=0,
        epochs=2.0,
        save_steps=10,
        save_total_limit=1,
    ),
    "smoke": dict(_CPU, max_seq_length=96, batch_size=8, warmup_steps=1, max_steps=4, save_steps=2),
}


# ---------------------------------------------------------------------------------------------
# Training


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    seconds: float
    examples_per_s: float
    log: list[dict]
    resumed_from: str | None = None


def train(examples: list[dict], out_dir: str | Path, cfg: TrainConfig, **kwargs) -> TrainResult:
    """Train on ``examples`` (dicts, or ``TrainSet.dataset``) into ``out_dir``; resume if interrupted.

    With ``cfg.eval_steps > 0``, ``heldout`` seeds (never trained on; ``heldout.split_heldout``) are
    scored every ``eval_steps``; the best checkpoint is the one saved unless ``keep_best`` is False
    (then the final step's; docs/method.md §6).
    The saved model reads ``cfg.save_max_seq_length`` tokens (default: as many as the base model).

    ``loss='mnrl'`` swaps in plain MultipleNegativesRankingLoss (a baseline): sentence-transformers'
    own batches with in-batch negatives, recorded as such (``as_mnrl``); the top layers as set.
    A NaN/inf loss stops the run with ``NonFiniteLossError``; earlier checkpoints are kept.
    Keyword arguments: ``mode``, ``manifest``, ``loss``, ``device``, ``heldout``, ``report_to``
    (``tracking.resolve_report_to``), ``keep_checkpoints`` (default False: a finished run's
    ``checkpoints/`` are removed once its model is saved). A second process training into the
    same ``out_dir`` fails at once with ``OutputLocked``; an exception marks the run ``failed`` (``RunFolder.record_failure``).
    Drivers call this through ``pipelines.train.train_modes``.
    """
    run = RunFolder(out_dir)
    run.path.mkdir(parents=True, exist_ok=True)
    first_rank = int(os.environ.get("RANK", "0")) == 0
    with exclusive(run.path, "training run folder") if first_rank else contextlib.nullcontext():
        t0 = time.time()
        try:
            return _train(examples, run, cfg, **kwargs)
        except BaseException as e:
            if first_rank:
                run.record_failure(e, since=t0)
            raise


def _train(
    examples: list[dict],
    run: RunFolder,
    cfg: TrainConfig,
    *,
    mode: str = "custom",
    manifest: dict | None = None,
    loss: str = "relation",
    device: str | None = None,
    heldout: list[dict] | None = None,
    report_to: str | None = "auto",
    keep_checkpoints: bool = False,
) -> TrainResult:
    from sentence_transformers import SentenceTransformerTrainer
    from transformers import EarlyStoppingCallback

    from .heldout import HeldOutEvaluator
    from .tracking import JsonlLog, reporting

    if cfg.eval_steps > 0 and not heldout:
        raise ConfigError("eval_steps > 0 needs held-out seeds (train(..., heldout=...))")
    _check_precision(cfg)
    cfg = as_mnrl(cfg) if loss == "mnrl" else cfg
    cfg_dict = dataclasses.asdict(cfg)
    rank = int(os.environ.get("RANK", "0"))
    tracker_args, tracker_callbacks = reporting(
        report_to, run.path, cfg_dict, mode=mode, rng_seed=cfg.rng_seed, evaluates=cfg.eval_steps > 0
    )  # an uninstalled tracker fails here, before the model loads
    base = base_record(cfg.base_model)
    if _check_rerun(run, cfg_dict, mode, manifest, loss, base_sha=base["base_model_sha256"]):
        log.warning("%s already finished; nothing to do", run.path)
        return TrainResult(run.path, run.info().get("steps", 0), 0.0, 0.0, run.read_log())
    world = int(os.environ.get("WORLD_SIZE", "1"))
    resuming = _resuming(run, world)
    if rank == 0:
        # ``base_model`` here is absolute for a local folder; ``config.base_model`` stays as given,
        # so what a rerun and a sibling compare (the config) is what finished runs recorded
        record = dict(mode=mode, rng_seed=cfg.rng_seed, **base, config=cfg_dict, loss=loss)
        record.update(data=manifest or {}, heldout_seeds=len(heldout or []), world_size=world)
        record.update(batch_order=BATCH_ORDER)
        run.start(record, git_commit(), resuming=resuming)
    model, ds, loss_fn, sampler, prompts = _model_and_data(cfg, examples, loss, device, world)
    if rank == 0:  # the length it trains at: the config's as given (reruns compare it), capped
        run.update(trained_max_seq_length=model.max_seq_length)
        warn_cut_alike(model, examples, cfg.num_negatives)
    if loss == "relation" and rank == 0:
        same_query_in_batch(examples, ds, sampler, cfg)
    args = _training_args(cfg, run, sampler, prompts, tracker_args, device)
    _check_distributed(args, world)
    callbacks = [JsonlLog(run.train_log, run.heldout_log), sampler_epoch_callback(), *tracker_callbacks]
    if cfg.early_stopping_patience > 0:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.early_stopping_patience))
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        loss=loss_fn,
        evaluator=HeldOutEvaluator(heldout, read_length=saved_length(model, cfg))
        if cfg.eval_steps > 0
        else None,
        callbacks=callbacks,
    )
    resume = _resume_point(run, rank, world)
    t0 = time.time()
    result = _fit(trainer, run, resume, rank)
    seconds = time.time() - t0
    if world > 1:
        # each rank records what it ended with (before rank 0 sets the saved max_seq_length), so
        # a test can check the ranks agreed; then no rank still reads a checkpoint rank 0 removes
        (run.path / f"rank{rank}.fingerprint").write_text(model_fingerprint(model))
        trainer.accelerator.wait_for_everyone()
    if trainer.is_world_process_zero():
        _save_finished(trainer, model, run, cfg, result, seconds)
        if not keep_checkpoints:
            _drop_checkpoints(run)
    eps = result.metrics.get("train_samples_per_second", 0.0)
    return TrainResult(run.path, trainer.state.global_step, seconds, eps, run.read_log(), resume)


def _resuming(run: RunFolder, world: int) -> bool:
    """Whether ``run`` resumes from a checkpoint rank 0 finished (its ``trainer_state.json``),
    after checking that ``world`` processes and this batch order may resume it. Rank parts
    (``_missing_parts``) are judged later by the world that resumes, so the world check comes first:
    a folder written by another process count is refused, never set aside as cut."""
    resuming = any((c / "trainer_state.json").is_file() for c in run.checkpoints())
    if resuming:
        _check_resume_world(run, world)
        _check_resume_order(run)
    return resuming


def _check_distributed(args, world: int) -> None:
    """Several processes (``torchrun``, ``accelerate``) must train one run together: where the
    trainer does not see them as distributed (a CPU without ``ACCELERATE_USE_CPU``), each would
    train the whole run alone into the same folder (every log line twice, two saves at once)."""
    from transformers.training_args import ParallelMode

    if world > 1 and args.parallel_mode != ParallelMode.DISTRIBUTED:
        raise ConfigError(
            f"WORLD_SIZE={world} processes, but training would not be distributed ({args.parallel_mode}): "
            "each would train the whole run alone into one folder. On CPUs set ACCELERATE_USE_CPU=true; "
            "on GPUs check that each process sees a GPU"
        )


def _check_precision(cfg: TrainConfig) -> None:
    """A ``ConfigError`` when ``ACCELERATE_MIXED_PRECISION`` asks for another precision than the
    config: ``accelerate launch`` exports its config file's ``mixed_precision`` (a default
    accelerate config too), and transformers takes it whenever ``bf16`` is off, so a bf16=False
    config (the ``cpu`` and ``smoke`` presets) trained under bf16 autocast, recorded as bf16=False."""
    env = os.environ.get("ACCELERATE_MIXED_PRECISION", "no").strip().lower()
    if env in ("no", "bf16" if cfg.bf16 else "no"):
        return
    # a bf16 config overrides the variable on a GPU with bf16; on the CPU or an older GPU it does not
    would = (
        f"on a GPU without bf16, or on the CPU, it would train in {env} and record bf16=True"
        if cfg.bf16
        else f"the run would train in {env} and record bf16=False"
    )
    raise ConfigError(
        f"ACCELERATE_MIXED_PRECISION={env or '(empty)'} (accelerate launch's mixed_precision, or the "
        f"environment) asks for {env or 'nothing'} but the training config for bf16={cfg.bf16}: {would}. "
        f"Launch with mixed_precision {'bf16' if cfg.bf16 else 'no'!r}, or unset the variable"
    )


def _check_resume_world(run: RunFolder, world: int) -> None:
    """Checkpoints resume only under the number of processes that wrote them: a step is
    ``world x batch_size`` examples, so another number would skip or repeat data."""
    was = _written_by(run)
    if was is not None and was != world:
        raise ConfigError(
            f"{run.run_file}: its checkpoints were written by {was} process(es); resume it with {was} "
            f"(now {world}), or use a new --out"
        )


def _written_by(run: RunFolder) -> int | None:
    """How many processes wrote ``run``'s checkpoints: its record's ``world_size``; for a record
    from before runs kept it, the latest checkpoint's random states (``rng_state.pth``: one process;
    ``rng_state_<r>.pth``: the highest ``r`` plus one); None when neither tells."""
    was = run.info().get("world_size")
    if was is not None:
        return int(was)
    for ckpt in reversed(run.checkpoints()):
        ranks = [
            int(m.group(1))
            for f in ckpt.glob("rng_state_*.pth")
            if (m := re.fullmatch(r"rng_state_(\d+)\.pth", f.name))
        ]
        if ranks:
            return max(ranks) + 1
        if (ckpt / "rng_state.pth").is_file():
            return 1
    return None


def _check_resume_order(run: RunFolder) -> None:
    """A ``ConfigError`` when ``run``'s checkpoints were written past its first epoch under another
    batch order (``samplers.BATCH_ORDER``; a record without one: order 1, ``seed + epoch``): the
    resumed epoch would replay its first steps' batches in the new order, training some seeds twice
    and others never. Epoch 0's order is the same in both, so a checkpoint within it resumes, and
    one at an exact epoch boundary skips no batch (each later epoch is whole in the new order). Both
    losses: ``mnrl``'s shuffle takes the same per-epoch seeds (``ShuffledBatchSampler``)."""
    was = run.info().get("batch_order", 1)
    ckpts = [c for c in run.checkpoints() if (c / "trainer_state.json").is_file()]
    if was == BATCH_ORDER or not ckpts:
        return
    epoch = json.loads((ckpts[-1] / "trainer_state.json").read_text()).get("epoch") or 0.0
    if epoch > 1.0 and not float(epoch).is_integer():  # at a boundary no batch is skipped
        raise ConfigError(
            f"{ckpts[-1]}: written at epoch {epoch:.2f} under batch order {was} (now {BATCH_ORDER}: later "
            "epochs are shuffled otherwise); resuming would mix the two orders. Use a new --out, or "
            "delete the folder's checkpoints/ to train the run again"
        )


def _check_new_folder(run: RunFolder, base_model: str | None) -> None:
    """A ``ConfigError`` when ``run`` (a folder with no run record) is the base model's folder, or
    holds a model already: training wrote over it (``--base-model DIR --out DIR`` fine-tuned the
    base in place, and every later run from DIR started from the fine-tuned one)."""
    if base_model:
        base = Path(resolve_model(base_model))
        if base.exists() and base.resolve() == run.path.resolve():
            raise ConfigError(
                f"{run.path}: --out is the base model's own folder; training would overwrite it"
            )
    if (run.path / "modules.json").exists() or (run.path / "config.json").exists():
        raise ConfigError(
            f"{run.path}: holds a model but no run record ({RUN_FILE}); training would write over it: "
            "use a new --out"
        )


def _check_rerun(
    run: RunFolder,
    cfg_dict: dict,
    mode: str,
    manifest: dict | None = None,
    loss: str = "relation",
    *,
    base_sha: str | None,
) -> bool:
    """True when ``run`` already holds this finished run (``_same_config``); a ``ConfigError`` when it holds another:
    another config, loss or mode, other base model content (``base_sha``, the base folder's
    ``model_digest``), or other training data (``sha256`` of the examples), so a rerun on new
    reversals, on a rebuilt training set or from a base folder replaced in place, never silently
    reuses a model trained on the old.

    A record without ``loss`` (written before runs recorded it) counts as ``relation``, the
    default (an older ``mnrl`` run cannot be told from it). A built set trained before built sets
    were hashed, rerun on the same file (``source``), is reused with a warning that it is
    unverified; otherwise, when only one side records a ``sha256`` (a ``train`` call without a
    manifest), the data cannot be compared and the run is refused; when neither does, only config
    and mode are.
    """
    if not run.is_run():
        _check_new_folder(run, cfg_dict.get("base_model"))
        return False
    prev = run.read()
    if (
        not _same_config(prev.get("config"), cfg_dict, loss)
        or prev.get("mode") != mode
        or prev.get("loss", "relation") != loss
    ):
        raise ConfigError(
            f"{run.run_file}: this run directory holds a run with another config, loss or mode; "
            "use a new --out or delete it"
        )
    _check_same_base(run, prev, base_sha, mode)
    old_data, new_data = prev.get("data") or {}, manifest or {}
    old_sha, new_sha = old_data.get("sha256"), new_data.get("sha256")
    if (
        old_sha is None
        and new_sha
        and old_data.get("source")
        and old_data.get("source") == new_data.get("source")
    ):
        # a built set trained before built sets were hashed, rerun on the same file: reused, unverified
        log.warning(
            "%s: recorded before built training sets were hashed, so its data cannot be checked; reused "
            "as trained on %s (delete the folder to train again)",
            run.run_file,
            old_data["source"],
        )
        return prev.get("status") == "finished" and run.has_model()
    if old_sha != new_sha and None in (old_sha, new_sha):
        raise ConfigError(
            f"{run.run_file}: this run directory holds a {mode} run whose training data cannot be "
            "compared (one side records no hash of its examples); use a new --out or delete it"
        )
    if old_sha != new_sha:
        old, new = (f"sha256 {s[:12]}" if s else "no hash recorded" for s in (old_sha, new_sha))
        raise ConfigError(
            f"{run.run_file}: this run directory holds a {mode} run trained on other data "
            f"(examples {old}, now {new}: other seeds, reversals, curation, budget or built set, "
            "or data that cannot be compared); use a new --out or delete it"
        )
    return prev.get("status") == "finished" and run.has_model()


def _same_config(recorded: dict | None, cfg_dict: dict, loss: str) -> bool:
    """Whether a run's recorded config is ``cfg_dict``; an mnrl run recorded before ``as_mnrl``
    holds the preset's batching fields, which mnrl never used, so they are not compared."""
    if recorded == cfg_dict or loss != "mnrl" or not isinstance(recorded, dict):
        return recorded == cfg_dict
    unused = ("co_batch_views", "in_batch_negatives", "mini_batch_size")
    return {k: v for k, v in recorded.items() if k not in unused} == {
        k: v for k, v in cfg_dict.items() if k not in unused
    }


def _check_same_base(run: RunFolder, prev: dict, base_sha: str | None, mode: str) -> None:
    """A ``ConfigError`` when ``prev`` (the folder's record) was trained from other base model
    content than ``base_sha``. A record written before runs kept ``base_model_sha256`` is accepted
    as it is: its base cannot be checked, and refusing it would retrain every finished demo
    folder (a sibling is not copied on such a record: ``RunFolder.copy_finished_sibling``)."""
    if "base_model_sha256" not in prev or prev["base_model_sha256"] == base_sha:
        return
    old, new = (s or "none (not a local folder)" for s in (prev["base_model_sha256"], base_sha))
    raise ConfigError(
        f"{run.run_file}: this run directory holds a {mode} run trained from other base model content "
        f"({prev.get('base_model')}: sha256 {old}, now {new}); use a new --out or delete it"
    )


def _freeze_unused_pooler(model) -> None:
    """Freeze the backbone's own pooler (BERT's ``pooler.dense``) for several processes:
    sentence-transformers pools the token embeddings itself, so the pooler never gets a gradient,
    and DistributedDataParallel (``ddp_find_unused_parameters=False``, the fast setting) stops at
    the second step on parameters that took no part in the loss. One process trains the same
    either way (AdamW skips a parameter without a gradient), so it keeps the pooler in its
    optimizer, as checkpoints written before this change hold it (they resume)."""
    for module in model.modules():
        pooler = getattr(getattr(module, "auto_model", None), "pooler", None)
        if pooler is not None and hasattr(pooler, "requires_grad_"):
            pooler.requires_grad_(False)


def as_mnrl(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` as plain MultipleNegativesRankingLoss trains it: sentence-transformers' own batches
    (views at random, not co-batched), in-batch negatives, no gradient caching. A setting it
    cannot honour is named in a warning and recorded as what ran (the run record said
    ``co_batch_views: true`` for a run that never co-batched). ``train_top_layers`` is honoured."""
    ran = dict(co_batch_views=False, in_batch_negatives=True, mini_batch_size=None)
    if changed := [f"{k}={getattr(cfg, k)!r}" for k, v in ran.items() if getattr(cfg, k) != v]:
        log.info(
            "loss mnrl trains with sentence-transformers' own batches and in-batch negatives: "
            "%s not honoured; recorded as co_batch_views=False, in_batch_negatives=True, mini_batch_size=None",
            ", ".join(changed),
        )
    return dataclasses.replace(cfg, **ran)


def _model_and_data(cfg: TrainConfig, examples, loss: str, device: str | None, world: int = 1):
    """The model (with its stored prompts), the dataset, the loss, the batch sampler and the
    per-column prompts: what ``SentenceTransformerTrainer`` needs beyond its arguments; ``world``
    processes (``_freeze_unused_pooler`` above one)."""
    import torch
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from .loss import RelationInfoNCELoss

    torch.manual_seed(cfg.rng_seed)
    model = build_model(cfg.base_model, max_seq_length=cfg.max_seq_length, pooling=cfg.pooling, device=device)
    model.max_seq_length = cap_to_positions(model, cfg.max_seq_length, "max_seq_length (training)")
    if world > 1:
        _freeze_unused_pooler(model)
    _warn_saved_shorter(model, cfg)
    _warn_replaced_prompts(model, cfg)
    model.prompts = {QUERY_PROMPT_NAME: cfg.query_prompt, DOCUMENT_PROMPT_NAME: cfg.document_prompt}
    _drop_lost_default_prompt(model, cfg.base_model)
    _declare_cosine(model, cfg.base_model)
    ds = as_train_dataset(examples, cfg.num_negatives, with_labels=loss == "relation")  # list or Dataset
    doc_cols = [c for c in ds.column_names if c not in ("query", "label")]
    prompts = {"query": cfg.query_prompt, **{c: cfg.document_prompt for c in doc_cols}}
    if loss == "relation":
        loss_fn = RelationInfoNCELoss(
            model,
            temperature=cfg.temperature,
            in_batch_negatives=cfg.in_batch_negatives,
            mini_batch_size=cfg.mini_batch_size,
        )
        sampler = DualViewBatchSampler if cfg.co_batch_views else SingleViewBatchSampler
        if cfg.train_top_layers is not None:
            from .frozen import FrozenBottom

            # runs from one base model in one process share the frozen states: keyed on its files'
            # digest (``base_record`` took it; cached), not its name (a folder replaced in place
            # kept the old states); a hub name has no folder and keeps its name
            share_as = model_digest(Path(resolve_model(cfg.base_model))) or str(cfg.base_model)
            loss_fn.doc_encoder = FrozenBottom(model, cfg.train_top_layers, share_as=share_as)
    elif loss == "mnrl":
        loss_fn = MultipleNegativesRankingLoss(model, scale=1.0 / cfg.temperature)
        sampler = ShuffledBatchSampler  # the library's shuffle, seeded per epoch as ours (no seed + epoch)
        if cfg.train_top_layers is not None:  # the same layers train; no cached document states
            from .frozen import FrozenBottom

            FrozenBottom(model, cfg.train_top_layers)
    else:
        raise ConfigError(f"unknown loss {loss!r}")
    return model, ds, loss_fn, sampler, prompts


def same_query_in_batch(examples, ds, sampler, cfg: TrainConfig) -> int:
    """With in-batch negatives on, the co-batched seed pairs that share a normalized bare query over
    the run's batches (``sampler`` on ``ds``, epoch by epoch to the run's length), warned about:
    each seed's documents are negatives of the other's rows though they may answer its query (the
    loss masks a row's own seed only). A streamed Arrow set (no bare query column) is not checked.
    The batches are replayed (quadratic in the rows) only when some query is asked by two seeds."""
    if not cfg.in_batch_negatives or not isinstance(examples, list):
        return 0
    query = [normalized_text(e["query"]) for e in examples]
    groups_of: dict[str, set] = {}
    for q, e in zip(query, examples):
        groups_of.setdefault(q, set()).add(e["group"])
    if all(len(g) < 2 for g in groups_of.values()):  # O(n): no query of two seeds, no batch to replay
        return 0
    s = sampler(ds, batch_size=cfg.batch_size, drop_last=False, seed=cfg.rng_seed)
    total = cfg.max_steps if cfg.max_steps > 0 else math.ceil(cfg.epochs * len(s.batches(0)))
    pairs, steps, epoch = 0, 0, 0
    while steps < total:
        batches = s.batches(epoch)[: total - steps]
        for batch in batches:
            groups: dict[str, set] = {}
            for i in batch:
                groups.setdefault(query[i], set()).add(examples[i]["group"])
            pairs += sum(len(g) * (len(g) - 1) // 2 for g in groups.values())
        steps, epoch = steps + len(batches), epoch + 1
        if not batches:
            break
    if pairs:
        log.warning(
            "in-batch negatives: %d times over %d steps a batch holds two seeds with one query: each "
            "one's passages (positive, instruction negatives) are negatives of the other's rows, though "
            "they may answer its query (docs/method.md §3)",
            pairs,
            total,
        )
    return pairs


def saved_length(model, cfg: TrainConfig, *, warn: bool = False) -> int:
    """The ``max_seq_length`` a run from ``model`` (``build_model``) is saved with, which every
    evaluation reads: ``cfg.save_max_seq_length``, else the base model's own length, at most the
    backbone's positions (``cap_to_positions``, which warns with ``warn``: the save does)."""
    asked = cfg.save_max_seq_length or getattr(model, "native_max_seq_length", cfg.max_seq_length)
    if warn:
        return cap_to_positions(model, asked, "save_max_seq_length")
    most = max_positions(model)
    return asked if most is None else min(asked, most)


def _warn_saved_shorter(model, cfg: TrainConfig) -> None:
    """Warn when the run is saved reading fewer tokens than it trains on (the ``paper`` preset's 512
    from MiniLM, saved at its 256, or mpnet's 384): every evaluation cuts what training read.
    Logged once, by rank 0 (each DDP rank builds the model). Both lengths are Python-API settings
    (``TrainConfig``); ``ifir train`` has no flag for either, so the CLI's advice is another base."""
    saved, trained = saved_length(model, cfg), model.max_seq_length  # both capped to the positions
    if saved < trained and int(os.environ.get("RANK", "0")) == 0:
        log.warning(
            "%s trains reading up to %d tokens but is saved reading %d (%s): every evaluation reads "
            "fewer tokens than training did. From the CLI (ifir train has no length flag) train from "
            "a base that reads at least %d tokens (--base-model) or a shorter --preset; from Python set "
            "TrainConfig.save_max_seq_length (at most the model's positions) or "
            "TrainConfig.max_seq_length of at most %d",
            cfg.base_model,
            trained,
            saved,
            "save_max_seq_length" if cfg.save_max_seq_length else "the base model's own length",
            trained,
            saved,
        )


def _warn_replaced_prompts(model, cfg: TrainConfig) -> None:
    """Warn when the base model stores non-empty prompts that training replaces with
    ``cfg.query_prompt`` / ``cfg.document_prompt``: an E5-style base (``query: ``, ``passage: ``)
    was trained and scored without the prefixes it was pretrained with, while its base row,
    scored with its stored prompts, kept them."""
    kept = (cfg.query_prompt, cfg.document_prompt)
    dropped = {k: v for k, v in (getattr(model, "prompts", None) or {}).items() if v and v not in kept}
    if dropped:
        log.warning(
            "base model %s stores the prompts %s; training replaces them with query_prompt %r and "
            "document_prompt %r (to keep them: TrainConfig(query_prompt=..., document_prompt=...))",
            cfg.base_model,
            dropped,
            cfg.query_prompt,
            cfg.document_prompt,
        )


def _drop_lost_default_prompt(model, base_model: str) -> None:
    """Unset ``default_prompt_name`` when it names a prompt that training replaced, with a warning:
    the run was saved naming a prompt its folder lacks, and every loader (sentence-transformers,
    ``ifir evaluate``, mteb) refused the finished folder with a ``ValueError``."""
    name = getattr(model, "default_prompt_name", None)
    if name is None or name in model.prompts:
        return
    log.warning(
        "base model %s names %r as its default prompt; training replaces that prompt, so the trained "
        "model is saved with no default prompt (encode() without a prompt adds none)",
        base_model,
        name,
    )
    model.default_prompt_name = None


def _declare_cosine(model, base_model: str) -> None:
    """Set ``model.similarity_fn_name`` to ``cosine``, with a warning, when the base declares another
    similarity that is not cosine on its vectors (``dot`` without a Normalize module, as TAS-B-like
    bases do): the loss trains cosine (``loss.RelationInfoNCELoss`` normalises both sides), and the
    saved folder kept the base's ``dot``, so mteb, plain sentence-transformers and ``ifir evaluate
    --tasks`` scored the trained model by a similarity it was never trained for (v1 p-MRR -2.32 by
    dot against -5.34 by cosine for a dot-declared MiniLM)."""
    sim = getattr(model, "similarity_fn_name", None)
    normalised = any(type(m).__name__ == "Normalize" for m in model.children())
    if sim in (None, "cosine") or (sim == "dot" and normalised):  # on unit vectors dot is cosine
        return
    log.warning(
        "base model %s declares similarity %r; training optimises cosine, so the trained model is saved "
        "declaring 'cosine' (mteb and sentence-transformers score it by what it declares)",
        base_model,
        sim,
    )
    model.similarity_fn_name = "cosine"


def _training_args(cfg: TrainConfig, run: RunFolder, sampler, prompts: dict, tracker_args: dict, device):
    """``SentenceTransformerTrainingArguments`` for ``cfg``: schedule, precision, checkpoints,
    held-out evaluation (``eval_steps``) and trackers."""
    import torch
    from sentence_transformers import SentenceTransformerTrainingArguments

    cuda = torch.cuda.is_available()
    evaluation = dict(
        eval_strategy="steps",
        eval_steps=cfg.eval_steps,
        load_best_model_at_end=cfg.keep_best,
        metric_for_best_model="eval_heldout_score",
        greater_is_better=True,
    )
    return SentenceTransformerTrainingArguments(
        output_dir=str(run.checkpoints_dir),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1,
        num_train_epochs=cfg.epochs,
        learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps,
        **_schedule(cfg),
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        bf16=cfg.bf16 and cuda and torch.cuda.is_bf16_supported(),
        # only passed when on: the argument itself triggers a deprecation warning in transformers 5
        **({"gradient_checkpointing": True} if cfg.gradient_checkpointing and cuda else {}),
        seed=cfg.rng_seed,
        data_seed=cfg.rng_seed,
        batch_sampler=sampler,
        prompts=prompts,
        save_strategy="steps",
        save_steps=cfg.eval_steps if cfg.eval_steps > 0 else cfg.save_steps,
        **(evaluation if cfg.eval_steps > 0 else {}),
        save_total_limit=cfg.save_total_limit,
        logging_steps=cfg.logging_steps,
        **tracker_args,
        dataloader_num_workers=0,
        dataloader_pin_memory=cuda,
        disable_tqdm=not progress_enabled(),
        use_cpu=(device == "cpu"),
        ddp_find_unused_parameters=False,
    )


def _schedule(cfg: TrainConfig) -> dict:
    """The scheduler arguments: linear decay to 0, or warmup-stable-decay (decay over the last 10%)."""
    if cfg.lr_schedule == "linear":
        return {"lr_scheduler_type": "linear"}
    decay = max(1, round(WSD_DECAY_SHARE * cfg.max_steps))
    return {"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"num_decay_steps": decay}}


def _resume_point(run: RunFolder, rank: int, world: int = 1) -> str | None:
    """The latest checkpoint that all ``world`` processes wrote whole, or None; its later log lines
    are dropped (rank 0).

    With no checkpoint (a run killed before its first) training starts again at step 0, so every
    log line an earlier start wrote is dropped (TensorBoard purges its events the same way:
    ``tracking.TensorBoardLog``)."""
    ckpts = _complete_checkpoints(run, rank, world)
    if not ckpts:
        if rank == 0 and run.last_step() is not None:
            log.warning("%s: no checkpoint to resume from; training starts again at step 0", run.path)
            run.trim_logs(0)
        return None
    if rank == 0:
        # steps after the checkpoint will be logged again; drop them so the log has one line per step
        run.trim_logs(int(ckpts[-1].name.split("-")[1]))
    log.warning("resuming %s from %s", run.path, ckpts[-1])
    return str(ckpts[-1])


def _missing_parts(ckpt: Path, world: int = 1) -> list[str]:
    """The files ``ckpt`` lacks to be whole: ``trainer_state.json`` (rank 0 writes it last) and,
    with ``world`` > 1 processes, each rank's own ``rng_state_<r>.pth``: rank 0 writes its state
    without waiting for the others, so a rank killed while it saved left a checkpoint that resumed
    as whole with that rank's random state not restored (transformers says so at INFO only)."""
    names = ["trainer_state.json", *(f"rng_state_{r}.pth" for r in range(world) if world > 1)]
    return [n for n in names if not (ckpt / n).is_file()]


def _complete_checkpoints(run: RunFolder, rank: int, world: int = 1) -> list:
    """The run's checkpoints that were written to the end by every one of ``world`` processes
    (``_missing_parts``): one cut by a kill while it was saved made every rerun fail on its missing
    files. Rank 0 moves a cut one aside (``checkpoints/.cut-checkpoint-N``), with a warning naming
    what it lacks; the run resumes from the one before."""
    ckpts = run.checkpoints()
    whole = [c for c in ckpts if not _missing_parts(c, world)]
    for cut in (c for c in ckpts if c not in whole):
        if rank == 0:
            missing = ", ".join(_missing_parts(cut, world))
            aside = cut.with_name(f".cut-{cut.name}")
            shutil.rmtree(aside, ignore_errors=True)
            cut.rename(aside)
            log.warning(
                "%s: %s was cut while it was saved (no %s); moved to %s", run.path, cut, missing, aside
            )
    return whole


def _fit(trainer, run: RunFolder, resume: str | None, rank: int):
    """``trainer.train``; a non-finite loss marks the run stopped and names the last good checkpoint."""
    try:
        return trainer.train(resume_from_checkpoint=resume)
    except NonFiniteLossError as e:
        ckpts = run.checkpoints()
        last = str(ckpts[-1]) if ckpts else "none (no checkpoint was saved yet)"
        step = trainer.state.global_step + 1
        if rank == 0:
            run.stop(f"non-finite loss at step {step}", last_checkpoint=last)
        raise NonFiniteLossError(
            f"{e} (step {step}); last good checkpoint: {last}. "
            "Check the data, or train with a lower learning rate into a new --out (this folder's "
            "checkpoints resume only under the same settings: rerunning this command resumes from it)."
        ) from None


def max_positions(model) -> int | None:
    """The most tokens ``model``'s backbone reads: its ``max_position_embeddings`` less the offset
    of position ids that start after the padding index (RoBERTa, MPNet: 514 positions, 512 tokens;
    the offset sentence-transformers infers for its flattened batches); None when unknown."""
    import torch

    auto = getattr(model[0], "auto_model", None)
    n = getattr(getattr(auto, "config", None), "max_position_embeddings", None)
    if not isinstance(n, int) or n <= 0:  # xlnet's -1: no limit
        return None
    for module in auto.modules():
        pad, pos = getattr(module, "padding_idx", None), getattr(module, "position_embeddings", None)
        if isinstance(pad, int) and isinstance(pos, torch.nn.Embedding):
            return n - (pad + 1)
    return n


def cap_to_positions(model, length: int, field: str) -> int:
    """``length``, or the backbone's positions (``max_positions``) where it asks for more, with a
    warning naming ``field``: a loader caps the length anyway (the record said 1024 where MiniLM
    reads 512), and a longer text would overrun the position embeddings."""
    most = max_positions(model)
    if most is None or length <= most:
        return length
    log.warning(
        "%s %d is more than the backbone's %d positions (max_position_embeddings); %d is used",
        field,
        length,
        most,
        most,
    )
    return most


def _save_finished(trainer, model, run: RunFolder, cfg: TrainConfig, result, seconds: float) -> None:
    """Save the model (the best held-out checkpoint's with ``keep_best``, else the final step's)
    and mark the run finished; ``best_step`` is the held-out pick either way (the saved step is ``steps``
    when ``keep_best`` is False)."""
    model.max_seq_length = saved_length(model, cfg, warn=True)
    model.save(str(run.path))
    steps, best = trainer.state.global_step, trainer.state.best_model_checkpoint
    run.finish(
        steps=steps,
        best_step=int(Path(best).name.split("-")[1]) if best else steps,
        best_heldout_score=trainer.state.best_metric,
        saved_step=int(Path(best).name.split("-")[1]) if best and cfg.keep_best else steps,
        saved_max_seq_length=model.max_seq_length,
        train_seconds=round(seconds, 2),
        train_loss=_run_loss(run, result.training_loss, steps),
    )


def _run_loss(run: RunFolder, session_loss: float, steps: int) -> float:
    """The mean training loss over every step of the run: Hugging Face's ``training_loss`` covers
    only the steps since the last resume (0.36 for 1.18 after a kill at step 3 of 6), so a resumed
    run's is read from its log, each logged loss weighted by the steps it covers."""
    if not run.info().get("resumes"):
        return session_loss
    rows = sorted((r for r in run.read_log() if "loss" in r and r["step"] <= steps), key=lambda r: r["step"])
    # each row's loss is the mean over steps since+1 .. step (``tracking.JsonlLog``; older logs: from
    # the row before, which a resume between two logging steps makes wrong, and the sum then says so)
    spans = [r["step"] - r.get("since", prev["step"] if prev else 0) for prev, r in zip([None, *rows], rows)]
    if not rows or rows[-1]["step"] != steps or sum(spans) != steps:
        log.warning(
            "%s: train_loss covers only the steps since the last resume (the log does not cover each step once)",
            run.path,
        )
        return session_loss
    return sum(w * r["loss"] for w, r in zip(spans, rows)) / steps


def _drop_checkpoints(run: RunFolder) -> None:
    """Remove a finished run's ``checkpoints/``: they only resume a run, and a finished one is never
    resumed (a rerun finds it done; another config is refused), while they hold the optimizer state
    and a model copy each (~350 MB for the cpu preset's MiniLM, GBs at paper scale). The model
    is saved in the run folder first; ``keep_checkpoints=True`` keeps them."""
    size = sum(f.stat().st_size for f in run.checkpoints_dir.rglob("*") if f.is_file())
    shutil.rmtree(run.checkpoints_dir, ignore_errors=True)
    run.update(checkpoints="removed when the run finished")
    if size:
        log.info(
            "%s: finished; its checkpoints (%.0f MB) removed (keep_checkpoints keeps them)",
            run.path,
            size / 1e6,
        )


def mode_config(cfg: TrainConfig, mode: str) -> TrainConfig:
    """``cfg`` with what an ablation mode changes (``config.ABLATIONS``); other modes keep it. An
    ablation whose one change ``cfg`` already has (``ins-dv-cobatch`` under a co-batching preset)
    trains exactly as Ins-DV: a warning says so, as its comparison with Ins-DV measures nothing."""
    changes = {k: v for k, v in ABLATIONS.get(mode, {}).items() if k != "reversals"}
    if (
        changes
        and len(changes) == len(ABLATIONS[mode])
        and all(getattr(cfg, k) == v for k, v in changes.items())
    ):
        said = ", ".join(f"{k}={v!r}" for k, v in changes.items())
        log.warning(
            "ablation %s changes nothing here (the config already has %s): it trains as ins-dv", mode, said
        )
    return cfg.replace(**changes)
