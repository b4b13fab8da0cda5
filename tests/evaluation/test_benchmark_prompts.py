"""``--prompts model|benchmark``: which prompts each benchmark family is encoded with, that the
choice changes what MiniLM encodes (our encoder and mteb's), the embedding cache, and the
``prompts`` / ``plan`` labels in the results table."""

import json
import logging

import numpy as np
import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import ConfigError
from ifir_lib.core.models import encode, model_fingerprint, using_prompts
from ifir_lib.evaluation import embed_cache, mteb_glue
from ifir_lib.evaluation import tasks as T
from ifir_lib.pipelines.evaluate import evaluate_models
from ifir_lib.reporting import results as R

pytestmark = pytest.mark.usefixtures("private_cache")

DOCS = ["Kiwi fruit is rich in vitamin C.", "The car was painted red.", "Apples grow on trees."]


@pytest.fixture
def prompted(minilm):
    """MiniLM with the prompts a test sets (``prompted(q, d)``), restored afterwards."""
    saved = (dict(minilm.prompts), minilm.default_prompt_name)

    def set_prompts(query: str, document: str, default: str | None = None):
        minilm.prompts, minilm.default_prompt_name = {"query": query, "document": document}, default
        return minilm

    yield set_prompts
    minilm.prompts, minilm.default_prompt_name = saved


def test_each_family_gets_its_benchmarks_prompts(prompted, caplog):
    m = prompted("q: ", "d: ")
    for family in (*T.PROMPT_RULES, "something-else"):
        assert T.prompts_for(m, family, "model") is None  # the stored prompts, untouched
    stored = {"query": "q: ", "document": "d: "}
    assert T.prompts_for(m, "followir", "benchmark") == stored  # as mteb: the stored ones
    assert T.prompts_for(m, "mair", "benchmark") == {"query": "", "document": ""}  # instruction is the prompt
    assert T.prompts_for(m, "infosearch", "benchmark") == {"query": "", "document": ""}
    with caplog.at_level(logging.WARNING):
        assert T.prompts_for(m, "beir-folder", "benchmark") == stored  # not placed: the stated fallback
    assert "beir-folder" in caplog.text and "not placed" in caplog.text
    # a script that passes no prompt still gets sentence-transformers' default prompt, if one is named
    m = prompted("q: ", "d: ", default="query")
    assert T.prompts_for(m, "infosearch", "benchmark") == {"query": "q: ", "document": "q: "}
    assert T.prompts_for(m, "mair", "benchmark") == {"query": "", "document": "q: "}
    with pytest.raises(ConfigError, match="unknown choice 'paper'"):
        T.prompts_for(m, "mair", "paper")


def test_mteb_lookup_order():
    p = {"query": "q: ", "InstructionReranking-query": "t: ", "Core17-query": "c: ", "passage": "p: "}
    assert T.mteb_prompt(p, "query", "Core17", "InstructionReranking") == "c: "
    assert T.mteb_prompt(p, "query", "News21", "InstructionReranking") == "t: "
    assert T.mteb_prompt(p, "query", "News21", "Retrieval") == "q: "
    assert T.mteb_prompt(p, "document") == "p: "  # encode_document's own fallback
    assert T.mteb_prompt({}, "document") is None


def test_task_families(fir):
    import mteb

    assert T.task_family(mteb_glue.local_followir_task(fir)) == "followir"
    assert T.task_family(T.mair_task("MAIR-IFEval")) == "mair"
    assert T.task_family(T.infosearch_task("InfoSearchLength")) == "infosearch"
    assert T.task_family(mteb.get_task("Core17InstructionRetrieval")) == "followir"
    assert T.task_family(mteb.get_task("SciFact")) == "mteb"


def test_document_embeddings_differ_only_when_the_model_has_a_document_prompt(prompted):
    def docs_under(choice, m):
        with using_prompts(m, T.prompts_for(m, "mair", choice)):
            return encode(m, DOCS, "document")

    m = prompted("", "passage: ")
    assert not np.allclose(docs_under("model", m), docs_under("benchmark", m), atol=1e-4)
    assert m.prompts == {"query": "", "document": "passage: "}  # restored after each block
    m = prompted("", "")
    assert np.array_equal(docs_under("model", m), docs_under("benchmark", m))


def write_mair_instructir(root):
    """MAIR-Bench/MAIR-Queries and MAIR-Docs with one task (InstructIR), as the hub repos lay it out."""
    files = {
        T.MAIR_QUERIES: ("queries", [{"qid": "1", "instruction": "Find fruit. ", "query": "vitamin C",
                                      "labels": [{"id": "0", "score": 1}]}]),
        T.MAIR_DOCS: ("docs", [{"id": str(i), "doc": d} for i, d in enumerate(DOCS)]),
    }  # fmt: skip
    for repo, (split, rows) in files.items():
        (root / repo / "InstructIR").mkdir(parents=True)
        (root / repo / "InstructIR" / f"{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
        (root / repo / "README.md").write_text(
            "---\nconfigs:\n- config_name: InstructIR\n  data_files:\n"
            f"  - split: {split}\n    path: InstructIR/{split}.jsonl\n---\n"
        )
    return root


@pytest.mark.slow
def test_mteb_runs_mair_with_the_benchmarks_prompts(prompted, tmp_path):
    """Same queries (no query prompt either way): the scores move only when documents do."""
    root = write_mair_instructir(tmp_path / "hub")

    def scores(choice, m):
        task = mteb_glue.get_task("MAIR-InstructIR", root)
        r = mteb_glue.evaluate_mteb_task(m, task, bootstrap=0, prompts=choice)
        assert r.prompts == choice
        return r.runs["run"]["1"]

    m = prompted("", "passage: ")
    with_prompt, without = scores("model", m), scores("benchmark", m)
    assert max(abs(with_prompt[d] - without[d]) for d in without) > 1e-3
    assert m.prompts == {"query": "", "document": "passage: "}
    m = prompted("", "")
    assert scores("model", m) == pytest.approx(scores("benchmark", m), abs=1e-6)


def test_the_cache_keys_on_the_prompts_used(prompted, monkeypatch):
    m = prompted("", "passage: ")
    calls = []

    def counted(model, texts, kind, **kw):
        calls.append(len(texts))
        return encode(model, texts, kind, **kw)

    def cached(choice):
        with using_prompts(m, T.prompts_for(m, "mair", choice)):
            return embed_cache.encode_cached(m, DOCS, "document", fingerprint=model_fingerprint(m))

    monkeypatch.setattr(embed_cache, "encode", counted)
    as_model = cached("model")
    as_benchmark = cached("benchmark")  # not the model run's vectors: encoded anew ...
    assert calls == [3, 3]
    with using_prompts(m, {"query": "", "document": ""}):
        assert np.allclose(as_benchmark, encode(m, DOCS, "document"), atol=1e-6)  # ... without a prompt
    assert not np.allclose(as_model, as_benchmark, atol=1e-4)
    assert np.array_equal(cached("benchmark"), as_benchmark) and calls == [3, 3]  # then cached
    m = prompted("", "")  # stored prompts = the ones that run used: its vectors serve both choices
    assert np.array_equal(cached("model"), as_benchmark) and np.array_equal(cached("benchmark"), as_benchmark)
    assert calls == [3, 3]


def test_rows_record_prompts_and_plan_and_skip_done_tells_them_apart(fir, tmp_path, capsys):
    out = tmp_path / "results.csv"
    kw = dict(followir=[fir], results_csv=out, bootstrap=0, skip_done=True, style=None)
    evaluate_models(["minilm"], plan="p1", **kw)
    evaluate_models(["minilm"], plan="p1", **kw)  # done: nothing appended
    df = R.load_results(out)
    assert len(df) == 4 and set(df["prompts"]) == {"model"} and set(df["plan"]) == {"p1"}
    evaluate_models(["minilm"], prompts="benchmark", **kw)  # another prompts value: not done
    df = R.load_results(out)
    assert df.groupby("prompts").size().to_dict() == {"benchmark": 4, "model": 4}
    assert set(df[df.prompts == "benchmark"]["plan"]) == {""}
    with pytest.raises(ConfigError, match="unknown choice 'mine'"):
        evaluate_models(["minilm"], prompts="mine", **kw)


def test_cli_prompts_flag(fir, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--prompts {model,benchmark}" in help_text and "model (default)" in help_text
    out = tmp_path / "r.csv"
    argv = ["evaluate", "--model", "minilm", "--followir", str(fir), "--bootstrap", "0", "--out", str(out)]
    assert main([*argv, "--prompts", "benchmark", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["prompts"] == "benchmark"
    assert set(R.load_results(out)["prompts"]) == {"benchmark"}
