"""Nothing silently wrong: append-only files heal or refuse, run ids never collide, and ``ifir
evaluate`` checks its outputs and inputs before it loads a model.

Every case uses real files and the real command line (``ifir ...`` in-process) and asserts the
exit status, the one-line message and what must be left unchanged. A model name that does not
exist (``no-such-model``) shows that a check ran before any model load: the error must be about
the output or the input, never the model.
"""

import json
import logging
import time
from pathlib import Path

import pytest

from ifir_lib.cli import main
from ifir_lib.curation.decisions import CurationStore
from ifir_lib.evaluation.corpora import write_followir
from ifir_lib.reporting import results as R
from ifir_lib.testing.inputs import synthetic_followir
from ifir_lib.training.tracking import JsonlLog
from support.fakes import fake_result

NO_MODEL = "no-such-model-ifir-test"


def _table(path, runs=("a", "b")):
    for i, rid in enumerate(runs):
        R.save_result(fake_result("followir", [1.0, 2.0, 3.0]), path, run_id=rid, model="m", rng_seed=i)
    return path


def _cut(path, keep=12):
    """Cut ``path`` after the first ``keep`` bytes of its last row (fields lost), as a crash
    mid-write or a partial copy leaves it; returns the fragment left."""
    data = path.read_bytes()
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    path.write_bytes(data[: start + keep])
    return data[start : start + keep]


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- 1. append-only files heal or refuse, never glue ---------------------------------------


def test_append_to_a_cut_results_file_keeps_whole_rows_and_sets_the_cut_one_aside(tmp_path, capsys, caplog):
    path = _table(tmp_path / "results.csv")
    fragment = _cut(path)
    whole = path.read_bytes()[: path.read_bytes().rfind(b"\n") + 1]
    with caplog.at_level(logging.WARNING):
        _table(path, runs=("c",))
    sides = list(tmp_path.glob("results.csv.cut-*"))
    assert len(sides) == 1 and sides[0].read_bytes() == fragment
    assert f"{path}: its last line was cut" in caplog.text and str(sides[0]) in caplog.text
    assert path.read_bytes().startswith(whole)  # every whole row kept, byte for byte
    df = R.load_results(path)
    assert list(df["run_id"]) == ["a", "c"] and df["value"].notna().all()
    assert main(["table", "--results", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().err == ""


def test_a_cut_per_query_file_is_healed_too(tmp_path, caplog):
    path = _table(tmp_path / "results.csv")
    pq = R.per_query_path(path)
    fragment = _cut(pq, 5)
    with caplog.at_level(logging.WARNING):
        _table(path, runs=("c",))
    sides = list(tmp_path.glob("results_per_query.csv.cut-*"))
    assert len(sides) == 1 and sides[0].read_bytes() == fragment and str(sides[0]) in caplog.text
    df = R.load_per_query(path)
    assert len(df) == 3 + 2 + 3 and df["value"].notna().all()  # run b lost only its cut row


def test_reading_a_cut_results_file_drops_the_cut_row_and_names_it(tmp_path, capsys, caplog):
    path = _table(tmp_path / "results.csv")
    _cut(path)
    before = path.read_bytes()
    with caplog.at_level(logging.WARNING):
        assert main(["table", "--results", str(path), "--format", "csv"]) == 0
    assert f"{path}:3: dropping a cut last row (12 bytes) left by an interrupted write" in caplog.text
    assert capsys.readouterr().err == ""
    assert path.read_bytes() == before  # reading never changes the file


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path):
    path = _table(tmp_path / "results.csv")
    path.write_bytes(path.read_bytes().rstrip(b"\r\n"))  # written by another tool: no final newline
    _table(path, runs=("c",))
    assert list(R.load_results(path)["run_id"]) == ["a", "b", "c"]
    assert not list(tmp_path.glob("*.cut-*"))


def test_a_non_number_is_refused_on_write_and_nothing_is_written(tmp_path):
    path = _table(tmp_path / "results.csv")
    before = path.read_bytes(), R.per_query_path(path).read_bytes()
    rows = R.result_rows(fake_result("followir", [1.0, 2.0]), run_id="x", git="g")
    rows[0]["ci_low"] = "n/a"
    with pytest.raises(R.DataError) as e:
        R.append_results(path, rows)
    assert (
        str(e.value)
        == f"{path}: field 'ci_low': not a finite number: 'n/a' (run x, followir/p_mrr); nothing written"
    )
    rows[0]["ci_low"] = float("nan")  # NaN is written deliberately as an empty cell
    rows[0]["n_queries"] = 2.5
    with pytest.raises(R.DataError, match="field 'n_queries': not an integer: 2.5"):
        R.append_results(path, rows)
    assert (path.read_bytes(), R.per_query_path(path).read_bytes()) == before


def test_a_non_number_is_named_on_read_with_file_line_and_column(tmp_path, capsys):
    path = _table(tmp_path / "results.csv")
    text = path.read_text()
    path.write_text(
        text.replace(",2.0,1.0,3.0,", ",2.0,oops,3.0,", 2).replace(",2.0,oops,3.0,", ",2.0,1.0,3.0,", 1)
    )
    assert main(["table", "--results", str(path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line == f"ifir table: error: {path}:3: field 'ci_low': not a finite number: 'oops'"


def test_an_empty_cell_still_reads_as_missing(tmp_path):
    path = tmp_path / "results.csv"
    r = fake_result("fir", [1.0, 2.0])
    r.ci.clear()  # no interval: written as empty cells
    R.save_result(r, path, run_id="a", model="m")
    df = R.load_results(path)
    assert df["ci_low"].isna().all() and df["value"].iloc[0] == 1.5


def test_curation_log_with_a_cut_last_line_is_healed(tmp_path, caplog):
    path = tmp_path / "curation.jsonl"
    store = CurationStore(path)
    store.record("k1", "accept")
    store.record("k2", "reject")
    path.write_bytes(path.read_bytes()[:-10])
    with caplog.at_level(logging.WARNING):
        store = CurationStore(path)
        store.record("k3", "accept")
    assert [s.name.startswith("curation.jsonl.cut-") for s in tmp_path.iterdir() if ".cut-" in s.name] == [
        True
    ]
    assert CurationStore(path).decisions == {"k1": "accept", "k3": "accept"}


def test_training_log_with_a_cut_last_line_is_healed(tmp_path, caplog):
    log_file = tmp_path / "train_log.jsonl"
    log_file.write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n" + '{"step": 2, "lo')

    class State:
        is_world_process_zero, global_step = True, 3

    with caplog.at_level(logging.WARNING):
        JsonlLog(log_file, tmp_path / "heldout_log.jsonl").on_log(None, State(), None, logs={"loss": 0.25})
    rows = [json.loads(x) for x in log_file.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 3]
    assert [p.read_text() for p in tmp_path.glob("train_log.jsonl.cut-*")] == ['{"step": 2, "lo']


# ---- 2. run ids ------------------------------------------------------------------------------


def test_run_ids_are_unique_within_one_second_and_keep_their_shape():
    ids = [R.make_run_id("runs/ins-dv", "ins-dv", 1) for _ in range(200)]
    assert len(set(ids)) == 200
    prefix, stamp = ids[0].rsplit("-", 1)
    assert prefix == "ins-dv-ins-dv-s1"
    assert time.strptime(stamp.split(".")[0], "%Y%m%dT%H%M%S") and len(stamp.split(".")[1]) == 6


# ---- 3. check before work in ``ifir evaluate`` ----------------------------------------------


@pytest.fixture
def fir_ok(tmp_path):
    return write_followir(synthetic_followir(3, 20, 10, rng_seed=7), tmp_path / "fir")


def _evaluate(capsys, out, followir, model=NO_MODEL):
    t0 = time.perf_counter()
    code = main(["evaluate", "--model", model, "--followir", str(followir), "--out", str(out), "--no-cache"])
    took = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2 and took < 5, (code, took, err)
    line = _one_line(err)
    assert NO_MODEL not in line, line  # failed before the model was looked at
    return line


def test_evaluate_refuses_an_output_under_a_regular_file(tmp_path, capsys, fir_ok):
    blocker = tmp_path / "blocker"
    blocker.write_text("keep me\n")
    out = blocker / "results.csv"
    line = _evaluate(capsys, out, fir_ok)
    assert line == f"ifir evaluate: error: {out}: cannot be written: {blocker} is a file, not a folder"
    assert blocker.read_text() == "keep me\n"


def test_evaluate_refuses_an_output_that_is_a_folder(tmp_path, capsys, fir_ok):
    out = tmp_path / "results.csv"
    out.mkdir()
    line = _evaluate(capsys, out, fir_ok)
    assert line == f"ifir evaluate: error: {out}: cannot be written: it is a folder; name a file"
    assert list(out.iterdir()) == []


def test_evaluate_refuses_an_output_folder_it_cannot_create(capsys, fir_ok):
    """/proc refuses new folders even to root, so this runs in CI as well (a chmod would not)."""
    out = Path("/proc/ifir-no-such-folder/results.csv")
    line = _evaluate(capsys, out, fir_ok)
    assert (
        line
        == f"ifir evaluate: error: {out}: cannot be written: /proc is not writable (No such file or directory)"
    )


def test_evaluate_refuses_a_results_file_of_other_columns_before_work(tmp_path, capsys, fir_ok):
    out = tmp_path / "other.csv"
    out.write_text("a,b\n1,2\n")
    line = _evaluate(capsys, out, fir_ok)
    assert line.startswith(f"ifir evaluate: error: {out}:1: header ['a', 'b'] does not match")
    assert out.read_text() == "a,b\n1,2\n"


def _broken(tmp_path, how):
    """A FollowIR folder with one bad line appended: ``(file, its line number, the error's field text)``."""
    data = synthetic_followir(3, 20, 10, rng_seed=7)
    folder = write_followir(data, tmp_path / "fir")
    d0, q0 = sorted(data.corpus)[0], sorted(data.queries)[0]
    qrels = folder / "qrels_og" / "test.jsonl"
    first = json.loads(qrels.read_text().splitlines()[0])
    q, d, s = first["query-id"], first["corpus-id"], first["score"]
    name, row, what = {
        "duplicate document id": (
            "corpus.jsonl",
            {"_id": d0, "title": "", "text": "another text"},
            f"field '_id': duplicate id '{d0}' (first on line 1) with other content",
        ),
        "duplicate query id": (
            "queries.jsonl",
            {"_id": q0, "text": "t", "instruction_og": "i"},
            f"field '_id': duplicate id '{q0}' (first on line 1) with other content",
        ),
        "empty document": (
            "corpus.jsonl",
            {"_id": "empty-doc", "title": "", "text": "  "},
            "field 'text': document 'empty-doc' is empty (no text, no title)",
        ),
        "conflicting qrels": (
            "qrels_og/test.jsonl",
            {**first, "score": s + 1},
            f"field 'score': {s + 1} conflicts with {s} on line 1 for query '{q}', document '{d}'",
        ),
    }[how]
    path = folder / name
    n = len(path.read_text().splitlines()) + 1
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    return path, n, what


@pytest.mark.parametrize(
    "how", ["duplicate document id", "duplicate query id", "empty document", "conflicting qrels"]
)
def test_evaluate_checks_the_followir_folder_before_the_model(tmp_path, capsys, how):
    path, line_no, what = _broken(tmp_path, how)
    before = path.read_bytes()
    out = tmp_path / "out" / "results.csv"
    line = _evaluate(capsys, out, path.parent if path.parent.name == "fir" else path.parent.parent)
    assert line == f"ifir evaluate: error: {path}:{line_no}: {what}"
    assert path.read_bytes() == before and not out.exists()


def test_evaluate_refuses_a_non_integer_rng_seed_label_before_work(tmp_path, capsys, fir_ok):
    out = tmp_path / "results.csv"
    code = main(
        ["evaluate", "--model", NO_MODEL, "--followir", str(fir_ok), "--out", str(out), "--rng-seed", "x"]
    )
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert line == "ifir evaluate: error: rng_seed: the table's random-seed label must be an integer, not 'x'"


@pytest.mark.slow
def test_ifir_evaluate_appends_to_a_cut_results_file_without_gluing(
    tmp_path, capsys, caplog, fir_ok, private_cache
):
    path = _table(tmp_path / "results.csv")
    fragment = _cut(path)
    whole = path.read_bytes()[: path.read_bytes().rfind(b"\n") + 1]
    argv = [
        "evaluate",
        "--model",
        "minilm",
        "--followir",
        str(fir_ok),
        "--out",
        str(path),
        "--bootstrap",
        "0",
    ]
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--run-id", "real"]) == 0
    sides = list(tmp_path.glob("results.csv.cut-*"))
    assert [s.read_bytes() for s in sides] == [fragment] and str(sides[0]) in caplog.text
    assert path.read_bytes().startswith(whole)
    assert set(R.load_results(path)["run_id"]) == {"a", "real"}
    capsys.readouterr()
    assert main(["table", "--results", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().err == ""


def test_a_per_query_file_of_other_columns_is_refused_before_the_results_file_is_touched(tmp_path):
    path = _table(tmp_path / "results.csv")
    pq = R.per_query_path(path)
    pq.write_text("x,y\n1,2\n")
    before = path.read_bytes()
    with pytest.raises(R.DataError, match=r"results_per_query.csv:1: header \['x', 'y'\] does not match"):
        _table(path, runs=("c",))
    assert path.read_bytes() == before and pq.read_text() == "x,y\n1,2\n"


# ---- 3. a set, a run id, a file: each read as what it is ------------------------------------


def test_evaluate_refuses_two_folders_of_one_name_before_the_model(tmp_path, capsys):
    a = write_followir(synthetic_followir(3, 20, 10, rng_seed=7), tmp_path / "orig" / "eval")
    b = write_followir(synthetic_followir(3, 20, 10, rng_seed=8), tmp_path / "mine" / "eval")
    out = tmp_path / "results.csv"
    argv = ["evaluate", "--model", NO_MODEL, "--followir", str(a), "--followir", str(b), "--out", str(out)]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("ifir evaluate: error: FollowIR folder") and str(a) in line and str(b) in line
    assert NO_MODEL not in line and not out.exists()


def test_table_reads_every_results_file_given(tmp_path, capsys):
    for sub, dataset, values in (("a", "followir_mini", [1, 2, 3]), ("b", "followir_v2", [7, 8, 9])):
        R.save_result(
            fake_result(dataset, values), tmp_path / sub / "results.csv", model="minilm", rng_seed=0
        )
    a, b = str(tmp_path / "a" / "results.csv"), str(tmp_path / "b" / "results.csv")
    assert main(["table", "--results", a, "--results", b, "--format", "csv"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[1].endswith(",2.00,8.00") and out.err == ""  # v1 from a, v2 from b


def test_figures_refuse_a_repeated_results_file(tmp_path, capsys):
    a = _table(tmp_path / "a.csv")
    b = _table(tmp_path / "b.csv")
    assert main(["figures", "--results", str(a), "--results", str(b), "--out", str(tmp_path / "f")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("ifir figures: error: --results given 2 times") and str(a) in line
    assert not (tmp_path / "f").exists()
