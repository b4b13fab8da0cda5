"""Does dual-view training help on the bundled data? Ins-orig vs Ins-DV over several seeds.

Run by hand: ``python bench/bench_method.py [--rng-seeds 0,1,2] [--budget 104] [--preset cpu]``.
Trains both configs at one matched budget with the bundled reference reversals, for each
training seed, evaluates them (and the base model) on the bundled FollowIR-format set, and prints
mean, spread and range over seeds, the per-seed Ins-DV minus Ins-orig difference, and a paired
test over queries (seed-averaged per-query p-MRR). Results go to ``--out`` (resumable: trained
runs and evaluated rows are reused).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rng-seeds", default="0,1,2", help="comma-separated random seeds")
    ap.add_argument("--budget", type=int, default=104)
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--modes", default="ins-orig,ins-dv")
    ap.add_argument("--out", default="out/bench_method")
    a = ap.parse_args()

    from ifir_lib.evaluation.stats import compare
    from ifir_lib.pipelines.demo import DemoConfig, run_demo
    from ifir_lib.reporting.results import load_per_query, load_results, per_query_path

    rng_seeds = tuple(int(s) for s in a.rng_seeds.split(","))
    modes = tuple(a.modes.split(","))
    cfg = DemoConfig(train_preset=a.preset, modes=modes, budget=a.budget, rng_seeds=rng_seeds)
    res = run_demo(a.out, cfg, figures_dir=os.path.join(a.out, "figures"))

    df = load_results(res.results_csv)
    df = df[df.metric.isin(["p_mrr", "map_at_1000", "ndcg_at_5"])]
    table = df.groupby(["mode", "metric"])["value"].agg(["mean", "std", "min", "max", "count"]).round(2)
    print("\nOver training seeds (base: one deterministic model):")
    print(table.unstack("metric").to_string())

    p = df[df.metric == "p_mrr"].pivot_table(index="rng_seed", columns="mode", values="value")
    if {"ins-orig", "ins-dv"} <= set(p.columns):
        d = (p["ins-dv"] - p["ins-orig"]).dropna()
        print(
            f"\nIns-DV - Ins-orig p-MRR per seed: {', '.join(f'{v:+.2f}' for v in d)}; "
            f"mean {d.mean():+.2f}, sd {d.std():.2f}, {int((d > 0).sum())}/{len(d)} seeds positive"
        )
        pq = load_per_query(per_query_path(res.results_csv))
        pq = pq[pq.metric == "p_mrr"].merge(df[["run_id", "mode"]].drop_duplicates(), on="run_id")
        by = pq.groupby(["mode", "query_id"])["value"].mean().unstack("mode")
        c = compare(by["ins-dv"].to_dict(), by["ins-orig"].to_dict())
        print(f"paired over {len(by)} queries (seed-averaged per-query p-MRR): {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
