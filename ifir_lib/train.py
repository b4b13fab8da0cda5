"""Fine-tune a bi-encoder on one training set (Dual-View Training, arXiv 2604.18845, §3).

Queries are ``query + " " + instruction`` (the model's stored ``query`` prompt in front);
documents are encoded alone. The loss is ``RelationInfoNCELoss`` (temperature 0.02, in-batch
negatives off, documents deduplicated by id); ``DualViewBatchSampler`` keeps each seed's two
views in one batch. Training runs through ``SentenceTransformerTrainer``, so the same entry works
on one CPU, one GPU, and under ``torchrun`` / ``accelerate launch`` (DDP).

A run directory is a SentenceTransformer folder plus its provenance::

    RUN/                      SentenceTransformer(RUN) loads it; prompts hold the query format
    RUN/ifir_run.json         config, mode, data manifest, git commit, status
    RUN/train_log.jsonl       one line per logged step: loss, learning rate, epoch
    RUN/checkpoints/          HF Trainer checkpoints; rerunning the same command resumes

Not handled here: building examples (``trainsets``), evaluation (``evaluate``).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from .config import DOCUMENT_PROMPT_NAME, QUERY_PROMPT_NAME
from .models import format_query, resolve_model

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Training settings. Defaults are the paper-scale run; see ``PRESETS`` for the small ones.

    Where the paper is silent (REFERENCE.md §1) we follow ArcticTraining's example: lr 3e-5,
    500 warmup then 1000 linear-decay steps, weight decay 0.01, gradient clipping at 10.
    """
    base_model: str = "Alibaba-NLP/gte-multilingual-base"
    pooling: str = "cls"                      # ArcticTraining default; used when building from a raw backbone
    max_seq_length: int = 512
    temperature: float = 0.02
    num_negatives: int = 30                   # hard negatives per query, 1-3 of them instruction negatives
    in_batch_negatives: bool = False
    batch_size: int = 256                     # per device; gradient caching makes it affordable
    mini_batch_size: int | None = 32          # GradCache chunk; None = plain forward
    learning_rate: float = 3e-5
    warmup_steps: int = 500
    max_steps: int = 1500
    epochs: float = 1.0                       # used when max_steps <= 0
    weight_decay: float = 0.01
    max_grad_norm: float = 10.0
    bf16: bool = True
    gradient_checkpointing: bool = True
    co_batch_views: bool = True
    query_prompt: str = ""
    document_prompt: str = ""
    save_steps: int = 250
    save_total_limit: int = 2
    logging_steps: int = 10
    seed: int = 0

    def replace(self, **kw) -> "TrainConfig":
        kw = {k: v for k, v in kw.items() if v is not None}
        return dataclasses.replace(self, **kw)

    def validate(self) -> "TrainConfig":
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2 (a dual-view pair needs two slots)")
        if self.mini_batch_size is not None and self.mini_batch_size < 1:
            raise ValueError("mini_batch_size must be positive or None")
        if self.temperature <= 0:
            raise ValueError("temperature must be positive")
        if self.num_negatives < 1:
            raise ValueError("num_negatives must be >= 1")
        if self.max_steps <= 0 and self.epochs <= 0:
            raise ValueError("set max_steps or epochs")
        if self.pooling not in ("cls", "mean", "lasttoken"):
            raise ValueError(f"unknown pooling {self.pooling!r}")
        return self


PRESETS: dict[str, TrainConfig] = {
    "paper": TrainConfig(),
    # what the demo and the benchmark run on a laptop CPU: the PyPI MiniLM, short sequences
    "cpu": TrainConfig(base_model="minilm", pooling="mean", max_seq_length=128, num_negatives=3, batch_size=16,
                       mini_batch_size=None, learning_rate=5e-5, warmup_steps=2, max_steps=0, epochs=2.0,
                       bf16=False, gradient_checkpointing=False, save_steps=10, save_total_limit=1, logging_steps=1),
    # a few steps, for tests and CI
    "cpu-smoke": TrainConfig(base_model="minilm", pooling="mean", max_seq_length=96, num_negatives=3, batch_size=8,
                             mini_batch_size=None, learning_rate=5e-5, warmup_steps=1, max_steps=4, bf16=False,
                             gradient_checkpointing=False, save_steps=2, logging_steps=1),
}


def get_config(preset: str = "paper", **overrides) -> TrainConfig:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[preset].replace(**overrides).validate()


# ---------------------------------------------------------------------------------------------
# Data: examples -> a datasets.Dataset with integer id labels


def encode_ids(examples: list[dict]) -> list[list[int]]:
    """Label rows ``[group, query, positive_doc, negative_doc_1, ...]`` as integers.

    The loss deduplicates documents by these ids; the sampler groups by the first two.
    Ids are assigned in sorted order, so the same examples always get the same integers.
    """
    groups = {g: i for i, g in enumerate(sorted({e["group"] for e in examples}))}
    queries = {q: i for i, q in enumerate(sorted({format_query(e["query"], e["instruction"]) for e in examples}))}
    docs = {d: i for i, d in enumerate(sorted({p["id"] for e in examples for p in (e["positive"], *e["negatives"])}))}
    return [[groups[e["group"]], queries[format_query(e["query"], e["instruction"])], docs[e["positive"]["id"]],
             *(docs[p["id"]] for p in e["negatives"])] for e in examples]


def to_dataset(examples: list[dict], num_negatives: int, with_labels: bool = True):
    """Columns ``query, positive, negative_1..k`` (+ ``label``); every row must have k negatives."""
    from datasets import Dataset

    bad = [e["id"] for e in examples if len(e["negatives"]) < num_negatives]
    if bad:
        raise ValueError(f"{len(bad)} examples have fewer than {num_negatives} negatives (e.g. {bad[0]}); "
                         "rebuild the training set with the same num_negatives")
    cols = {"query": [format_query(e["query"], e["instruction"]) for e in examples],
            "positive": [e["positive"]["text"] for e in examples]}
    for j in range(num_negatives):
        cols[f"negative_{j + 1}"] = [e["negatives"][j]["text"] for e in examples]
    if with_labels:
        cols["label"] = encode_ids([{**e, "negatives": e["negatives"][:num_negatives]} for e in examples])
    return Dataset.from_dict(cols)


# ---------------------------------------------------------------------------------------------
# Batching


def _batch_sampler_base():
    from sentence_transformers.base.sampler import DefaultBatchSampler
    return DefaultBatchSampler


class DualViewBatchSampler(_batch_sampler_base()):
    """Batches that keep each seed's views together and never repeat a query.

    Reads ``label[0]`` (group) and ``label[1]`` (query) of each row. Each epoch shuffles the
    groups with ``seed + epoch`` and packs them whole (``co_batch=True``) or shuffles single
    examples (``co_batch=False``). An item whose query is already in the open batch waits for
    the next one, so no batch holds a query twice.
    """

    co_batch = True

    def __init__(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
        super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                         valid_label_columns=valid_label_columns, generator=generator, seed=seed)
        labels = dataset["label"]
        self.groups: dict[int, list[int]] = {}
        for i, lab in enumerate(labels):
            self.groups.setdefault(int(lab[0]), []).append(i)
        self.query_of = [int(lab[1]) for lab in labels]
        too_big = [g for g, idx in self.groups.items() if len(idx) > batch_size]
        if self.co_batch and too_big:
            raise ValueError(f"a seed has {max(len(self.groups[g]) for g in too_big)} views but batch_size is {batch_size}")

    def batches(self, epoch: int) -> list[list[int]]:
        rng = random.Random(self.seed + epoch)
        units = list(self.groups.values()) if self.co_batch else [[i] for idx in self.groups.values() for i in idx]
        units = [list(u) for u in units]
        rng.shuffle(units)
        out, pending = [], units
        while pending:
            batch, queries, deferred = [], set(), []
            for u in pending:
                qs = {self.query_of[i] for i in u}
                if len(batch) + len(u) <= self.batch_size and not (qs & queries) and len(qs) == len(u):
                    batch.extend(u)
                    queries |= qs
                elif len(qs) < len(u):  # a unit repeating its own query: split it
                    deferred.extend([[i] for i in u])
                else:
                    deferred.append(u)
            if not batch:  # cannot happen with batch_size >= largest unit, but never loop forever
                raise RuntimeError("batch sampler made no progress")
            out.append(batch)
            pending = deferred
        if self.drop_last and out and len(out[-1]) < self.batch_size:
            out.pop()
        return out

    def __iter__(self):
        yield from self.batches(self.epoch)

    def __len__(self) -> int:
        return len(self.batches(self.epoch))


class SingleViewBatchSampler(DualViewBatchSampler):
    """Same as ``DualViewBatchSampler`` but views of a seed are shuffled independently."""
    co_batch = False


# ---------------------------------------------------------------------------------------------
# Model


def build_model(name: str, cfg: TrainConfig, device: str | None = None):
    """A SentenceTransformer from an ST folder, a raw transformers backbone (CLS pooling), or a hub name."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    path = resolve_model(name)
    p = Path(path)
    if p.exists() and not (p / "modules.json").exists():
        # a raw backbone folder (e.g. a transformers checkpoint): add pooling + normalisation
        tr = Transformer(str(p), max_seq_length=cfg.max_seq_length)
        pool = Pooling(tr.get_word_embedding_dimension(), pooling_mode=cfg.pooling)
        model = SentenceTransformer(modules=[tr, pool, Normalize()], device=device)
    else:
        if not p.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise FileNotFoundError(f"base model {name!r} is neither a local folder nor reachable (HF_HUB_OFFLINE=1)")
        model = SentenceTransformer(path, device=device, trust_remote_code=True)
    model.max_seq_length = cfg.max_seq_length
    return model


# ---------------------------------------------------------------------------------------------
# Dry run: steps, tokens, memory without a GPU

KNOWN_PARAMS = {"gte-multilingual-base": 305e6, "gte-multilingual-mlm-base": 305e6, "bge-m3": 568e6,
                "minilm": 22.7e6, "all-minilm-l6-v2": 22.7e6, "all-mpnet-base-v2": 109e6}


def _backbone_shape(name: str) -> dict | None:
    """hidden size, layers, heads and parameter count from a local config, or known sizes."""
    try:
        from transformers import AutoConfig
        path = resolve_model(name)
        if Path(path).exists():
            cfg = AutoConfig.from_pretrained(path)
            h, L, a, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.vocab_size
            params = v * h + cfg.max_position_embeddings * h + L * (12 * h * h + 13 * h)
            return {"hidden": h, "layers": L, "heads": a, "params": params}
    except Exception:  # offline hub name: fall through to the table
        pass
    key = name.lower().split("/")[-1]
    if key in KNOWN_PARAMS:
        n = KNOWN_PARAMS[key]
        h, L, a = (768, 12, 12) if n > 5e7 else (384, 6, 12)
        return {"hidden": h, "layers": L, "heads": a, "params": n}
    return None


def dry_run(cfg: TrainConfig, examples: list[dict], world_size: int = 1) -> dict:
    """Validate ``cfg`` against ``examples`` and estimate steps, tokens and peak GPU memory.

    Tokens are estimated as 1.3 x words, capped at ``max_seq_length``. Memory follows
    Korthikanti et al. (arXiv 2205.05198): 16 bytes per parameter for fp32 weights, gradients
    and Adam, plus activations ``s*b*h*(34 + 5*a*s/h)`` bytes per layer for the live mini-batch
    (only layer boundaries kept under gradient checkpointing). An estimate, not a measurement.
    """
    cfg.validate()
    to_dataset(examples[:1], cfg.num_negatives, with_labels=False)  # checks negatives count
    def toks(text):
        return min(cfg.max_seq_length, int(len(text.split()) * 1.3) + 2)
    q_tok = [toks(format_query(e["query"], e["instruction"])) for e in examples]
    d_tok = [toks(p["text"]) for e in examples for p in (e["positive"], *e["negatives"][:cfg.num_negatives])]
    per_step = cfg.batch_size * world_size
    steps_per_epoch = math.ceil(len(examples) / per_step)
    steps = cfg.max_steps if cfg.max_steps > 0 else math.ceil(cfg.epochs * steps_per_epoch)
    epochs = steps / steps_per_epoch
    tokens_per_epoch = sum(q_tok) + sum(d_tok)
    out = {"examples": len(examples), "world_size": world_size, "effective_batch": per_step,
           "steps_per_epoch": steps_per_epoch, "steps": steps, "epochs": round(epochs, 3),
           "texts_per_step": per_step * (2 + cfg.num_negatives),
           "tokens_per_epoch": tokens_per_epoch, "tokens_total": int(tokens_per_epoch * epochs),
           "mean_query_tokens": round(sum(q_tok) / len(q_tok), 1), "mean_doc_tokens": round(sum(d_tok) / len(d_tok), 1)}
    shape = _backbone_shape(cfg.base_model)
    if shape:
        h, L, a = shape["hidden"], shape["layers"], shape["heads"]
        s = cfg.max_seq_length
        b = min(cfg.mini_batch_size or per_step * (2 + cfg.num_negatives), per_step * (2 + cfg.num_negatives))
        layer = s * b * h * (34 + 5 * a * s / h)  # bytes in 16-bit
        if not cfg.bf16:
            layer *= 2
        act = (L * s * b * h * 2 + layer) if cfg.gradient_checkpointing else L * layer
        static = 16 * shape["params"]
        out.update({"params": int(shape["params"]), "est_static_gb": round(static / 2**30, 2),
                    "est_activation_gb": round(act / 2**30, 2), "est_peak_gb": round((static + act) / 2**30, 2)})
    return out


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


def train(examples: list[dict], out_dir: str | Path, cfg: TrainConfig, *, mode: str = "custom",
          manifest: dict | None = None, loss: str = "relation", device: str | None = None) -> TrainResult:
    """Train on ``examples`` into ``out_dir`` (a SentenceTransformer folder); resume if interrupted.

    ``loss='mnrl'`` swaps in plain MultipleNegativesRankingLoss (the baseline for benchmarks).
    A NaN/inf loss stops the run with ``NonFiniteLossError``; earlier checkpoints are kept.
    """
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    from .evaluate import git_commit
    from .relation_loss import NonFiniteLossError, RelationInfoNCELoss

    cfg.validate()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_file, log_file, ckpt_dir = out / "ifir_run.json", out / "train_log.jsonl", out / "checkpoints"
    cfg_dict = dataclasses.asdict(cfg)
    rank = int(os.environ.get("RANK", "0"))
    if run_file.exists():
        prev = json.loads(run_file.read_text())
        if prev.get("config") != cfg_dict or prev.get("mode") != mode:
            raise ValueError(f"{run_file}: this run directory holds a run with another config or mode; "
                             "use a new --out or delete it")
        if prev.get("status") == "finished" and (out / "modules.json").exists():
            log.warning("%s already finished; nothing to do", out)
            logs = _read_log(log_file)
            return TrainResult(out, prev.get("steps", 0), 0.0, 0.0, logs)
    if rank == 0:
        run_file.write_text(json.dumps({"mode": mode, "config": cfg_dict, "data": manifest or {},
                                        "git_commit": git_commit(), "status": "running",
                                        "started": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))

    torch.manual_seed(cfg.seed)
    model = build_model(cfg.base_model, cfg, device=device)
    model.prompts = {QUERY_PROMPT_NAME: cfg.query_prompt, DOCUMENT_PROMPT_NAME: cfg.document_prompt}
    use_labels = loss == "relation"
    ds = to_dataset(examples, cfg.num_negatives, with_labels=use_labels)
    doc_cols = [c for c in ds.column_names if c not in ("query", "label")]
    prompts = {"query": cfg.query_prompt, **{c: cfg.document_prompt for c in doc_cols}}
    if loss == "relation":
        loss_fn = RelationInfoNCELoss(model, temperature=cfg.temperature, in_batch_negatives=cfg.in_batch_negatives,
                                      mini_batch_size=cfg.mini_batch_size)
        sampler = DualViewBatchSampler if cfg.co_batch_views else SingleViewBatchSampler
    elif loss == "mnrl":
        loss_fn = MultipleNegativesRankingLoss(model, scale=1.0 / cfg.temperature)
        sampler = "batch_sampler"
    else:
        raise ValueError(f"unknown loss {loss!r}")

    bf16 = cfg.bf16 and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(ckpt_dir), per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1, num_train_epochs=cfg.epochs,
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps, lr_scheduler_type="linear",
        weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm, bf16=bf16,
        # only passed when on: the argument itself triggers a deprecation warning in transformers 5
        **({"gradient_checkpointing": True} if cfg.gradient_checkpointing and torch.cuda.is_available() else {}),
        seed=cfg.seed, data_seed=cfg.seed, batch_sampler=sampler, prompts=prompts,
        save_strategy="steps", save_steps=cfg.save_steps, save_total_limit=cfg.save_total_limit,
        logging_steps=cfg.logging_steps, report_to="none", dataloader_num_workers=0, dataloader_pin_memory=torch.cuda.is_available(),
        disable_tqdm=False, use_cpu=(device == "cpu"), ddp_find_unused_parameters=False,
    )

    class JsonlLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_world_process_zero and logs and "loss" in logs:
                with open(log_file, "a") as fh:
                    fh.write(json.dumps({"step": state.global_step, "epoch": logs.get("epoch"), "loss": logs["loss"],
                                         "learning_rate": logs.get("learning_rate"), "grad_norm": logs.get("grad_norm"),
                                         "time": time.time()}) + "\n")

    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss_fn, callbacks=[JsonlLog()])
    resume = None
    if ckpt_dir.exists() and any(ckpt_dir.glob("checkpoint-*")):
        resume = str(max(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])))
        # steps after the checkpoint will be logged again; drop them so the log has one line per step
        step0 = int(Path(resume).name.split("-")[1])
        if rank == 0 and log_file.exists():
            kept = [r for r in _read_log(log_file) if r["step"] <= step0]
            log_file.write_text("".join(json.dumps(r) + "\n" for r in kept))
        log.warning("resuming %s from %s", out, resume)
    t0 = time.time()
    try:
        result = trainer.train(resume_from_checkpoint=resume)
    except NonFiniteLossError as e:
        ckpts = sorted(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        last = str(ckpts[-1]) if ckpts else "none (no checkpoint was saved yet)"
        if rank == 0:
            info = json.loads(run_file.read_text())
            info.update({"status": f"stopped: non-finite loss at step {trainer.state.global_step + 1}", "last_checkpoint": last})
            run_file.write_text(json.dumps(info, indent=2))
        raise NonFiniteLossError(f"{e} (step {trainer.state.global_step + 1}); last good checkpoint: {last}. "
                                 "Lower the learning rate or check the data, then rerun to resume from it.") from None
    seconds = time.time() - t0
    steps = trainer.state.global_step
    if trainer.is_world_process_zero():
        model.save(str(out))
        info = json.loads(run_file.read_text())
        info.update({"status": "finished", "steps": steps, "train_seconds": round(seconds, 2),
                     "train_loss": result.training_loss, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
        run_file.write_text(json.dumps(info, indent=2))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # each rank records what it ended with, so a test can check the ranks agreed
        from .models import model_fingerprint
        (out / f"rank{rank}.fingerprint").write_text(model_fingerprint(model))
    eps = result.metrics.get("train_samples_per_second", 0.0)
    return TrainResult(out, steps, seconds, eps, _read_log(log_file), resume)
