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

Not handled here: computing per-query scores (``metrics``, ``evaluate``) and file I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
        return (self.p_permutation if test == "permutation" else self.p_bootstrap) < alpha


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
            vals = (t.diff, t.ci_low, t.ci_high, t.p_permutation if test == "permutation" else t.p_bootstrap)
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
