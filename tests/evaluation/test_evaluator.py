"""Our FollowIR / BEIR evaluation with MiniLM on tiny synthetic sets; cache; results table; CLI."""

import copy
import json
import math

import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.evaluation import embed_cache
from ifir_lib.evaluation import evaluator as E
from ifir_lib.evaluation.corpora import content_digest, load_beir, load_followir, write_followir
from ifir_lib.reporting import results as R

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture(scope="module")
def result(minilm, fir):
    """One uncached evaluation shared by the read-only tests below."""
    return E.evaluate_followir(minilm, fir, bootstrap=200, cache=False)


@pytest.fixture
def encode_log(monkeypatch):
    """Record every batch of texts that reaches the model."""
    calls = []
    real = embed_cache.encode

    def spy(model, texts, kind, **kw):
        calls.append((kind, list(texts)))
        return real(model, texts, kind, **kw)

    monkeypatch.setattr(embed_cache, "encode", spy)
    return calls


@pytest.mark.slow
def test_followir_metrics_intervals_and_runs(result):
    res = result
    assert set(res.metrics) == {"p_mrr", "map_at_1000", "ndcg_at_5", "score"}
    assert res.metrics["score"] == res.metrics["map_at_1000"] and res.score_metric == "map_at_1000"
    for m, v in res.metrics.items():
        lo, hi = res.ci[m]
        assert lo <= v <= hi and -100 <= v <= 100
        assert res.n_queries[m] == 4 and v == pytest.approx(sum(res.per_query[m].values()) / 4)
    assert set(res.runs["og"]["q1"]) == set(res.data.top_ranked["q1"])
    # the changed instruction names the country: MiniLM moves the other countries' documents down
    assert res.metrics["p_mrr"] > 0


@pytest.mark.slow
def test_each_text_encoded_once_then_cached(minilm, fir, result, encode_log):
    first = E.evaluate_followir(minilm, fir, bootstrap=0)
    assert first.metrics == pytest.approx(result.metrics, abs=1e-6)  # cache on = cache off
    data = first.data
    docs = [t for k, ts in encode_log if k == "document" for t in ts]
    queries = [t for k, ts in encode_log if k == "query" for t in ts]
    candidates = {d for c in data.top_ranked.values() for d in c}
    assert len(docs) == len(set(docs)) == len(candidates)  # shared by the og and changed runs
    assert len(queries) == len(set(queries)) == 2 * len(data.queries)
    encode_log.clear()
    again = E.evaluate_followir(minilm, fir, bootstrap=0)
    assert encode_log == []  # all from the on-disk cache
    assert again.metrics == first.metrics and again.runs == first.runs
    assert (embed_cache.cache_dir() / "emb" / first.fingerprint).is_dir()


def test_ranking_table_explains_the_query_p_mrr(result):
    res = result
    t = E.ranking_table(res, "q1", top=5)
    flagged = t[t["changed_doc"]]
    assert set(flagged["doc_id"]) == set(res.qrel_diff["q1"])
    assert (t["moved"] == t["og_rank"] - t["changed_rank"]).all()
    assert flagged["p_mrr_contribution"].sum() == pytest.approx(res.per_query["p_mrr"]["q1"])
    assert (flagged["rel_og"] > 0).all() and (flagged["rel_changed"] == 0).all()
    assert list(t["og_rank"]) == sorted(t["og_rank"])


@pytest.mark.slow
def test_beir_ndcg_at_10(minilm, beir):
    res = E.evaluate_beir(minilm, beir, bootstrap=100)
    assert set(res.metrics) == {"ndcg_at_10"} and res.n_queries["ndcg_at_10"] == 4
    assert 0 < res.metrics["ndcg_at_10"] <= 100
    assert all(len(r) == 40 for r in res.runs["run"].values())  # full corpus ranked


@pytest.mark.slow
def test_cli_json_contract_and_table(fir, tmp_path, capsys):
    from ifir_lib.cli import main

    out = tmp_path / "res.csv"
    rc = main(
        [
            "evaluate",
            "--model",
            "minilm",
            "--followir",
            str(fir),
            "--json",
            "--out",
            str(out),
            "--mode",
            "ins-dv",
            "--rng-seed",
            "3",
            "--bootstrap",
            "100",
        ]
    )
    assert rc == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    obj = json.loads(last)
    for m in ("p_mrr", "map_at_1000", "ndcg_at_5"):
        assert isinstance(obj[m], float) and obj[f"{m}_ci_low"] <= obj[m] <= obj[f"{m}_ci_high"]
    df = R.load_results(out)
    assert set(df["metric"]) == {"p_mrr", "map_at_1000", "ndcg_at_5", "score"}
    assert set(df["mode"]) == {"ins-dv"} and set(df["rng_seed"]) == {"3"} and set(df["model"]) == {"minilm"}
    assert math.isclose(df.set_index("metric").loc["p_mrr", "value"], obj["p_mrr"], abs_tol=1e-4)


def test_cli_bad_folder_is_one_line_exit_2(tmp_path, capsys):
    from ifir_lib.cli import main

    rc = main(["evaluate", "--model", "minilm", "--followir", str(tmp_path / "nope")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "not a directory" in err[0]


def test_table_lists_each_metric_with_its_interval():
    from ifir_lib.evaluation.evaluator import EvalResult

    r = EvalResult(
        dataset="d",
        model="m",
        metrics={"p_mrr": 4.256, "map_at_1000": 70.0},
        ci={"p_mrr": (1.0, 7.5)},
        per_query={"p_mrr": {"q1": 3.0, "q2": 5.5}},
    )
    t = r.table()
    assert list(t["metric"]) == ["p_mrr", "map_at_1000"]
    assert t.loc[0, ["value", "ci_low", "ci_high", "queries"]].tolist() == [4.26, 1.0, 7.5, 2]
    assert t.loc[1, "queries"] == 0 and t["ci_low"].isna().tolist() == [False, True]


def test_a_model_declaring_dot_similarity_is_named(minilm, fir, caplog):
    """This engine ranks by cosine; mteb's ranks by the model's own similarity (p-MRR -5.03 vs
    -3.96 on v1 for MiniLM without its Normalize module, scored by dot): rows of the two engines
    are not one number. With the Normalize module dot is cosine, and nothing is said."""
    from sentence_transformers import SentenceTransformer

    raw = SentenceTransformer(modules=[minilm[0], minilm[1]], device="cpu", similarity_fn_name="dot")
    with caplog.at_level("WARNING"):
        E.evaluate_followir(raw, fir, bootstrap=0, name="dot-minilm", cache=False)
    assert "dot-minilm declares similarity 'dot'; this engine ranks by cosine" in caplog.text
    caplog.clear()
    unit = SentenceTransformer(
        modules=[minilm[0], minilm[1], minilm[2]], device="cpu", similarity_fn_name="dot"
    )
    with caplog.at_level("WARNING"):
        E.evaluate_followir(unit, fir, bootstrap=0, name="unit-dot", cache=False)
    assert "declares similarity" not in caplog.text


def test_an_instruction_change_past_the_models_length_is_named(minilm, fir, caplog):
    """A changed sentence after MiniLM's 256 tokens: both runs are one ranking and p-MRR is 0 by
    construction; those zeros were averaged in without a word (probe 46 N, 16 of 32 v1 queries)."""
    import copy

    from ifir_lib.evaluation.corpora import load_followir

    data = copy.deepcopy(load_followir(fir))
    background = " ".join(["The committee reviewed the background of the matter at length."] * 40)
    first, second = list(data.queries)[:2]
    for q in (first, second):  # same long preamble before both instructions, the change at the end
        v = data.queries[q]
        v["instruction_og"] = background + " " + v["instruction_og"]
        v["instruction_changed"] = background + " " + v["instruction_changed"]
    assert E.changes_cut_off(minilm, data) == [first, second]
    with caplog.at_level("WARNING"):
        res = E.evaluate_followir(minilm, data, bootstrap=0, cache=False)
    said = f"2 of {len(data.queries)} queries read the same with both instructions once cut at"
    assert said in caplog.text and any(said in p for p in res.problems)
    assert res.per_query["p_mrr"][first] == 0.0
    assert E.changes_cut_off(minilm, load_followir(fir)) == []
    from ifir_lib.evaluation.corpora import write_followir
    from ifir_lib.pipelines.evaluate import evaluate_models

    long = write_followir(data, fir.parent / "long")
    caplog.clear()
    with caplog.at_level("WARNING"):  # mteb's engine on the same folder: the same rows, named too
        out = evaluate_models(["minilm"], followir=[long], engine="mteb", bootstrap=0, style=None)
    assert said in caplog.text and any(said in p for p in out["minilm"][0].problems)


def test_rows_saved_by_hand_record_the_set_s_digest(minilm, fir, beir, tmp_path):
    """``evaluate_followir`` + ``save_result`` wrote rows without ``data_sha``: an edited copy of
    bundled v1 under its folder name (ten candidates for half its queries: MAP@1000 56.27) filled
    ``ifir table``'s 'Bundled v1' column beside the command line's rows (78.96), without a word."""
    data = load_followir(fir)
    edited = copy.deepcopy(data)
    for q in list(edited.queries)[::2]:
        edited.top_ranked[q] = edited.top_ranked[q][:10]
    mine = write_followir(edited, tmp_path / "mine" / fir.name)
    csv = tmp_path / "results.csv"
    for folder in (fir, mine):
        R.save_result(E.evaluate_followir(minilm, folder, bootstrap=10), csv, model=str(folder))
    rows = R.load_results(csv)
    assert set(rows["data_sha"]) == {content_digest(data), content_digest(load_followir(mine))}
    with pytest.raises(DataError, match="names 2 different evaluation sets"):
        R.runs_to_read(rows, str(csv))
    retrieval = E.evaluate_beir(minilm, beir, bootstrap=10)  # a BEIR folder's rows too
    assert R.result_rows(retrieval, run_id="b")[0]["data_sha"] == content_digest(load_beir(beir))


def test_a_model_given_by_name_or_path_is_loaded_and_encodes(minilm, fir, beir):
    """The documented ``evaluate_followir("minilm", ...)`` / ``evaluate_beir(path, ...)`` handed the
    string itself to the encoder (``TypeError: encode() takes at most 2 arguments``) unless every
    vector was already cached; the name is now loaded, and scores as the loaded model does."""
    by_name = E.evaluate_followir("minilm", fir, bootstrap=0, cache=False)
    assert by_name.model == "minilm"
    assert by_name.metrics == E.evaluate_followir(minilm, fir, bootstrap=0, cache=False).metrics
    retrieval = E.evaluate_beir("minilm", beir, bootstrap=0, cache=False)
    assert 0 < retrieval.metrics["ndcg_at_10"] <= 100 and retrieval.model == "minilm"
