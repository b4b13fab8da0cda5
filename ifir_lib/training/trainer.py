"""Fine-tune a bi-encoder on one training set (Dual-View Training, arXiv 2604.18845; docs/method.md §3).

Queries are ``query + " " + instruction`` (the model's stored ``query`` prompt in front);
documents are encoded alone. The loss is ``RelationInfoNCELoss`` (temperature 0.02, in-batch
negatives off, documents deduplicated by id); ``DualViewBatchSampler`` keeps each seed's two
views in one batch. Training runs through ``SentenceTransformerTrainer``, so the same entry works
on one CPU, one GPU, and under ``torchrun`` / ``accelerate launch`` (DDP).

A run directory is a SentenceTransformer folder plus its provenance::

    RUN/                      SentenceTransformer(RUN) loads it; prompts hold the query format
    RUN/ifir_run.json         config, mode, data manifest, git commit, status
    RUN/train_log.jsonl       one line per logged step: loss, learning rate, epoch
    RUN/tb/                   TensorBoard events with the config as hparams (``tracking``)
    RUN/checkpoints/          HF Trainer checkpoints; rerunning the same command resumes

``train_modes`` trains several modes from one seed file in turn (the demo, the notebook and the
experiment all use it). Not handled here: building examples (``trainsets``), batching
(``samplers``), the loss (``relation_loss``), estimates without a GPU (``dry_run``), evaluation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.config import DOCUMENT_PROMPT_NAME, PAPER_MODES, QUERY_PROMPT_NAME, SEEDS_PATH, git_commit
from ..core.errors import ConfigError, NonFiniteLossError
from ..core.locks import exclusive
from ..core.models import build_model
from ..core.progress import progress_enabled
from ..seeds.forms import NARRATIVE_SHARE
from .samplers import DualViewBatchSampler, SingleViewBatchSampler
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
    eval_steps: int = 0  # > 0: score the held-out seeds every so many steps, keep the best checkpoint
    early_stopping_patience: int = 0  # > 0: stop after this many evaluations without improvement
    save_max_seq_length: int | None = None  # stored with the trained model; None = the base model's own
    query_prompt: str = ""
    document_prompt: str = ""
    save_steps: int = 250
    save_total_limit: int = 2
    logging_steps: int = 10
    rng_seed: int = 0

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

    def replace(self, **kw) -> TrainConfig:
        """A copy with ``kw`` changed; ``None`` values are ignored (unset CLI flags)."""
        return dataclasses.replace(self, **{k: v for k, v in kw.items() if v is not None})

    @classmethod
    def preset(cls, name: str = "paper", **overrides) -> TrainConfig:
        """``paper`` (the defaults), ``cpu`` (the demo on a laptop CPU: the PyPI MiniLM, short
        sequences) or ``cpu-smoke`` (a few steps, for tests and CI); ``overrides`` change fields."""
        if name not in TRAIN_PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(TRAIN_PRESETS)}")
        return cls(**TRAIN_PRESETS[name]).replace(**overrides)


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
    "cpu-smoke": dict(_CPU, max_seq_length=96, batch_size=8, warmup_steps=1, max_steps=4, save_steps=2),
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


def _read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train(examples: list[dict], out_dir: str | Path, cfg: TrainConfig, **kwargs) -> TrainResult:
    """Train on ``examples`` (dicts, or ``TrainSet.dataset``) into ``out_dir``; resume if interrupted.

    With ``cfg.eval_steps > 0``, ``heldout`` seeds (never trained on; ``heldout.split_heldout``) are
    scored every ``eval_steps`` and the best checkpoint is the one saved (docs/method.md §6).
    The saved model reads ``cfg.save_max_seq_length`` tokens (default: as many as the base model).

    ``loss='mnrl'`` swaps in plain MultipleNegativesRankingLoss (the baseline for benchmarks).
    A NaN/inf loss stops the run with ``NonFiniteLossError``; earlier checkpoints are kept.
    Keyword arguments: ``mode``, ``manifest``, ``loss``, ``device``, ``heldout``, ``report_to``
    (``tracking.resolve_report_to``). A second process training into the same ``out_dir`` fails
    at once with ``OutputLocked``; an exception marks the run ``failed`` (``runs.record_failure``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    first_rank = int(os.environ.get("RANK", "0")) == 0
    with exclusive(out, "training run folder") if first_rank else contextlib.nullcontext():
        t0 = time.time()
        try:
            return _train(examples, out, cfg, **kwargs)
        except BaseException as e:
            if first_rank:
                from ..pipelines.registry import record_failure

                record_failure(out, e, since=t0)
            raise


def _train(
    examples: list[dict],
    out_dir: str | Path,
    cfg: TrainConfig,
    *,
    mode: str = "custom",
    manifest: dict | None = None,
    loss: str = "relation",
    device: str | None = None,
    heldout: list[dict] | None = None,
    report_to: str | None = "auto",
) -> TrainResult:
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import EarlyStoppingCallback

    from .heldout import HeldOutEvaluator
    from .loss import RelationInfoNCELoss
    from .tracking import JsonlLog, reporting

    if cfg.eval_steps > 0 and not heldout:
        raise ConfigError("eval_steps > 0 needs held-out seeds (train(..., heldout=...))")
    out = Path(out_dir)  # made, and locked, by ``train``
    run_file, log_file, ckpt_dir = out / "ifir_run.json", out / "train_log.jsonl", out / "checkpoints"
    heldout_file = out / "heldout_log.jsonl"
    cfg_dict = dataclasses.asdict(cfg)
    rank = int(os.environ.get("RANK", "0"))
    tracker_args, tracker_callbacks = reporting(
        report_to, out, cfg_dict, mode=mode, rng_seed=cfg.rng_seed, evaluates=cfg.eval_steps > 0
    )  # an uninstalled tracker fails here, before the model loads
    if run_file.exists():
        prev = json.loads(run_file.read_text())
        if prev.get("config") != cfg_dict or prev.get("mode") != mode:
            raise ConfigError(
                f"{run_file}: this run directory holds a run with another config or mode; "
                "use a new --out or delete it"
            )
        if prev.get("status") == "finished" and (out / "modules.json").exists():
            log.warning("%s already finished; nothing to do", out)
            logs = _read_log(log_file)
            return TrainResult(out, prev.get("steps", 0), 0.0, 0.0, logs)
    if rank == 0:
        run_file.write_text(
            json.dumps(
                {
                    "mode": mode,
                    "rng_seed": cfg.rng_seed,
                    "base_model": cfg.base_model,
                    "config": cfg_dict,
                    "data": manifest or {},
                    "heldout_seeds": len(heldout or []),
                    "git_commit": git_commit(),
                    "status": "running",
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                },
                indent=2,
            )
        )

    torch.manual_seed(cfg.rng_seed)
    model = build_model(cfg.base_model, max_seq_length=cfg.max_seq_length, pooling=cfg.pooling, device=device)
    model.prompts = {QUERY_PROMPT_NAME: cfg.query_prompt, DOCUMENT_PROMPT_NAME: cfg.document_prompt}
    use_labels = loss == "relation"
    ds = as_train_dataset(examples, cfg.num_negatives, with_labels=use_labels)  # a list or a Dataset
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
    elif loss == "mnrl":
        loss_fn = MultipleNegativesRankingLoss(model, scale=1.0 / cfg.temperature)
        sampler = "batch_sampler"
    else:
        raise ConfigError(f"unknown loss {loss!r}")

    bf16 = cfg.bf16 and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(ckpt_dir),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1,
        num_train_epochs=cfg.epochs,
        learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="linear",
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        bf16=bf16,
        # only passed when on: the argument itself triggers a deprecation warning in transformers 5
        **(
            {"gradient_checkpointing": True}
            if cfg.gradient_checkpointing and torch.cuda.is_available()
            else {}
        ),
        seed=cfg.rng_seed,
        data_seed=cfg.rng_seed,
        batch_sampler=sampler,
        prompts=prompts,
        save_strategy="steps",
        save_steps=cfg.eval_steps if cfg.eval_steps > 0 else cfg.save_steps,
        **(
            dict(
                eval_strategy="steps",
                eval_steps=cfg.eval_steps,
                load_best_model_at_end=True,
                metric_for_best_model="eval_heldout_score",
                greater_is_better=True,
            )
            if cfg.eval_steps > 0
            else {}
        ),
        save_total_limit=cfg.save_total_limit,
        logging_steps=cfg.logging_steps,
        **tracker_args,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        disable_tqdm=not progress_enabled(),
        use_cpu=(device == "cpu"),
        ddp_find_unused_parameters=False,
    )

    callbacks = [JsonlLog(log_file, heldout_file), *tracker_callbacks]
    if cfg.early_stopping_patience > 0:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.early_stopping_patience))
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        loss=loss_fn,
        evaluator=HeldOutEvaluator(heldout) if cfg.eval_steps > 0 else None,
        callbacks=callbacks,
    )
    resume = None
    if ckpt_dir.exists() and any(ckpt_dir.glob("checkpoint-*")):
        resume = str(max(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])))
        # steps after the checkpoint will be logged again; drop them so the log has one line per step
        step0 = int(Path(resume).name.split("-")[1])
        for f in (log_file, heldout_file) if rank == 0 else ():
            if f.exists():
                kept = [r for r in _read_log(f) if r["step"] <= step0]
                f.write_text("".join(json.dumps(r) + "\n" for r in kept))
        log.warning("resuming %s from %s", out, resume)
    t0 = time.time()
    try:
        result = trainer.train(resume_from_checkpoint=resume)
    except NonFiniteLossError as e:
        ckpts = sorted(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        last = str(ckpts[-1]) if ckpts else "none (no checkpoint was saved yet)"
        if rank == 0:
            info = json.loads(run_file.read_text())
            info.update(
                {
                    "status": f"stopped: non-finite loss at step {trainer.state.global_step + 1}",
                    "last_checkpoint": last,
                }
            )
            run_file.write_text(json.dumps(info, indent=2))
        raise NonFiniteLossError(
            f"{e} (step {trainer.state.global_step + 1}); last good checkpoint: {last}. "
            "Lower the learning rate or check the data, then rerun to resume from it."
        ) from None
    seconds = time.time() - t0
    steps = trainer.state.global_step
    if trainer.is_world_process_zero():
        # with held-out evaluation the trainer has loaded the best checkpoint into ``model``
        model.max_seq_length = cfg.save_max_seq_length or getattr(
            model, "native_max_seq_length", cfg.max_seq_length
        )
        model.save(str(out))
        info = json.loads(run_file.read_text())
        best = trainer.state.best_model_checkpoint
        info.update(
            {
                "status": "finished",
                "steps": steps,
                "best_step": int(Path(best).name.split("-")[1]) if best else steps,
                "best_heldout_score": trainer.state.best_metric,
                "saved_max_seq_length": model.max_seq_length,
                "train_seconds": round(seconds, 2),
                "train_loss": result.training_loss,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
        )
        run_file.write_text(json.dumps(info, indent=2))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # each rank records what it ended with, so a test can check the ranks agreed
        from ..core.models import model_fingerprint

        (out / f"rank{rank}.fingerprint").write_text(model_fingerprint(model))
    eps = result.metrics.get("train_samples_per_second", 0.0)
    return TrainResult(out, steps, seconds, eps, _read_log(log_file), resume)


def mode_config(cfg: TrainConfig, mode: str) -> TrainConfig:
    """``cfg`` with what an ablation mode changes (``config.ABLATIONS``); other modes keep it."""
    from ..core.config import ABLATIONS

    return cfg.replace(**{k: v for k, v in ABLATIONS.get(mode, {}).items() if k != "reversals"})


def train_modes(
    out_dir: str | Path,
    *,
    preset: str = "cpu",
    modes=PAPER_MODES,
    seeds_path=SEEDS_PATH,
    reversals_path: str | Path | None = None,
    curation_path: str | Path | None = None,
    budget: int | None = None,
    rng_seed: int = 0,
    heldout_seeds: int = 0,
    narrative_share: float = NARRATIVE_SHARE,
    report_to: str | None = "auto",
    **overrides,
) -> dict[str, TrainResult]:
    """Train one model per mode into ``out_dir/<mode>``; returns ``{mode: TrainResult}``.

    Reversals come from a synthesis file when given, else from the seeds' reference reversals.
    ``heldout_seeds`` seeds (the same for every mode and rng_seed) are kept out of training and,
    with ``eval_steps``, pick the checkpoint. ``overrides`` change ``TrainConfig`` fields of the
    preset (``None`` values are ignored); ``report_to`` names the trackers (``tracking``).
    """
    from ..curation.decisions import load_decisions
    from ..pipelines.registry import data_sources, reuse_identical_run
    from ..seeds.schema import load_seeds
    from .heldout import split_heldout
    from .trainsets import build_trainset, load_reversals

    cfg = TrainConfig.preset(preset, rng_seed=rng_seed, **overrides)
    seeds, heldout = split_heldout(load_seeds(seeds_path, stage="train"), heldout_seeds)
    reversals = load_reversals(reversals_path) if reversals_path else None
    curation = load_decisions(curation_path) if curation_path and Path(curation_path).exists() else None
    out = {}
    for mode in modes:
        ts = build_trainset(
            mode,
            seeds,
            reversals,
            budget=budget,
            num_negatives=cfg.num_negatives,
            curation=curation,
            rng_seed=rng_seed,
            narrative_share=narrative_share,
        )
        log.info("training %s on %d examples", mode, len(ts.examples))
        sources = data_sources(mode, seeds_path, reversals_path, curation_path if curation else None)
        mcfg, manifest = mode_config(cfg, mode), {**ts.manifest(), **sources}
        same = reuse_identical_run(Path(out_dir) / mode, mode, dataclasses.asdict(mcfg), manifest)
        if same:
            log.warning("%s: same examples and config as %s; copied that finished run", mode, same)
        out[mode] = train(
            ts.examples,
            Path(out_dir) / mode,
            mcfg,
            mode=mode,
            manifest=manifest,
            heldout=heldout,
            report_to=report_to,
        )
    return out
