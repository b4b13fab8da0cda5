"""The paper's six benchmark columns without the hub: local repos in each hub dataset's own layout.

Each fixture writes a small repo exactly as its hub dataset is laid out (README ``configs``, split
names, file formats, column names and types), under ``DIR/owner/name`` as ``hf download
--local-dir`` writes it. The tasks read it through their normal loaders (mteb's own class for
FollowIR); only the path changes. The model is a bag-of-words sentence-transformer (binary term
vectors, cosine), so every ranking below is worked out by hand: cosine = |q & d| / sqrt(|q| |d|).

p-MRR of one changed document (FollowIR / InfoSearch): ranks R_og, R_new;
R_og >= R_new: R_new / R_og - 1, else 1 - R_og / R_new.  nDCG@10 of one relevant doc at rank r: 1/log2(r+1).
"""

import csv
import json
import math
import time

import pytest

from ifir_lib.cli import main
from ifir_lib.evaluation import mteb_glue
from ifir_lib.evaluation import tasks as paper_tasks
from ifir_lib.evaluation.tasks import docs_split, mair_split_data, negatives
from ifir_lib.pipelines.evaluate import evaluate_models
from ifir_lib.reporting.results import load_results
from ifir_lib.reporting.tables import COLUMNS

pytestmark = pytest.mark.usefixtures("private_cache")

VOCAB = "fruit any short long big old other car every brief huge red apple green blue kiwi banana".split()


def yaml_configs(configs: dict[str, dict[str, str]]) -> str:
    """README front matter declaring ``{config: {split: path}}``, as the hub repos do."""
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        lines += [f"  - split: {s}\n    path: {p}" for s, p in splits.items()]
    return "\n".join(lines + ["---", ""])


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ---- the two query sets every p-MRR fixture uses (see the module docstring for the arithmetic)
# q1: og "fruit any" ranks d3 (2/sqrt6) > d1 (1/2) > d2 (1/sqrt8) > d4 (0);
#     changed "fruit short" ranks d1 (1) > d3 (1/sqrt6) > d2 (1/sqrt8) > d4
# q2: og "car every" ranks e2 (2/sqrt6) > e3 (1/sqrt2) > e1 (1/2); changed "car brief": e1 (1) > e3 > e2 (1/sqrt6)
DOCS = {
    "d1": "fruit short",
    "d2": "fruit long big old",
    "d3": "fruit any long",
    "d4": "other",
    "e1": "car brief",
    "e2": "car every huge",
    "e3": "car",
}
QUERIES = {"q1": ("fruit", "any", "short"), "q2": ("car", "every", "brief")}


@pytest.fixture(scope="module")
def bow_model(tmp_path_factory):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import BoW

    model = SentenceTransformer(modules=[BoW(vocab=VOCAB, cumulative_term_frequency=False)], device="cpu")
    folder = tmp_path_factory.mktemp("models") / "bow"
    model.save(str(folder))
    return folder


def write_infosearch(root, repo):
    """jianqunZ/<Dim>-v1: corpus.jsonl, queries.jsonl, qrels_{og,changed,reversed}/test.jsonl + README configs."""
    d = root / repo
    write_jsonl(d / "corpus.jsonl", [{"_id": k, "title": "", "text": v} for k, v in DOCS.items()])
    queries = [
        {
            "_id": q,
            "text": t,
            "instruction_og": og,
            "instruction_changed": ch,
            "instruction_reversed": "not " + ch,
            "keywords": t,
            "short_query": t,
        }
        for q, (t, og, ch) in QUERIES.items()
    ]
    # q3 has no original qrels: InfoSearch's loader drops it
    queries.append({**queries[0], "_id": "q3", "text": "kiwi"})
    write_jsonl(d / "queries.jsonl", queries)
    og = {"q1": {"d1": 1.0, "d2": 1.0, "d3": 1.0, "d4": 0.0}, "q2": {"e1": 1.0, "e2": 1.0, "e3": 0.0}}
    ch = {"q1": {"d1": 1.0, "d2": 0.0, "d3": 0.0, "d4": 0.0}, "q2": {"e1": 1.0, "e2": 0.0, "e3": 0.0}}
    for name, qr in (("qrels_og", og), ("qrels_changed", ch), ("qrels_reversed", og)):
        rows = [{"query-id": q, "corpus-id": c, "score": s} for q, ds in qr.items() for c, s in ds.items()]
        write_jsonl(d / name / "test.jsonl", rows)
    configs = {n: {"test": f"{n}/test.jsonl"} for n in ("qrels_og", "qrels_changed", "qrels_reversed")}
    configs |= {"corpus": {"corpus": "corpus.jsonl"}, "queries": {"queries": "queries.jsonl"}}
    (d / "README.md").write_text(yaml_configs(configs))


def write_followir_mteb(root, repo):
    """mteb/<Name>InstructionRetrieval (mteb 2.x): parquet configs corpus, queries, instruction, qrels, qrel_diff, top_ranked."""
    d = root / repo
    og = {"q1": {"d1": 1, "d2": 0, "d3": 1, "d4": 1}, "q2": {"e1": 1, "e2": 1, "e3": 0}}
    ch = {"q1": {"d1": 1, "d2": 0, "d3": 0, "d4": 1}, "q2": {"e1": 1, "e2": 0, "e3": 0}}
    pools = {"q1": ["d1", "d2", "d3", "d4"], "q2": ["e1", "e2", "e3"]}
    qids = [q + sfx for q in QUERIES for sfx in ("-og", "-changed")]
    tables = {
        "corpus": ({"_id": list(DOCS), "text": list(DOCS.values()), "title": [""] * len(DOCS)}, "test"),
        "queries": ({"_id": qids, "text": [QUERIES[q.split("-")[0]][0] for q in qids]}, "test"),
        "instruction": (
            {
                "query-id": qids,
                "instruction": [QUERIES[q.split("-")[0]][1 if "og" in q else 2] for q in qids],
            },
            "test",
        ),
        "qrels": (
            {
                "query-id": [
                    q + sfx for sfx, qr in (("-og", og), ("-changed", ch)) for q in qr for _ in qr[q]
                ],
                "corpus-id": [c for qr in (og, ch) for q in qr for c in qr[q]],
                "score": [v for qr in (og, ch) for q in qr for v in qr[q].values()],
            },
            "test",
        ),
        "qrel_diff": ({"query-id": ["q1", "q2"], "corpus-ids": [["d3"], ["e2"]]}, "qrel_diff"),
        "top_ranked": ({"query-id": qids, "corpus-ids": [pools[q.split("-")[0]] for q in qids]}, "test"),
    }
    write_parquet_configs(d, tables)


def write_parquet_configs(d, tables):
    """mteb 2.x's hub layout: one parquet config per ``{config: (columns, split)}`` + README configs."""
    from datasets import Dataset, Features, Sequence, Value

    s = Value("string")
    types = {"score": Value("int64"), "corpus-ids": Sequence(s)}
    configs = {}
    for name, (cols, split) in tables.items():
        path = f"{name}/{split}-00000-of-00001.parquet"
        (d / name).mkdir(parents=True, exist_ok=True)
        Dataset.from_dict(cols, features=Features({c: types.get(c, s) for c in cols})).to_parquet(d / path)
        configs[name] = {split: path}
    (d / "README.md").write_text(yaml_configs(configs))


# MAIR: IFEval has one split per instruction type, each with its own pool and reused doc ids "0", "1", ...
IFEVAL = {
    "change_case__english_capital_1999": (
        ["apple red", "apple", "red green blue"],
        [("100", "red ", "apple", "1"), ("101", "green ", "blue", "2")],
    ),
    "length_constraints__number_words_12": (["red apple", "kiwi"], [("102", "kiwi ", "fruit", "0")]),
}
INSTRUCTIR = (
    ["apple kiwi", "apple", "kiwi banana"],
    [("10", "kiwi ", "apple", "1"), ("11", "banana ", "kiwi", "2")],
)


def write_mair(root):
    """MAIR-Bench/MAIR-Queries and MAIR-Docs: one config per task, ``<Task>/<split>.jsonl`` + README configs."""
    qconf, dconf = {"IFEval": {}, "InstructIR": {}}, {"IFEval": {}, "InstructIR": {}}
    splits = {("IFEval", f"{k}_queries"): v for k, v in IFEVAL.items()} | {
        ("InstructIR", "queries"): INSTRUCTIR
    }
    for (task, split), (docs, queries) in splits.items():
        dsplit = docs_split(split)
        rows = [
            {"qid": q, "instruction": i, "query": t, "labels": [{"id": lab, "score": 1}]}
            for q, i, t, lab in queries
        ]
        write_jsonl(root / paper_tasks.MAIR_QUERIES / task / f"{split}.jsonl", rows)
        write_jsonl(
            root / paper_tasks.MAIR_DOCS / task / f"{dsplit}.jsonl",
            [{"id": str(i), "doc": t} for i, t in enumerate(docs)],
        )
        qconf[task][split] = f"{task}/{split}.jsonl"
        dconf[task][dsplit] = f"{task}/{dsplit}.jsonl"
    (root / paper_tasks.MAIR_QUERIES / "README.md").write_text(yaml_configs(qconf))
    (root / paper_tasks.MAIR_DOCS / "README.md").write_text(yaml_configs(dconf))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    for name in paper_tasks.FOLLOWIR_TASKS:
        write_followir_mteb(root, f"mteb/{name}")
    for repo, _ in paper_tasks.INFOSEARCH_DATASETS.values():
        write_infosearch(root, repo)
    write_mair(root)
    return root


def ndcg1(rank):
    return 1 / math.log2(rank + 1)


# hand-computed expectations (x100)
FOLLOWIR_PMRR = 100 * ((1 - 1 / 2) + (1 - 1 / 3)) / 2  # q1: d3 1 -> 2; q2: e2 1 -> 3
FOLLOWIR_MAP = (
    100 * ((1 / 1 + 2 / 2 + 3 / 4) / 3 + (1 / 1 + 2 / 3) / 2) / 2
)  # og relevant at ranks {1,2,4}, {1,3}
FOLLOWIR_NDCG5 = (
    100 * ((1 + ndcg1(2) + ndcg1(4)) / (1 + ndcg1(2) + ndcg1(3)) + (1 + ndcg1(3)) / (1 + ndcg1(2))) / 2
)
INFOSEARCH_PMRR = (
    100 * (((3 / 3 - 1) + (1 - 1 / 2)) / 2 + (1 - 1 / 3)) / 2
)  # q1: d2 3 -> 3, d3 1 -> 2; q2: e2 1 -> 3
# IFEval: "red apple" ranks "apple red" (1) > "apple" (1/sqrt2): label at 2 (with the other split's
# identical "red apple" in the pool it would be 3); "green blue": label 1st; "kiwi fruit": "kiwi" 1st, label "red apple" 2nd
IFEVAL_NDCG = 100 * (ndcg1(2) + ndcg1(1) + ndcg1(2)) / 3
# InstructIR: "kiwi apple" ranks "apple kiwi" (1) > "apple" (1/sqrt2); "banana kiwi" ranks "kiwi banana" 1st
INSTRUCTIR_NDCG = 100 * (ndcg1(2) + ndcg1(1)) / 2


def test_infosearch_negatives_follow_create_qrel_match():
    og = {"q": {"a": 1, "b": 1, "c": 0, "d": 0}}
    assert negatives(og, {"q": {"a": 1, "b": 0, "c": 0, "d": 1}}) == {"q": ["b"]}


def test_mair_split_data_keeps_pools_apart_and_joins_like_mair():
    from datasets import Dataset

    q = {
        s: Dataset.from_list(
            [{"qid": "7", "instruction": "Do X. ", "query": "y", "labels": [{"id": "0", "score": 2}]}]
        )
        for s in ("a_queries", "b_queries")
    }
    d = {s: Dataset.from_list([{"id": "0", "doc": s}]) for s in ("a_docs", "b_docs")}
    corpus, qs, qrels, top = mair_split_data(q, d)
    # '::', not '/': a '/' in a query id marks an aggregate's '<dataset>/<qid>' to the readers
    assert qs == {
        "a_queries::7": "Do X. y",
        "b_queries::7": "Do X. y",
    }  # prompt + query, as encode(prompt=...)
    assert qrels["b_queries::7"] == {"b_queries::0": 2} and top["a_queries::7"] == ["a_queries::0"]
    assert corpus == {"a_queries::0": "a_docs", "b_queries::0": "b_docs"}


def _mair(queries, docs):
    from datasets import Dataset

    return {"queries": Dataset.from_list(queries)}, {"docs": Dataset.from_list(docs)}


Q7 = {"qid": "7", "instruction": "Do X. ", "query": "y", "labels": [{"id": "0", "score": 1}]}
DOC0 = {"id": "0", "doc": "apple"}


@pytest.mark.parametrize(
    "queries, docs, says",
    [
        ([Q7], [DOC0, {"id": "0", "doc": "banana"}], r"\[docs, row\]:2: field 'id': duplicate id '0'"),
        ([Q7, {**Q7, "query": "z"}], [DOC0], r"\[queries, row\]:2: field 'qid': duplicate qid '7'"),
        ([{**Q7, "labels": [{"id": "0", "score": 0.5}]}], [DOC0], "not a whole number: 0.5"),
        (
            [{**Q7, "labels": [{"id": "0", "score": 1}, {"id": "0", "score": 0}]}],
            [DOC0],
            "0 conflicts with 1",
        ),
    ],
)
def test_mair_rows_are_checked_as_a_folder_s_are(queries, docs, says):
    """A repeated document or query id kept the last row, a 0.5 grade became 0 and a pair judged
    twice kept the last grade, without a word (the FollowIR and BEIR readers refuse each)."""
    from ifir_lib.core.errors import DataError

    with pytest.raises(DataError, match=says):
        mair_split_data(*_mair(queries, docs), "MAIR-Bench/MAIR-Queries")


def test_mair_queries_without_a_relevant_label_are_counted(caplog):
    """A MAIR query whose labels are all 0 scored nDCG 0 in the mean, and one with no labels left
    the mean, both without a word; MAIR's own scorer does the same, so both stay, now counted."""
    queries = [
        Q7,
        {**Q7, "qid": "8", "labels": [{"id": "0", "score": 0}]},
        {**Q7, "qid": "9", "labels": []},
    ]
    with caplog.at_level("WARNING"):
        _, qs, qrels, _ = mair_split_data(*_mair(queries, [DOC0]), "MAIR-Bench/MAIR-Queries")
    assert qrels == {"7": {"0": 1}, "8": {"0": 0}, "9": {}} and len(qs) == 3  # scored as MAIR does
    assert "1 of 3 queries have labels but none above 0" in caplog.text and "'8'" in caplog.text
    assert "1 of 3 queries have no labels: left out of the mean" in caplog.text and "'9'" in caplog.text


def test_infosearch_rows_are_checked_and_unknown_documents_named(data_root, tmp_path, caplog):
    import shutil

    from ifir_lib.core.errors import DataError

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    repo = root / "jianqunZ/Length-v1"
    path = repo / "qrels_og" / "test.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    write_jsonl(path, [*rows, {"query-id": "q1", "corpus-id": "zz-missing", "score": 1.0}])
    with caplog.at_level("WARNING"):
        _changed_relevant(root)
    assert (
        "1 judgment(s) name documents not in the corpus, e.g. query 'q1' document 'zz-missing'" in caplog.text
    )
    write_jsonl(path, [*rows, {**rows[0], "score": 0.5}])
    with pytest.raises(
        DataError, match=r"Length-v1 \[qrels_og, row\]:\d+: field 'score': not a whole number"
    ):
        _changed_relevant(root)
    write_jsonl(path, rows)
    corpus = repo / "corpus.jsonl"
    docs = [json.loads(x) for x in corpus.read_text().splitlines()]
    write_jsonl(corpus, [*docs, {**docs[0], "text": "another text"}])
    with pytest.raises(DataError, match="duplicate id 'd1'"):
        _changed_relevant(root)


def test_paper_expands_to_the_six_columns():
    assert mteb_glue.expand_task_names("paper") == [
        *paper_tasks.FOLLOWIR_TASKS,
        "InfoSearchLength",
        "InfoSearchKeyword",
        "MAIR-IFEval",
        "MAIR-InstructIR",
    ]


def test_each_task_alone_matches_hand_computed_numbers(bow_model, data_root):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(bow_model), device="cpu")
    kw = dict(bootstrap=0, name="bow")
    fir = mteb_glue.evaluate_mteb_task(
        model, mteb_glue.get_task("News21InstructionRetrieval", data_root), **kw
    )
    assert fir.metrics["p_mrr"] == pytest.approx(FOLLOWIR_PMRR, abs=1e-6)
    assert fir.metrics["ndcg_at_5"] == pytest.approx(FOLLOWIR_NDCG5, abs=1e-3)
    assert fir.metrics["score"] == fir.metrics["ndcg_at_5"] and fir.metrics["map_at_1000"] == pytest.approx(
        FOLLOWIR_MAP, abs=1e-3
    )
    for name in ("InfoSearchLength", "InfoSearchKeyword"):
        r = mteb_glue.evaluate_mteb_task(model, mteb_glue.get_task(name, data_root), **kw)
        assert r.metrics["p_mrr"] == pytest.approx(INFOSEARCH_PMRR, abs=1e-6)
        assert sorted(r.per_query["p_mrr"]) == ["q1", "q2"]  # q3 (no qrels) dropped
    for name, want, n in (("MAIR-IFEval", IFEVAL_NDCG, 3), ("MAIR-InstructIR", INSTRUCTIR_NDCG, 2)):
        r = mteb_glue.evaluate_mteb_task(model, mteb_glue.get_task(name, data_root), **kw)
        assert r.metrics["ndcg_at_10"] == pytest.approx(want, abs=1e-3)
        assert len(r.per_query["ndcg_at_10"]) == n


def test_cli_paper_writes_every_column(bow_model, data_root, tmp_path, capsys):
    out = tmp_path / "results.csv"
    rc = main(
        [
            "evaluate",
            "--model",
            str(bow_model),
            "--tasks",
            "paper",
            "--data-dir",
            str(data_root),
            "--bootstrap",
            "0",
            "--out",
            str(out),
            "--run-id",
            "r1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    rows = {(r["dataset"], r["metric"]): float(r["value"]) for r in csv.DictReader(out.open())}
    want = {
        "FollowIR p-MRR": FOLLOWIR_PMRR,
        "FollowIR Score": (FOLLOWIR_MAP + FOLLOWIR_NDCG5 + FOLLOWIR_MAP) / 3,  # MAP, nDCG@5 (News21), MAP
        "InfoSearch Length p-MRR": INFOSEARCH_PMRR,
        "InfoSearch Keyword p-MRR": INFOSEARCH_PMRR,
        "MAIR IFEval nDCG@10": IFEVAL_NDCG,
        "MAIR InstructIR nDCG@10": INSTRUCTIR_NDCG,
    }
    for column, key in paper_tasks.PAPER_COLUMNS.items():
        assert rows[key] == pytest.approx(want[column], abs=1e-3), column


def test_missing_datasets_fail_fast_one_line_each(tmp_path, capsys, monkeypatch):
    import datasets.config

    monkeypatch.setattr(
        datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty_cache"
    )  # whatever is cached here
    t = time.perf_counter()
    rc = main(["evaluate", "--model", "minilm", "--tasks", "paper", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert time.perf_counter() - t < 10
    # 3 FollowIR + 2 InfoSearch + MAIR-Queries + MAIR-Docs, each once, each saying how to fetch it
    assert rc == 2 and len(err) == 7
    repos = [f"mteb/{n}" for n in paper_tasks.FOLLOWIR_TASKS] + ["jianqunZ/Length-v1", "jianqunZ/Clarity-v1"]
    for line, repo in zip(err, repos + [paper_tasks.MAIR_QUERIES, paper_tasks.MAIR_DOCS], strict=True):
        assert (
            f"dataset {repo}" in line and "not in the local cache" in line and f"hf download {repo}" in line
        )
    assert "MAIR-IFEval, MAIR-InstructIR" in err[-1]


def test_a_local_copy_is_read_instead_of_the_hub(data_root, monkeypatch):
    monkeypatch.setenv(paper_tasks.DATA_DIR_ENV, str(data_root))
    task = mteb_glue.get_task("Core17InstructionRetrieval")
    assert task.metadata.dataset["path"] == str(data_root / "mteb/Core17InstructionRetrieval")
    assert type(task).__mro__[1].__name__ == "Core17InstructionRetrieval"  # mteb's own class
    assert paper_tasks.missing_datasets([task]) == []
    paper_tasks.prefetch(["paper"])  # every loader runs on the local copies (qrel diff included)


def test_paper_columns_are_the_tables_first_six():
    """``ifir table`` reads each paper column from the row ``--tasks paper`` writes."""
    table = [(datasets[0], metric) for _, _, datasets, metric in COLUMNS.values()][:6]
    assert table == list(paper_tasks.PAPER_COLUMNS.values())


def test_skip_done_skips_named_tasks_already_in_the_table(bow_model, data_root, tmp_path):
    """A rerun of the experiment's collect step evaluates no named task twice."""
    out = tmp_path / "results.csv"
    kw = dict(
        tasks=["paper"], data_dir=str(data_root), results_csv=out, bootstrap=0, skip_done=True, style=None
    )
    first = evaluate_models({"bow": str(bow_model)}, **kw)
    rows = len(load_results(out))
    assert first["bow"] and rows > 0
    again = evaluate_models({"bow": str(bow_model)}, **kw)
    assert again == {} and len(load_results(out)) == rows


def _edit_changed_qrel(repo_dir, query, doc, score):
    path = repo_dir / "qrels_changed" / "test.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows = [{**r, "score": score} if (r["query-id"], r["corpus-id"]) == (query, doc) else r for r in rows]
    write_jsonl(path, rows)


def _changed_relevant(root, name="InfoSearchLength"):
    task = mteb_glue.get_task(name, root)
    task.load_data()
    return task.dataset["default"]["test"]["relevant_docs"]["q1-changed"]


def test_an_edited_or_other_local_copy_is_read_as_it_is_now(data_root, tmp_path):
    """``datasets`` keyed a local copy by its folder name and README configs: an edited copy, or
    another copy of the same repo, was served from the first one's cache without a word."""
    import shutil

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(data_root, a)
    shutil.copytree(data_root, b)
    _edit_changed_qrel(b / "jianqunZ/Length-v1", "q1", "d1", 0.0)
    assert _changed_relevant(a)["d1"] == 1 and _changed_relevant(b)["d1"] == 0  # another copy
    time.sleep(0.01)
    _edit_changed_qrel(a / "jianqunZ/Length-v1", "q1", "d1", 0.0)
    assert _changed_relevant(a)["d1"] == 0  # the same copy, edited


def test_two_copies_of_a_named_task_are_not_pooled_as_one_set(bow_model, data_root, tmp_path):
    """Named tasks recorded no data_sha: scores on two different copies of one benchmark sat in
    one table as one set, and skip_done kept the first copy's."""
    import shutil

    from ifir_lib.core.errors import ConfigError

    other = tmp_path / "other"
    shutil.copytree(data_root, other)
    _edit_changed_qrel(other / "jianqunZ/Length-v1", "q1", "d1", 0.0)
    out = tmp_path / "results.csv"
    kw = dict(tasks=["InfoSearchLength"], results_csv=out, bootstrap=0, style=None)
    evaluate_models({"bow": str(bow_model)}, data_dir=str(data_root), **kw)
    (sha,) = set(load_results(out)["data_sha"])
    assert len(sha) == 16
    with pytest.raises(ConfigError, match="'InfoSearchLength' is already there with other content"):
        evaluate_models({"bow": str(bow_model)}, data_dir=str(other), **kw)
    assert paper_tasks.copy_digest(mteb_glue.get_task("InfoSearchLength", data_root)) == sha  # stable
    corpus = other / "jianqunZ/Length-v1" / "corpus.jsonl"  # its last document edited: another digest
    docs = [json.loads(x) for x in corpus.read_text().splitlines()]
    write_jsonl(corpus, [*docs[:-1], {**docs[-1], "text": docs[-1]["text"] + " edited"}])
    _edit_changed_qrel(other / "jianqunZ/Length-v1", "q1", "d1", 1.0)  # the qrels as data_root's
    assert len(docs) > 5 and paper_tasks.copy_digest(mteb_glue.get_task("InfoSearchLength", other)) != sha


def test_a_followir_copy_s_qrel_diff_is_its_own_and_part_of_its_digest(data_root, tmp_path):
    """The per-query p-MRR's qrel diff was loaded outside the copy's own cache: a second copy, or
    an edited one, was scored with the first copy's diff; and the digest left the diff out."""
    import shutil

    from datasets import Dataset, Features, Sequence, Value

    name = "Robust04InstructionRetrieval"
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(data_root / f"mteb/{name}", a / f"mteb/{name}")
    shutil.copytree(a, b)
    diff = {"query-id": ["q1", "q2"], "corpus-ids": [["d1"], ["e1"]]}
    features = Features({"query-id": Value("string"), "corpus-ids": Sequence(Value("string"))})
    Dataset.from_dict(diff, features=features).to_parquet(
        b / f"mteb/{name}/qrel_diff/qrel_diff-00000-of-00001.parquet"
    )
    ta, tb = mteb_glue.get_task(name, a), mteb_glue.get_task(name, b)
    assert mteb_glue._qrel_diff_of(ta) == {"q1": ["d3"], "q2": ["e2"]}
    assert mteb_glue._qrel_diff_of(tb) == {"q1": ["d1"], "q2": ["e1"]}
    assert paper_tasks.copy_digest(ta) != paper_tasks.copy_digest(tb)


def write_nevir(root):
    """orionweller/NevIR-mteb in mteb 2.x's layout: pairs ``<k>_q1`` (wants ``<k>_p1``) and the negated
    ``<k>_q2`` (wants ``<k>_p2``), each reranking its pair's two passages. Bag of words ignores the
    negation ("other"), so both questions of every pair rank p1 first: paired accuracy 0, nDCG@10
    (1 + 1/log2(3)) / 2 per pair."""
    docs = {
        f"{k}_p{i}": f"{w} {c}"
        for k, w in (("1", "apple"), ("2", "car"))
        for i, c in ((1, "red"), (2, "blue"))
    }
    queries = {
        f"{k}_q{i}": f"{w} red" + (" other" if i == 2 else "")
        for k, w in (("1", "apple"), ("2", "car"))
        for i in (1, 2)
    }
    qrels = [(q, f"{q[0]}_p{i}", int(q.endswith(f"q{i}"))) for q in queries for i in (1, 2)]
    tables = {
        "corpus": ({"_id": list(docs), "text": list(docs.values()), "title": [""] * len(docs)}, "test"),
        "queries": ({"_id": list(queries), "text": list(queries.values())}, "test"),
        "qrels": (
            {
                "query-id": [r[0] for r in qrels],
                "corpus-id": [r[1] for r in qrels],
                "score": [r[2] for r in qrels],
            },
            "test",
        ),
        "top_ranked": (
            {"query-id": list(queries), "corpus-ids": [[f"{q[0]}_p1", f"{q[0]}_p2"] for q in queries]},
            "test",
        ),
    }
    write_parquet_configs(root / "orionweller/NevIR-mteb", tables)


def test_a_task_s_own_main_score_is_recorded_beside_ndcg(bow_model, tmp_path, capsys):
    """NevIR's score is paired accuracy (mteb's main_score): only nDCG@10 was recorded (81.5 for a
    model that fails every negated question), without a word."""
    write_nevir(tmp_path / "hub")
    out = tmp_path / "results.csv"
    args = ["evaluate", "--model", str(bow_model), "--tasks", "NevIR", "--data-dir", str(tmp_path / "hub")]
    assert main([*args, "--bootstrap", "0", "--out", str(out)]) == 0, capsys.readouterr().err
    rows = {r["metric"]: float(r["value"]) for r in csv.DictReader(out.open())}
    assert rows["paired_accuracy"] == 0.0
    assert rows["ndcg_at_10"] == pytest.approx(100 * (1 + ndcg1(2)) / 2, abs=1e-3)
    assert (
        mteb_glue.metric_name("p-MRR") == "p_mrr"
        and mteb_glue.metric_name("robustness@10") == "robustness_at_10"
    )
    assert set(load_results(out)["metric"]) == {"paired_accuracy", "ndcg_at_10"}  # the table reads back


@pytest.mark.parametrize("files", [("qrels_og",), ("qrels_changed",)])
def test_infosearch_queries_that_do_not_pair_up_are_named(data_root, tmp_path, caplog, files):
    """q2's rows in one qrels file spelled 'q2 ': q2 left the p-MRR mean (45.83 -> 25.00) and its
    judgments were ignored, without a word (a FollowIR folder reports both)."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    for name in files:
        path = root / "jianqunZ/Length-v1" / name / "test.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        write_jsonl(path, [{**r, "query-id": "q2 "} if r["query-id"] == "q2" else r for r in rows])
    with caplog.at_level("WARNING"):
        _changed_relevant(root)
    assert (
        f"[{files[0]}]: 1 judged queries are not in the queries (their judgments are ignored): 'q2 '"
        in caplog.text
    )
    if files == ("qrels_changed",):
        assert "[qrels_changed]: 1 queries judged in qrels_og have no row here" in caplog.text


def test_a_clean_infosearch_copy_draws_no_pairing_warning(data_root, caplog):
    with caplog.at_level("WARNING"):
        _changed_relevant(data_root)
    assert "judged queries" not in caplog.text and "have no row here" not in caplog.text


def test_named_tasks_name_the_queries_the_model_reads_the_same_twice(minilm, data_root, tmp_path, caplog):
    """A FollowIR copy whose q1 instruction grows a long narrative before the words that change
    (cut at MiniLM's 256 tokens), and an InfoSearch copy whose q2 has its original instruction
    as the changed one: p-MRR 0 by construction, averaged in without a word (folders named them)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    path = root / "mteb/Robust04InstructionRetrieval/instruction/test-00000-of-00001.parquet"
    t = pq.read_table(path).to_pydict()
    narrative = " ".join(["relevant documents discuss fruit and any of its uses in detail"] * 30)
    t["instruction"] = [
        narrative + " " + x if q.startswith("q1") else x for q, x in zip(t["query-id"], t["instruction"])
    ]
    pq.write_table(pa.table(t), path)
    path = root / "jianqunZ/Length-v1/queries.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    write_jsonl(
        path, [{**q, "instruction_changed": q["instruction_og"]} if q["_id"] == "q2" else q for q in rows]
    )
    for name, qid in (("Robust04InstructionRetrieval", "q1"), ("InfoSearchLength", "q2")):
        caplog.clear()
        with caplog.at_level("WARNING"):
            r = mteb_glue.evaluate_mteb_task(minilm, mteb_glue.get_task(name, root), bootstrap=0, name="m")
        said = "1 of 2 queries read the same with both instructions once cut at the model's 256 tokens"
        assert said in caplog.text and [p for p in r.problems if said in p] == [r.problems[-1]], name
        assert r.problems[-1].endswith(f": {qid}") and r.per_query["p_mrr"][qid] == 0.0
    clean = mteb_glue.evaluate_mteb_task(
        minilm, mteb_glue.get_task("InfoSearchLength", data_root), bootstrap=0
    )
    assert not clean.problems


def _append_parquet_row(path, row):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    pq.write_table(pa.concat_tables([t, pa.table({k: [v] for k, v in row.items()}, schema=t.schema)]), path)


@pytest.mark.parametrize(
    "config, row, says",
    [
        (
            "qrels",
            {"query-id": "q1-og", "corpus-id": "d4", "score": 0},
            r"\[qrels, test, row\]:15: field 'score': 0 conflicts with 1 on line 4",
        ),
        (
            "top_ranked",
            {"query-id": "q1-og", "corpus-ids": ["d1", "d2"]},
            r"\[top_ranked, test, row\]:5: field 'query-id': duplicate query-id 'q1-og'",
        ),
    ],
)
def test_a_copy_read_by_mteb_s_own_class_is_checked_row_by_row(data_root, tmp_path, config, row, says):
    """mteb's loader keeps the last of repeated rows: a pair judged 1 then 0 moved MAP 87.50 ->
    91.67, and q1-og's candidates on a second row reranked its og run over another pool than its
    changed run (p-MRR 58.33 -> 16.67), without a word."""
    import shutil

    from ifir_lib.core.errors import DataError

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    _append_parquet_row(root / f"mteb/Core17InstructionRetrieval/{config}/test-00000-of-00001.parquet", row)
    task = mteb_glue.get_task("Core17InstructionRetrieval", root)
    with pytest.raises(DataError, match=says):
        task.load_data()
    mteb_glue.get_task("Core17InstructionRetrieval", data_root).load_data()  # the clean copy loads


def test_a_copy_s_splits_that_mteb_does_not_score_are_not_checked(data_root, tmp_path):
    """The local-copy check read every split of the qrels and top_ranked configs: a repeated pair
    in a ``dev`` split beside ``test`` (which mteb never reads for a test evaluation) refused the
    test evaluation. Only the task's eval splits are checked, and a conflict there still is."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ifir_lib.core.errors import DataError

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    d = root / "mteb/Core17InstructionRetrieval"
    for config, row in (("qrels", {"query-id": "x1", "corpus-id": "d1"}), ("top_ranked", {"query-id": "x1"})):
        test = pq.read_table(d / f"{config}/test-00000-of-00001.parquet")
        rows = [{**row, "score": 1, "corpus-ids": ["d1"]}, {**row, "score": 0, "corpus-ids": ["d2"]}]
        dev = pa.table({c: [r[c] for r in rows] for c in test.column_names}, schema=test.schema)
        pq.write_table(dev, d / f"{config}/dev-00000-of-00001.parquet")
        readme = (d / "README.md").read_text()
        where = f"- config_name: {config}\n  data_files:\n"
        assert where in readme
        (d / "README.md").write_text(
            readme.replace(where, f"{where}  - split: dev\n    path: {config}/dev-00000-of-00001.parquet\n")
        )
    task = mteb_glue.get_task("Core17InstructionRetrieval", root)
    task.load_data()  # the test split is clean
    assert task.data_loaded
    _append_parquet_row(
        d / "qrels/test-00000-of-00001.parquet", {"query-id": "q1-og", "corpus-id": "d4", "score": 0}
    )
    with pytest.raises(DataError, match=r"\[qrels, test, row\]:15: field 'score'"):
        mteb_glue.get_task("Core17InstructionRetrieval", root).load_data()


def test_the_same_text_check_reads_the_queries_with_the_prompt_mteb_uses(minilm, data_root, tmp_path, caplog):
    """With ``--prompts benchmark`` on mteb's engine the check of queries read the same twice ran
    after the run, under the model's own query prompt: a 30-token task prompt that mteb put
    before Robust04's queries (pushing q1's change past 256 tokens) went unnamed, and a 30-token
    stored query prompt that InfoSearch's rule leaves out named a q1 that mteb read apart."""
    import copy
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "copy"
    shutil.copytree(data_root, root)
    narrative = " ".join(["relevant documents discuss fruit and any of its uses in detail"] * 22)
    path = root / "mteb/Robust04InstructionRetrieval/instruction/test-00000-of-00001.parquet"
    t = pq.read_table(path).to_pydict()
    t["instruction"] = [
        narrative + " " + x if q.startswith("q1") else x for q, x in zip(t["query-id"], t["instruction"])
    ]
    pq.write_table(pa.table(t), path)
    path = root / "jianqunZ/Length-v1/queries.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    long = {
        k: narrative + " " + v for k, v in rows[0].items() if k in ("instruction_og", "instruction_changed")
    }
    write_jsonl(path, [{**q, **long} if q["_id"] == "q1" else q for q in rows])
    prompt = " ".join(["represent this query for finding documents"] * 5) + ": "  # 30 tokens and more
    said = "1 of 2 queries read the same with both instructions"
    for name, stored, named in (
        ("Robust04InstructionRetrieval", {"query": "", "Robust04InstructionRetrieval-query": prompt}, True),
        ("InfoSearchLength", {"query": prompt}, False),
    ):
        model = copy.deepcopy(minilm)
        model.prompts = {"document": "", **stored}
        caplog.clear()
        with caplog.at_level("WARNING"):
            r = mteb_glue.evaluate_mteb_task(
                model, mteb_glue.get_task(name, root), bootstrap=0, name="m", prompts="benchmark"
            )
        assert (said in caplog.text) is named, name
        assert [p.endswith(": q1") for p in r.problems if said in p] == ([True] if named else []), name
