"""The one driver of training: ``train_modes`` builds each mode's training set and trains it.

``ifir train``, the demo, the experiment, notebook 03 and the benches all call it. For each
mode it builds the matched-budget set (``training.trainsets``) from the seeds and reversals, or
reads an already built set, applies what an ablation changes (``trainer.mode_config``), reuses
a finished sibling run trained on the same examples from the same base model content, and trains (``training.trainer.train``)
into ``OUT/<mode>/`` (``flat=True``: into ``OUT`` itself, one mode). Example::

    train_modes("out/runs", modes=("ins-orig", "ins-dv"), preset="cpu", budget=80)
    -> {"ins-orig": TrainResult(run_dir=out/runs/ins-orig, steps=10, ...), "ins-dv": ...}

``training_sets`` returns the sets it would train, built by the same code, without training
(notebook 03 shows them). A rerun resumes every unfinished run and skips the finished ones. Not
handled here: the trainer itself, evaluation (``pipelines.evaluate``), the experiment's plan
(``experiment``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from pathlib import Path

from ..core.config import PAPER_MODES, SEEDS_PATH, data_mode
from ..core.errors import ConfigError
from ..core.jsonl import read_jsonl
from ..core.models import base_record
from ..core.run_folder import RunFolder, data_sources
from ..curation.decisions import load_decisions
from ..seeds.forms import NARRATIVE_SHARE
from ..seeds.schema import load_seeds
from ..training.dry_run import dry_run as estimate
from ..training.heldout import shared_bare_queries, split_heldout
from ..training.trainer import TrainConfig, TrainResult, as_mnrl, mode_config, train
from ..training.trainsets import (
    MODE_VIEWS,
    TrainSet,
    build_trainset,
    check_decisions_name_seeds,
    keep_n_star,
    load_reversals,
    load_trainset,
    match_reversals,
    warn_forms_differ,
)

log = logging.getLogger(__name__)


def train_modes(
    out_dir: str | Path,
    *,
    preset: str | None = None,
    modes=PAPER_MODES,
    seeds_path=SEEDS_PATH,
    reversals_path: str | Path | None = None,
    curation_path: str | Path | None = None,
    budget: int | None = None,
    rng_seed: int = 0,
    heldout_seeds: int = 0,
    narrative_share: float = NARRATIVE_SHARE,
    report_to: str | None = "auto",
    loss: str = "relation",
    flat: bool = False,
    dry_run: bool = False,
    world_size: int | None = None,
    launch_config: str | None = None,
    labels: dict | None = None,
    keep_checkpoints: bool = False,
    **overrides,
) -> dict[str, TrainResult | dict]:
    """Train one model per mode into ``out_dir/<mode>``; returns ``{mode: TrainResult}``.

    ``seeds_path`` is a seed JSONL (each mode's set is built from it) or a training set already
    built (rows with ``negatives``; one mode). Reversals come from a synthesis file when given,
    else from the seeds' reference reversals. ``heldout_seeds`` seeds (the same for every mode and
    rng_seed) are kept out of training and, with ``eval_steps``, pick the checkpoint. ``budget``
    None: each mode takes every seed it can use, so several modes are not matched (a warning).
    ``overrides`` change ``TrainConfig`` fields of the preset (None values are ignored; preset
    None = ``default_preset()``); ``report_to`` names the trackers (``tracking``). ``dry_run``
    returns ``{mode: estimate}`` (steps, tokens, memory; ``training.dry_run``) and trains nothing.
    ``labels`` (for example the experiment's plan hash) are recorded in every run's data manifest.
    A finished run's checkpoints are removed unless ``keep_checkpoints`` (``trainer.train``).
    """
    modes = tuple(modes)
    if flat and len(modes) != 1:
        raise ConfigError("flat=True trains one mode into the output folder itself; name one mode")
    if launch_config and not dry_run:
        raise ConfigError("--launch-config is read by --dry-run only; launch with accelerate or torchrun")
    cfg = TrainConfig.preset(preset, rng_seed=rng_seed, **overrides)
    sets = _training_sets(
        modes, cfg, seeds_path, reversals_path, curation_path, budget, heldout_seeds, narrative_share
    )
    out = {}
    for mode, (ts, manifest, heldout) in sets.items():
        examples, manifest = ts.examples, {**manifest, **(labels or {})}
        mcfg = mode_config(cfg, mode)
        mcfg = as_mnrl(mcfg) if loss == "mnrl" else mcfg  # what trains: dry run and siblings see it too
        if dry_run:
            out[mode] = estimate(mcfg, examples, world_size=world_size, launch_config=launch_config)
            continue
        run = RunFolder(out_dir if flat else Path(out_dir) / mode)
        base = base_record(mcfg.base_model)
        same = run.copy_finished_sibling(mode, dataclasses.asdict(mcfg), manifest, loss=loss, base=base)
        if same:
            log.warning("%s: same examples and config as %s; copied that finished run", mode, same)
        log.info("training %s on %d examples", mode, len(examples))
        out[mode] = train(
            examples,
            run.path,
            mcfg,
            mode=mode,
            manifest=manifest,
            heldout=heldout,
            loss=loss,
            report_to=report_to,
            keep_checkpoints=keep_checkpoints,
        )
    return out


def training_sets(modes=PAPER_MODES, **kwargs) -> dict[str, TrainSet]:
    """``{mode: TrainSet}``: the sets ``train_modes(out_dir, modes=modes, **kwargs)`` trains, built by
    the same code from its own arguments and defaults (``kwargs`` are ``train_modes``'; the ones
    that do not choose data are ignored), so what is shown of them before training (notebook 03's
    counts, example pair and dry run) is what trains: the same reversals, curation decisions, budget
    and held-out split. Building them again by hand (``build_trainset`` on the seeds alone) showed
    the bundled reference reversals and no curation while the LLM's curated reversals trained.
    Example::

        training_sets(("ins-orig", "ins-dv"), preset="cpu", budget=80)["ins-dv"].counts["seeds_used"]
        -> 40
    """
    bound = inspect.signature(train_modes).bind(None, modes=modes, **kwargs)  # a mistyped name: TypeError
    bound.apply_defaults()
    a = bound.arguments
    cfg = TrainConfig.preset(a["preset"], rng_seed=a["rng_seed"], **a["overrides"])
    fields = ("seeds_path", "reversals_path", "curation_path", "budget", "heldout_seeds", "narrative_share")
    sets = _training_sets(tuple(modes), cfg, *(a[f] for f in fields))
    return {mode: ts for mode, (ts, _, _) in sets.items()}


def _warn_unmatched(modes, budget) -> None:
    """Several modes at ``budget=None`` each take every seed they can use, so they differ in how much
    data they see, not only in its kind (Ins-DV adds the reversed views to Ins-orig's seeds, All-DV
    is Ins-DV's set; docs/method.md §3). Said here, once, because the manifests alone only show it
    to someone comparing their counts."""
    if budget is None and len(modes) > 1:
        log.warning(
            "modes %s are not budget-matched: with no budget each takes every seed it can use (Ins-DV "
            "then adds reversed views to Ins-orig's seeds, All-DV holds Ins-DV's set); give a budget "
            "to compare them (docs/method.md §3)",
            ", ".join(modes),
        )


def _training_sets(
    modes, cfg, seeds_path, reversals_path, curation_path, budget, heldout_seeds, narrative_share
):
    """``{mode: (TrainSet, manifest, heldout seeds)}``: built from seeds, or a built set read as is.

    A ``curation_path`` that does not exist is a ``ConfigError`` (a typo would otherwise train the
    rejected reversals); callers without decisions pass None (``pipelines.chain`` does when
    notebook 02 wrote none). Reversals are checked against all the seeds once, before the held-out
    split (``match_reversals``: one warning for stale ones or ones naming no seed).
    """
    if curation_path and not Path(curation_path).exists():
        raise ConfigError(
            f"curation file {curation_path} does not exist (--curation); fix the path, or leave it out to "
            "train every accepted reversal"
        )
    if _is_built_set(seeds_path):
        given = {"--reversals": reversals_path, "--curation": curation_path, "--budget": budget}
        given["--narrative-share"] = narrative_share if narrative_share != NARRATIVE_SHARE else None
        given["held-out seeds"] = heldout_seeds or None
        return _built_set(modes, seeds_path, given, cfg.num_negatives)
    _warn_unmatched(modes, budget)  # a built set (above) trains one mode and has no budget
    all_seeds = load_seeds(seeds_path, stage="train")
    reversals = None
    if reversals_path:
        reversals = match_reversals(all_seeds, load_reversals(reversals_path), str(seeds_path))
    seeds, heldout = split_heldout(all_seeds, heldout_seeds)
    _warn_shared_bare_query(modes, seeds, heldout)
    curation = load_decisions(curation_path) if curation_path else None
    check_decisions_name_seeds(curation, [s["id"] for s in all_seeds])  # held-out seeds count too
    sets = {}
    for mode in modes:
        ts = build_trainset(
            mode,
            seeds,
            reversals,
            budget=budget,
            num_negatives=cfg.num_negatives,
            curation=curation,
            rng_seed=cfg.rng_seed,
            narrative_share=narrative_share,
            seeds_name=str(seeds_path),
        )
        sources = data_sources(mode, seeds_path, reversals_path, curation_path if curation else None)
        sets[mode] = (ts, {**ts.manifest(), **sources}, heldout)
    warn_forms_differ({mode: ts.counts for mode, (ts, _, _) in sets.items()})
    return sets


def _warn_shared_bare_query(modes, seeds: list[dict], heldout: list[dict]) -> int:
    """Warn, naming the seeds, where a mode with a bare-query view (``MODE_VIEWS``: All-orig) is
    built on a held-out split in which a training seed asks a held-out seed's bare query: that
    view trains the question the held-out ``query_acc`` scores. Other modes train no bare query,
    so it is only logged at info for them. Returns the count of such training seeds."""
    pairs = shared_bare_queries(seeds, heldout)
    if not pairs:
        return 0
    bare = [m for m in modes if "query" in MODE_VIEWS.get(data_mode(m), ())]
    (t, h), n_held = pairs[0], len({h["id"] for _, h in pairs})
    if not bare:
        log.info(
            "held-out split: %d training seed(s) ask a held-out seed's bare query (e.g. %s, %s); "
            "no mode here trains a bare-query view",
            len(pairs),
            t["id"],
            h["id"],
        )
        return len(pairs)
    log.warning(
        "held-out split: training seed %s asks the bare query of held-out seed %s (%r); %s trains that "
        "query as its bare-query view, so %s's held-out query_acc is not fully held out (%d training "
        "seed(s), %d of %d held-out seeds; the split groups questions with their instructions only, "
        "docs/method.md §6)",
        t["id"],
        h["id"],
        h["query"],
        ", ".join(bare),
        h["id"],
        len(pairs),
        n_held,
        len(heldout),
    )
    return len(pairs)


def _is_built_set(path) -> bool:
    """A built training set's rows have ``negatives`` and no ``instruction_negatives``; a seed row
    has ``instruction_negatives`` (a seed that also carries ``negatives``, another toolkit's name for
    hard negatives, is a seed, and the seed check names the field)."""
    first = next(read_jsonl(path), (0, {}))[1]
    return "negatives" in first and "instruction_negatives" not in first


def _built_set(modes, path, given: dict, num_negatives: int) -> dict:
    """``{mode: (TrainSet, manifest, None)}`` for a built set read as it is. What only building from
    seeds uses (reversals, curation, a budget, held-out seeds) is a ``ConfigError``: the set would be
    trained without it. Rows that record their ``view`` must hold the mode's views (a built
    ins-orig set trained as ins-dv would carry a false label). Where training keeps fewer negatives
    than the set stores and the cut would drop N* from an original view, N* is moved first, as a
    set built from seeds at ``num_negatives`` has it (``trainsets.keep_n_star``)."""
    if len(modes) != 1:
        raise ConfigError(f"{path} is a built training set: it trains one mode, not {len(modes)}")
    ignored = [flag for flag, value in given.items() if value is not None]
    if ignored:
        raise ConfigError(
            f"{path} is a built training set (rows with 'negatives'), read as it is: {', '.join(ignored)} "
            "apply only when a set is built from seeds; leave them out, or pass the seeds file"
        )
    examples = load_trainset(path)  # hashed as a set built from seeds is (sha256)
    mode = modes[0]
    views = {ex["view"] for ex in examples if "view" in ex}
    wanted = MODE_VIEWS.get(data_mode(mode))
    if views and wanted and views != wanted:
        raise ConfigError(
            f"{path}: a built set with views {sorted(views)} cannot train {mode}, whose set holds "
            f"{sorted(wanted)}; train it under its own mode, or build the set for {mode} from seeds"
        )
    if views and wanted:
        _check_groups(path, mode, examples, wanted)
        examples = keep_n_star(path, examples, num_negatives)
    ts = TrainSet(mode, examples)
    return {mode: (ts, {**ts.manifest(), "source": str(path)}, None)}


def _check_groups(path, mode: str, examples: list[dict], wanted: set[str]) -> None:
    """A ``ConfigError`` unless every group (seed) holds exactly the mode's views, once each: the
    union of views alone passes an ins-dv set concatenated with an ins-orig one (half its seeds
    never see a reversal) or one whose failed dv rows were deleted, recorded as ins-dv all the same."""
    by_group: dict[str, list[str]] = {}
    for ex in examples:
        if "view" in ex:
            by_group.setdefault(ex["group"], []).append(ex["view"])
    bad = {g: v for g, v in by_group.items() if sorted(v) != sorted(wanted)}
    if bad:
        g, v = next(iter(bad.items()))
        raise ConfigError(
            f"{path}: {len(bad)} of {len(by_group)} seeds (groups) do not hold {mode}'s views "
            f"{sorted(wanted)} once each, e.g. {g!r} with {sorted(v)}; rebuild the set for {mode} from seeds"
        )
