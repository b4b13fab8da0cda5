"""mteb 2.x fidelity: the same model on the same local data, our code vs mteb.evaluate; offline behaviour."""

import json
import time

import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import DatasetUnavailable
from ifir_lib.evaluation import evaluator as E
from ifir_lib.evaluation import metrics as M
from ifir_lib.evaluation import mteb_glue
from ifir_lib.evaluation.corpora import FOLLOWIR_TASKS, write_followir
from ifir_lib.testing.inputs import synthetic_followir

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture(params=["stored", "custom"])
def model(request, minilm):
    """MiniLM with its stored prompts ('' / ''), and with non-empty ones both sides must apply."""
    saved = dict(minilm.prompts)
    if request.param == "custom":
        minilm.prompts = {"query": "query: ", "document": "passage: "}
    yield minilm
    minilm.prompts = saved


@pytest.mark.slow
def test_ours_equals_mteb_on_local_followir(model, tmp_path):
    folder = write_followir(synthetic_followir(4, 40, 20, rng_seed=7), tmp_path / "fir")
    ours = E.evaluate_followir(model, folder, bootstrap=0)
    task = mteb_glue.local_followir_task(folder)
    theirs = mteb_glue.evaluate_mteb_task(model, task, bootstrap=0)
    assert theirs.source == "mteb" and theirs.dataset == ours.dataset == "fir"
    # p-MRR: mteb reports it unrounded
    assert ours.metrics["p_mrr"] == pytest.approx(theirs.metrics["p_mrr"], abs=1e-6)
    # MAP@1000 / nDCG@5: mteb rounds the fraction to 5 decimals; equal at that precision ...
    for m in ("map_at_1000", "ndcg_at_5"):
        assert round(ours.metrics[m] / 100, 5) == pytest.approx(theirs.metrics[m] / 100, abs=1e-9)
    # ... and per query, recomputed on mteb's own run, equal to 1e-6 (x100)
    for m in ("p_mrr", "map_at_1000", "ndcg_at_5"):
        assert ours.per_query[m].keys() == theirs.per_query[m].keys()
        for q, v in ours.per_query[m].items():
            assert v == pytest.approx(theirs.per_query[m][q], abs=1e-6)
    # the rankings themselves agree: same candidates, same order, scores to float32 precision
    for which in ("og", "changed"):
        for q, run in ours.runs[which].items():
            assert M.ranks(run) == M.ranks(theirs.runs[which][q])
            assert max(abs(s - theirs.runs[which][q][d]) for d, s in run.items()) < 1e-5


@pytest.mark.slow
def test_benchmark_prompts_on_followir_are_mtebs_in_both_engines(minilm, tmp_path):
    """FollowIR's rule is mteb's: the stored query / document prompts, so ``benchmark`` = ``model``."""
    saved = dict(minilm.prompts)
    minilm.prompts = {"query": "query: ", "document": "passage: "}
    try:
        folder = write_followir(synthetic_followir(3, 30, 15, rng_seed=5), tmp_path / "fir")
        ours = E.evaluate_followir(minilm, folder, bootstrap=0, prompts="benchmark")
        as_model = E.evaluate_followir(minilm, folder, bootstrap=0)
        theirs = mteb_glue.evaluate_mteb_task(
            minilm, mteb_glue.local_followir_task(folder), bootstrap=0, prompts="benchmark"
        )
    finally:
        minilm.prompts = saved
    assert ours.prompts == theirs.prompts == "benchmark" and as_model.prompts == "model"
    assert ours.runs == as_model.runs and ours.fingerprint == as_model.fingerprint  # one cache entry
    assert ours.metrics["p_mrr"] == pytest.approx(theirs.metrics["p_mrr"], abs=1e-6)
    for q, run in ours.runs["og"].items():
        assert M.ranks(run) == M.ranks(theirs.runs["og"][q])


@pytest.mark.slow
def test_ours_equals_mteb_on_local_beir(minilm, tmp_path):
    data = synthetic_followir(3, 30, rng_seed=9)
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, **v}) + "\n" for d, v in data.corpus.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": v["text"] + " " + v["instruction_changed"]}) + "\n"
            for q, v in data.queries.items()
        )
    )
    (root / "qrels" / "test.jsonl").write_text(
        "".join(
            json.dumps({"query-id": q, "corpus-id": d, "score": s}) + "\n"
            for q, ds in data.qrels_changed.items()
            for d, s in ds.items()
        )
    )
    ours = E.evaluate_beir(minilm, root, bootstrap=0)
    theirs = mteb_glue.evaluate_mteb_task(minilm, mteb_glue.local_retrieval_task(root), bootstrap=0)
    assert round(ours.metrics["ndcg_at_10"] / 100, 5) == pytest.approx(
        theirs.metrics["ndcg_at_10"] / 100, abs=1e-9
    )
    for q, v in ours.per_query["ndcg_at_10"].items():
        assert v == pytest.approx(theirs.per_query["ndcg_at_10"][q], abs=1e-6)


def test_missing_dataset_fails_fast_with_one_clear_message():
    task = mteb_glue.get_task("Core17InstructionRetrieval")
    t = time.perf_counter()
    with pytest.raises(DatasetUnavailable, match="not in the local cache"):
        mteb_glue.check_task_available(task)
    assert time.perf_counter() - t < 5


def test_cli_named_task_offline_exit_2(capsys):
    rc = main(["evaluate", "--model", "minilm", "--tasks", "followir", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 3  # one line per missing dataset
    for line, name in zip(err, mteb_glue.FOLLOWIR_TASKS, strict=True):
        assert name in line and "not in the local cache" in line


def test_unknown_task_name_is_a_data_error():
    with pytest.raises(mteb_glue.DataError, match="not an mteb task name"):
        mteb_glue.get_task("NoSuchTask123")


def test_task_names_and_score_metrics():
    assert mteb_glue.expand_task_names(["followir,SciFact"]) == list(mteb_glue.FOLLOWIR_TASKS) + ["SciFact"]
    assert [mteb_glue.score_metric_for(n) for n in mteb_glue.FOLLOWIR_TASKS] == [
        "map_at_1000",
        "ndcg_at_5",
        "map_at_1000",
    ]
    assert (
        mteb_glue.score_metric_for("news21-mini") == "ndcg_at_5"
        and mteb_glue.score_metric_for("mini") == "map_at_1000"
    )


def test_followir_aggregate_is_the_mean_of_dataset_means():
    def fake(name, pm, sc):
        return E.EvalResult(
            name,
            "m",
            {"p_mrr": sum(pm) / len(pm), "score": sum(sc) / len(sc)},
            {},
            {
                "p_mrr": {f"q{i}": v for i, v in enumerate(pm)},
                "score": {f"q{i}": v for i, v in enumerate(sc)},
            },
        )

    rs = [
        fake("Robust04InstructionRetrieval", [1, 3], [20, 22]),
        fake("News21InstructionRetrieval", [10], [30]),
        fake("Core17InstructionRetrieval", [-2, 0, 2], [15, 15, 15]),
    ]
    agg = mteb_glue.aggregate_followir(rs, bootstrap=200)
    assert agg.metrics["p_mrr"] == pytest.approx((2 + 10 + 0) / 3)
    assert agg.metrics["score"] == pytest.approx((21 + 30 + 15) / 3)
    assert agg.n_queries == {"p_mrr": 6, "score": 6}
    assert "News21InstructionRetrieval/q0" in agg.per_query["p_mrr"]
    lo, hi = agg.ci["p_mrr"]
    assert lo <= agg.metrics["p_mrr"] <= hi


def test_rows_of_mteb_s_engine_saved_by_hand_record_the_set_s_digest(minilm, fir, beir):
    """``evaluate_mteb_task`` (``--engine mteb``'s path) + ``save_result`` wrote rows without
    ``data_sha``, where ``evaluate_followir``'s carry it: an edited copy of a set under its name
    was read as that set. Each now records the digest our engine records for the same folder."""
    from ifir_lib.evaluation.corpora import content_digest, load_beir, load_followir
    from ifir_lib.reporting.results import result_rows

    fol = mteb_glue.evaluate_mteb_task(minilm, mteb_glue.local_followir_task(fir), bootstrap=0)
    ret = mteb_glue.evaluate_mteb_task(minilm, mteb_glue.local_retrieval_task(beir), bootstrap=0)
    assert fol.data_sha == content_digest(load_followir(fir))  # what evaluate_followir's rows record
    assert ret.data_sha == content_digest(load_beir(beir))
    assert {r["data_sha"] for r in result_rows(fol, run_id="a")} == {fol.data_sha}
    named = {n: E.EvalResult(n, "m", {"p_mrr": 1.0, "score": 2.0}, {}, {}) for n in FOLLOWIR_TASKS}
    for i, r in enumerate(named.values()):
        r.data_sha = f"{i:016d}"
    agg = mteb_glue.aggregate_followir(list(named.values()), bootstrap=0)
    assert agg.data_sha == mteb_glue.followir_digest({n: r.data_sha for n, r in named.items()}) != ""
