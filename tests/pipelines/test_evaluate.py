"""``evaluate_models``' checks before any model loads: sets named alike, a folder named like a
bundled set, a set the table holds with other content (``data_sha``), a run id reused, and what
every row records (the set's digest, one spelling of its rng_seed).

A model name that does not exist (``no-such-model``) shows that a check ran before any model
load: a ``ConfigError`` about the sets or the table, never the model's ``DataError``.
"""

import logging
import os
import shutil

import pandas as pd
import pytest

from ifir_lib.core.config import FOLLOWIR_DIR
from ifir_lib.core.errors import ConfigError, DataError
from ifir_lib.core.run_folder import RunFolder
from ifir_lib.evaluation.corpora import content_digest, load_followir, write_followir
from ifir_lib.pipelines.evaluate import _label, evaluate_models, format_result
from ifir_lib.pipelines.registry import runs_table
from ifir_lib.reporting import results as R
from ifir_lib.testing.inputs import synthetic_followir
from support.fakes import fake_result
from support.runs import recorded_run

NO_MODEL = "no-such-model-ifir-test"


def _set(folder, rng_seed=0):
    return write_followir(synthetic_followir(3, 20, 10, rng_seed=rng_seed), folder)


def _run(**kw):
    return evaluate_models([NO_MODEL], bootstrap=0, style=None, **kw)


def test_two_folders_of_one_name_are_refused_before_any_model_loads(tmp_path):
    a, b = _set(tmp_path / "orig" / "eval"), _set(tmp_path / "mine" / "eval", rng_seed=1)
    out = tmp_path / "r.csv"
    with pytest.raises(ConfigError) as e:
        _run(followir=[a, b], results_csv=out)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and str(a) in msg and str(b) in msg and "'eval'" in msg
    assert "rename a folder" in msg and not out.exists()
    with pytest.raises(ConfigError, match="FollowIR folder .* and BEIR folder .* share the name 'eval'"):
        _run(followir=[a], beir=[b])


@pytest.mark.slow
def test_a_folder_given_twice_is_evaluated_once_and_rows_record_its_digest_and_seed(
    tmp_path, monkeypatch, caplog, private_cache
):
    folder = _set(tmp_path / "orig" / "eval")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.csv"
    with caplog.at_level(logging.WARNING):
        found = evaluate_models(
            ["minilm"],
            followir=["orig/eval", "./orig/eval/"],
            results_csv=out,
            bootstrap=0,
            rng_seed="01",
            style=None,
        )
    assert [r.dataset for r in found["minilm"]] == ["eval"]
    assert "given twice" in caplog.text and "evaluated once" in caplog.text
    df = R.load_results(out)
    assert len(df) == len(df["metric"].unique()) == 4  # one result, not two
    assert set(df["data_sha"]) == {content_digest(load_followir(folder))}
    assert set(df["rng_seed"]) == {"1"} and "s1-" in df["run_id"].iloc[0]
    assert out.read_text().splitlines()[1].split(",")[3] == "1"  # written as 1, not '01'
    pq = R.load_per_query(out)
    assert len(pq) == len(pq.drop_duplicates(["run_id", "dataset", "metric", "query_id"]))


def test_a_folder_named_like_a_bundled_set_must_hold_its_content(tmp_path):
    mine = tmp_path / "mine" / FOLLOWIR_DIR.name
    shutil.copytree(FOLLOWIR_DIR, mine)
    # an unchanged copy is the bundled set: the checks pass, and the model is looked up
    with pytest.raises(DataError, match=NO_MODEL):
        _run(followir=[mine])
    lines = (mine / "queries.jsonl").read_text().splitlines()
    (mine / "queries.jsonl").write_text("\n".join(lines[:4]) + "\n")  # a 4-query edit of v1
    with pytest.raises(ConfigError) as e:
        _run(followir=[mine], results_csv=tmp_path / "r.csv")
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and str(mine) in msg and "bundled set v1" in msg
    assert msg.endswith("rename the folder") and not (tmp_path / "r.csv").exists()


def test_a_set_the_table_holds_with_other_content_is_refused(tmp_path):
    folder = _set(tmp_path / "b" / "eval", rng_seed=1)
    out = tmp_path / "r.csv"
    R.save_result(fake_result("eval", [1.0, 2.0]), out, run_id="earlier", model="m", data_sha="0" * 16)
    before = out.read_bytes()
    with pytest.raises(ConfigError) as e:
        _run(followir=[folder], results_csv=out)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and str(out) in msg and "'eval'" in msg and "'earlier'" in msg
    assert "rename the folder, or write to another --out" in msg and out.read_bytes() == before


@pytest.mark.parametrize("sha", ["same", ""])
def test_skip_done_counts_a_row_of_the_same_content_or_of_unknown_content(tmp_path, sha):
    """A row of the same digest is done; so is one without a digest (a table written before the
    column), so a resumed run goes on as before. A changed folder is refused above, never skipped."""
    folder = _set(tmp_path / "eval")
    out = tmp_path / "r.csv"
    digest = content_digest(load_followir(folder)) if sha == "same" else ""
    R.save_result(fake_result("eval", [1.0]), out, run_id="x", model=NO_MODEL, data_sha=digest)
    assert _run(followir=[folder], results_csv=out, skip_done=True) == {}  # no model loaded


def test_skip_done_under_a_plan_counts_only_that_plan_s_rows(tmp_path):
    """A base row written by a plain ``ifir evaluate`` into an experiment's table was "already in
    results.csv" for the plan's collect, whose report reads only its own plan's rows."""
    folder = _set(tmp_path / "eval")
    out = tmp_path / "r.csv"
    digest = content_digest(load_followir(folder))
    R.save_result(fake_result("eval", [1.0]), out, run_id="x", model=NO_MODEL, data_sha=digest)
    assert _run(followir=[folder], results_csv=out, skip_done=True) == {}  # no plan: done
    with pytest.raises(DataError, match=NO_MODEL):  # the plan's own evaluation: the model is loaded
        _run(followir=[folder], results_csv=out, skip_done=True, plan="p1")


def test_an_explicit_run_id_names_one_model_s_run(tmp_path):
    folder = _set(tmp_path / "eval")
    out = tmp_path / "r.csv"
    with pytest.raises(ConfigError, match="run_id 'trial1' given for 2 models"):
        evaluate_models(["a", "b"], followir=[folder], results_csv=out, run_id="trial1", style=None)
    R.save_result(fake_result("other", [1.0]), out, run_id="trial1", model="minilm", mode="base")
    with pytest.raises(ConfigError) as e:  # another model under an id the table already uses
        _run(followir=[folder], results_csv=out, run_id="trial1", mode="ins-dv", rng_seed=0)
    msg = str(e.value)
    assert str(out) in msg and "'trial1'" in msg and "'minilm' (base, rng_seed 0)" in msg
    R.save_result(fake_result("eval", [1.0]), out, run_id="mine", model=NO_MODEL, mode="base")
    with pytest.raises(ConfigError, match="'mine' already has rows for eval"):  # the same set again
        _run(followir=[folder], results_csv=out, run_id="mine")
    with pytest.raises(DataError, match=NO_MODEL):  # the same run, another set: fine
        _run(followir=[_set(tmp_path / "other2")], results_csv=out, run_id="mine")


def test_rows_older_than_the_run_scored_the_model_that_lived_there_before(tmp_path):
    """A run deleted and trained again at the same path (in a minute, as the cpu preset can): its
    rows in the table predate the run's ``started`` time, so they are not 'done' (the model is
    evaluated again); rows written after it are."""
    import datetime

    folder = _set(tmp_path / "eval")
    run = tmp_path / "runs" / "ins-dv"
    run.mkdir(parents=True)
    RunFolder(run).start({"mode": "ins-dv", "rng_seed": 0}, git_commit="")  # started now, local time
    RunFolder(run).finish()
    out = tmp_path / "r.csv"
    label, digest = str(run), content_digest(load_followir(folder))
    row = dict(run_id="old", model=label, mode="ins-dv", rng_seed=0, data_sha=digest)
    R.save_result(fake_result("eval", [1.0]), out, **row)
    stamp = R.load_results(out).loc[0, "timestamp"]
    minute_before = (stamp - datetime.timedelta(seconds=60)).isoformat()
    out.write_text(out.read_text().replace(stamp.isoformat(), minute_before))  # the earlier model's row
    with pytest.raises(DataError, match="not a SentenceTransformer folder"):  # evaluated again: loads it
        evaluate_models([run], followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style=None)
    R.save_result(fake_result("eval", [1.0]), out, **dict(row, run_id="new"))  # written now
    assert evaluate_models([run], followir=[folder], results_csv=out, skip_done=True, style=None) == {}


def test_rows_of_another_run_copied_over_the_folder_are_not_its_rows(tmp_path):
    """Another machine's run copied over a run folder (rsync) started before the local rows were
    written (or on a clock of another time zone): skip_done took the old model's rows as the new
    run's, and every table read them for it. Rows record their run's identity (``run_sha``): one of
    another run is not done, whatever the clocks say; one of this run is."""
    folder = _set(tmp_path / "eval")
    run = recorded_run(tmp_path / "exp" / "ins-dv")  # before the rows
    out = tmp_path / "r.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=0, data_sha=content_digest(load_followir(folder)))
    R.save_result(fake_result("eval", [1.0]), out, run_id="a", run_sha="0123456789abcdef", **row)
    kw = dict(followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style=None)
    with pytest.raises(DataError, match="not a SentenceTransformer folder"):  # evaluated again: loads it
        evaluate_models([run.path], **kw)
    R.save_result(fake_result("eval", [1.0]), out, run_id="b", run_sha=run.identity(), **row)
    assert evaluate_models([run.path], **kw) == {}


def test_rows_of_this_run_are_its_rows_whatever_the_clocks_say(tmp_path, capsys):
    """A run's record holds a naive local ``started``; read on a laptop west of the GPU machine
    that wrote it, the rows of this very run (``run_sha`` = the folder's identity) seemed older than
    the run: each rerun evaluated it again and said the folder held another run. Rows of this run
    are done whatever the clocks say; rows without ``run_sha`` older than the run are named as such."""
    folder = _set(tmp_path / "eval")
    run = recorded_run(tmp_path / "exp" / "ins-dv", later=True)  # clocks ahead of the rows
    out = tmp_path / "r.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=0, data_sha=content_digest(load_followir(folder)))
    R.save_result(fake_result("eval", [1.0]), out, run_id="old", **row)  # no run_sha: judged by time
    kw = dict(followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style="line")
    with pytest.raises(DataError, match="not a SentenceTransformer folder"):  # evaluated again: loads it
        evaluate_models([run.path], **kw)
    said = capsys.readouterr().out
    assert "were written before" in said and "holds another run" not in said
    R.save_result(fake_result("eval", [1.0]), out, run_id="b", run_sha=run.identity(), **row)
    assert evaluate_models([run.path], **kw) == {}
    assert "already in r.csv" in capsys.readouterr().out


def test_evaluate_and_ifir_runs_agree_on_a_row_written_while_the_run_trained(tmp_path):
    """A row without ``run_sha`` written between a run's start and its finish (the folder evaluated
    while it trained again: the old model, or a clock apart): skip_done judged it against the run's
    ``started`` (done, skipped) and ``ifir runs`` against its ``finished`` (another model's), so the
    set was never evaluated for the run that ``ifir runs`` listed without it. One rule now
    (``registry.rows_of_run``): such a row, more than ``CLOCK_SLACK`` (26 h) before the finish of a
    longer training, is not the run's in either; a row after its finish is."""
    import datetime

    folder = _set(tmp_path / "eval")
    run = RunFolder(tmp_path / "models" / "ins-dv")
    run.path.mkdir(parents=True)
    now, fmt = datetime.datetime.now(), "%Y-%m-%dT%H:%M:%S"
    times = {"started": now - datetime.timedelta(hours=40), "finished": now + datetime.timedelta(hours=28)}
    run.write(
        {
            "mode": "ins-dv",
            "rng_seed": 0,
            "status": "finished",
            **{k: v.strftime(fmt) for k, v in times.items()},
        }
    )
    out = tmp_path / "r.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=0, data_sha=content_digest(load_followir(folder)))
    R.save_result(fake_result("eval", [1.0]), out, run_id="mid", **row)  # no run_sha, while it trained
    kw = dict(followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style=None)
    with pytest.raises(DataError, match="not a SentenceTransformer folder"):  # evaluated again: loads it
        evaluate_models([run.path], **kw)
    listed = runs_table(tmp_path).set_index("run")
    assert pd.isna(listed.loc["models/ins-dv", "eval:p_mrr"]) and listed.loc[str(run.path), "kind"] == "eval"
    run.update(finished=(now - datetime.timedelta(minutes=30)).strftime(fmt))  # the row is after its finish
    assert evaluate_models([run.path], **kw) == {}
    assert runs_table(tmp_path).set_index("run").loc["models/ins-dv", "eval:p_mrr"] == 1.0


def test_rows_written_right_after_a_summer_run_are_its_rows_read_in_winter_or_west_of_it(tmp_path):
    """A run's record holds naive local times. ``rows_of_run`` read them with today's UTC offset and
    no slack: a run finished on 2026-07-01 at 12:00 in Berlin (summer time, 10:00 UTC) read in winter
    (+1) seemed to end at 11:00 UTC, and read in UTC (a container west of the writer) at 12:00 UTC,
    so the rows written right after training (no ``run_sha``: an older table) were another model's:
    ``ifir evaluate`` evaluated the run again and ``ifir runs`` listed it without them. The times are
    now read with the zone rules of their date, against ``max(started, finished - CLOCK_SLACK)``;
    a row from before the run's start is still another model's."""
    import time

    folder = _set(tmp_path / "eval")
    run = RunFolder(tmp_path / "models" / "ins-dv")
    run.path.mkdir(parents=True)
    record = {"mode": "ins-dv", "rng_seed": 0, "status": "finished"}
    run.write({**record, "started": "2026-07-01T09:00:00", "finished": "2026-07-01T12:00:00"})
    out = tmp_path / "r.csv"
    row = dict(model=str(run.path), mode="ins-dv", rng_seed=0, data_sha=content_digest(load_followir(folder)))
    R.save_result(fake_result("eval", [5.0]), out, run_id="before", **row)
    R.save_result(fake_result("eval", [1.0]), out, run_id="after", **row)
    rows = pd.read_csv(out)  # before its start (07:00 UTC), and 30 s after its finish (10:00 UTC)
    rows["timestamp"] = rows["run_id"].map(
        {"before": "2026-07-01T06:59:00+00:00", "after": "2026-07-01T10:00:30+00:00"}
    )
    rows.to_csv(out, index=False)
    kw = dict(followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style=None)
    was = os.environ.get("TZ")
    try:
        for zone in ("Europe/Berlin", "UTC"):  # read in winter where it was written, and west of it
            os.environ["TZ"] = zone
            time.tzset()
            assert evaluate_models([run.path], **kw) == {}, zone  # done: not evaluated again
            listed = runs_table(tmp_path).set_index("run")
            assert listed.loc["models/ins-dv", "eval:p_mrr"] == 1.0, zone
            assert listed.loc[str(run.path), "eval:p_mrr"] == 5.0, zone  # before its start: another model
    finally:
        if was is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = was
        time.tzset()


def test_a_checkpoint_of_a_run_whose_length_was_capped_is_said_to_read_the_capped_length(tmp_path, caplog):
    """A run asked for ``max_seq_length`` 1024 on MiniLM trains at 512 (its positions); the record's
    config keeps 1024 (reruns compare it), and the checkpoint warning quoted it: "it reads 1024
    tokens". It now quotes the length training used (``trained_max_seq_length``)."""
    run = RunFolder(tmp_path / "run")
    ckpt = run.path / "checkpoints" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    config = {"base_model": "minilm", "max_seq_length": 1024}
    run.write({"mode": "ins-dv", "rng_seed": 3, "status": "running", "started": "2026-12-01T09:00:00"})
    run.update(config=config, trained_max_seq_length=512)
    with caplog.at_level("WARNING"), pytest.raises(DataError, match="not a SentenceTransformer folder"):
        evaluate_models([str(ckpt)], followir=[_set(tmp_path / "eval")], bootstrap=0, style=None, cache=False)
    assert "it reads 512 tokens (the training length)" in caplog.text and "1024" not in caplog.text


def test_a_run_folder_not_finished_is_named_with_its_status(tmp_path, caplog):
    """A run killed inside its final save (its record still ``running``), stopped or failed was
    scored and labelled as a finished run of its mode without a word (the folder may hold a half
    save or an earlier model). A warning names the folder and its status; nothing is refused
    (here the loader then refuses the folder, which has no model); a finished run is quiet."""
    folder = _set(tmp_path / "eval")
    run = RunFolder(tmp_path / "runs" / "ins-dv")
    run.path.mkdir(parents=True)
    for status in ("running", "stopped: interrupted", "failed: RuntimeError: boom"):
        run.write({"mode": "ins-dv", "rng_seed": 2, "started": "2026-01-01T09:00:00", "status": status})
        caplog.clear()
        with caplog.at_level("WARNING"), pytest.raises(DataError, match="not a SentenceTransformer folder"):
            evaluate_models([run.path], followir=[folder], bootstrap=0, style=None)
        assert f"{run.path}: its run record says status {status!r}, not finished" in caplog.text
        assert "labelled ins-dv, rng_seed 2" in caplog.text
    run.finish()
    caplog.clear()
    with caplog.at_level("WARNING"), pytest.raises(DataError, match="not a SentenceTransformer folder"):
        evaluate_models([run.path], followir=[folder], bootstrap=0, style=None)
    assert "not finished" not in caplog.text


def test_rows_of_a_run_whose_record_is_gone_are_kept_with_a_line(tmp_path, capsys):
    """A run folder deleted and a model saved at its path without ``ifir_run.json`` (a notebook's
    ``model.save``): the folder has no identity, so the old run's rows counted as its rows without
    a word. They still do (a run copied without its record is the same run), and a line names the
    folder and the run the rows record."""
    folder = _set(tmp_path / "eval")
    model = tmp_path / "exp" / "ins-dv"
    model.mkdir(parents=True)
    out = tmp_path / "r.csv"
    row = dict(model=str(model), mode="ins-dv", rng_seed=0, data_sha=content_digest(load_followir(folder)))
    R.save_result(fake_result("eval", [1.0]), out, run_id="a", run_sha="0123456789abcdef", **row)
    kw = dict(followir=[folder], results_csv=out, skip_done=True, bootstrap=0, style="line")
    assert evaluate_models([model], mode="ins-dv", rng_seed=0, **kw) == {}
    said = capsys.readouterr().out
    assert f"record run 0123456789abcdef, and {model} holds no run record" in said


def test_a_printed_line_names_its_set():
    """Each set prints one line per model: without the set's name, v1's and v2's lines of a model
    cannot be told apart (the demo printed two 'base rng_seed 0' lines)."""
    lines = []
    for name in ("followir_mini", "followir_v2"):
        r = fake_result(name, [1.0, 3.0])
        r.metrics.update(map_at_1000=80.0, ndcg_at_5=70.0)
        lines.append(format_result(r, mode="base", rng_seed=0))
    assert (
        lines[0].split() == "base rng_seed 0 followir_mini: p-MRR +2.00 MAP@1000 80.00 nDCG@5 70.00".split()
    )
    assert lines[1].split()[3] == "followir_v2:"


def test_a_run_folder_has_one_label_however_it_is_typed(tmp_path, monkeypatch):
    """``runs/ins-dv/`` (tab completion) and ``./runs/ins-dv`` were labels of their own: skip_done
    missed the folder's rows and the tables read a second run."""
    (tmp_path / "runs" / "ins-dv").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert _label("runs/ins-dv/") == _label("./runs/ins-dv") == _label("runs/ins-dv") == "runs/ins-dv"
    assert _label("sentence-transformers/all-MiniLM-L6-v2/") == "sentence-transformers/all-MiniLM-L6-v2/"


def test_a_label_that_contradicts_the_run_record_is_refused_or_named(tmp_path, caplog):
    """``ifir evaluate --rng-seed 1`` on a run recorded as rng_seed 0 listed one model as two runs:
    a run-to-run spread and a smaller p that were not there. Another mode is named in a warning
    (a sweep's variant may be labelled on purpose)."""
    from ifir_lib.core.run_folder import RunFolder
    from ifir_lib.pipelines.evaluate import labels_of

    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.start({"mode": "ins-dv", "rng_seed": 0}, "abc")
    assert labels_of(run.path) == ("ins-dv", 0) == labels_of(run.path, "ins-dv", "0")
    with pytest.raises(ValueError, match=r"run record says rng_seed 0, not '1'"):
        labels_of(run.path, None, "1")
    with caplog.at_level("WARNING"):
        assert labels_of(run.path, "ins-dv-lr3") == ("ins-dv-lr3", 0)
    assert "labelled ins-dv-lr3, though its run record says ins-dv" in caplog.text
    caplog.clear()
    labels_of(run.path, "INS-DV")  # the record's mode in another case: no warning
    assert "though its run record says" not in caplog.text
    assert labels_of(run.path, "base", 0) == ("base", 0)  # an experiment may start from a trained run


@pytest.mark.slow
def test_a_run_folder_copied_under_other_folders_is_one_run(tmp_path, minilm, private_cache, caplog):
    """A finished run copied to ``backup/run-a`` and evaluated there too was a second run (sd 0,
    a smaller p): its label ends in other folders, and scores need not tie to the last digit
    (another machine). Both rows carry the run's identity (``run_sha``), so the readers keep one;
    the same folder trained again is another run."""
    folder = _set(tmp_path / "eval")
    run = RunFolder(tmp_path / "exp" / "models" / "ins-dv")
    minilm.save(str(run.path))
    run.start({"mode": "ins-dv", "rng_seed": 0, "config": {"lr": 1e-5}, "data": {"sha256": "ab"}}, "c0")
    run.finish()
    copy = tmp_path / "backup" / "run-a"
    shutil.copytree(run.path, copy)
    out = tmp_path / "r.csv"
    evaluate_models([run.path, copy], followir=[folder], results_csv=out, bootstrap=0, style=None)
    table = R.load_results(out)
    assert table["run_sha"].nunique() == 1 and len(table["run_sha"].iloc[0]) == 16
    with caplog.at_level(logging.WARNING):
        kept = R.runs_to_read(table)
    assert kept["model"].nunique() == 1 and "same run under another name" in caplog.text
    assert kept["model"].iloc[0] == str(copy)  # the latest evaluation stays
    info = run.info()
    run.write({**info, "started": "2099-01-01T00:00:00"})  # trained again in its folder: a new run
    assert run.identity() not in ("", table["run_sha"].iloc[0])
    assert RunFolder(tmp_path / "eval").identity() == ""  # not a run


@pytest.mark.parametrize("name", ["followir", "InfoSearch-Length", "mair_ifeval", "Mean"])
def test_a_folder_named_like_a_paper_set_or_an_aggregate_is_refused(tmp_path, name):
    """A copy of v1 saved as ``followir/`` or ``InfoSearchLength/`` filled the paper's columns
    beside the paper's numbers (its MAP@1000 shown as 'FollowIR Score'), and one named ``mean``
    stood for every set in the summaries."""
    folder = _set(tmp_path / name)
    with pytest.raises(ConfigError, match=f"a folder named '{name}' would be read as .*rename the folder"):
        _run(followir=[folder])
    with pytest.raises(DataError, match="no-such-model"):  # a free name gets as far as the model
        _run(followir=[_set(tmp_path / "mybench")])


def test_a_training_checkpoint_is_named_with_its_run_and_the_length_it_reads(tmp_path, bundled_seeds, caplog):
    """A kept checkpoint (``--keep-checkpoints``, or an interrupted run's last) was scored as mode
    ``base``, rng_seed 0, at the training length (96 tokens in smoke) where the run's saved model
    reads 256, without a word; ``ifir compare`` then averaged it with the base as a replicate."""
    from ifir_lib.training.trainer import TrainConfig, train
    from ifir_lib.training.trainsets import build_trainset

    cfg = TrainConfig.preset("smoke", max_steps=2, save_steps=2, rng_seed=3)
    ts = build_trainset("ins-dv", bundled_seeds, budget=8, num_negatives=cfg.num_negatives)
    kw = dict(mode="ins-dv", manifest=ts.manifest(), device="cpu", keep_checkpoints=True)
    run = train(ts.examples, tmp_path / "run", cfg, **kw).run_dir
    ckpt = run / "checkpoints" / "checkpoint-2"
    with caplog.at_level("WARNING"):
        out = evaluate_models(
            [str(ckpt)], followir=[_set(tmp_path / "eval")], bootstrap=0, style=None, cache=False
        )
    assert out and f"{ckpt} is a training checkpoint of the run {run} (ins-dv, rng_seed 3)" in caplog.text
    assert "it reads 96 tokens (the training length) where the run's saved model reads 256" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        evaluate_models([str(run)], followir=[_set(tmp_path / "eval")], bootstrap=0, style=None, cache=False)
    assert "training checkpoint" not in caplog.text  # the run's own folder: no warning
