"""The million-row data path in bounded memory: peak RSS and rows/s per stage.

Run by hand (not a test), e.g.::

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 nice -n 10 .venv/bin/python bench/bench_scale.py --rows 1000000

1. generates ``--rows`` Promptriever rows in the hub schema (``ifir_lib.testing.promptriever``:
   Parquet shards, 30 hard negatives per row, MS MARCO-length passages) under a temp folder;
2. runs each stage in its own subprocess and reads its peak RSS (``VmHWM``, which counts the
   touched pages of memory-mapped files) and its peak private memory (``RssAnon``, sampled):
   - ``load_convert``: the Parquet shards -> ``ArrowSeeds`` (seed table + passages stored once);
   - ``synthesis``: ``synthesize`` with the template backend over the Arrow seeds, streamed;
   - ``synthesis_resume``: the same command again (every key already done: the resume scan);
   - ``trainset``: ``load_reversals`` + ``build_trainset('ins-dv')`` into a memory-mapped Dataset;
   (``ins-dv`` with as many examples as seeds: ~500k at 1M rows, the paper's Ins-DV size);
3. prints a table, then as its last line JSON with ``rows`` and, per stage, ``peak_rss_gb``,
   ``peak_anon_gb`` and ``rows_per_s``; deletes the generated data (``--keep`` keeps it).

rows/s counts source rows for ``load_convert``, synthesis keys (one per seed) for the two
synthesis stages and training examples for ``trainset``. Target: peak RSS <= 3 GB per stage at
1M rows, growing sub-linearly from 100k. The machine may be shared, so rows/s are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

STAGES = ("load_convert", "synthesis", "synthesis_resume", "trainset")


def _du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def run_stage(stage: str, work: Path, num_negatives: int) -> dict:
    """One stage, in this process; returns its counts (the parent adds time and memory)."""
    from ifir_lib.seeds.arrow import ArrowSeeds
    from ifir_lib.seeds.promptriever import promptriever_to_arrow

    if stage == "load_convert":
        seeds = promptriever_to_arrow(work / "source", work / "seeds")
        meta = json.loads((work / "seeds" / "meta.json").read_text())
        return {"n": meta["rows_read"], "seeds": len(seeds), "passages": meta["passages"]}
    if stage in ("synthesis", "synthesis_resume"):
        from ifir_lib.synthesis.run import SynthesisConfig, synthesize

        cfg = SynthesisConfig(backend="template", progress=False, use_cache=False)
        s = synthesize(ArrowSeeds.open(work / "seeds"), work / "reversals.jsonl", cfg)
        return {"n": s.keys, "written": s.written, "skipped": s.skipped, "accepted": s.accepted}
    if stage == "trainset":
        from ifir_lib.training.trainsets import build_trainset, load_reversals

        seeds = ArrowSeeds.open(work / "seeds")
        revs = load_reversals(work / "reversals.jsonl")
        # as many examples as seeds (half of them x 2 views): 1M rows -> ~500k, the paper's Ins-DV size
        budget = len(seeds) - len(seeds) % 2
        ts = build_trainset(
            "ins-dv", seeds, revs, budget=budget, num_negatives=num_negatives, out_dir=work / "train"
        )
        return {"n": len(ts), "columns": len(ts.dataset.column_names), "views": ts.counts["views"]}
    raise ValueError(stage)


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB: ``VmHWM`` (peak RSS of this process image, unlike
    ``ru_maxrss``, which keeps the parent's peak across ``exec``) or ``RssAnon`` (private memory
    now, without the pages of memory-mapped files)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def _rss_anon_kb() -> int:
    return _status_kb("RssAnon")


class _PeakAnon(threading.Thread):
    """Samples ``RssAnon`` every 50 ms: the kernel keeps a high-water mark only for all of RSS."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.done = _rss_anon_kb(), threading.Event()

    def run(self):
        while not self.done.wait(0.05):
            self.peak = max(self.peak, _rss_anon_kb())


def _child(args) -> int:
    import ifir_lib.synthesis.run  # noqa: F401  (imports are not timed)
    import ifir_lib.training.trainsets  # noqa: F401

    sampler = _PeakAnon()
    sampler.start()
    t0 = time.perf_counter()
    out = run_stage(args.stage, Path(args.work), args.num_negatives)
    out["seconds"] = time.perf_counter() - t0
    sampler.done.set()
    sampler.join()
    # VmHWM counts the touched pages of memory-mapped Arrow files too: page cache the kernel
    # can drop, shared with other readers. The anonymous peak is private memory.
    out["peak_rss_gb"] = _status_kb("VmHWM") / 1024**2
    out["peak_anon_gb"] = max(sampler.peak, _rss_anon_kb()) / 1024**2
    print("STAGE " + json.dumps(out))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="generated Promptriever rows")
    ap.add_argument("--negatives", type=int, default=30, help="hard negatives per generated row")
    ap.add_argument("--num-negatives", type=int, default=30, help="negatives per training example")
    ap.add_argument("--workdir", default=None, help="parent folder for the generated data (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # internal: one stage
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:
        return _child(args)

    from ifir_lib.testing.promptriever import write_fake_promptriever

    work = Path(tempfile.mkdtemp(prefix="ifir-scale-", dir=args.workdir))
    results, sizes = {}, {}
    try:
        t0 = time.perf_counter()
        write_fake_promptriever(work / "source", args.rows, negatives=args.negatives)
        gen_s = time.perf_counter() - t0
        sizes["source"] = _du(work / "source")
        print(
            f"generated {args.rows} rows ({sizes['source'] / 1e9:.2f} GB Parquet) in {gen_s:.0f}s", flush=True
        )
        for stage in STAGES:
            cmd = [sys.executable, __file__, "--stage", stage, "--work", str(work)]
            cmd += ["--num-negatives", str(args.num_negatives)]
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("STAGE ")), None)
            if p.returncode != 0 or line is None:
                sys.stderr.write(p.stdout + p.stderr)
                raise SystemExit(f"stage {stage} failed (exit {p.returncode})")
            results[stage] = json.loads(line[6:])
            print(f"  {stage}: {results[stage]}", flush=True)
        sizes.update(
            seeds=_du(work / "seeds"), train=_du(work / "train"), reversals=_du(work / "reversals.jsonl")
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    units = {"load_convert": "rows", "synthesis": "keys", "synthesis_resume": "keys", "trainset": "examples"}
    print(
        f"\n{'stage':<18} {'items':>10} {'unit':<9} {'seconds':>8} {'items/s':>9} {'peak RSS GB':>12} "
        f"{'of it private':>13}"
    )
    for st, r in results.items():
        print(
            f"{st:<18} {r['n']:>10} {units[st]:<9} {r['seconds']:>8.1f} {r['n'] / r['seconds']:>9.0f} "
            f"{r['peak_rss_gb']:>12.2f} {r['peak_anon_gb']:>13.2f}"
        )
    print("peak RSS counts touched pages of the memory-mapped Arrow files; 'private' is anonymous memory")
    print("disk (GB): " + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in sizes.items()))
    print(("kept in " if args.keep else "deleted ") + str(work))
    print(
        json.dumps(
            {
                "rows": args.rows,
                "negatives": args.negatives,
                "num_negatives": args.num_negatives,
                "seeds": results["load_convert"]["seeds"],
                "passages": results["load_convert"]["passages"],
                "examples": results["trainset"]["n"],
                "peak_rss_gb": {k: round(r["peak_rss_gb"], 3) for k, r in results.items()},
                "peak_anon_gb": {k: round(r["peak_anon_gb"], 3) for k, r in results.items()},
                "rows_per_s": {k: round(r["n"] / r["seconds"], 1) for k, r in results.items()},
                "seconds": {k: round(r["seconds"], 1) for k, r in results.items()},
                "disk_gb": {k: round(v / 1e9, 3) for k, v in sizes.items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
