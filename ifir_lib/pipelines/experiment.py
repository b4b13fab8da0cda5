"""The offline experiment: Ins-DV against its controls, over several training seeds (docs/method.md §6).

``run_experiment`` trains the decisive comparison (Ins-orig, Ins-DV and the wording control
``ins-aug``, at one matched budget) once per ``rng_seed``, and All-orig / All-DV on the first
``rng_seed``; every run stops on a held-out slice of the training seeds. It evaluates the base
model and every run on each evaluation set (v1, v2), then writes::

    OUT/results.csv, OUT/results_per_query.csv   the tidy table (one row per run, set, metric)
    OUT/paired_tests.csv                          Ins-DV against each other mode, Holm-corrected
    OUT/summary.md                                mean ± sd over rng_seeds, and the tests
    OUT/models/rng<k>/<mode>/                     the run folders (``RunFolder``), one per rng_seed
    OUT/figures/                                  the result figures

Every step is resumable: finished runs and rows already in the table are reused.
Not handled here: the stages themselves (training, evaluation, ``stats``, figures); it calls the
one training driver (``pipelines.train``) and the one evaluation driver (``pipelines.evaluate``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core import config as C
from ..core.errors import ConfigError
from ..core.models import build_model
from ..evaluation.stats import compare, holm
from ..reporting.figures import make_all_figures
from ..reporting.results import load_per_query, load_results, mode_order, per_query_path
from ..reporting.tables import markdown_table  # summary.md's tables; tests import it from here
from ..seeds.forms import NARRATIVE_SHARE
from ..seeds.schema import load_seeds
from ..training.heldout import heldout_scores, split_heldout
from ..training.trainer import TrainConfig
from .evaluate import evaluate_models
from .train import train_modes

TESTED_METRICS = ("p_mrr", "map_at_1000")
TEST_COLUMNS = ["dataset", "metric", "mode", "versus", "pairs", "diff", "ci_low", "ci_high", "p_value"]


@dataclass(frozen=True)
class ExperimentConfig:
    """What ``ifir experiment`` runs. ``None`` training fields take the train preset's value."""

    train_preset: str = "paper"
    modes: tuple[str, ...] = ("ins-orig", "ins-dv", "ins-aug")  # trained for every rng_seed
    rng_seeds: tuple[int, ...] = (0, 1, 2)
    extra_modes: tuple[str, ...] = ("all-orig", "all-dv")  # trained for the first rng_seed only
    budget: int | None = None  # Ins-* examples per run; None = as many as the data allows
    extra_budget: int | None = None  # the All-* budget (seeds; 2 examples each); None = budget
    heldout_seeds: int = 1000  # kept out of training; they pick the checkpoint
    epochs: float | None = None
    max_steps: int | None = None
    learning_rate: float | None = None
    num_negatives: int | None = None
    in_batch_negatives: bool | None = None
    co_batch_views: bool | None = None  # False: a seed's two views in independent batches
    narrative_share: float = NARRATIVE_SHARE  # seeds with narratives drawn into narrative form
    temperature: float | None = None
    eval_steps: int = 250
    early_stopping_patience: int = 3
    eval_sets: tuple[str, ...] = ("v1", "v2")
    baseline: str = "ins-dv"  # the mode every other mode is tested against
    bootstrap: int = 1000
    n_perm: int = 10000

    def __post_init__(self):
        unknown = [m for m in (*self.modes, *self.extra_modes) if m not in C.MODES]
        if unknown:
            raise ConfigError(f"unknown mode(s) {unknown}; choose from {', '.join(C.MODES)}")
        if self.baseline not in self.modes:
            raise ConfigError(f"baseline {self.baseline!r} must be one of the modes {self.modes}")
        if not self.rng_seeds:
            raise ConfigError("rng_seeds must name at least one random seed")
        bad = [s for s in self.eval_sets if s not in C.EVAL_SETS]
        if bad:
            raise ConfigError(f"unknown evaluation set(s) {bad}; choose from {', '.join(C.EVAL_SETS)}")
        if self.eval_steps > 0 and self.heldout_seeds <= 0:
            raise ConfigError("eval_steps > 0 needs heldout_seeds > 0")

    @classmethod
    def preset(cls, name: str | None = None, **overrides) -> ExperimentConfig:
        """``cpu`` (the offline experiment, under an hour on 2 cores), ``smoke`` (seconds, for
        tests) or ``paper`` (the paper-scale training preset, for a GPU); None: ``default_preset()``.
        ``overrides`` change fields (None values are ignored)."""
        name = C.check_preset(name or C.default_preset(), "experiment")
        return dataclasses.replace(
            cls(**EXPERIMENT_PRESETS[name]), **{k: v for k, v in overrides.items() if v is not None}
        )

    def train_overrides(self) -> dict:
        """The ``TrainConfig`` fields this config sets (``None`` = the train preset's)."""
        return {f: getattr(self, f) for f in TRAIN_FIELDS}


TRAIN_FIELDS = (
    "epochs",
    "max_steps",
    "learning_rate",
    "num_negatives",
    "in_batch_negatives",
    "co_batch_views",
    "temperature",
    "eval_steps",
    "early_stopping_patience",
)


# The cpu preset's choices and the evidence for them are in README § "The offline experiment".
_FAST = dict(max_steps=4, eval_steps=2, early_stopping_patience=2, bootstrap=100, n_perm=200)
EXPERIMENT_PRESETS: dict[str, dict] = {
    "paper": {},
    "cpu": dict(
        train_preset="cpu",
        budget=640,
        extra_budget=320,  # All-* then train on 640 examples too, the Ins-* runs' length
        heldout_seeds=64,
        epochs=1.0,
        max_steps=0,
        learning_rate=3e-5,  # the paper preset's; 5e-5 cost 4-5 MAP points on v1 (README)
        co_batch_views=False,  # a seed's two views in independent batches: ahead on v1 and v2 (README)
        eval_steps=10,
        early_stopping_patience=3,
    ),
    "smoke": dict(_FAST, train_preset="smoke", rng_seeds=(0, 1), budget=16, heldout_seeds=8),
}


def paired_tests(results_csv: str | Path, cfg: ExperimentConfig) -> pd.DataFrame:
    """Ins-DV (``cfg.baseline``) against every other mode, per evaluation set and metric.

    Pairs are (rng_seed, query): trained modes are paired seed by seed (All-*, trained on the
    first seed only, on that seed); the base model, one untrained run, is paired with each of the
    baseline's seeds on the same query. ``diff`` is baseline minus the other mode; p-values (paired permutation test) are
    Holm-corrected over every row of the table.
    """
    results = load_results(results_csv)
    pq = load_per_query(per_query_path(results_csv))
    runs = results.drop_duplicates(["run_id", "dataset"])[["run_id", "mode", "rng_seed", "dataset"]]
    values = pq.merge(runs, on=["run_id", "dataset"])
    rows = []
    for (dataset, metric), g in values[values["metric"].isin(TESTED_METRICS)].groupby(["dataset", "metric"]):
        by_mode = {m: gm for m, gm in g.groupby("mode")}
        if cfg.baseline not in by_mode:
            continue
        base = {(int(r.rng_seed), r.query_id): r.value for r in by_mode[cfg.baseline].itertuples()}
        for other, go in by_mode.items():
            if other == cfg.baseline:
                continue
            vals = {(int(r.rng_seed), r.query_id): r.value for r in go.itertuples()}
            if other == C.BASE_MODE:  # the untrained model: one run, paired with every seed
                by_query = {q: v for (_, q), v in vals.items()}
                vals = {(s, q): by_query[q] for s, q in base if q in by_query}
            common = sorted(base.keys() & vals.keys())
            if not common:
                continue
            a = {f"{s}/{q}": base[(s, q)] for s, q in common}
            b = {f"{s}/{q}": vals[(s, q)] for s, q in common}
            t = compare(a, b, n=cfg.n_perm, rng_seed=0)
            rows.append(
                (dataset, metric, cfg.baseline, other, t.n, t.diff, t.ci_low, t.ci_high, t.p_permutation)
            )
    df = pd.DataFrame(rows, columns=TEST_COLUMNS)
    if len(df):
        df["p_holm"] = holm(df["p_value"].tolist())
    return df


def seed_table(results_csv: str | Path, metrics=("p_mrr", "map_at_1000", "ndcg_at_5")) -> pd.DataFrame:
    """Mean ± sd over rng_seeds per (set, mode, metric): columns dataset, mode, metric, mean, sd, runs."""
    r = load_results(results_csv)
    r = r[r["metric"].isin(metrics)]
    t = (
        r.groupby(["dataset", "mode", "metric"])["value"]
        .agg(mean="mean", sd=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan"), runs="size")
        .reset_index()
    )
    order = {m: i for i, m in enumerate(mode_order(t["mode"].unique()))}
    return t.sort_values(["dataset", "metric", "mode"], key=lambda c: c.map(order) if c.name == "mode" else c)


def write_summary(out: Path, cfg: ExperimentConfig, heldout_base: dict | None = None) -> Path:
    """``OUT/summary.md``: the seed table and the paired tests, as Markdown."""
    table = seed_table(out / "results.csv")
    tests = paired_tests(out / "results.csv", cfg)
    tests.to_csv(out / "paired_tests.csv", index=False)
    wide = table.assign(
        cell=[
            f"{m:.2f}" + ("" if np.isnan(s) else f" ± {s:.2f}") + f" ({n})"
            for m, s, n in zip(table["mean"], table["sd"], table["runs"])
        ]
    ).pivot_table(index=["dataset", "mode"], columns="metric", values="cell", aggfunc="first", sort=False)
    lines = [
        "# Experiment summary",
        "",
        f"Config: `{json.dumps(dataclasses.asdict(cfg))}`",
        "",
        "Mean ± sd over rng_seeds (number of runs in brackets):",
        "",
        markdown_table(wide.reset_index()),
        "",
        f"Paired tests, {cfg.baseline} minus the other mode over (rng_seed, query) pairs; "
        "95% bootstrap CI; permutation p-value, Holm-corrected over all rows:",
        "",
        markdown_table(tests) if len(tests) else "(no pairs)",
    ]
    if heldout_base:
        lines += [
            "",
            f"Held-out seeds, base model: {json.dumps({k: round(v, 2) for k, v in heldout_base.items()})}",
        ]
    path = out / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_experiment(out_dir: str | Path = "out/experiment", cfg: ExperimentConfig | None = None) -> Path:
    """Train, evaluate, test and plot (see the module docstring); returns ``OUT/summary.md``."""
    cfg = cfg or ExperimentConfig.preset(C.resolve_preset(None, "experiment"))
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_csv = out / "results.csv"
    (out / "experiment.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2))
    tcfg = TrainConfig.preset(cfg.train_preset)
    base = tcfg.base_model
    sets = [C.EVAL_SETS[name] for name in cfg.eval_sets]
    evaluate = dict(followir=sets, results_csv=results_csv, bootstrap=cfg.bootstrap, skip_done=True)

    print(f"[1/4] the base model ({base}) on {', '.join(cfg.eval_sets)}")
    evaluate_models({base: base}, mode=C.BASE_MODE, rng_seed=0, **evaluate)
    _, heldout = split_heldout(load_seeds(C.SEEDS_PATH), cfg.heldout_seeds)
    heldout_base = (
        heldout_scores(build_model(base, max_seq_length=tcfg.max_seq_length), heldout) if heldout else None
    )

    extra_budget = cfg.extra_budget if cfg.extra_budget is not None else cfg.budget
    plan = [(s, cfg.modes, cfg.budget) for s in cfg.rng_seeds]
    plan += [(cfg.rng_seeds[0], cfg.extra_modes, extra_budget)] if cfg.extra_modes else []
    for k, (rng_seed, modes, budget) in enumerate(plan, 1):
        print(f"[2/4] ({k}/{len(plan)}) rng_seed {rng_seed}: train {', '.join(modes)}, budget {budget}")
        runs = train_modes(
            out / "models" / f"rng{rng_seed}",
            preset=cfg.train_preset,
            modes=modes,
            budget=budget,
            rng_seed=rng_seed,
            heldout_seeds=cfg.heldout_seeds,
            narrative_share=cfg.narrative_share,
            **cfg.train_overrides(),
        )
        for mode, res in runs.items():
            evaluate_models({str(res.run_dir): res.run_dir}, mode=mode, rng_seed=rng_seed, **evaluate)

    print("[3/4] paired tests and summary")
    summary = write_summary(out, cfg, heldout_base)
    print(summary.read_text())
    print(f"[4/4] figures -> {out / 'figures'}")
    make_all_figures(
        results_csv, out / "figures", per_query_csv=per_query_path(results_csv), runs_dir=out / "models"
    )
    print(f"done in {(time.time() - t0) / 60:.1f} min: {summary}")
    return summary
