"""What an experiment reports: ``OUT/summary.md``, ``OUT/modes.csv`` and ``OUT/comparisons.csv``.

In the order a reader needs it:

1. the plan's primary comparison (say Ins-DV minus Ins-orig, p-MRR, on one set), at each run's
   fixed final step (a plan with ``keep_best`` compares the held-out picks, and says so): the
   difference, its two-stage 95% interval (runs resampled within each
   mode, queries within the set; ``reporting.comparisons``) and the run-level test's p-value
   with the smallest p-value the design can reach;
2. every mode's mean over runs with the run-level sd and the two-stage interval (``modes.csv``);
3. the family of tests (the baseline against every other mode, base model entered once), with
   the plan's correction (``comparisons.csv``);
4. secondary: the held-out slice per run, its three parts apart (original view, reversed view,
   bare query) at the last logged evaluation, and the step a held-out pick would have chosen;
5. runs not finished yet, and the plan's hash.

Not handled here: the statistics (``reporting.comparisons``), running anything (``experiment``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from ..core.config import BASE_MODE
from ..core.run_folder import RunFolder
from ..reporting.comparisons import compare_modes, comparison_table, load_tables, mode_table
from ..reporting.tables import fixed, markdown_table
from .plan import sets_of

SHOWN_METRICS = ("p_mrr", "map_at_1000", "ndcg_at_5")
HELDOUT_PARTS = ("orig_acc", "rev_acc", "query_acc")


def _cell(mean, sd, runs, lo, hi) -> str:
    sd_text = "" if pd.isna(sd) else f" ± {sd:.2f}"
    ci = "" if pd.isna(lo) else f" [{fixed(lo)}, {fixed(hi)}]"
    return f"{fixed(mean)}{sd_text} ({int(runs)}){ci}"


def _mode_lines(modes: pd.DataFrame) -> list[str]:
    cells = modes.assign(
        cell=[_cell(*r) for r in modes[["mean", "sd", "runs", "ci_low", "ci_high"]].itertuples(index=False)]
    )
    wide = cells.pivot_table(
        index=["dataset", "mode"], columns="metric", values="cell", aggfunc="first", sort=False
    )
    return [
        "## Every mode",
        "",
        "Mean over runs ± run-level sd (runs) [two-stage 95% bootstrap interval: runs within the "
        "mode, queries within the set]. The base model is one run.",
        "",
        markdown_table(wide.reset_index()),
    ]


def experiment_rows(results: pd.DataFrame, plan_hash: str, runs: dict, quiet: bool = False) -> pd.DataFrame:
    """The rows an experiment's tables and figures read: its plan's (``plan``), of the base model
    and of the runs finished now (``runs``: their folders, the labels ``collect`` evaluates them
    under). A run deleted, failed or training again since an earlier collect was named as left
    out while its old rows stayed in every mean, interval, test and figure; one warning (unless
    ``quiet``) names such rows."""
    results = results[results["plan"] == plan_hash] if "plan" in results else results
    labels = {str(p) for p in runs.values()}
    keep = (results["mode"] == BASE_MODE) | results["model"].astype(str).isin(labels)
    if (gone := sorted(set(results.loc[~keep, "model"].astype(str)))) and not quiet:
        print(
            f"warning: {len(gone)} model(s) in results.csv are no finished run of this experiment now "
            f"(deleted, failed, training again or moved) and are left out of the tables: {', '.join(gone[:3])}"
            + (", ..." if len(gone) > 3 else ""),
            file=sys.stderr,
        )
    return results[keep]


def primary_set_of(cfg) -> str:
    """The results' ``dataset`` of the plan's primary comparison: ``primary_set`` (an ``--eval``
    item, or a set one evaluates), else the first item's first set (``paper``: ``followir``,
    the paper's headline aggregate; a folder: its name)."""
    return sets_of(cfg.primary_set or cfg.eval[0])[0]


def _picked(runs: dict) -> list[str]:
    """The runs whose saved model is not their final step (``keep_best``: the held-out pick)."""
    out = []
    for (rng_seed, mode), path in sorted(runs.items()):
        info = RunFolder(path).info()
        if info.get("saved_step", info.get("steps")) != info.get("steps"):
            out.append(f"rng{rng_seed}/{mode}")
    return out


def _which_step(runs: dict) -> str:
    """How the compared models were chosen, from the runs' records (a plan may set keep_best)."""
    picked = _picked(runs)
    if not picked:
        return "each run's fixed final step"
    return (
        f"each run's saved model, which for {len(picked)} of {len(runs)} runs ({', '.join(picked[:3])}"
        f"{', ...' if len(picked) > 3 else ''}) is the held-out pick (keep_best), not the fixed final step"
    )


def _primary_lines(row: dict, cfg, runs: dict) -> list[str]:
    p = "n/a" if pd.isna(row["p_run"]) else f"{row['p_run']:.3f}"
    return [
        "## Primary comparison (planned before the runs)",
        "",
        f"{cfg.primary_a} minus {cfg.primary_b}, {cfg.primary_metric}, on {row['dataset']}, "
        f"{_which_step(runs)}:",
        "",
        f"- difference {fixed(row['diff'], sign='+')}, 95% two-stage interval [{fixed(row['ci_low'])}, {fixed(row['ci_high'])}]",
        f"- runs: {row['runs_a']} of {cfg.primary_a} (sd {row['sd_a']:.2f}), "
        f"{row['runs_b']} of {cfg.primary_b} (sd {row['sd_b']:.2f}); {row['n_queries']} queries",
        f"- run-level permutation test: p = {p} (the smallest p this design can reach: {row['min_p']:.3f})",
        *([f"- note: {row['note']}"] if row.get("note") else []),
    ]


def _family_lines(tests: pd.DataFrame) -> list[str]:
    """The family as a compact table (every column is in ``comparisons.csv``), notes below it."""
    if not len(tests):
        return ["(no comparisons yet)"]
    shown = tests.assign(
        runs=[f"{a} vs {b}" for a, b in zip(tests["runs_a"], tests["runs_b"])],
        interval=[f"[{fixed(lo)}, {fixed(hi)}]" for lo, hi in zip(tests["ci_low"], tests["ci_high"])],
    )
    cols = ["dataset", "metric", "b", "runs", "diff", "interval", "p_run", "min_p", "p_holm"]
    notes = sorted({n for n in tests["note"].fillna("") if n})
    return [
        markdown_table(shown[[c for c in cols if c in shown]]),
        *(["", *[f"- {n}" for n in notes]] if notes else []),
    ]


def heldout_table(runs: dict) -> pd.DataFrame:
    """Per run: the last logged held-out evaluation's parts, and the held-out pick (secondary)."""
    rows = []
    for (rng_seed, mode), path in runs.items():
        run = RunFolder(path)
        log = run.read_log("heldout")
        info = run.info()
        if not log:
            continue
        last = log[-1]
        best = max(log, key=lambda r: r.get("score", float("-inf")))
        rows.append(
            dict(
                mode=mode,
                rng_seed=rng_seed,
                steps=info.get("steps"),
                saved_step=info.get("saved_step", info.get("steps")),
                heldout_step=last.get("step"),
                **{k: round(last.get(k, float("nan")), 2) for k in HELDOUT_PARTS},
                pick_step=best.get("step"),
                pick_score=round(best.get("score", float("nan")), 2),
            )
        )
    return pd.DataFrame(rows)


def _heldout_lines(runs: dict, heldout_base: dict | None) -> list[str]:
    table = heldout_table(runs)
    lines = [
        "## Held-out seeds (secondary)",
        "",
        "Pairwise accuracies in % on seeds kept out of training, at the last logged evaluation: "
        "orig_acc (P+ first under q + I), rev_acc (N* first under q + I', the reference reversal: "
        "Ins-DV's own training distribution), query_acc (topical ranking under the bare query). "
        "pick_step is where a held-out pick would have stopped; "
        + (
            "the models above are the final steps."
            if not _picked(runs)
            else "the models above are each run's saved_step (keep_best: the held-out pick)."
        ),
        "",
        markdown_table(table) if len(table) else "(no held-out evaluations logged)",
    ]
    if heldout_base:
        parts = ", ".join(f"{k} {heldout_base[k]:.2f}" for k in HELDOUT_PARTS if k in heldout_base)
        lines += ["", f"Base model on the same seeds: {parts}."]
    return lines


def write_report(out: Path, cfg, plan_hash: str, runs: dict, missing: list[str], heldout_base=None) -> Path:
    """Write ``modes.csv``, ``comparisons.csv`` and ``summary.md`` from ``OUT/results.csv``."""
    results, per_query = load_tables(out / "results.csv")
    results = experiment_rows(results, plan_hash, runs)
    modes = mode_table(results, per_query, metrics=SHOWN_METRICS, n_boot=cfg.n_boot, rng_seed=0)
    modes.to_csv(out / "modes.csv", index=False)
    present = set(results["mode"])
    pairs = [(cfg.baseline, m) for m in ("base", *cfg.modes, *cfg.extra_modes) if m != cfg.baseline]
    pairs = [p for p in pairs if p[1] in present and p[0] in present]
    tests = (
        comparison_table(
            results,
            per_query,
            pairs,
            metrics=cfg.tested_metrics,
            family_adjust=cfg.correction,
            n_boot=cfg.n_boot,
        )
        if pairs
        else pd.DataFrame()
    )
    tests.to_csv(out / "comparisons.csv", index=False)
    primary_set = primary_set_of(cfg)
    lines = [f"# Experiment {plan_hash}", "", f"Plan: `{out / 'experiment.toml'}` (hash {plan_hash}).", ""]
    if {cfg.primary_a, cfg.primary_b} <= present and primary_set in set(results["dataset"]):
        row = compare_modes(
            results,
            per_query,
            cfg.primary_a,
            cfg.primary_b,
            metric=cfg.primary_metric,
            dataset=primary_set,
            n_boot=cfg.n_boot,
            rng_seed=0,
        )
        lines += _primary_lines(dict(row), cfg, runs)
    else:
        why = (
            "a side has no finished run"
            if primary_set in set(results["dataset"])
            else "no rows of this set yet"
        )
        lines += ["## Primary comparison", "", f"not available yet ({primary_set}: {why})"]
    lines += ["", *_mode_lines(modes), "", "## The family of tests", ""]
    lines += [
        f"{cfg.baseline} minus each other mode; two-stage 95% interval; run-level permutation p-value, "
        f"{cfg.correction}-corrected over the family (min_p: the smallest p the design allows).",
        "",
        *_family_lines(tests),
        "",
        *_heldout_lines(runs, heldout_base),
    ]
    if missing:
        lines += ["", f"Runs not finished (left out): {', '.join(missing)}."]
    path = out / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path
