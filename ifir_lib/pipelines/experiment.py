"""The experiment: does dual-view training help, with controls, several runs and a plan (docs/method.md §6).

``ExperimentConfig`` is the plan: inputs (seeds, reversals, curation, base model), the modes
trained for every ``rng_seed`` and those trained on the first only (All-*), the training
settings, the evaluation (bundled sets, FollowIR-format folders, mteb task names, ``paper``),
the primary comparison and the family of tests. The plan is written to ``OUT/experiment.toml``
before any run (``plan``); its hash labels every run and every results row, and a rerun with a
different plan into the same folder is refused. Three ways to run it::

    run_experiment(OUT, cfg)   train every run here, then collect
    run_commands(OUT, cfg)     one self-contained command per training run (absolute paths), for a scheduler
    collect(OUT, cfg)          evaluate the finished runs, write the tables, tests and figures

Outputs::

    OUT/experiment.toml                          the plan
    OUT/models/rng<k>/<mode>/                    the run folders (``RunFolder``)
    OUT/results.csv, OUT/results_per_query.csv   the tidy table (one row per run, set, metric)
    OUT/modes.csv, OUT/comparisons.csv           run-level means and two-stage tests (``experiment_report``)
    OUT/summary.md, OUT/figures/

Every step resumes: finished runs and rows already in the table are reused. The primary result
is each run's fixed final step (``keep_best=False``); the held-out pick is reported beside it.
Not handled here: training, evaluation, statistics and figures themselves (``pipelines.train``,
``pipelines.evaluate``, ``reporting.comparisons``, ``reporting.figures``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import config as C
from ..core.errors import ConfigError
from ..core.locks import exclusive
from ..core.models import build_model, is_raw_backbone, resolve_model
from ..core.run_folder import RunFolder
from ..evaluation.backends import check_backend
from ..evaluation.tasks import PROMPT_CHOICES
from ..reporting.figures import make_all_figures
from ..reporting.results import per_query_path
from ..seeds.forms import NARRATIVE_SHARE
from ..seeds.schema import load_seeds
from ..training.heldout import heldout_scores, split_heldout
from ..training.trainer import TrainConfig, saved_length
from ..training.trainsets import seeds_for_budget
from . import plan as P
from .evaluate import evaluate_models
from .experiment_report import experiment_rows, write_report
from .train import train_modes

log = logging.getLogger(__name__)

LAUNCHERS = ("plain", "torchrun", "accelerate")
# the metric names the evaluation writes (ours and mteb's), checked when planned, not at --collect
_METRIC = re.compile(
    r"p_mrr|score|(ndcg|map|mrr|recall|precision|robustness)_at_\d+|main_score|paired_accuracy"
)


BUNDLED = "bundled"


@dataclass(frozen=True)
class ExperimentConfig:
    """The plan of ``ifir experiment``. ``None`` training fields take the train preset's value."""

    seeds: str = BUNDLED  # a seed JSONL; "bundled": the seeds shipped in ifir_lib/data (any checkout)
    reversals: str | None = None  # a synthesis (or curated) file; None: the seeds' reference reversals
    curation: str | None = None  # curation decisions (notebook 02)
    base_model: str | None = None  # hub name or path; None: the train preset's
    experiment_preset: str = "paper"  # the preset this plan started from (a record)
    train_preset: str = "paper"
    modes: tuple[str, ...] = ("ins-orig", "ins-dv", "ins-aug")  # trained for every rng_seed
    rng_seeds: tuple[int, ...] = (0, 1, 2)
    extra_modes: tuple[str, ...] = ("all-orig", "all-dv")  # trained for the first rng_seed only
    budget: int | None = None  # Ins-* examples per run (All-* build theirs from it); None: all the data
    heldout_seeds: int = 1000  # kept out of training; their scores are logged every eval_steps
    epochs: float | None = None
    max_steps: int | None = None
    learning_rate: float | None = None
    num_negatives: int | None = None
    in_batch_negatives: bool | None = None
    co_batch_views: bool | None = None
    temperature: float | None = None
    train_top_layers: int | None = None  # the cheaper variant for every mode: train the top k layers only
    lr_schedule: str | None = None  # linear (decay to 0) or wsd (hold, then decay over the last 10%)
    narrative_share: float = NARRATIVE_SHARE  # seeds with narratives drawn into narrative form
    eval_steps: int = 250
    keep_best: bool = False  # False: every run's fixed final step is its model (the primary result)
    early_stopping_patience: int = 0
    eval: tuple[str, ...] = ("paper",)  # v1, v2, FollowIR-format folders, mteb task names, paper
    prompts: str = "model"  # model: the model's stored prompts; benchmark: each benchmark's own
    eval_backend: str | None = None  # the encoder of collect's evaluation (evaluation.backends); None: torch
    bootstrap: int = 1000  # per-run intervals over queries
    primary_a: str = "ins-dv"
    primary_b: str = "ins-orig"
    primary_metric: str = "p_mrr"
    primary_set: str = ""  # an --eval item or a set it evaluates; "" = the first item's first set
    baseline: str = "ins-dv"  # the family: the baseline against every other mode, on every set
    tested_metrics: tuple[str, ...] = ("p_mrr", "map_at_1000")
    correction: str = "holm"
    n_boot: int = 2000  # two-stage bootstrap replicates

    def __post_init__(self):
        _check_types(self)
        modes = (*self.modes, *self.extra_modes)
        unknown = [m for m in modes if m not in C.MODES]
        if unknown:
            raise ConfigError(f"unknown mode(s) {unknown}; choose from {', '.join(C.MODES)}")
        if self.experiment_preset not in C.PRESET_NAMES:
            raise ConfigError(
                f"experiment_preset {self.experiment_preset!r}: one of {', '.join(C.PRESET_NAMES)}"
            )
        if self.baseline not in self.modes:
            raise ConfigError(f"baseline {self.baseline!r} must be one of the modes {self.modes}")
        _check_budget(self.budget, modes)
        self._check_primary(modes)
        if not self.rng_seeds:
            raise ConfigError("rng_seeds must name at least one random seed")
        twice_checked = (("rng_seeds", self.rng_seeds), ("modes and extra_modes", modes))
        for what, items in (*twice_checked, ("tested_metrics", self.tested_metrics)):
            if twice := sorted({str(x) for x in items if list(items).count(x) > 1}):
                raise ConfigError(f"{what}: {', '.join(twice)} given twice (two jobs would train one folder)")
        for m in (self.primary_metric, *self.tested_metrics):
            if not _METRIC.fullmatch(str(m)):
                raise ConfigError(
                    f"metric {m!r} is not one the evaluation writes (p_mrr, score, map_at_1000, ndcg_at_10, ...)"
                )
        if self.correction != "holm":
            raise ConfigError(f"correction {self.correction!r}: the family is corrected by 'holm'")
        TrainConfig.preset(self.train_preset, **self.train_overrides())  # epochs and max_steps both set
        if not self.eval:
            raise ConfigError("eval: name at least one evaluation set")
        if self.eval_backend is not None:
            check_backend(self.eval_backend)
        if self.prompts not in PROMPT_CHOICES:
            raise ConfigError(f"prompts must be one of {PROMPT_CHOICES}, not {self.prompts!r}")
        if self.eval_steps > 0 and self.heldout_seeds <= 0:
            raise ConfigError("eval_steps > 0 needs heldout_seeds > 0")
        for folder in P.eval_targets(self.eval)[0]:  # a missing folder fails here, before any run
            P.check_layout(folder)
        self._check_metrics_written()

    def _check_primary(self, modes: tuple[str, ...]) -> None:
        """The primary comparison names two planned modes (or base) and a set the plan evaluates:
        a folder by its path, not only its name (``v3/test`` planned, ``v3-fixed/test`` evaluated)."""
        for side in (self.primary_a, self.primary_b):
            if side not in (*modes, C.BASE_MODE):
                raise ConfigError(
                    f"primary comparison: {side!r} is not a planned mode ({', '.join(modes)}, base)"
                )
        if self.primary_a == self.primary_b:
            raise ConfigError(f"primary comparison: {self.primary_a!r} against itself")
        sets = [x for item in self.eval for x in (item, *P.sets_of(item))]
        if self.primary_set and P.dataset_of(self.primary_set) not in sets:  # a folder: by its name
            raise ConfigError(
                f"primary_set {self.primary_set!r} is not one of --eval {list(self.eval)} nor a set they "
                f"evaluate ({', '.join(dict.fromkeys(sets))})"
            )
        if self.primary_set and P.is_folder_item(self.primary_set):
            folders = {os.path.realpath(i) for i in self.eval if P.is_folder_item(i)}
            if os.path.realpath(self.primary_set) not in folders:
                raise ConfigError(
                    f"primary_set {self.primary_set} is not evaluated: --eval holds another folder of "
                    f"its name ({', '.join(i for i in self.eval if P.dataset_of(i) == P.dataset_of(self.primary_set))})"
                )

    def _check_metrics_written(self) -> None:
        """The primary metric is one its set writes, and each tested metric one some set writes,
        where that is known before mteb runs (``plan.metrics_written``): ``ndcg_at_10`` on a
        FollowIR folder was refused only at ``--collect``, after every run had trained."""
        first = P.dataset_of(self.primary_set) if self.primary_set else P.sets_of(self.eval[0])[0]
        written = P.metrics_written(first, self.eval)
        if written is not None and self.primary_metric not in written:
            raise ConfigError(
                f"primary_metric {self.primary_metric!r}: the evaluation of {first} writes {', '.join(written)}"
            )
        per_set = [P.metrics_written(d, self.eval) for i in self.eval for d in P.sets_of(i)]
        if None in per_set:
            return
        for m in self.tested_metrics:
            if not any(m in w for w in per_set):
                raise ConfigError(
                    f"tested_metrics: no set of --eval {list(self.eval)} writes {m!r}; they write "
                    f"{', '.join(dict.fromkeys(x for w in per_set for x in w))}"
                )

    @classmethod
    def preset(cls, name: str | None = None, **overrides) -> ExperimentConfig:
        """``cpu`` (the offline experiment, under an hour on 2 cores), ``smoke`` (seconds, for
        tests) or ``paper`` (the paper-scale training preset, for a GPU); None: ``default_preset()``.
        ``overrides`` change fields (None values are ignored)."""
        name = C.check_preset(name or C.default_preset(), "experiment")
        fields = {**EXPERIMENT_PRESETS[name], "experiment_preset": name}
        return cls.from_plan({**fields, **{k: v for k, v in overrides.items() if v is not None}})

    @classmethod
    def from_plan(cls, plan: dict, where: str = "the plan") -> ExperimentConfig:
        """A config from a plan's fields (lists become tuples); an unknown field is an error."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(plan) - set(names))
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {unknown}; known: {', '.join(names)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in plan.items()})

    def plan(self) -> dict:
        return dataclasses.asdict(self)

    def train_overrides(self) -> dict:
        """The ``TrainConfig`` fields this config sets (``None`` = the train preset's)."""
        return {f: getattr(self, f) for f in TRAIN_FIELDS}

    def seeds_path(self) -> str:
        """The seed file: ``seeds``, or the bundled seeds' path in this checkout."""
        return str(C.SEEDS_PATH) if self.seeds == BUNDLED else self.seeds

    def base(self) -> str:
        return self.base_model or TrainConfig.preset(self.train_preset).base_model


_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "None": (type(None),)}


def _is(value, name: str) -> bool:
    """``value`` of the annotated type ``name`` (``int``, ``tuple[int, ...]``, ...); a bool is no number."""
    if name.startswith("tuple["):
        item = name[len("tuple[") :].split(",")[0]
        return isinstance(value, tuple) and all(_is(v, item) for v in value)
    return isinstance(value, _TYPES[name]) and not (isinstance(value, bool) and name in ("int", "float"))


def _check_types(cfg) -> None:
    """Each field of the annotated type: a hand-edited plan's ``keep_best = "false"`` (a string,
    true to Python) trained the held-out pick under a record of false, ``rng_seeds = [0, "0"]``
    gave two runs one folder, ``eval = "v1"`` became the tasks 'v' and '1'."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if not any(_is(value, t) for t in str(f.type).split(" | ")):
            raise ConfigError(f"plan field {f.name}: expected {f.type}, got {type(value).__name__} {value!r}")


def _check_budget(budget: int | None, modes: tuple[str, ...]) -> None:
    """The plan's budget by the rule each mode's set is built with (``trainsets.seeds_for_budget``:
    positive, and even for a two-view mode), before any run rather than at its build."""
    for mode in modes if budget is not None else ():
        seeds_for_budget(mode, budget)


TRAIN_FIELDS = (
    "base_model",
    "epochs",
    "max_steps",
    "learning_rate",
    "num_negatives",
    "in_batch_negatives",
    "co_batch_views",
    "temperature",
    "train_top_layers",
    "lr_schedule",
    "eval_steps",
    "keep_best",
    "early_stopping_patience",
)

# Why the cpu preset is what it is: docs/experiments.md, entry of 2026-12-04.
_FAST = dict(max_steps=4, eval_steps=2, bootstrap=100, n_boot=200)
EXPERIMENT_PRESETS: dict[str, dict] = {
    "paper": dict(budget=480_000),  # the paper's Ins-* budget; All-* build 440k seeds x 2 views from it
    "cpu": dict(
        train_preset="cpu",
        modes=("ins-orig", "ins-dv", "ins-aug"),
        extra_modes=("ins-dv-abstract",),  # one run: the abstract reversal style (docs/method.md §2)
        budget=1056,  # every usable seed once for Ins-orig; Ins-DV 528 seeds x 2 views
        heldout_seeds=64,
        max_steps=200,  # 3,200 examples per run (5x the 640 of the 2026-12-03 preset), about 3 epochs
        learning_rate=3e-5,  # the paper preset's
        num_negatives=1,
        train_top_layers=2,  # the cheaper variant, every mode: top 2 of 6 layers, frozen bottom cached
        lr_schedule="wsd",  # warm up, hold, decay over the last 10% of the steps
        eval_steps=100,  # logged only: the final step is the model
        eval=("v1", "v2"),
        primary_set="v2",  # the larger development set (64 queries, four constraint styles)
    ),
    "smoke": dict(
        _FAST, train_preset="smoke", rng_seeds=(0, 1), budget=16, heldout_seeds=8, eval=("v1", "v2")
    ),
}


def planned_runs(cfg: ExperimentConfig) -> list[tuple[int, str]]:
    """``[(rng_seed, mode), ...]``: every mode for every rng_seed, then the extra modes on the first."""
    runs = [(s, m) for s in cfg.rng_seeds for m in cfg.modes]
    return runs + [(cfg.rng_seeds[0], m) for m in cfg.extra_modes]


def run_name(rng_seed: int, mode: str) -> str:
    return f"rng{rng_seed}/{mode}"


def _parse_run(cfg: ExperimentConfig, name: str) -> tuple[int, str]:
    by_name = {run_name(*r): r for r in planned_runs(cfg)}
    if name not in by_name:
        raise ConfigError(f"--run {name!r} is not in the plan; planned runs: {', '.join(by_name)}")
    return by_name[name]


def start(out: str | Path, cfg: ExperimentConfig, *, new: bool = False) -> str:
    """Store the plan in ``out`` (``--new-experiment``: set an older plan's outputs aside first);
    returns the plan hash. A different stored plan is refused (``plan.write_plan``)."""
    if new:
        moved = P.set_aside(out)
        if moved:
            print(f"the previous experiment's plan and outputs moved to {moved}", file=sys.stderr)
    header = "ifir experiment plan: written before the first run; its hash labels every run and result."
    return P.write_plan(out, cfg.plan(), header=header)


def train_run(out: str | Path, cfg: ExperimentConfig, rng_seed: int, mode: str, plan_hash: str):
    """Train (or resume, or find finished) one planned run: ``OUT/models/rng<k>/<mode>/``. Its
    record keeps the digests of the input files (``plan.input_digests``); a run of this experiment
    that recorded other ones is a ``ConfigError`` before any training."""
    inputs = P.input_digests({k: getattr(cfg, k) for k in (*P.PATH_FIELDS, *P.MODEL_FIELDS)})
    _check_runs_agree_on_inputs(out, cfg, now=inputs)
    return train_modes(
        Path(out) / "models" / f"rng{rng_seed}",
        preset=cfg.train_preset,
        modes=(mode,),
        seeds_path=cfg.seeds_path(),
        reversals_path=cfg.reversals,
        curation_path=cfg.curation,
        budget=cfg.budget,
        rng_seed=rng_seed,
        heldout_seeds=cfg.heldout_seeds,
        narrative_share=cfg.narrative_share,
        labels={"plan": plan_hash, "inputs": inputs},
        **cfg.train_overrides(),
    )[mode]


def _recorded_inputs(out: str | Path, cfg: ExperimentConfig) -> dict[str, dict]:
    """``{run name: its recorded input digests}`` of the planned runs that recorded them."""
    found = {}
    for s, m in planned_runs(cfg):
        data = RunFolder(Path(out) / "models" / f"rng{s}" / m).info().get("data") or {}
        if isinstance(data.get("inputs"), dict):
            found[run_name(s, m)] = data["inputs"]
    return found


def run_commands(out: str | Path, cfg: ExperimentConfig, launcher: str = "plain", **launch) -> list[str]:
    """One shell command per planned run; each reads the plan from ``OUT`` and resumes its run.
    ``OUT`` is printed as an absolute path, so a job that starts in another folder finds the plan.

    ``launcher``: ``plain`` (``ifir experiment ...``), ``torchrun`` (``nproc`` processes) or
    ``accelerate`` (``launch_config``, for example ``launch/accelerate_ddp_8gpu.yaml``).
    """
    if launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {launcher!r}; choose from {', '.join(LAUNCHERS)}")
    prefix = {
        "plain": ["ifir"],
        # '--' ends torchrun's options: its parser read '--run' as an abbreviation of '--run-path'
        "torchrun": ["torchrun", f"--nproc-per-node={launch.get('nproc') or 1}", "-m", "--", "ifir_lib"],
        "accelerate": [
            "accelerate",
            "launch",
            "--config_file",
            launch.get("launch_config") or "",
            "-m",
            "ifir_lib",
        ],
    }[launcher]
    if launcher == "accelerate" and not launch.get("launch_config"):
        raise ConfigError(
            "--launcher accelerate needs --launch-config (for example launch/accelerate_ddp_8gpu.yaml)"
        )
    return [
        shlex.join([*prefix, "experiment", "--out", os.path.abspath(out), "--run", run_name(s, m)])
        for s, m in planned_runs(cfg)
    ]


def finished_runs(out: str | Path, cfg: ExperimentConfig, plan_hash: str) -> tuple[dict, list[str]]:
    """``({(rng_seed, mode): run folder}, [missing run names])``; a finished run of another plan is an error."""
    done, missing = {}, []
    for s, m in planned_runs(cfg):
        run = RunFolder(Path(out) / "models" / f"rng{s}" / m)
        info = run.info()
        if info.get("status") != "finished":
            missing.append(run_name(s, m))
            continue
        theirs = (info.get("data") or {}).get("plan")
        if theirs != plan_hash:
            raise ConfigError(f"{run.path}: trained under plan {theirs}, not this experiment's {plan_hash}")
        done[(s, m)] = run.path
    return done, missing


def _warn_commits(runs: dict) -> None:
    """One warning when the finished runs were trained under several commits of this code (resumes
    included): the input files agree, but how a training set is built from them may not."""
    by_commit: dict[str, list[str]] = {}
    for (s, m), path in sorted(runs.items()):
        info = RunFolder(path).info()
        for c in {info.get("git_commit"), *(r.get("git_commit") for r in info.get("resumes", []))}:
            by_commit.setdefault(str(c), []).append(run_name(s, m))
    if len(by_commit) > 1:
        said = "; ".join(f"{c}: {', '.join(names)}" for c, names in by_commit.items())
        print(
            f"warning: the runs were trained under {len(by_commit)} commits ({said}); if the code between "
            "them changed how training sets are built, they are not replicates of one condition",
            file=sys.stderr,
        )
    if blind := sorted(c for c in by_commit if c in ("None", "unknown", "") or c.endswith("+dirty")):
        print(
            f"warning: runs trained under commit {', '.join(blind)} (no git checkout, or uncommitted "
            "changes): code changed between --run jobs cannot be seen; commit before training",
            file=sys.stderr,
        )


def _check_runs_are_replicates(runs: dict) -> None:
    """A ``ConfigError`` when runs of one mode were trained under other settings than each other
    (their recorded ``config`` less ``rng_seed``, and ``world_size``: the global batch is
    ``batch_size`` x processes): the tables would pool them as replicates of one condition (a
    learning rate edited between two ``--run`` jobs; a scheduler array whose nodes have other GPU
    counts). Fields one record lacks (written by an older version) are not compared."""
    by_mode: dict[str, list[tuple[str, dict]]] = {}
    for (s, m), path in sorted(runs.items()):
        info = RunFolder(path).info()
        settings = {k: v for k, v in (info.get("config") or {}).items() if k != "rng_seed"}
        if "world_size" in info:  # recorded since 2026-12-06; an older record is not compared
            settings["world_size"] = info["world_size"]
        by_mode.setdefault(m, []).append((run_name(s, m), settings))
    for mode, ((first, a), *others) in by_mode.items():
        for name, b in others:
            if diff := sorted(k for k in a.keys() & b.keys() if a[k] != b[k]):
                said = ", ".join(f"{k} {a[k]!r} vs {b[k]!r}" for k in diff[:4])
                raise ConfigError(
                    f"runs {first} and {name} of {mode} were trained under other settings ({said}); they are "
                    "not replicates of one condition. Train the odd one again under the plan's settings "
                    "(delete its folder and rerun its --run), or start anew with --new-experiment"
                )


NOW = "the files now"


def _check_runs_agree_on_inputs(out: str | Path, cfg: ExperimentConfig, now: dict | None = None) -> None:
    """A ``ConfigError`` when the planned runs recorded other input digests (``plan.input_digests``)
    than each other or, with ``now``, than the input files hold now (a reversals file redone
    between two ``--run`` jobs): they would be pooled as replicates of one condition. Runs
    recorded before digests were kept are not compared. The message names the input that differs
    and the runs of each digest."""
    recorded = _recorded_inputs(out, cfg)
    if recorded and now is not None:
        recorded[NOW] = now
    for k in sorted({k for d in recorded.values() for k in d}):
        by_digest: dict[str | None, list[str]] = {}
        for name, digests in recorded.items():
            if k not in digests and (name == NOW or k in P.MODEL_FIELDS):
                continue  # not checked now, or recorded before base model folders were digested
            by_digest.setdefault(digests.get(k), []).append(name)
        if len(by_digest) > 1:
            said = "; ".join(f"{', '.join(names)}: {d or 'not recorded'}" for d, names in by_digest.items())
            raise ConfigError(
                f"{out}: the runs were trained on {k} {getattr(cfg, k)} holding other content (sha256 "
                f"{said}); their results cannot be pooled. Restore the file, or delete the runs trained "
                "on the version you do not want and run them again, or start anew with --new-experiment"
            )


def collect(out: str | Path, cfg: ExperimentConfig, plan_hash: str | None = None) -> Path:
    """Evaluate the base model and every finished run (once), then write the tables, tests and
    figures; missing runs are named in ``summary.md`` and on stderr. Returns ``OUT/summary.md``.
    One collect at a time (``plan.COLLECT_LOCK``): ``--new-experiment`` waits for none and
    refuses while one runs (an old plan's collect wrote its base rows into the new plan's table)."""
    out = Path(out)
    with exclusive(out / P.COLLECT_LOCK, "experiment's --collect"):
        return _collect(out, cfg, plan_hash)


def _collect(out: Path, cfg: ExperimentConfig, plan_hash: str | None) -> Path:
    plan_hash = plan_hash or start(out, cfg)
    runs, missing = finished_runs(out, cfg, plan_hash)
    # the base row is scored from the base model folder as it is now: it must be the runs' start
    # the base's held-out scores read the seed file now: it must hold the runs' held-out seeds
    now = (*P.MODEL_FIELDS, *(("seeds",) if cfg.heldout_seeds > 0 else ()))
    _check_runs_agree_on_inputs(out, cfg, now=P.input_digests({k: getattr(cfg, k) for k in now}))
    if missing:
        print(f"not finished yet (left out): {', '.join(missing)}", file=sys.stderr)
    _check_runs_are_replicates(runs)
    _warn_commits(runs)
    results_csv = out / "results.csv"
    followir, tasks = P.eval_targets(cfg.eval)
    evaluate = dict(
        followir=followir,
        tasks=tasks,
        results_csv=results_csv,
        bootstrap=cfg.bootstrap,
        skip_done=True,
        plan=plan_hash,
        prompts=cfg.prompts,
        backend=cfg.eval_backend or "torch",
    )
    base = cfg.base()
    print(f"evaluating the base model ({base}) and {len(runs)} finished run(s) on {', '.join(cfg.eval)}")
    _warn_raw_base(base, cfg)
    evaluate_models({base: base}, mode=C.BASE_MODE, rng_seed=0, **evaluate)
    for (rng_seed, mode), path in runs.items():
        evaluate_models({str(path): path}, mode=mode, rng_seed=rng_seed, **evaluate)
    summary = write_report(out, cfg, plan_hash, runs, missing, _heldout_base(cfg))
    make_all_figures(
        results_csv,
        out / "figures",
        per_query_csv=per_query_path(results_csv),
        runs_dir=out / "models",
        rows=lambda r: experiment_rows(r, plan_hash, runs, quiet=True),  # what the tables read
        log_runs=list(runs.values()),  # a run still training (or killed) is no curve of its mode
    )
    return summary


def _warn_raw_base(base: str, cfg: ExperimentConfig) -> None:
    """Warn when the base is a raw transformers folder (no ``modules.json``) and the train preset
    pools otherwise than by mean: its base row is scored with sentence-transformers' mean pooling
    (``load_model``), while every run started from ``build_model``'s, with the preset's pooling."""
    pooling = TrainConfig.preset(cfg.train_preset).pooling
    if pooling != "mean" and is_raw_backbone(Path(resolve_model(base))):
        log.warning(
            "base model %s is a raw transformers folder (no modules.json): its base row is scored with "
            "mean pooling, but the runs started from it with %s pooling (train preset %s), so the base "
            "row is not the model training started from",
            base,
            pooling,
            cfg.train_preset,
        )


def _heldout_base(cfg: ExperimentConfig) -> dict | None:
    """The base model's held-out scores (orig, reversed, bare query), the runs' starting point,
    read at the length the runs score theirs at (``saved_length``) and built with their pooling."""
    if cfg.heldout_seeds <= 0:
        return None
    _, heldout = split_heldout(load_seeds(cfg.seeds_path(), stage="train"), cfg.heldout_seeds)  # as trained
    tcfg = TrainConfig.preset(cfg.train_preset)
    # the preset's pooling, as the runs are built: a raw backbone was scored with build_model's CLS
    model = build_model(cfg.base(), max_seq_length=tcfg.max_seq_length, pooling=tcfg.pooling)
    model.max_seq_length = saved_length(model, tcfg)
    return heldout_scores(model, heldout)


def run_experiment(out_dir: str | Path = "out/experiment", cfg: ExperimentConfig | None = None, **kw) -> Path:
    """Store the plan, train every planned run here, then ``collect``; returns ``OUT/summary.md``.
    ``kw``: ``new`` (set an older experiment in ``out_dir`` aside first)."""
    cfg = cfg or ExperimentConfig.preset(C.resolve_preset(None, "experiment"))
    t0 = time.time()
    plan_hash = start(out_dir, cfg, new=kw.get("new", False))
    runs = planned_runs(cfg)
    print(f"experiment {plan_hash}: {len(runs)} runs, plan in {Path(out_dir) / P.PLAN_FILE}")
    for k, (rng_seed, mode) in enumerate(runs, 1):
        print(f"[{k}/{len(runs)}] train {run_name(rng_seed, mode)} (budget {cfg.budget})")
        train_run(out_dir, cfg, rng_seed, mode, plan_hash)
    summary = collect(out_dir, cfg, plan_hash)
    print(summary.read_text())
    print(f"done in {(time.time() - t0) / 60:.1f} min: {summary}")
    return summary
