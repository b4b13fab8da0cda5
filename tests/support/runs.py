"""A run folder's record without a model (``recorded_run``), for the tests of which rows are a run's."""

from ifir_lib.core.run_folder import RunFolder

RECORD = {"mode": "ins-dv", "config": {"lr": 1e-5}, "data": {"sha256": "b"}}


def recorded_run(path, rng_seed: int = 0, later: bool = False) -> RunFolder:
    """A finished Ins-DV run's record at ``path``: started 2026-01-01 (before any row a test writes),
    or with ``later`` started and finished in 2099 (after them: a clock ahead of the rows)."""
    run = RunFolder(path)
    run.path.mkdir(parents=True)
    record = {**RECORD, "rng_seed": rng_seed, "git_commit": "c1"}
    if later:
        run.write(
            {
                **record,
                "started": "2099-01-01T09:00:00",
                "finished": "2099-01-01T10:00:00",
                "status": "finished",
            }
        )
    else:
        run.write({**record, "started": "2026-01-01T09:00:00", "status": "running"})
        run.finish()
    return run
