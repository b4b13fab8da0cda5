"""The tidy results table: its schema, appending, reading, summarising and comparing runs.

One row per run x dataset x metric, values x100 as the evaluation writes them::

    run_id, model, mode, rng_seed, dataset, metric, value, ci_low, ci_high, n_queries, git_commit, timestamp,
    prompts, plan, backend, data_sha

``mode`` is the data configuration a model was trained on (``base`` for an untrained model);
``prompts`` says which prompts encoded the texts (``model``: the model's stored ones; ``benchmark``:
each benchmark's own, ``ifir evaluate --prompts``); ``plan`` is the hash of the experiment plan the
row belongs to (empty outside an experiment); ``backend`` is the encoder that produced it
(``torch``, ``torch-bf16``, ``onnx``, ``onnx-int8``, ``openvino``, ``openvino-bf16``:
``evaluation.backends``); ``data_sha`` is a digest of the evaluated set's content (16 hex
characters, ``evaluation.corpora.content_digest``, or a local copy's files' for a named mteb task
read from one, ``tasks.copy_digest``; empty for one read from the hub), so two sets that
share a name can be told apart;
per-query scores go to a sibling ``<stem>_per_query.csv`` (``run_id, dataset, metric, query_id,
value``). The table is only ever appended to, one run's rows in one locked write, so two
evaluations appending at once never interleave. Before each append, a cut last row (a crash or
a partial copy: no final newline, fewer fields than the header) is moved to a side file with a
warning, so a new row is never glued onto it; a value that is not a number in a number column is
refused on write and named (file, line, column) on read, while an empty cell reads as missing. Tables written before the vocabulary settled
(``config``/``seed`` columns) are read with those columns renamed; tables written before
``prompts``/``plan`` or ``backend`` read as ``prompts="model"``, ``plan=""``, ``backend="torch"``,
and take new rows in their own columns as long as those rows have these defaults (else a
one-line error: start a new file); tables written before ``data_sha`` read it as ``''`` (unknown)
and take new rows without it, with a warning. Rows without ``backend`` written at the commits
that had ``--backend onnx-int8`` but no column for it (``BACKEND_UNRECORDED_COMMITS``) read as
torch's with a warning, once per file and process: their encoder is unknown (an experiment's rows,
with a ``plan``, are left out: it had no eval backend then; a ``backend`` column added to the file
naming each row's encoder silences it). ``rng_seed`` reads as one spelling of its integer
(``'01'``, ``'1.0'`` -> ``'1'``).

Every table, summary, figure and comparison reads the rows through ``runs_to_read`` (the end of
this module): one evaluation per run and set, the latest; exact repeats of a row read once, with a
warning; a warning when they mix conditions; a ``DataError`` for a run id shared by two runs, a run
id with two values for one set and metric, or a set name shared by two sets (``data_sha``).

Used by evaluation (writing), figures and notebooks (reading and summarising). Not handled here:
computing metrics (``evaluate``), drawing (``figures``).
"""

from __future__ import annotations

import csv
import datetime
import io
import logging
import math
import numbers
import re
import threading
from collections.abc import Sequence
from pathlib import Path, PureWindowsPath

import numpy as np
import pandas as pd

from ..core.config import BASE_MODE, MODES, PUBLISHED_RESULTS_PATH, REPO_DIR, git_commit
from ..core.errors import DataError
from ..core.jsonl import read_jsonl, set_aside_cut_tail
from ..core.locks import check_writable, shared_append
from ..core.run_folder import RunFolder
from ..synthesis.run import iter_synthesis_lines

RESULT_COLUMNS = [
    "run_id",
    "model",
    "mode",
    "rng_seed",
    "dataset",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n_queries",
    "git_commit",
    "timestamp",
    "prompts",
    "plan",
    "backend",
    "data_sha",
    "run_sha",
]
REQUIRED_RESULT_COLUMNS = RESULT_COLUMNS[:7]
LEGACY_RESULT_COLUMNS = RESULT_COLUMNS[:12]  # the header before ``prompts`` and ``plan``
# ... and before ``backend``, before ``data_sha``, and before ``run_sha``
OLDER_HEADERS = (LEGACY_RESULT_COLUMNS, RESULT_COLUMNS[:14], RESULT_COLUMNS[:15], RESULT_COLUMNS[:16])
# what a row without these columns means: the model's stored prompts, not from an experiment,
# encoded by PyTorch fp32, evaluated on a set whose content is unknown ('': no digest recorded),
# by a model whose training run is unknown (a named model, or a row from before ``run_sha``)
RESULT_DEFAULTS = {"prompts": "model", "plan": "", "backend": "torch", "data_sha": "", "run_sha": ""}
# digests left out, with a warning, when a table written before their column takes new rows
_DIGEST_COLUMNS = ("data_sha", "run_sha")
_LOST_MEANS = {
    "data_sha": "a set changed under the same name",
    "run_sha": "a run folder copied to another path",
}
# the commits (76479bd..1f0e8ab^) whose ``ifir evaluate --backend onnx|onnx-int8`` wrote rows with
# no ``backend`` column: such a row's encoder is unknown, though it reads as torch's (the default)
BACKEND_UNRECORDED_COMMITS = (
    "76479bd446ca296ab8ecc6033108dafdff2255ef",
    "41a156cf007e9f666be580dddd0d330682019e8d",
    "c25e8bf0f4ec68c84a0d9f9418f0c089402483cb",
    "3f4b1bcd005c50472e51eac1dfd353bada728fa9",
    "bfdef3ed18663334785d2bfd5e315ba7f5d80c89",
    "8ba25de2f80234e51faf4a524c4be3c67848db09",
    "8145cc827b27ebdff3d7c3a72467a4cb6260b746",
    "061e00b2fee70b00e48e515a2d9102757166c7bc",
    "7516590884f8b66daf5adbd00af88ccb89b44824",
    "ab5d91cf3f3993b1058984b88348d0a89b1a3424",
)
PER_QUERY_COLUMNS = ["run_id", "dataset", "metric", "query_id", "value"]
_OLD_NAMES = {"config": "mode", "seed": "rng_seed"}
# dataset names that already hold an average over the FollowIR collections
AGGREGATE_DATASETS = {"all", "mean", "average", "overall", "followir"}
FOLLOWIR_COLLECTIONS = {"robust04", "news21", "core17"}  # as ``collection_key`` spells them
# columns that must hold numbers (an empty cell is a deliberate "missing"); rng_seed must be an integer
NUMERIC_COLUMNS = ("value", "ci_low", "ci_high")
INTEGER_COLUMNS = ("n_queries", "rng_seed")

log = logging.getLogger(__name__)


def collection_key(name) -> str:
    """A set name reduced to compare with FollowIR's: ``'Core17InstructionRetrieval'`` and
    ``'core-17'`` -> ``'core17'``."""
    return re.sub(r"instructionretrieval$", "", re.sub(r"[^a-z0-9]", "", str(name).lower()))


def is_aggregate(name) -> bool:
    """``followir``, ``mean``...: a set whose rows hold the mean over FollowIR's collections."""
    return str(name).lower() in AGGREGATE_DATASETS


def panel_sets(sets: Sequence) -> list[str]:
    """The sets that each stand on their own in a figure or summary, in ``sets``' order: every set,
    less FollowIR's collections where an aggregate row (``followir``) stands for them. Example:
    ``followir, Core17InstructionRetrieval, followir_mini`` -> ``[followir, followir_mini]``; the
    other sets are never dropped because an aggregate is there."""
    sets = list(dict.fromkeys(str(d) for d in sets))
    agg = any(is_aggregate(d) for d in sets)
    return [d for d in sets if not (agg and collection_key(d) in FOLLOWIR_COLLECTIONS)]


def panel_members(dataset, sets: Sequence) -> list[str]:
    """The sets whose rows a panel of ``dataset`` reads: itself, and for an aggregate the FollowIR
    collections among ``sets`` (a metric without an aggregate row is their mean, never a mean
    over unrelated sets)."""
    members = [str(dataset)]
    if is_aggregate(dataset):
        members += [str(d) for d in dict.fromkeys(sets) if collection_key(d) in FOLLOWIR_COLLECTIONS]
    return members


def mode_order(modes) -> list[str]:
    """The paper's order (base, ins-orig, ins-dv, all-orig, all-dv), then any other mode sorted."""
    known = (BASE_MODE, *MODES)
    present = set(modes)
    return [m for m in known if m in present] + sorted(present - set(known))


# ---------------------------------------------------------------------------------------------
# Writing


_last_stamp: list[datetime.datetime] = []  # the last time make_run_id used, in this process
_stamp_lock = threading.Lock()


def make_run_id(model: str, mode: str, rng_seed: int | str) -> str:
    """``make_run_id('runs/ins-dv', 'ins-dv', 1) -> 'ins-dv-ins-dv-s1-20260101T120000.123456'``: the
    model folder name, then the UTC time to the microsecond (ISO 8601 basic format). Two calls in
    one process never share a time (the second is moved on by a microsecond), so two evaluations
    started within one second get different ids."""
    with _stamp_lock:
        now = datetime.datetime.now(datetime.timezone.utc)
        if _last_stamp and now <= _last_stamp[0]:
            now = _last_stamp[0] + datetime.timedelta(microseconds=1)
        _last_stamp[:] = [now]
    return f"{Path(str(model)).name}-{mode}-s{rng_seed}-{now.strftime('%Y%m%dT%H%M%S.%f')}"


def result_rows(
    result,
    *,
    run_id: str,
    model: str | None = None,
    mode: str = BASE_MODE,
    rng_seed: int | str = 0,
    git: str | None = None,
    timestamp: str | None = None,
    prompts: str | None = None,
    plan: str = "",
    data_sha: str = "",
    run_sha: str = "",
) -> list[dict]:
    """Rows for the results table, one per metric (x100, with the 95% interval). ``prompts``
    defaults to the result's own (``EvalResult.prompts``), else ``'model'``; ``backend`` is the
    result's own (``EvalResult.backend``), else ``'torch'``; ``data_sha`` is the evaluated set's
    content digest (``corpora.content_digest``; default: the result's own, ``EvalResult.data_sha``;
    ``''``: unknown); ``run_sha`` the training run's identity (``RunFolder.identity``; ``''``: a
    named model, or unknown). Rows of ``evaluate_followir`` saved by hand (``save_result``) had no
    digest, so an edited copy of a set under its name was read as that set, beside its rows."""
    prompts = prompts or getattr(result, "prompts", None) or RESULT_DEFAULTS["prompts"]
    data_sha = data_sha or (result.digest() if hasattr(result, "digest") else "")
    backend = getattr(result, "backend", None) or RESULT_DEFAULTS["backend"]
    git = git or git_commit()
    timestamp = timestamp or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for m, v in result.metrics.items():
        lo, hi = result.ci.get(m, (float("nan"), float("nan")))
        rows.append(
            {
                "run_id": run_id,
                "model": model or result.model,
                "mode": mode,
                "rng_seed": rng_seed,
                "dataset": result.dataset,
                "metric": m,
                "value": v,
                "ci_low": lo,
                "ci_high": hi,
                "n_queries": len(result.per_query.get(m, {})) or None,
                "git_commit": git,
                "timestamp": timestamp,
                "prompts": prompts,
                "plan": plan,
                "backend": backend,
                "data_sha": data_sha,
                "run_sha": run_sha,
            }
        )
    return rows


def per_query_rows(result, *, run_id: str) -> list[dict]:
    """Rows for the per-query sibling file: ``run_id, dataset, metric, query_id, value``."""
    return [
        {"run_id": run_id, "dataset": result.dataset, "metric": m, "query_id": q, "value": v}
        for m, d in result.per_query.items()
        for q, v in d.items()
    ]


def per_query_frame(result, *, run_id: str = "-"):
    """``per_query_rows`` as a DataFrame, for plotting one result's per-query distribution."""
    return pd.DataFrame(per_query_rows(result, run_id=run_id), columns=PER_QUERY_COLUMNS)


def per_query_path(path: str | Path) -> Path:
    """``results.csv -> results_per_query.csv`` (same folder)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_per_query{path.suffix or '.csv'}")


def _fields(line: bytes) -> list[str] | None:
    """The CSV fields of one line, or None when it does not parse (an unclosed quote)."""
    try:
        return next(csv.reader([line.decode("utf-8").rstrip("\r\n")], strict=True), [])
    except (csv.Error, UnicodeDecodeError):
        return None


def _first_line(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.readline()


def _check_header(path: Path, columns: list[str]) -> None:
    """Refuse to append to a file whose header is not ``columns`` (a cut header is left to heal)."""
    first = _first_line(path)
    if not first.strip():
        return
    header = _fields(first.removeprefix(b"\xef\xbb\xbf"))
    if header == columns:
        return
    if not first.endswith(b"\n") and ",".join(columns).encode().startswith(first.strip()):
        return  # the header itself was cut: set aside, then written again
    raise DataError(
        path,
        1,
        f"header {header} does not match the expected columns {columns}; "
        "refusing to append (write to a new file)",
    )


def _cell(value, column: str, path: Path, where: str):
    """``value`` as it goes in the CSV: None and NaN become an empty cell (missing); a value that
    is not a number in a number column is a ``DataError`` naming the column."""
    if value is None or (isinstance(value, numbers.Real) and value != value):
        return ""
    if column in NUMERIC_COLUMNS or column in INTEGER_COLUMNS:
        ok = _is_number(value, integer=column in INTEGER_COLUMNS)
        if not ok:
            kind = "an integer" if column in INTEGER_COLUMNS else "a finite number"
            raise DataError(path, None, f"not {kind}: {value!r} ({where}); nothing written", column)
    return value


def _is_number(value, integer: bool) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        try:
            value = int(value.strip()) if integer else float(value)
        except ValueError:
            return False
    if not isinstance(value, numbers.Real) or not math.isfinite(value):
        return False
    return not integer or float(value).is_integer()


def _row_name(r: dict) -> str:
    if "query_id" in r:
        return f"run {r.get('run_id')}, {r.get('dataset')}/{r.get('metric')}, query {r.get('query_id')}"
    return f"run {r.get('run_id')}, {r.get('dataset')}/{r.get('metric')}"


def _append_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    """Append ``rows`` to ``path`` (the caller holds its lock). A cut last row (no final newline,
    fewer fields than the header) is set aside first (``set_aside_cut_tail``), so it is never glued
    to the next row; every value is checked before anything is written."""
    cells = [{c: _cell(r.get(c), c, path, _row_name(r)) for c in columns} for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _check_header(path, columns)
        set_aside_cut_tail(path, is_whole=lambda tail: len(_fields(tail) or ()) == len(columns))
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="raise")
        if new:
            w.writeheader()
        w.writerows(cells)


def _result_columns(path: Path, rows: list[dict]) -> list[str]:
    """The columns ``rows`` are appended under: ``RESULT_COLUMNS``, or for a file written before
    ``prompts``/``plan`` or ``backend`` (``OLDER_HEADERS``) its own columns when every row has the
    defaults (``RESULT_DEFAULTS``) in the others, which is what such a file reads as; else a
    ``DataError``: an int8 row must not land in a table that would read it back as torch's."""
    header = _fields(_first_line(path).removeprefix(b"\xef\xbb\xbf")) if path.is_file() else None
    if header not in OLDER_HEADERS:
        return RESULT_COLUMNS
    # digests are not refused but left out, with a warning: every evaluated folder has one, so
    # refusing them would close every older table to new rows (and a resumed demo with it)
    absent = {c: d for c, d in RESULT_DEFAULTS.items() if c not in header and c not in _DIGEST_COLUMNS}
    odd = sorted({f"{c}={r.get(c)!r}" for r in rows for c, d in absent.items() if r.get(c) not in (None, d)})
    if odd:
        raise DataError(
            path,
            1,
            f"written before the {'/'.join(absent)} column(s), so it cannot record {', '.join(odd)}; "
            "start a new results file (another --out)",
        )
    lost = [c for c in _DIGEST_COLUMNS if c not in header and any(r.get(c) for r in rows)]
    if lost and (path, *lost) not in _WARNED_NO_DIGEST:
        _WARNED_NO_DIGEST.add((path, *lost))
        log.warning(
            "%s was written before the %s column(s): what they record is left out of it, so %s "
            "cannot be told apart there; write to a new --out to record them",
            path,
            "/".join(lost),
            " or ".join(_LOST_MEANS[c] for c in lost),
        )
    return header


_WARNED_NO_DIGEST: set[tuple] = set()  # (older table, columns) already warned about (once per process)


def append_results(path: str | Path, rows: list[dict], per_query: list[dict] | None = None) -> Path:
    """Append ``rows`` (``RESULT_COLUMNS``) to the results CSV, creating it with a header.

    Never overwrites: an existing file with other columns is an error, and so is a value that is
    not a number in a number column (nothing is written then). A file written before the
    ``prompts``/``plan`` columns takes rows with their defaults in its own columns
    (``_result_columns``); a row without those keys has the defaults. A cut last row left by a
    crash is set aside in a side file, with a warning, before the append. ``per_query`` rows go to
    ``per_query_path(path)``. Returns ``path``.
    """
    path = Path(path)
    rows = [{**RESULT_DEFAULTS, **r} for r in rows]  # a row without prompts/plan/backend: the defaults
    missing = [c for c in RESULT_COLUMNS if any(c not in r for r in rows)]
    if missing:
        raise ValueError(f"result rows lack columns {missing}")
    pq_path = per_query_path(path)
    for r in per_query or []:  # checked before either file is touched
        _cell(r.get("value"), "value", pq_path, _row_name(r))
    with shared_append(path):  # two evaluations appending at once take turns, whole runs at a time
        if per_query and pq_path.is_file():  # refused before the results file is touched
            _check_header(pq_path, PER_QUERY_COLUMNS)
        _append_csv(path, _result_columns(path, rows), rows)
        if per_query:
            _append_csv(pq_path, PER_QUERY_COLUMNS, per_query)
    return path


def check_outputs(
    path: str | Path, *, prompts: str = "model", plan: str = "", backend: str = "torch"
) -> Path:
    """Fail now, in one line (``DataError``), when the results CSV ``path`` or its per-query sibling
    could not be appended to later: either file cannot be written (``locks.check_writable``) or its
    header holds other columns (or an older file could not record ``prompts``/``plan``,
    ``_result_columns``). Writes nothing. Returns ``path``."""
    path = Path(path)
    labels = [{"prompts": prompts, "plan": plan, "backend": backend}]
    for p in (path, per_query_path(path)):
        check_writable(p)
        if p.exists():
            _check_header(p, _result_columns(p, labels) if p == path else PER_QUERY_COLUMNS)
    return path


def save_result(
    result,
    path: str | Path,
    *,
    run_id: str | None = None,
    model: str | None = None,
    mode: str = BASE_MODE,
    rng_seed: int | str = 0,
    prompts: str | None = None,
    plan: str = "",
    data_sha: str = "",
    run_sha: str = "",
) -> str:
    """Append one result (summary rows + per-query rows) to the table; returns the run_id used.
    ``data_sha``: the evaluated set's content digest (default: the result's own, both
    engines'; ``''`` for a named mteb task read from the hub, or unknown);
    ``run_sha``: the trained model's run identity (``RunFolder.identity``; ``''`` for a named model).
    An integer ``rng_seed`` is written as one (``'01'`` -> ``1``), so one seed has one spelling."""
    if _is_number(rng_seed, integer=True):
        rng_seed = int(str(rng_seed).strip()) if isinstance(rng_seed, str) else int(rng_seed)
    run_id = run_id or make_run_id(model or result.model, mode, rng_seed)
    labels = dict(model=model, mode=mode, rng_seed=rng_seed, prompts=prompts, plan=plan)
    labels.update(data_sha=data_sha, run_sha=run_sha)  # what was evaluated: the set's and the run's digests
    append_results(
        path,
        result_rows(result, run_id=run_id, **labels),
        per_query_rows(result, run_id=run_id),
    )
    return run_id


# ---------------------------------------------------------------------------------------------
# Loading


def load_results(path: str | Path) -> pd.DataFrame:
    """Read the tidy results CSV; a missing column raises ``DataError`` naming it.

    ``value``/``ci_*`` become floats, ``timestamp`` a UTC datetime; the optional columns are
    added empty when absent (``prompts``/``plan``: ``'model'``/``''``, also for empty cells);
    ``config``/``seed`` columns of older tables are renamed. An empty
    cell is a missing value (NaN); a cell that is not a number in a number column (``value``,
    ``ci_low``, ``ci_high``, ``n_queries``, ``rng_seed``) is a ``DataError`` naming file, line and
    column: coerced to NaN it would vanish from every mean, table and figure without a word. A
    cut last row (no final newline, too few fields: a crashed append) is dropped with a warning.
    """
    path = Path(path)
    df = _read_csv(
        path,
        "results file not found",
        {c: str for c in ("run_id", "model", "mode", "config", "rng_seed", "seed", "dataset", "metric")}
        | {"git_commit": str, "prompts": str, "plan": str, "backend": str, "data_sha": str, "run_sha": str},
    )
    return check_results(df, path)


def _read_csv(path: Path, not_found: str, dtype: dict) -> pd.DataFrame:
    """``pd.read_csv`` with one-line errors, and a cut last row dropped with a warning."""
    if not path.exists():
        raise DataError(path, None, not_found)
    if path.is_dir():
        raise DataError(path, None, "is a folder, not a CSV file")
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep and data[keep:].strip():  # a last line without its newline: whole, or cut by a crash?
        header = _fields(data[: data.find(b"\n")]) or ()
        if len(_fields(data[keep:]) or ()) != len(header):
            n = data[:keep].count(b"\n") + 1
            log.warning(
                "%s:%d: dropping a cut last row (%d bytes) left by an interrupted write; the next "
                "append sets it aside",
                path,
                n,
                len(data) - keep,
            )
            data = data[:keep]
    try:
        return pd.read_csv(io.BytesIO(data), dtype=dtype)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise DataError(path, None, f"not a readable CSV ({str(e).strip().splitlines()[-1]})") from None


def _file_line(path, row: int) -> int | None:
    """The line of ``path`` that holds data row ``row`` (0-based, as pandas counts: blank lines
    skipped), or None when ``path`` is not a file."""
    if not Path(path).is_file():
        return None
    with Path(path).open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        seen = -2  # the header is row -1
        for fields in reader:
            if any(f.strip() for f in fields):
                seen += 1
                if seen == row:
                    return reader.line_num
    return None


def _numbers(df: pd.DataFrame, column: str, path, integer: bool = False) -> pd.Series:
    """``df[column]`` as numbers; an empty cell is NaN, any other non-number a ``DataError``."""
    raw = df[column]
    num = pd.to_numeric(raw, errors="coerce")
    bad = raw.notna() & (num.isna() | ~np.isfinite(num.astype(float)))
    if integer:
        bad |= num.notna() & np.isfinite(num.astype(float)) & (num.astype(float) % 1 != 0)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        line = _file_line(path, i)
        where = f" (row {i + 1})" if line is None else ""
        kind = "an integer" if integer else "a finite number"
        more = f"; {int(bad.sum()) - 1} more bad cell(s) in this column" if bad.sum() > 1 else ""
        raise DataError(path, line, f"not {kind}: {raw.iloc[i]!r}{where}{more}", column)
    return num


def check_results(df: pd.DataFrame, path: str | Path = "<results>") -> pd.DataFrame:
    """Validate and normalise a results DataFrame (see ``load_results``)."""
    df = df.rename(columns={k: v for k, v in _OLD_NAMES.items() if k in df.columns and v not in df.columns})
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            path, 1, f"missing column(s) {', '.join(missing)}; have {', '.join(map(str, df.columns))}"
        )
    df = df.copy()
    if "backend" not in df.columns and "git_commit" in df.columns:
        _warn_backend_unknown(df, path)
    for c in RESULT_COLUMNS[7:]:
        if c not in df.columns:
            df[c] = RESULT_DEFAULTS.get(c, np.nan)
    for c, default in RESULT_DEFAULTS.items():
        df[c] = df[c].fillna(default).astype(str)
    df["mode"] = df["mode"].astype(str).str.lower()
    # one seed, one spelling: '01' and '1.0' read as '1' (an empty cell stays missing, as before)
    seeds = _numbers(df, "rng_seed", path, integer=True)
    df["rng_seed"] = df["rng_seed"].astype(str)
    df.loc[seeds.notna(), "rng_seed"] = [str(int(v)) for v in seeds[seeds.notna()]]
    for c in NUMERIC_COLUMNS:
        df[c] = _numbers(df, c, path)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce", format="mixed")
    df["n_queries"] = _numbers(df, "n_queries", path, integer=True).astype("Int64")
    return df


_BACKEND_WARNED: set[str] = set()  # the files ``_warn_backend_unknown`` named in this process


def _warn_backend_unknown(df: pd.DataFrame, path) -> None:
    """One warning per file and process when a table without a ``backend`` column holds rows of
    the commits that had ``ifir evaluate --backend onnx-int8`` but did not record it
    (``BACKEND_UNRECORDED_COMMITS``): read as torch's, an int8 evaluation's numbers (v1 p-MRR -2.69
    for MiniLM's -5.03) stood in every table as torch's, and ``skip_done`` skipped the torch
    evaluation. An experiment's rows (``plan``) are left out: it had no eval backend then."""
    if str(path) in _BACKEND_WARNED:  # each evaluate_models call of a --collect reads the table again
        return
    commit = df["git_commit"].fillna("").astype(str).str.split("+").str[0].str.strip()
    known = {c: any(full.startswith(c) for full in BACKEND_UNRECORDED_COMMITS) for c in commit.unique()}
    hit = commit.map(lambda c: len(c) >= 7 and known[c])
    if "plan" in df.columns:
        hit &= df["plan"].fillna("").astype(str).isin(["", "nan"])
    if hit.any():
        _BACKEND_WARNED.add(str(path))
        log.warning(
            "%s: %d row(s) were written at commit(s) %s, whose ifir evaluate had --backend onnx/onnx-int8 "
            "but no backend column: they are read as torch's (and count as torch evaluations for "
            "skip_done). Rows of ifir demo, and of ifir evaluate without --backend, are torch's; if any "
            "was written with --backend, add a backend column saying each row's encoder (torch, onnx or "
            "onnx-int8): the rows are then read as written and this warning stops",
            path,
            int(hit.sum()),
            ", ".join(sorted(set(commit[hit]))),
        )


def backbone_of(model: str, runs_dir: str | Path | None = None, labels: dict | None = None) -> str:
    """The backbone a model was fine-tuned from: ``config.base_model`` of the run folder ``model``
    (``RunFolder``); a model without one (the untrained base) is its own backbone.
    ``'runs/ins-dv-s0' -> 'minilm'``. A relative folder is looked up from the working directory,
    then from the checkout, where ``make demo`` writes it (a notebook runs in ``notebooks/``).

    When the table moved machines, ``runs_dir`` (``--runs``) is searched for the label's trailing
    folders, longest first: ``'out/exp/models/rng0/ins-dv'`` is found as
    ``<runs_dir>/rng0/ins-dv`` when ``runs_dir`` is the moved ``models`` folder. A folder found
    there counts only if its record agrees with the row's ``labels`` (``mode`` and ``plan``, each
    compared where both sides have one), so another experiment's ``rng0/ins-dv`` is not taken for
    this one's.
    """
    path = (PureWindowsPath if "\\" in str(model) else Path)(str(model))  # run_label on Windows
    candidates = [(Path(path), False)]
    if not path.is_absolute():
        candidates.append((REPO_DIR / path, False))
    if runs_dir is not None:
        parts = list(path.parts[1 if path.anchor else 0 :])
        parts = parts[len(parts) - parts[::-1].index("..") :] if ".." in parts else parts
        candidates += [(Path(runs_dir).joinpath(*parts[i:]), True) for i in range(len(parts))]
    for run, moved in candidates:
        info = RunFolder(run).info()
        cfg = info.get("config")
        if isinstance(cfg, dict) and "base_model" in cfg and not (moved and _disagrees(info, labels or {})):
            return str(cfg["base_model"])
    return str(model)


def _disagrees(info: dict, labels: dict) -> bool:
    """Whether a run record names another mode or experiment plan than ``labels`` (rng_seed is
    not compared: ``ifir evaluate --rng-seed`` may relabel a run; the trailing folders tell an
    experiment's ``rng<k>`` apart)."""
    theirs = {"mode": info.get("mode"), "plan": (info.get("data") or {}).get("plan")}
    return any(
        v not in (None, "") and str(labels.get(k, "")) not in ("", "nan", str(v)) for k, v in theirs.items()
    )


def add_backbone(results: pd.DataFrame, runs_dir: str | Path | None = None) -> pd.DataFrame:
    """Add a ``backbone`` column (``backbone_of`` each model) unless the table has one.

    ``evaluate`` records a trained run by its folder, so ``model`` differs per mode; figures
    compare modes within a backbone, so they group by this column instead. A trained row whose
    run folder is not found (the table was moved without its runs) would stand as a backbone of
    its own: ``_warn_lost_runs`` names those models.
    """
    if "backbone" in results.columns:
        return results
    out = results.copy()
    labels = out[[c for c in ("model", "mode", "plan") if c in out.columns]].astype(str)
    runs = labels.drop_duplicates()  # one lookup per run, not per metric row
    runs["backbone"] = [backbone_of(r["model"], runs_dir, r) for r in runs.to_dict("records")]
    out["backbone"] = labels.merge(runs, on=list(labels.columns), how="left")["backbone"].to_numpy()
    trained = out["mode"].notna() & (out["mode"].astype(str) != BASE_MODE) if "mode" in out.columns else False
    _warn_lost_runs(out.loc[trained & (out["backbone"] == out["model"].astype(str)), "model"], runs_dir)
    return out


_WARNED_LOST: set[tuple] = set()  # (models, runs_dir) already warned about: once, not per figure


def _warn_lost_runs(models: pd.Series, runs_dir) -> None:
    names = models.astype(str).drop_duplicates()
    if not len(names) or (key := (tuple(names), str(runs_dir))) in _WARNED_LOST:
        return
    _WARNED_LOST.add(key)
    log.warning(
        "%d trained model(s) without a run folder, each grouped as its own backbone (%s%s); if these "
        "are run folders, pass the folder that holds them (--runs, or add_backbone(results, runs_dir) "
        "first)%s",
        len(names),
        ", ".join(names.head(3)),
        ", ..." if len(names) > 3 else "",
        f"; none found under {runs_dir}" if runs_dir is not None else "",
    )


def load_per_query(path: str | Path) -> pd.DataFrame:
    """The per-query sibling (pass the results path or the per-query path itself) as a DataFrame.
    A ``value`` that is not a number is a ``DataError`` naming file, line and column; an empty one
    is NaN; a cut last row is dropped with a warning (``load_results``)."""
    path = Path(path)
    if not path.stem.endswith("_per_query"):
        path = per_query_path(path)
    df = _read_csv(
        path, "per-query file not found", {"run_id": str, "dataset": str, "metric": str, "query_id": str}
    )
    missing = [c for c in PER_QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(path, 1, f"missing column(s) {', '.join(missing)}")
    df["value"] = _numbers(df, "value", path)
    return df


def load_published(path: str | Path = PUBLISHED_RESULTS_PATH) -> pd.DataFrame:
    """The paper's Tables 1-2 (``backbone, mode, metric, value, source``); '#' lines are provenance."""
    return pd.read_csv(path, comment="#")


def load_train_logs(runs_dir: str | Path, only: Sequence[str | Path] | None = None) -> pd.DataFrame:
    """Every ``train_log.jsonl`` under ``runs_dir`` as ``run, mode, rng_seed, model, step, epoch, loss``.

    The mode is the run record's ``mode`` (the training set the run used; ``RunFolder``); a log
    without a run record is labelled by its folder name. ``only``: the run folders to read (an
    experiment's finished runs, as its tables read them: a run still training or killed added its
    partial curve to its mode's mean under a caption counting it).
    """
    rows = []
    keep = None if only is None else {Path(p).resolve() for p in only}
    for log in sorted(Path(runs_dir).rglob("train_log.jsonl")):
        run_dir = log.parent
        if keep is not None and run_dir.resolve() not in keep:
            continue
        info = RunFolder(run_dir).read() if RunFolder(run_dir).is_run() else {}
        cfg = info.get("config") or {}
        for _, r in read_jsonl(log):
            if r.get("loss") is None:
                continue
            rows.append(
                {
                    "run": str(run_dir.relative_to(runs_dir)) if run_dir != Path(runs_dir) else run_dir.name,
                    "mode": str(info.get("mode", run_dir.name)).lower(),
                    "rng_seed": info.get("rng_seed", cfg.get("rng_seed", cfg.get("seed"))),
                    "model": cfg.get("base_model"),
                    "step": r.get("step"),
                    "epoch": r.get("epoch"),
                    "loss": float(r["loss"]),
                }
            )
    return pd.DataFrame(rows, columns=["run", "mode", "rng_seed", "model", "step", "epoch", "loss"])


def load_synthesis_rows(paths: str | Path | Sequence[str | Path]) -> list[dict]:
    """Rows of one or several synthesis outputs, one per key and file, so runs of different
    backends, which share keys, can be compared. Each needs a status.

    A key redone after its seed changed (``synthesize --redo-changed``) has a row per seed version
    (``synthesis.run.iter_synthesis(by_version=True)``; read with line numbers, for errors); the last one is read, since a redone row is
    always appended after the stale one, at the place of the key's first row. A file without redone
    rows reads as ``load_synthesis`` reads it (the first row of each key)."""
    rows = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        latest: dict[str, dict] = {}
        for n, r in iter_synthesis_lines(path, by_version=True):
            if "status" not in r:
                raise DataError(path, n, f"row {r['key']!r} has no status", "status")
            latest[r["key"]] = r  # a later version replaces the row, keeping the key's place
        rows.extend(latest.values())
    return rows


# ---------------------------------------------------------------------------------------------
# Reading runs: what every table, summary, figure and comparison checks before it averages

# one evaluation of a run on a set: a model (its folder), the mode it was trained on, its rng_seed
EVALUATION_KEY = ["dataset", "mode", "model", "rng_seed"]
CONDITION_COLUMNS = ("prompts", "plan", "backend")  # evaluation conditions a table must not mix
_SAID = threading.local()  # .said: the warnings already given in the current ``warnings_once``


class warnings_once:
    """A block (``with warnings_once():``) or a function (``@warnings_once()``) in which each
    warning given through ``warn_once`` is given once: a figure summarises the table once per
    panel and metric, and says what it found about the table once. Blocks nest (the outermost
    counts); outside any block every warning is given."""

    def __enter__(self):
        self._outer = getattr(_SAID, "said", None) is None
        if self._outer:
            _SAID.said = set()
        return self

    def __exit__(self, *exc) -> bool:
        if self._outer:
            _SAID.said = None
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def once(*args, **kwargs):
            with warnings_once():
                return fn(*args, **kwargs)

        return once


def warn_once(logger: logging.Logger, message: str, *args) -> None:
    """``logger.warning(message, *args)``, unless the same words were said in this ``warnings_once``."""
    said = getattr(_SAID, "said", None)
    if said is not None:
        text = message % args if args else message
        if text in said:
            return
        said.add(text)
    logger.warning(message, *args)


def warn_if_fractions(results: pd.DataFrame, source: str) -> None:
    """One warning per metric whose values mix fractions and x100: a value in (0, 1] of a metric
    that cannot be negative (every one but p-MRR), beside values above 2 (a file written as mteb
    reports, 0.051 for 5.1, was averaged with x100 rows, bolded, and set beside the paper's)."""
    rows = results[(results["metric"].astype(str) != "p_mrr") & results["value"].notna()]
    for metric, g in rows.groupby("metric", sort=False):
        v = pd.to_numeric(g["value"], errors="coerce")
        small = g[(v > 0) & (v <= 1)]
        if len(small) and (v > 2).any():
            warn_once(
                log,
                "%s: %d %s value(s) lie in (0, 1] beside others above 2: written as fractions, not x100? "
                "(e.g. run %s, %s %.4g)",
                source,
                len(small),
                metric,
                small["run_id"].iloc[0],
                small["dataset"].iloc[0],
                float(small["value"].iloc[0]),
            )


def frame_path(frame: pd.DataFrame, default: str = "<results>") -> str:
    """The file a frame was read from (``attrs['path']``, as ``comparisons.load_tables`` sets it),
    for errors; ``default`` for a frame built in memory."""
    return str(frame.attrs.get("path", default))


def _label(row) -> str:
    return f"{row['model']} ({row['mode']}, rng_seed {row['rng_seed']})"


def check_run_ids(rows: pd.DataFrame, path: str | None = None) -> None:
    """A ``DataError`` naming the file and the run id when one ``run_id`` labels more than one
    (model, mode, rng_seed) on one set (two models evaluated under one ``--run-id``): per-query
    scores are joined to their run by (run_id, dataset), so one model's would be read as the other's;
    or when one run id holds two different values for one (set, metric) (two sets under one name
    evaluated in one call, as older versions wrote): they would be averaged as one.
    Identical repeated rows are not an error (``drop_repeated_rows`` leaves them out)."""
    if rows.empty:
        return
    keys = rows[["run_id", *EVALUATION_KEY]].astype(str).drop_duplicates()
    shared = keys[keys.duplicated(["run_id", "dataset"], keep=False)]
    if shared.empty:
        _check_one_value(rows, path)
        return
    run_id, dataset = shared.iloc[0][["run_id", "dataset"]]
    runs = shared[(shared["run_id"] == run_id) & (shared["dataset"] == dataset)]
    raise DataError(
        path or frame_path(rows),
        None,
        f"run id {run_id!r} labels {len(runs)} different runs on set {dataset!r} "
        f"({'; '.join(_label(r) for _, r in runs.iterrows())}); their per-query scores cannot be told "
        "apart: evaluate again, each run under its own --run-id",
        "run_id",
    )


_VALUE_COLUMNS = ["value", "ci_low", "ci_high", "n_queries"]  # what a repeated row must repeat


def _check_one_value(rows: pd.DataFrame, path: str | None) -> None:
    """The ``DataError`` of ``check_run_ids`` for one (run_id, dataset, metric) with 2+ values."""
    cols = ["run_id", "dataset", "metric", *(c for c in _VALUE_COLUMNS if c in rows.columns)]
    cells = rows[cols].astype(str).drop_duplicates()
    twice = cells[cells.duplicated(["run_id", "dataset", "metric"], keep=False)]
    if twice.empty:
        return
    run_id, dataset, metric = twice.iloc[0][["run_id", "dataset", "metric"]]
    one = twice[(twice["run_id"] == run_id) & (twice["dataset"] == dataset) & (twice["metric"] == metric)]
    raise DataError(
        path or frame_path(rows),
        None,
        f"run id {run_id!r} holds {len(one)} different rows for set {dataset!r}, metric {metric!r} "
        f"(values {', '.join(one['value'])}): a set evaluated twice under one run id (two sets of one "
        "name?) would be averaged as one; re-evaluate, each set under its own name",
        "run_id",
    )


def drop_repeated_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` less the exact repeats of a row already read (same run id, set, metric and numbers),
    with one warning saying how many: a repeat is the same number, so it is counted once."""
    cols = ["run_id", "dataset", "metric", *(c for c in _VALUE_COLUMNS if c in rows.columns)]
    repeat = rows[cols].astype(str).duplicated()
    if not repeat.any():
        return rows
    warn_once(
        log,
        "%d repeated row(s) of one run, set and metric left out (run ids %s); each counted once",
        int(repeat.sum()),
        ", ".join(dict.fromkeys(rows.loc[repeat, "run_id"].astype(str).head(5))),
    )
    return rows[~repeat]


def check_data_sets(rows: pd.DataFrame, path: str | None = None) -> None:
    """A ``DataError`` when one set name (``dataset``) holds 2+ different evaluation sets: rows whose
    ``data_sha`` (the content digest of the evaluated set) differ, naming the run ids of each. Rows
    with an empty ``data_sha``, and tables without the column (written before it), are not checked:
    their set is unknown, not different."""
    if rows.empty or "data_sha" not in rows.columns:
        return
    sha = rows["data_sha"].fillna("").astype(str).str.strip()
    known = rows.assign(_sha=sha)[~sha.isin(["", "nan", "None"])]
    for dataset, g in known.groupby(known["dataset"].astype(str), sort=False):
        if g["_sha"].nunique() < 2:
            continue
        each = "; ".join(
            f"data_sha {digest[:12]}: run id(s) {', '.join(dict.fromkeys(r['run_id'].astype(str)))}"
            for digest, r in g.groupby("_sha", sort=False)
        )
        raise DataError(
            path or frame_path(rows),
            None,
            f"set {dataset!r} names {g['_sha'].nunique()} different evaluation sets ({each}); "
            "their numbers are not comparable: rename one folder and re-evaluate",
            "data_sha",
        )


def warn_if_mixed(rows: pd.DataFrame) -> None:
    """Warn when the rows hold several evaluation conditions (``prompts``, experiment ``plan``,
    encoder ``backend``): a model's evaluations under each are not separate runs, and only the
    latest of them is kept (``one_evaluation_per_run``); filter the table to one first."""
    for col in CONDITION_COLUMNS:
        if col in rows.columns and rows[col].nunique(dropna=False) > 1:
            values = ", ".join(map(repr, rows[col].drop_duplicates().head(4)))
            warn_once(
                log, "the table mixes %s values (%s); filter it to one before comparing modes", col, values
            )


def _stamped(frame: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (built from ``rows``, row for row) with ``_stamp``, ``rows``' ``timestamp`` in UTC
    (NaT when absent or unreadable: a frame built by hand), and ``_order``, the file order that
    breaks ties: what "the latest evaluation" is sorted by."""
    stamp = rows["timestamp"] if "timestamp" in rows.columns else pd.Series(pd.NaT, index=rows.index)
    stamp = pd.to_datetime(stamp, utc=True, errors="coerce", format="mixed")
    return frame.assign(_stamp=stamp.to_numpy(), _order=np.arange(len(rows)))


def one_evaluation_per_run(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` less the repeated evaluations of one model on one set (same ``EVALUATION_KEY``,
    another run id): the evaluation with the latest ``timestamp`` stays (file order breaks ties),
    with every row it has, so a re-evaluation is not a second run. One warning names those left out."""
    if rows.empty:
        return rows
    keys = rows[["run_id", *EVALUATION_KEY]].astype(str)
    evals = _stamped(keys, rows).drop_duplicates(["run_id", "dataset"])  # an evaluation: its first row
    evals = evals.sort_values(["_stamp", "_order"], na_position="first")
    repeated = evals[evals.duplicated(EVALUATION_KEY, keep="last")]
    if repeated.empty:
        return rows
    warn_once(
        log,
        "%d repeated evaluation(s) of one model on one set left out (run ids %s); the latest kept",
        len(repeated),
        ", ".join(repeated["run_id"].head(5)),
    )
    gone = pd.MultiIndex.from_frame(repeated[["run_id", "dataset"]])
    return rows[~pd.MultiIndex.from_frame(keys[["run_id", "dataset"]]).isin(gone)]


def same_run_under_two_labels(rows: pd.DataFrame) -> pd.MultiIndex:
    """``(run_id, dataset)`` of the evaluations that repeat another of the same training run
    under another label: same set, mode, rng_seed and conditions, and either the same ``run_sha``
    (``RunFolder.identity``: a run folder copied or moved anywhere keeps it) or, for rows without
    one (written before the column), labels ending in the same two folders (``rng0/ins-dv``) and
    the same value for every metric in ``rows`` (give it the whole table: a subset of one metric
    could tie by chance). One run folder reached by two spellings (``runs/ins-dv`` and
    ``runs/ins-dv/``, an experiment collected again after it moved, a copy under ``backup/``)
    was counted as two runs, with an sd of 0. Without a ``run_sha`` two trained runs count as one
    only when they agree on every metric to the last digit; a sweep's ``lr1/ins-dv`` and
    ``lr3/ins-dv`` end in other folders and are never compared. The latest evaluation stays; one
    warning names the labels."""
    none = pd.MultiIndex.from_tuples([], names=["run_id", "dataset"])
    if rows.empty or "value" not in rows.columns:
        return none
    key = ["dataset", "mode", "rng_seed", *(c for c in CONDITION_COLUMNS if c in rows.columns), "_folder"]
    cells = rows[["run_id", *key[:-1], "model", "metric"]].astype(str).assign(value=rows["value"].map(repr))
    parts = cells["model"].str.rstrip("/\\").str.split(r"[/\\]+")
    folder = "/" + parts.str[-2:].str.join("/")  # '/...': never a run_sha
    sha = rows["run_sha"].fillna("").astype(str).str.strip() if "run_sha" in rows.columns else ""
    if isinstance(sha, pd.Series):  # one training run, wherever its folder lies: scores need not tie
        folder = folder.where(sha == "", sha)
        cells = cells.assign(value=cells["value"].where(sha == "", ""))
    cells = _stamped(cells.assign(_folder=folder), rows)
    scores = cells.sort_values(["metric", "value"]).groupby(["run_id", "dataset"], sort=False)
    evals = scores.agg({**{c: "first" for c in key[1:]}, "model": "first", "_stamp": "max", "_order": "max"})
    evals["_scores"] = scores.apply(lambda g: tuple(zip(g["metric"], g["value"])), include_groups=False)
    evals = evals.reset_index().sort_values(["_stamp", "_order"], na_position="first")
    same = evals.duplicated([*key, "_scores"], keep="last") & ~evals.duplicated(
        [*key, "_scores", "model"], keep="last"
    )
    if not same.any():
        return none
    kept = {tuple(r): m for r, m in zip(evals[[*key, "_scores"]].itertuples(index=False), evals["model"])}
    said = [
        f"{m} (as {kept[tuple(r)]})"
        for r, m in zip(evals.loc[same, [*key, "_scores"]].itertuples(index=False), evals.loc[same, "model"])
    ]
    warn_once(
        log,
        "%d evaluation(s) repeat another model label's training run (its run_sha, or, without one, its "
        "scores on every metric) and are left out as the same run under another name: %s",
        int(same.sum()),
        "; ".join(dict.fromkeys(said[:3])),
    )
    return pd.MultiIndex.from_frame(evals.loc[same, ["run_id", "dataset"]])


def check_per_query(rows: pd.DataFrame, per_query: pd.DataFrame, metrics) -> None:
    """``per_query`` against the results ``rows`` a comparison or figure uses, for ``metrics``.

    A run's per-query mean that is more than 0.05 (x100) from its ``value`` (a per-query file of
    another table, or an edited copy) is a ``DataError`` naming both files and the run: its
    intervals and tests would contradict the table's numbers. ``evaluate`` writes values that are
    the mean of their per-query scores; an aggregate set's (``followir``: query ids
    ``<collection>/<qid>``) is the mean of its collections' means, and is checked so. Runs with no
    per-query rows are left out of those intervals and tests: one warning names them.
    """
    used = rows[rows["metric"].isin(list(metrics)) & rows["value"].notna()]
    if used.empty:
        return
    key = ["run_id", "dataset", "metric"]
    pq = per_query[per_query["metric"].isin(list(metrics)) & per_query["value"].notna()].astype(
        {k: str for k in key}
    )
    part = pq["query_id"].astype(str).str.split("/", n=1)
    pq = pq.assign(_part=part.str[0].where(part.str.len() == 2, ""))  # '' : not an aggregate's query
    parts = pq.groupby([*key, "_part"])["value"].mean().reset_index()
    means = parts.groupby(key)["value"].mean().rename("_pq").reset_index()  # a plain mean without parts
    joined = used.astype({k: str for k in key}).merge(means, on=key, how="left")
    apart = joined[(joined["_pq"] - joined["value"]).abs() > 0.05]
    if len(apart):
        r = apart.iloc[0]
        raise DataError(
            frame_path(per_query, "<per-query>"),
            None,
            f"{len(apart)} run(s) disagree with {frame_path(rows, 'the results table')}: run {r['run_id']} "
            f"{r['dataset']} {r['metric']} averages {r['_pq']:.4f} over its queries here, {r['value']:.4f} "
            "there (a per-query file of another table, or one cut by a crash?); give each table its own "
            "per-query file, or evaluate the run again",
            "value",
        )
    lacking = joined[joined["_pq"].isna()]
    if len(lacking):
        warn_once(
            log,
            "%d run(s) of %s have no per-query scores in %s and are left out of intervals and tests "
            "that need them: %s",
            lacking["run_id"].nunique(),
            frame_path(rows, "the results table"),
            frame_path(per_query, "the per-query table"),
            ", ".join(dict.fromkeys(lacking["run_id"].head(5))),
        )


def runs_to_read(
    rows: pd.DataFrame, path: str | None = None, whole: pd.DataFrame | None = None
) -> pd.DataFrame:
    """What every reading path (``ifir table``, summaries and figures, ``ifir compare``) does to the
    results rows it averages, so that they agree: a run id shared by two runs on a set
    (``check_run_ids``) or a set name shared by two sets (``check_data_sets``) is a ``DataError``
    naming ``path`` (default: the frame's ``attrs['path']``), and so is a run id holding two
    different values for one set and metric; exact repeats of a row are left out with a warning
    (``drop_repeated_rows``); mixed conditions draw a warning (``warn_if_mixed``); one evaluation
    per run and set is kept, the latest (``one_evaluation_per_run``), and one model label per run
    (``same_run_under_two_labels``, judged on ``whole``: the table ``rows`` were filtered from,
    so that every reader leaves out the same evaluations)."""
    path = path or frame_path(rows)
    check_run_ids(rows, path)
    check_data_sets(rows, path)
    warn_if_mixed(rows)
    kept = one_evaluation_per_run(drop_repeated_rows(rows))
    gone = same_run_under_two_labels(rows if whole is None else whole)
    kept = kept[~pd.MultiIndex.from_frame(kept[["run_id", "dataset"]].astype(str)).isin(gone)]
    warn_shared_rng_seeds(kept)
    return kept


def warn_shared_rng_seeds(rows: pd.DataFrame) -> None:
    """One warning when two models of one mode carry one rng_seed on a set (other settings, other
    base models where the rows are not split by ``backbone``, or a second training of one run):
    readers average them as replicates, and the spread between them would be read as
    seed-to-seed variation."""
    cols = [
        "dataset",
        "mode",
        "rng_seed",
        *(c for c in (*CONDITION_COLUMNS, "backbone") if c in rows.columns),
    ]
    if rows.empty or not set(cols) <= set(rows.columns) or "model" not in rows.columns:
        return
    models = rows[[*cols, "model"]].astype(str).drop_duplicates().groupby(cols)["model"].agg(list)
    shared = models[models.map(len) > 1]
    if shared.empty:
        return
    said = [f"{k[1]} rng_seed {k[2]} on {k[0]}: {', '.join(v[:3])}" for k, v in shared.items()]
    warn_once(
        log,
        "%d group(s) of runs share an rng_seed within a mode and are averaged as replicates (%s): runs "
        "of one mode should differ in their rng_seed only; keep other settings in other tables, or "
        "label a variant with its own --mode",
        len(shared),
        "; ".join(said[:3]),
    )
