"""What a training run records while it trains: its JSONL logs, and the trackers researchers use.

Every run writes ``RUN/train_log.jsonl`` (one line per logged step: loss, learning rate, grad
norm) and, with held-out seeds, ``RUN/heldout_log.jsonl`` (``JsonlLog``). On top of that the run
reports to the trackers ``report_to`` names, through the HF trainer's own integrations:

- ``tensorboard`` (the default whenever the ``tensorboard`` package is installed): event files
  in ``RUN/tb/``, with the scalars the trainer logs (``train/loss``, ``train/learning_rate``,
  ``eval/heldout_score``...) and the run's config, mode and rng_seed as *hparams*, so
  ``tensorboard --logdir out/`` compares runs in its HPARAMS tab. A resumed run purges the steps
  after its checkpoint, so each curve has one point per step.
- ``wandb`` / ``mlflow``: passed to the trainer as they are (their own callbacks log the
  training arguments); the run is named ``<mode>-s<rng_seed>``.

``report_to`` is ``auto`` (TensorBoard if installed, else nothing), ``none``, or a
comma-separated list: ``resolve_report_to('wandb,tensorboard') -> ['wandb', 'tensorboard']``.
Not handled here: what the trainer logs and when (``train``), reading runs back (``runs``).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

from transformers import TrainerCallback

from ..core.errors import ConfigError
from ..core.jsonl import append_jsonl

TRACKERS = ("tensorboard", "wandb", "mlflow")
REPORT_TO_CHOICES = ("auto", "none", *TRACKERS)  # --report-to also takes a comma-separated list
TB_DIR = "tb"


def resolve_report_to(report_to: str | None = "auto") -> list[str]:
    """The trackers a run reports to: ``'auto'``/None -> ``['tensorboard']`` when the package is
    installed, else ``[]``; ``'none'`` -> ``[]``. A named tracker that is not installed is a
    ``ConfigError`` (before any model loads), naming the package to install."""
    names = [n.strip().lower() for n in (report_to or "auto").split(",") if n.strip()]
    if names in (["auto"], []):
        return ["tensorboard"] if importlib.util.find_spec("tensorboard") else []
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in TRACKERS]
    if bad:
        raise ConfigError(f"report_to: unknown tracker(s) {bad}; choose from {', '.join(REPORT_TO_CHOICES)}")
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        raise ConfigError(
            f"report_to {', '.join(missing)}: not installed; `pip install {' '.join(missing)}` "
            "or choose another tracker (--report-to none)"
        )
    return list(dict.fromkeys(names))


def hparams(config: dict, **run) -> dict:
    """Flat ``{name: int | float | str}`` for TensorBoard's hparams plugin: ``run`` fields (mode,
    rng_seed, ...) first, then the config; None values are left out; booleans become ``'true'`` /
    ``'false'`` (the plugin would show 1.0 / 0.0), lists and dicts JSON text.

    ``hparams({'lr': 3e-5, 'bf16': False, 'mini_batch_size': None}, mode='ins-dv')
    -> {'mode': 'ins-dv', 'lr': 3e-05, 'bf16': 'false'}``
    """
    out = {}
    for k, v in {**run, **config}.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = str(v).lower()
        out[k] = v if isinstance(v, (int, float, str)) else json.dumps(v, sort_keys=True)
    return out


class JsonlLog(TrainerCallback):
    """Append each logged training step to ``log_file`` and each held-out score to ``heldout_file``."""

    def __init__(self, log_file: Path, heldout_file: Path):
        self.log_file, self.heldout_file = Path(log_file), Path(heldout_file)
        self._since = 0  # the step a logged loss's mean starts after (the resume point, at first)

    def on_train_begin(self, args, state, control, **kw):
        self._since = state.global_step

    def on_log(self, args, state, control, logs=None, **kw):
        if not (state.is_world_process_zero and logs):
            return
        if "eval_heldout_score" in logs:
            row = {
                k.removeprefix("eval_heldout_"): v for k, v in logs.items() if k.startswith("eval_heldout")
            }
            self._append(self.heldout_file, {"step": state.global_step, "epoch": logs.get("epoch"), **row})
        if "loss" in logs:
            self._append(
                self.log_file,
                {
                    "step": state.global_step,
                    "epoch": logs.get("epoch"),
                    "loss": logs["loss"],
                    "learning_rate": logs.get("learning_rate"),
                    "grad_norm": logs.get("grad_norm"),
                    "since": self._since,  # the loss is the mean over steps since+1 .. step
                    "time": time.time(),
                },
            )
            self._since = state.global_step

    @staticmethod
    def _append(path: Path, row: dict) -> None:
        """One line; a cut last line a killed run left is set aside first (``append_jsonl``), so
        the new line is never glued onto it. Not fsync'd: a log line lost to a crash is logged again
        on resume (``RunFolder.trim_logs``)."""
        append_jsonl(path, [row], fsync=False)


class TensorBoardLog(TrainerCallback):
    """Scalars and hparams into ``log_dir`` (HF's ``TensorBoardCallback`` writes under the checkpoint
    folder and logs no config of ours; this one writes where ``tensorboard --logdir out/`` finds it).

    ``metrics`` are the scalar tags the HPARAMS tab shows next to each run's hparams.
    """

    def __init__(self, log_dir: Path, hparams: dict, metrics: list[str]):
        self.log_dir, self.hparams, self.metrics = Path(log_dir), hparams, metrics
        self.writer = None

    def on_train_begin(self, args, state, control, **kw):
        if not state.is_world_process_zero:
            return
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        # on resume, state.global_step is the checkpoint's: events after it are dropped (logged again)
        self.writer = SummaryWriter(str(self.log_dir), purge_step=state.global_step + 1)
        experiment, session_start, _ = hparams_summaries(self.hparams, dict.fromkeys(self.metrics, 0.0))
        self.writer.file_writer.add_summary(experiment)
        self.writer.file_writer.add_summary(session_start)
        self.writer.add_text("ifir_config", f"```\n{json.dumps(self.hparams, indent=2)}\n```")
        self.writer.add_text("training_args", args.to_json_string())
        self.writer.flush()

    def on_log(self, args, state, control, logs=None, **kw):
        if self.writer is None or not logs:
            return
        for k, v in logs.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                tag = "eval/" + k.removeprefix("eval_") if k.startswith("eval_") else "train/" + k
                self.writer.add_scalar(tag, v, state.global_step)
        self.writer.flush()

    def on_train_end(self, args, state, control, **kw):
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        session_end = hparams_summaries(self.hparams, dict.fromkeys(self.metrics, 0.0))[2]
        self.writer.file_writer.add_summary(session_end)
        self.writer.close()
        self.writer = None


def reporting(
    report_to: str | None, run_dir: Path, config: dict, *, mode: str, rng_seed: int, evaluates: bool
) -> tuple[dict, list[TrainerCallback]]:
    """``(TrainingArguments fields, callbacks)`` for one run: ``report_to`` and ``run_name`` for the
    trainer's own integrations (wandb, mlflow), and ``TensorBoardLog`` when TensorBoard is asked."""
    trackers = resolve_report_to(report_to)
    callbacks: list[TrainerCallback] = []
    if "tensorboard" in trackers:
        metrics = ["train/loss"] + (["eval/heldout_score"] if evaluates else [])
        hp = hparams(config, mode=mode, run=Path(run_dir).name)
        callbacks.append(TensorBoardLog(Path(run_dir) / TB_DIR, hp, metrics))
    args = {
        "report_to": [t for t in trackers if t != "tensorboard"] or "none",
        "run_name": f"{mode}-s{rng_seed}",
    }
    return args, callbacks
