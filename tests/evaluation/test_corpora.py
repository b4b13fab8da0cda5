"""FollowIR-format folders: round trip, the synthetic generator, bad input (warn + exclude, or fail with file:line)."""

import json
import logging
import re

import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.evaluation.corpora import (
    check_followir,
    content_digest,
    load_beir,
    load_followir,
    write_followir,
)
from ifir_lib.testing.inputs import synthetic_followir, write_beir


def _rewrite(path, fn):
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in fn(rows)))


@pytest.fixture
def fir(tmp_path):
    return write_followir(synthetic_followir(4, 40, 20, rng_seed=2), tmp_path / "fir")


def test_qrels_naming_unknown_documents_exclude_the_query(fir, caplog):
    _rewrite(
        fir / "qrels_og" / "test.jsonl",
        lambda r: (
            r
            + [
                {"query-id": "q2", "corpus-id": "nope", "score": 1},
                {"query-id": "q2", "corpus-id": "nope2", "score": 1},
            ]
        ),
    )
    with caplog.at_level(logging.WARNING):
        data = load_followir(fir)
    assert "q2" not in data.queries and set(data.queries) == {"q1", "q3", "q4"}
    assert "2 qrels name documents not in the corpus (in 1 queries)" in caplog.text
    kept = load_followir(fir, unknown_qrels="keep")
    assert kept.qrels_og["q2"]["nope"] == 1 and "q2" in kept.queries


def test_query_without_changed_instruction_is_excluded(fir, caplog):
    _rewrite(
        fir / "queries.jsonl",
        lambda r: [{**x, "instruction_changed": ""} if x["_id"] == "q3" else x for x in r],
    )
    data = load_followir(fir)
    assert "q3" not in data.queries
    assert any("1 queries have no changed instruction" in p and "q3" in p for p in data.problems)
    assert "q3" in caplog.text


def test_empty_candidate_list_is_excluded_and_unknown_candidates_are_reported(fir):
    _rewrite(
        fir / "top_ranked.jsonl",
        lambda r: [x for x in r if x["qid"] != "q1"] + [{"qid": "q4", "pid": "ghost"}],
    )
    data = load_followir(fir)
    assert "q1" not in data.queries
    assert any("empty candidate list" in p for p in data.problems)
    assert any("1 candidates in top_ranked are not in the corpus" in p for p in data.problems)
    assert "ghost" not in data.top_ranked["q4"]


def test_malformed_line_names_file_and_line(fir):
    path = fir / "qrels_changed" / "test.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = '{"query-id": "q1", "corpus-id": '
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"qrels_changed/test.jsonl:3: invalid JSON"):
        load_followir(fir)


def test_non_numeric_score_names_field(fir):
    path = fir / "qrels_og" / "test.jsonl"
    path.write_text(
        path.read_text() + json.dumps({"query-id": "q1", "corpus-id": "d01", "score": "high"}) + "\n"
    )
    with pytest.raises(DataError, match=r"test.jsonl:\d+: field 'score': not a number"):
        load_followir(fir)


def test_beir_bad_input(beir, caplog):
    with open(beir / "qrels" / "test.tsv", "a") as fh:
        fh.write("q2\tmissing-doc\t1\n")
    corpus, queries, qrels = load_beir(beir)
    assert (
        "q2" not in qrels
        and len(qrels) == 3
        and "1 queries have qrels naming documents missing" in caplog.text
    )
    with open(beir / "qrels" / "test.tsv", "a") as fh:
        fh.write("q1 d01 1\n")
    with pytest.raises(DataError, match=r"test.tsv:\d+: expected 3 tab-separated fields"):
        load_beir(beir)


def test_trec_qrels_in_a_beir_folder_are_refused_not_misread(tmp_path):
    """``qid 0 docid rel`` read as BEIR's 3 columns judged document "0" with the document id as
    its grade: with numeric document ids (a "0" among them), nDCG came out wrong and nothing was said."""
    docs = {str(i): f"document number {i}" for i in range(6)}
    folder = write_beir(tmp_path / "b", docs, {f"q{i}": f"query {i}" for i in range(1, 6)}, {})
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text("".join(f"q{i}\t0\t{i}\t1\n" for i in range(1, 6)))
    with pytest.raises(DataError, match=r"test.tsv:1: expected 3 .* got 4 \(TREC qrels"):
        load_beir(folder)
    qrels.write_text("".join(f"q{i}\t{i}\t1\t\n" for i in range(1, 6)))  # a trailing tab is no field
    assert load_beir(folder)[2] == {f"q{i}": {str(i): 1} for i in range(1, 6)}


@pytest.mark.parametrize(
    "score, says",
    [
        (0.5, "not a whole number: 0.5"),  # int() made it 0: a relevant document became a p-MRR non-change
        ("2.5", "not a whole number: '2.5'"),
        ("Infinity", "not a finite number: 'Infinity'"),  # int() raised OverflowError
        (float("inf"), "not a finite number: inf"),  # 1e999 in the file
        ("nan", "not a finite number: 'nan'"),
    ],
)
def test_a_score_that_is_not_a_whole_finite_number_names_line_and_field(fir, score, says):
    path = fir / "qrels_og" / "test.jsonl"
    n = len(path.read_text().splitlines()) + 1
    path.write_text(
        path.read_text() + json.dumps({"query-id": "q1", "corpus-id": "d01", "score": score}) + "\n"
    )
    with pytest.raises(DataError, match=rf"qrels_og/test.jsonl:{n}: field 'score': {re.escape(says)}"):
        load_followir(fir)


def test_whole_scores_in_any_spelling_are_read(fir):
    _rewrite(fir / "qrels_og" / "test.jsonl", lambda r: [{**x, "score": f"{x['score']}.0"} for x in r])
    data = load_followir(fir)
    assert {type(s) for docs in data.qrels_og.values() for s in docs.values()} == {int}


def _beir_lines(beir, name, rows):
    with open(beir / name, "a") as fh:
        fh.write("".join((r if isinstance(r, str) else json.dumps(r) + "\n") for r in rows))


BEIR_REFUSED = {  # what the FollowIR reader refuses, refused in a BEIR folder too (the same readers)
    "a fractional score": ("qrels/test.tsv", ["q1\td01\t0.5\n"], r"test.tsv:\d+: field 'score': not a whole"),
    "an infinite score": ("qrels/test.tsv", ["q1\td01\tinf\n"], r"test.tsv:\d+: field 'score': not a finite"),
    "a conflicting judgment": (
        "qrels/test.tsv",
        ["q1\tzz\t1\n", "q1\tzz\t0\n"],
        r"test.tsv:\d+: field 'score': 0 conflicts with 1 on line \d+ for query 'q1', document 'zz'",
    ),
    "a numeric title": (
        "corpus.jsonl",
        [{"_id": "d99", "title": 1998, "text": "A year as a title."}],
        r"corpus.jsonl:41: field 'title': must be a string or absent",
    ),
    "a document id twice (1 and '1')": (
        "corpus.jsonl",
        [{"_id": 1, "text": "first"}, {"_id": "1", "text": "second"}],
        r"corpus.jsonl:42: field '_id': duplicate id '1' \(first on line 41\)",
    ),
    "a query id twice": (
        "queries.jsonl",
        [{"_id": "q1", "text": "another query under q1"}],
        r"queries.jsonl:5: field '_id': duplicate id 'q1' \(first on line 1\)",
    ),
    "a query without text": ("queries.jsonl", [{"_id": "q9"}], r"queries.jsonl:5: field 'text': missing"),
}


@pytest.mark.parametrize("case", list(BEIR_REFUSED))
def test_beir_rows_are_checked_as_followir_rows(beir, case):
    name, rows, says = BEIR_REFUSED[case]
    _beir_lines(beir, name, rows)
    with pytest.raises(DataError, match=says):
        load_beir(beir)


def test_beir_graded_scores_and_the_same_judgment_twice_are_read(beir, caplog):
    _beir_lines(beir, "qrels/test.tsv", ["q1\td39\t2.0\n", "q1\td39\t2\n"])  # d39 is judged 2 above
    _beir_lines(beir, "corpus.jsonl", [{"_id": "blank", "title": "", "text": " "}])
    with caplog.at_level(logging.WARNING):
        corpus, queries, qrels = load_beir(beir)
    assert qrels["q1"]["d39"] == 2 and "blank" in corpus
    assert (
        "1 documents in corpus.jsonl have no text and no title (kept, as empty documents): blank"
        in caplog.text
    )


def test_a_set_s_digest_follows_its_content_not_its_name_or_spelling(fir, tmp_path):
    data = load_followir(fir)
    digest = content_digest(data)
    assert len(digest) == 16 and int(digest, 16) >= 0
    # another name, lines in another order, keys spelled in another order: the same content
    copy = write_followir(data, tmp_path / "renamed")
    _rewrite(copy / "corpus.jsonl", lambda rows: [dict(reversed(list(r.items()))) for r in rows[::-1]])
    _rewrite(copy / "top_ranked.jsonl", lambda rows: rows[::-1])
    assert content_digest(load_followir(copy)) == digest
    # one judgment changed: another digest
    _rewrite(
        copy / "qrels_changed" / "test.jsonl",
        lambda rows: [{**rows[0], "score": 1 - rows[0]["score"]}, *rows[1:]],
    )
    assert content_digest(load_followir(copy)) != digest


def test_a_beir_folder_s_digest(beir, tmp_path):
    digest = content_digest(load_beir(beir))
    assert len(digest) == 16 and digest == content_digest(load_beir(beir))
    tsv = beir / "qrels" / "test.tsv"
    lines = tsv.read_text().splitlines()
    tsv.write_text("\n".join([lines[0], *lines[:0:-1]]) + "\n")  # other line order: the same
    assert content_digest(load_beir(beir)) == digest


def test_a_row_repeated_exactly_is_read_once_with_a_warning(tmp_path, caplog):
    """Exported BEIR corpora sometimes repeat a row verbatim: read once and counted (a repeat with
    other content stays an error, above)."""
    folder = write_beir(
        tmp_path / "b", {"d1": "Basalt.", "d2": "Granite."}, {"q1": "rock"}, {"q1": {"d1": 1}}
    )
    corpus = folder / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + corpus.read_text().splitlines()[0] + "\n")
    with caplog.at_level(logging.WARNING):
        data = load_beir(folder)
    assert (
        len(data[0]) == 2
        and "1 row(s) repeat an earlier row of the same id exactly (e.g. 'd1')" in caplog.text
    )


def test_a_query_judged_only_zero_or_with_one_instruction_twice_is_excluded_and_named(fir):
    """A query whose og judgments are all 0 was scored MAP 0 and nDCG 0 and averaged in; one whose
    changed instruction is its original (up to spaces) scored p-MRR 0 by construction."""
    _rewrite(
        fir / "qrels_og" / "test.jsonl",
        lambda r: [{**x, "score": 0} if x["query-id"] == "q2" else x for x in r],
    )
    _rewrite(
        fir / "queries.jsonl",
        lambda r: [
            {**x, "instruction_changed": x["instruction_og"] + "  "} if x["_id"] == "q3" else x for x in r
        ],
    )
    data = load_followir(fir)
    assert set(data.queries) == {"q1", "q4"}
    assert any("no relevant og document" in p and "q2" in p for p in data.problems)
    assert any("the same original and changed instruction" in p and "q3" in p for p in data.problems)
    named = "\n".join(check_followir(fir))
    assert "query 'q2' has no relevant document" in named
    assert "field 'instruction_changed': the same as instruction_og: query 'q3'" in named


def test_changed_documents_outside_the_pool_or_unjudged_are_reported(fir):
    """Kept (mteb scores them so), but no longer silent: a changed document outside the candidates
    adds 0 to p-MRR, and a 'diff-only' qrels_changed doubled the changed documents."""
    data = load_followir(fir)
    q1_changed = data.qrel_diff["q1"]
    _rewrite(
        fir / "top_ranked.jsonl",
        lambda r: [x for x in r if not (x["qid"] == "q1" and x["pid"] == q1_changed[0])],
    )
    kept = {d for d, s in data.qrels_og["q4"].items() if s > 0 and data.qrels_changed["q4"].get(d, 0) > 0}
    _rewrite(
        fir / "qrels_changed" / "test.jsonl",
        lambda r: [x for x in r if not (x["query-id"] == "q4" and x["corpus-id"] in kept)],
    )
    again = load_followir(fir)
    assert set(again.queries) == set(data.queries)
    assert any("1 changed documents are not among their query's candidates" in p for p in again.problems)
    assert any(
        f"{len(kept)} documents relevant under the original instruction have no judgment" in p
        for p in again.problems
    )
    named = "\n".join(check_followir(fir))
    assert (
        f"query 'q1': changed documents not among its candidates in top_ranked.jsonl (0 in p-MRR): {q1_changed[0]}"
        in named
    )
    assert "query 'q4': relevant documents with no judgment in qrels_changed" in named


def test_a_beir_query_s_instruction_is_read_and_zero_only_queries_are_counted(beir, caplog):
    """mteb 2.x's instruction schema: the ``instruction`` was dropped without a word; a query judged
    only 0 was dropped without a word too."""
    _rewrite(
        beir / "queries.jsonl",
        lambda r: [{**x, "instruction": "Only Kenya."} if x["_id"] == "q1" else x for x in r],
    )
    tsv = beir / "qrels" / "test.tsv"
    lines = tsv.read_text().splitlines()
    tsv.write_text(
        "\n".join(
            lines[:1]
            + [ln if not ln.startswith("q2\t") else ln.rsplit("\t", 1)[0] + "\t0" for ln in lines[1:]]
        )
        + "\n"
    )
    with caplog.at_level(logging.WARNING):
        _, queries, _ = load_beir(beir)
    assert queries["q1"].endswith("? Only Kenya.") and "q2" not in queries
    assert "1 queries have no relevant document (every judgment 0); not evaluated: q2" in caplog.text


def test_a_query_id_with_a_slash_is_refused(fir):
    """'/' marks a combined set's '<dataset>/<qid>' ids: a set of one's own with such ids was
    resampled by prefix, and ``compare`` blamed the per-query file."""
    _rewrite(fir / "queries.jsonl", lambda r: [{**x, "_id": "topic/1"} if x["_id"] == "q1" else x for x in r])
    with pytest.raises(DataError, match=r"queries.jsonl:1: field '_id': query id 'topic/1' holds '/'"):
        load_followir(fir)


def test_a_query_whose_text_already_holds_its_instruction_is_named(fir, caplog, followir_dir):
    """Probe 49a: a folder whose query text ends with its og instruction (an export that folds it in,
    as Promptriever's query column does) was scored without a word, the og instruction read in
    both runs (bundled v1: p-MRR -5.03 became -3.58); training refuses such a seed."""
    _rewrite(
        fir / "queries.jsonl",
        lambda r: [
            {**x, "text": x["text"] + " " + x["instruction_og"]} if x["_id"] == "q2" else x for x in r
        ],
    )
    with caplog.at_level(logging.WARNING):
        data = load_followir(fir)
    assert "q2" in data.queries  # kept, as mteb keeps it
    said = [p for p in data.problems if "1 queries hold their instruction in their text already" in p]
    assert said and said[0].endswith(": q2") and "q2" in caplog.text
    assert not any("hold their instruction" in p for p in load_followir(followir_dir).problems)
