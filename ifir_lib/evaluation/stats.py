"""Uncertainty for retrieval metrics: bootstrap intervals over queries, paired tests, tables.

The paper reports single numbers without variance (docs/method.md §7); with 20-52 queries per
FollowIR set a difference of a few p-MRR points can be noise. Everything here works on
per-query scores (``{qid: value}``), resampling *queries* (topics), the unit that varies in
IR test collections (Sakai 2006, "Evaluating evaluation metrics based on the bootstrap";
Smucker, Allan & Carterette 2007, "A comparison of statistical significance tests for IR
evaluation", who recommend the paired randomization test). All randomness is seeded.

``strata`` (optional, one label per query) makes every statistic the mean of per-stratum
means and resamples within strata: that is how the FollowIR aggregate (mean over Robust04,
News21, Core17) is formed, so its interval respects the three collections' sizes.

A trained mode has a second source of variation: its runs (one model per training
``rng_seed``) differ, and every run is scored on the same queries (a crossed runs x queries
design). ``two_stage_bootstrap`` resamples both: runs within each mode and, independently,
queries (the same query draw for both modes, so the comparison stays paired by query). This is
the two-stage bootstrap for hierarchical data (Davison & Hinkley 1997, *Bootstrap Methods and
their Application*, §3.8) in its crossed form, the "pigeonhole" bootstrap (Owen 2007, *Annals of
Applied Statistics* 1(2)), which is mildly conservative; training-seed variance is what
Bouthillier et al. 2021 ("Accounting for variance in machine learning benchmarks", MLSys) show
single-run comparisons miss. A mode with one run (the untrained base model) enters once, never
copied to pair with the other mode's runs (that copying made the (rng_seed, query) pairs look
like independent draws). ``run_level_test`` is the matching test: an exact permutation test on
run means, whose smallest reachable p-value the design fixes (3 paired runs: 0.25).

Not handled here: computing per-query scores (``metrics``, ``evaluate``), file I/O, and reading
runs out of the results table (``reporting.comparisons``).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)


def _strata_index(strata: Sequence[str] | None, n: int) -> list[np.ndarray]:
    if strata is None:
        return [np.arange(n)]
    labels = np.asarray(strata)
    if len(labels) != n:
        raise ValueError(f"strata has {len(labels)} labels for {n} values")
    return [np.flatnonzero(labels == s) for s in dict.fromkeys(labels.tolist())]


def stratified_mean(values: Sequence[float], strata: Sequence[str] | None = None) -> float:
    """Mean of per-stratum means (plain mean without strata). ``([1, 3, 10], ['a', 'a', 'b']) -> (2 + 10) / 2``."""
    v = np.asarray(values, dtype=float)
    return float(np.mean([v[ix].mean() for ix in _strata_index(strata, len(v))]))


def _boot_means(v: np.ndarray, groups: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) bootstrap replicates of the stratified mean; resampling within each stratum."""
    total = np.zeros(n_boot)
    for ix in groups:
        draw = rng.integers(0, len(ix), size=(n_boot, len(ix)))  # (n_boot, n_stratum)
        total += v[ix][draw].mean(axis=1)
    return total / len(groups)


def bootstrap_ci(
    values: Sequence[float],
    *,
    n_boot: int = 1000,
    rng_seed: int = 0,
    alpha: float = 0.05,
    strata: Sequence[str] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap ``(low, high)`` interval of the (stratified) mean over queries.

    Efron & Tibshirani 1993, ch. 13. One query gives a zero-width interval; no queries give
    ``(nan, nan)``. ``bootstrap_ci([2.0] * 5) -> (2.0, 2.0)``.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0 or n_boot <= 0:
        return float("nan"), float("nan")
    reps = _boot_means(v, _strata_index(strata, len(v)), n_boot, np.random.default_rng(rng_seed))
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _paired(a: Mapping[str, float], b: Mapping[str, float], strata: Mapping[str, str] | None):
    common = sorted(set(a) & set(b))
    only = set(a) ^ set(b)
    if only:
        log.warning(
            "paired comparison: %d queries are scored in only one run and are left out (%d compared)",
            len(only),
            len(common),
        )
    if not common:
        raise ValueError("paired comparison: the two runs share no queries")
    d = np.array([a[q] - b[q] for q in common], dtype=float)
    s = [strata[q] for q in common] if strata is not None else None
    return common, d, s


@dataclass(frozen=True)
class PairedTest:
    """``a - b`` over shared queries: mean difference, its bootstrap interval, two p-values."""

    n: int
    diff: float
    ci_low: float
    ci_high: float
    p_bootstrap: float
    p_permutation: float

    def significant(self, alpha: float = 0.05, test: str = "permutation") -> bool:
        return self.p_value(test) < alpha

    def p_value(self, test: str = "permutation") -> float:
        """``test``: ``'permutation'`` or ``'bootstrap'``; another word is an error (a typo chose
        the bootstrap p without a word)."""
        _check_choice("test", test, TESTS)
        return self.p_permutation if test == "permutation" else self.p_bootstrap


TESTS = ("permutation", "bootstrap")
ADJUSTMENTS = ("holm", None)


def _check_choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: choose one of {', '.join(map(repr, allowed))}")


def paired_bootstrap(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    n_boot: int = 10000,
    rng_seed: int = 0,
    alpha: float = 0.05,
    strata: Mapping[str, str] | None = None,
) -> tuple[float, float, float, float]:
    """Paired bootstrap on per-query differences: ``(diff, ci_low, ci_high, p_value)``.

    The two-sided p-value is the share of replicates of the centred difference at least as far
    from 0 as the observed one (Sakai 2006, shift method).
    """
    _, d, s = _paired(a, b, strata)
    groups = _strata_index(s, len(d))
    obs = stratified_mean(d, s)
    reps = _boot_means(d, groups, n_boot, np.random.default_rng(rng_seed))
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    p = (np.sum(np.abs(reps - obs) >= abs(obs) - 1e-12) + 1) / (n_boot + 1)
    return float(obs), float(lo), float(hi), float(min(1.0, p))


def permutation_test(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    n_perm: int = 10000,
    rng_seed: int = 0,
    strata: Mapping[str, str] | None = None,
) -> float:
    """Two-sided paired randomization test (Fisher; Smucker et al. 2007): swap each query's pair at random.

    Swapping a pair flips the sign of its difference; p is the share of ``n_perm`` random sign
    patterns whose mean |difference| reaches the observed one (+1 smoothing). Identical runs
    give p = 1.
    """
    _, d, s = _paired(a, b, strata)
    groups = _strata_index(s, len(d))
    obs = abs(stratified_mean(d, s))
    rng = np.random.default_rng(rng_seed)
    total = np.zeros(n_perm)
    for ix in groups:
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, len(ix)))  # (n_perm, n_stratum)
        total += (signs * d[ix]).mean(axis=1)
    stat = np.abs(total / len(groups))
    return float((np.sum(stat >= obs - 1e-12) + 1) / (n_perm + 1))


def compare(a: Mapping[str, float], b: Mapping[str, float], *, n: int = 10000, **kw) -> PairedTest:
    """Compare run ``a`` with run ``b`` on the same queries with both paired tests.

    ``kw``: ``rng_seed`` (0), ``alpha`` (0.05), ``strata`` (None), as for ``paired_bootstrap``.
    """
    rng_seed, strata = kw.get("rng_seed", 0), kw.get("strata")
    common, _, _ = _paired(a, b, strata)
    diff, lo, hi, p_boot = paired_bootstrap(a, b, n_boot=n, **kw)
    p_perm = permutation_test(a, b, n_perm=n, rng_seed=rng_seed, strata=strata)
    return PairedTest(len(common), diff, lo, hi, p_boot, p_perm)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979). ``holm([0.01, 0.04, 0.03]) -> [0.03, 0.06, 0.06]``."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    adj = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adj[i] = running
    return adj.tolist()


def strata_of(query_ids: Sequence[str]) -> dict[str, str] | None:
    """Strata from aggregate query ids ``'<dataset>/<qid>'`` (None when ids carry no ``/``)."""
    if not any("/" in q for q in query_ids):
        return None
    return {q: q.split("/", 1)[0] for q in query_ids}


def results_table(
    summary,
    per_query,
    *,
    baseline: str,
    metrics: Sequence[str] | None = None,
    alpha: float = 0.05,
    test: str = "permutation",
    n: int = 10000,
    rng_seed: int = 0,
    adjust: str | None = "holm",
):
    """Compare every run with ``baseline`` per dataset and metric: a tidy ``DataFrame``.

    ``summary`` has the results-table columns (``run_id, model, mode, rng_seed, dataset, metric,
    value, ci_low, ci_high, n_queries, ...``); ``per_query`` has ``run_id, dataset, metric,
    query_id, value``. Added columns: ``delta`` (run - baseline), ``delta_ci_low/high`` (paired
    bootstrap), ``p_value`` (``test``: ``"permutation"`` or ``"bootstrap"``), ``p_adjusted``
    (Holm over all comparisons in the table when ``adjust='holm'``), ``significant``
    (``p_adjusted < alpha``) and ``display`` (``"7.57 [5.10, 9.90] *"``; ``*`` marks a
    significant difference from the baseline). A baseline row has delta 0 and no p-value.
    """
    import pandas as pd

    _check_choice("test", test, TESTS)  # 'Holm' or 'bonferroni' gave unadjusted p in 'p_adjusted'
    _check_choice("adjust", adjust, ADJUSTMENTS)
    df = summary.copy()
    if metrics is not None:
        df = df[df["metric"].isin(list(metrics))]
    if baseline not in set(df["run_id"]):
        raise ValueError(
            f"baseline run_id {baseline!r} is not in the results ({sorted(set(df['run_id']))[:10]})"
        )
    pq = {
        k: dict(zip(g["query_id"], g["value"])) for k, g in per_query.groupby(["run_id", "dataset", "metric"])
    }
    cols = {c: [] for c in ("delta", "delta_ci_low", "delta_ci_high", "p_value")}
    for row in df.itertuples(index=False):
        key, base_key = (row.run_id, row.dataset, row.metric), (baseline, row.dataset, row.metric)
        if row.run_id == baseline or key not in pq or base_key not in pq:
            vals = (0.0, 0.0, 0.0, float("nan")) if row.run_id == baseline else (float("nan"),) * 4
        else:
            a, b = pq[key], pq[base_key]
            t = compare(a, b, n=n, rng_seed=rng_seed, alpha=alpha, strata=strata_of(list(a)))
            vals = (t.diff, t.ci_low, t.ci_high, t.p_value(test))
        for c, v in zip(cols, vals):
            cols[c].append(v)
    for c, v in cols.items():
        df[c] = v
    tested = df["p_value"].notna()
    df["p_adjusted"] = df["p_value"]
    if adjust == "holm" and tested.any():
        df.loc[tested, "p_adjusted"] = holm(df.loc[tested, "p_value"].tolist())
    df["significant"] = df["p_adjusted"] < alpha

    def show(r):
        ci = "" if pd.isna(r["ci_low"]) else f" [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        return f"{r['value']:.2f}{ci}{' *' if r['significant'] else ''}"

    df["display"] = df.apply(show, axis=1) if len(df) else []
    return df.reset_index(drop=True)


# ---- runs x queries: the two-stage bootstrap and the run-level test ---------------------------

Runs = Mapping[str, Mapping[str, float]]  # {run_id: {query_id: value}}: one mode's runs on one set


@dataclass(frozen=True)
class TwoStageCI:
    """``two_stage_bootstrap``'s answer: the estimate (mean of a, or a - b), its interval, the design.

    ``run_means_a/b`` are each run's (stratified) mean over the shared queries, in the order of
    the input's runs; ``run_sd_a/b`` their sd (NaN for one run); ``runs_b`` is 0 without ``b``.
    ``note`` is empty when every side has 2+ runs, else says which variation the interval lacks.
    """

    estimate: float
    ci_low: float
    ci_high: float
    runs_a: int
    runs_b: int
    n_queries: int
    run_sd_a: float
    run_sd_b: float
    note: str = ""
    mean_a: float = float("nan")
    mean_b: float = float("nan")
    run_means_a: tuple[float, ...] = ()
    run_means_b: tuple[float, ...] = ()


def _shared_queries(sides: Sequence[Runs]) -> list[str]:
    """The queries every run of every side scores (sorted); the others are left out with a warning."""
    if any(not side for side in sides):
        raise ValueError("two-stage bootstrap: a mode has no runs")
    runs = [r for side in sides for r in side.values()]
    common = set.intersection(*(set(r) for r in runs))
    union = set().union(*runs)
    if len(union) > len(common):
        log.warning(
            "two-stage bootstrap: %d queries are not scored by every run and are left out (%d used)",
            len(union) - len(common),
            len(common),
        )
    if not common:
        raise ValueError("two-stage bootstrap: the runs share no queries")
    return sorted(common)


def _draw_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n): how often each of ``n`` items is drawn in each of ``n_boot`` draws of ``n`` with
    replacement (a multinomial, counted with one ``bincount``: far faster than ``rng.multinomial``)."""
    draw = rng.integers(0, n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]  # (n_boot, n) flat ids
    return np.bincount(draw.ravel(), minlength=n_boot * n).reshape(n_boot, n)


def _query_weights(groups: list[np.ndarray], n_q: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n_q) weights: a stratum's resampled counts / (its size x number of strata).

    One row dotted with a query vector is one replicate of the stratified mean.
    """
    w = np.zeros((n_boot, n_q))
    for ix in groups:
        w[:, ix] = _draw_counts(len(ix), n_boot, rng) / (len(ix) * len(groups))  # (n_boot, n_stratum)
    return w


def _mean_weights(groups: list[np.ndarray], n_q: int) -> np.ndarray:
    """(n_q,) weights whose dot product with a query vector is its stratified mean."""
    w = np.zeros(n_q)
    for ix in groups:
        w[ix] = 1 / (len(ix) * len(groups))
    return w


def _run_weights(n_runs: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n_runs): resampled run counts / n_runs. One run always weighs 1: it enters once."""
    return _draw_counts(n_runs, n_boot, rng) / n_runs


def _sd(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")


def _design_note(names: Sequence[str], counts: Sequence[int]) -> str:
    """What the interval leaves out when a side has one run (empty when none has)."""
    single = [n for n, k in zip(names, counts) if k == 1]
    if not single:
        return ""
    if len(single) == len(counts):
        who = " and of ".join(single)
        return f"1 run of {who}: interval over queries only; run-to-run variation unknown"
    other = next(n for n, k in zip(names, counts) if k != 1)
    return (
        f"1 run of {single[0]}: interval over queries and {other}'s runs only; "
        f"{single[0]}'s run-to-run variation unknown"
    )


def two_stage_bootstrap(
    runs_a: Runs,
    runs_b: Runs | None = None,
    *,
    n_boot: int = 2000,
    rng_seed: int = 0,
    alpha: float = 0.05,
    strata: Mapping[str, str] | None = None,
    names: tuple[str, str] = ("a", "b"),
) -> TwoStageCI:
    """Percentile interval of mode a's mean (or of a - b) over runs *and* queries.

    Each replicate draws, with replacement, runs within each mode and (independently) queries
    (within ``strata``: ``{query_id: label}``), one query draw shared by both modes; it computes
    the mean over the drawn runs of the (stratified) mean over the drawn queries, and a - b.
    Queries not scored by every run are left out (warning). A mode with one run enters once.
    ``names`` label the modes in ``note``. Example: a's runs ``{r0: {q1: 1, q2: 3}, r1: {q1: 3,
    q2: 5}}`` -> estimate (2 + 4) / 2 = 3, run_sd_a = sd(2, 4) = 1.41, note ''. ``n_boot=0``:
    NaN interval.
    """
    sides = [runs_a] if runs_b is None else [runs_a, runs_b]
    queries = _shared_queries(sides)
    if strata is not None and any(q not in strata for q in queries):
        raise ValueError(f"strata has no label for query {next(q for q in queries if q not in strata)!r}")
    labels = None if strata is None else [strata[q] for q in queries]
    groups = _strata_index(labels, len(queries))
    mats = [np.array([[r[q] for q in queries] for r in s.values()], dtype=float) for s in sides]  # (runs, Q)
    run_means = [m @ _mean_weights(groups, len(queries)) for m in mats]  # (runs,) per side
    means = [float(rm.mean()) for rm in run_means]
    estimate = means[0] - (means[1] if len(means) > 1 else 0.0)
    lo = hi = float("nan")
    if n_boot > 0:
        rng = np.random.default_rng(rng_seed)
        qw = _query_weights(groups, len(queries), n_boot, rng)  # (n_boot, Q), shared by both modes
        reps = [((_run_weights(len(m), n_boot, rng) @ m) * qw).sum(axis=1) for m in mats]  # (n_boot,)
        diff = reps[0] - (reps[1] if len(reps) > 1 else 0.0)
        lo, hi = (float(x) for x in np.quantile(diff, [alpha / 2, 1 - alpha / 2]))
    counts = [len(m) for m in mats]
    return TwoStageCI(
        estimate=estimate,
        ci_low=lo,
        ci_high=hi,
        runs_a=counts[0],
        runs_b=counts[1] if len(counts) > 1 else 0,
        n_queries=len(queries),
        run_sd_a=_sd(run_means[0]),
        run_sd_b=_sd(run_means[1]) if len(run_means) > 1 else float("nan"),
        note=_design_note(names[: len(counts)], counts),
        mean_a=means[0],
        mean_b=means[1] if len(means) > 1 else float("nan"),
        run_means_a=tuple(float(x) for x in run_means[0]),
        run_means_b=tuple(float(x) for x in run_means[1]) if len(run_means) > 1 else (),
    )


@dataclass(frozen=True)
class RunLevelTest:
    """``run_level_test``'s answer. ``p`` is NaN (and ``reason`` says why) when no test is possible;
    ``min_p`` is the smallest p the design can reach, whatever the data (3 paired runs: 0.25), so a
    table can say that 3 runs cannot reach p < 0.05. ``exact``: every permutation was enumerated.
    ``method``: ``paired sign-flip``, ``one-sample sign-flip``, ``label permutation`` or ``none``."""

    p: float
    min_p: float
    method: str
    diff: float
    runs_a: int
    runs_b: int
    exact: bool = True
    reason: str = ""


def _as_runs(values: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
    items = values.items() if isinstance(values, Mapping) else enumerate(values)
    return {str(k): float(v) for k, v in items}


def _pairs(a: dict, b: dict, paired_by: Mapping[str, Hashable] | None) -> np.ndarray | None:
    """``a - b`` run by run when every run has a pairing label, unique within its mode, and both modes
    have the same labels (ordered by label); else None."""
    if paired_by is None or any(k not in paired_by for k in (*a, *b)):
        return None
    la, lb = ({paired_by[k]: v for k, v in side.items()} for side in (a, b))
    if len(la) != len(a) or len(lb) != len(b) or set(la) != set(lb):
        return None
    order = sorted(la, key=str)
    return np.array([la[k] - lb[k] for k in order])


def _tol(x: float) -> float:
    """Slack for 'at least as extreme': a mirrored permutation sums in another order."""
    return 1e-9 * (1.0 + abs(x))


def _sign_flip(d: np.ndarray, max_exact: int, n_perm: int, rng_seed: int) -> tuple[float, bool]:
    """Two-sided sign-flip p-value of mean(d): every pattern when 2^n <= max_exact, else ``n_perm``."""
    n = len(d)
    obs = abs(d.mean())
    if 2**n <= max_exact:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2.0 - 1.0  # (2^n, n)
        return float(np.mean(np.abs(signs @ d) / n >= obs - _tol(obs))), True
    signs = np.random.default_rng(rng_seed).choice([-1.0, 1.0], size=(n_perm, n))
    hits = np.sum(np.abs(signs @ d) / n >= obs - _tol(obs))
    return float((hits + 1) / (n_perm + 1)), False


def _label_permutation(a: np.ndarray, b: np.ndarray, max_exact: int, n_perm: int, rng_seed: int):
    """Two-sided p of mean(a) - mean(b) over relabellings of the pooled runs (exact when few)."""
    pool, na, nb = np.concatenate([a, b]), len(a), len(b)
    obs = abs(a.mean() - b.mean())
    if math.comb(na + nb, na) <= max_exact:
        idx, exact = np.array(list(itertools.combinations(range(na + nb), na))), True  # (C, na)
    else:
        rng = np.random.default_rng(rng_seed)
        idx, exact = np.argsort(rng.random((n_perm, na + nb)), axis=1)[:, :na], False
    sum_a = pool[idx].sum(axis=1)
    stat = np.abs(sum_a / na - (pool.sum() - sum_a) / nb)
    hits = np.sum(stat >= obs - _tol(obs))
    return (float(hits / len(idx)) if exact else float((hits + 1) / (n_perm + 1))), exact


def run_level_test(
    a_run_means: Mapping[str, float] | Sequence[float],
    b_run_means: Mapping[str, float] | Sequence[float],
    paired_by: Mapping[str, Hashable] | None = None,
    *,
    max_exact: int = 2**20,
    n_perm: int = 100_000,
    rng_seed: int = 0,
) -> RunLevelTest:
    """Exact two-sided permutation test of mode a against mode b with runs as the unit.

    ``a_run_means``/``b_run_means``: one value per run (``{run_id: mean}`` or a list).
    ``paired_by`` (``{run_id: rng_seed}``): when both modes have the same rng_seeds, a paired
    sign-flip over their differences; otherwise exact label permutation; against a mode with a
    single run, a one-sample sign-flip of the other mode's differences from it. One run on each
    side (or one pair) allows no test: p NaN, ``reason`` says so. Designs too large to enumerate
    (> ``max_exact``) use ``n_perm`` random permutations. Example: paired differences 1, 2, -0.5
    -> of the 8 sign patterns 4 reach |sum| >= 2.5, p = 0.5, min_p = 2/8 = 0.25.
    """
    a, b = _as_runs(a_run_means), _as_runs(b_run_means)
    if not a or not b:
        raise ValueError("run-level test: a mode has no runs")
    va, vb = np.array(list(a.values())), np.array(list(b.values()))
    diff, na, nb = float(va.mean() - vb.mean()), len(a), len(b)
    d = _pairs(a, b, paired_by)
    if d is None and min(na, nb) == 1:
        d, method = (va - vb[0]) if nb == 1 else (va[0] - vb), "one-sample sign-flip"
    else:
        method = "paired sign-flip"
    if d is not None and len(d) < 2:  # one run on each side (paired or not): nothing to permute
        reason = "1 run of each mode: no run-level test possible"
        return RunLevelTest(float("nan"), 1.0, "none", diff, na, nb, reason=reason)
    if d is not None:
        p, exact = _sign_flip(d, max_exact, n_perm, rng_seed)
        return RunLevelTest(p, 2.0 ** (1 - len(d)), method, diff, na, nb, exact)
    p, exact = _label_permutation(va, vb, max_exact, n_perm, rng_seed)
    min_p = (2 if na == nb else 1) / math.comb(na + nb, na)
    return RunLevelTest(p, min_p, "label permutation", diff, na, nb, exact)
