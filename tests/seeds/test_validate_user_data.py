"""``ifir data validate --seeds FILE --followir DIR`` on a user's own files, outside the bundle.

Valid files pass: a few bundled seeds copied as a user would (whole, or cut to the five fields
synthesis and training read), a minimal hand-written seed, a subset of the bundled v1 set and a
hand-written FollowIR-format folder. The bundle's own rules (passage lengths, 3 hard negatives,
the audit files) apply to the bundled seed file only, or to an audit the user names. A broken
file stops with one line naming file, line and field (exit 2) when a row is malformed, and lists
each problem with its file, line and field (exit 1) when the rows are well formed but disagree.
"""

import copy
import json
import shutil

import pytest

from ifir_lib import cli
from ifir_lib.core.config import ABSTRACT_AUDIT_PATH, FOLLOWIR_DIR, SEEDS_PATH
from ifir_lib.pipelines.bundle import is_bundled, validate_bundle, validate_data
from ifir_lib.seeds.schema import load_seeds

MINIMAL = {  # what synthesis and training read, and nothing else; passages of a few words are fine
    "id": "my-1",
    "query": "sourdough starter maintenance",
    "instruction": "Only advice for rye starters.",
    "positive": {"id": "my-1-pos", "text": "Feed a rye starter once a day with whole rye flour."},
    "instruction_negatives": [{"id": "my-1-in0", "text": "Feed a wheat starter twice a day."}],
}
STAGE_FIELDS = ("id", "query", "instruction", "positive", "instruction_negatives")


def _jsonl(path, rows):
    """``rows`` (objects or lines) as a JSONL file; a final ``None`` leaves out the last newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = bool(rows) and rows[-1] is None
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in (rows[:-1] if cut else rows))
    path.write_text(text[:-1] if cut else text)
    return path


def _seed(i: int, **kw) -> dict:
    """``MINIMAL`` with the ids and texts of seed ``my-<i>``; ``kw`` sets fields."""
    s = json.loads(json.dumps(MINIMAL).replace("my-1", f"my-{i}").replace("a day", f"a day ({i})"))
    return {**s, **kw}


def _validate(capsys, seeds, followir, *extra):
    code = cli.main(["data", "validate", "--seeds", str(seeds), "--followir", str(followir), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _hand_written_followir(folder):
    """One query, three documents: d1 relevant under both instructions, d2 under the original
    only (the qrel diff), d3 a candidate judged under neither."""
    _jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "", "text": "Basalt columns form as lava cools and contracts."},
            {"_id": "d2", "title": "Giant's Causeway", "text": "A tourist guide to the causeway's columns."},
            {"_id": "d3", "text": "Granite forms deep underground from slowly cooling magma."},
        ],
    )
    _jsonl(
        folder / "queries.jsonl",
        [
            {
                "_id": "q1",
                "text": "columnar basalt formation",
                "instruction_og": "Documents about how basalt columns form are relevant.",
                "instruction_changed": "Documents about how basalt columns form are relevant; "
                "travel writing is not.",
            }
        ],
    )
    _jsonl(folder / "qrels_og" / "test.jsonl", [_qrel("q1", "d1", 2), _qrel("q1", "d2", 1)])
    _jsonl(folder / "qrels_changed" / "test.jsonl", [_qrel("q1", "d1", 2), _qrel("q1", "d2", 0)])
    _jsonl(folder / "top_ranked.jsonl", [{"qid": "q1", "pid": d} for d in ("d1", "d2", "d3")])
    return folder


def _qrel(q, d, score):
    return {"query-id": q, "corpus-id": d, "score": score}


def _v1_subset(folder, n_queries=2):
    """The first ``n_queries`` queries of the bundled v1 set with their candidates and judgments."""
    rows = {
        name: [json.loads(line) for line in (FOLLOWIR_DIR / name).read_text().splitlines() if line.strip()]
        for name in ("corpus.jsonl", "queries.jsonl", "qrels_og/test.jsonl", "qrels_changed/test.jsonl")
        + ("top_ranked.jsonl",)
    }
    qids = {q["_id"] for q in rows["queries.jsonl"][:n_queries]}
    top = [r for r in rows["top_ranked.jsonl"] if r["qid"] in qids]
    qrels = {k: [r for r in rows[k] if r["query-id"] in qids] for k in rows if k.startswith("qrels")}
    docs = {r["pid"] for r in top} | {r["corpus-id"] for rs in qrels.values() for r in rs}
    _jsonl(folder / "corpus.jsonl", [d for d in rows["corpus.jsonl"] if d["_id"] in docs])
    _jsonl(folder / "queries.jsonl", [q for q in rows["queries.jsonl"] if q["_id"] in qids])
    _jsonl(folder / "top_ranked.jsonl", top)
    for name, rs in qrels.items():
        _jsonl(folder / name, rs)
    return folder


# ---- valid user files pass ------------------------------------------------------------------


@pytest.mark.parametrize("strip", [False, True], ids=["whole", "five-fields"])
def test_bundled_seeds_copied_by_a_user_pass(tmp_path, capsys, bundled_seeds, strip):
    rows = copy.deepcopy(bundled_seeds[:3])
    if strip:
        rows = [{k: s[k] for k in STAGE_FIELDS} for s in rows]
    seeds = _jsonl(tmp_path / "mine" / "seeds.jsonl", rows)
    code, out, err = _validate(capsys, seeds, _v1_subset(tmp_path / "mine" / "fir"))
    assert (code, err) == (0, "") and out.splitlines()[-1].startswith("0 problems")
    assert "seed schema and consistency" in out and not is_bundled(seeds)


def test_minimal_hand_written_seed_and_folder_pass(tmp_path, capsys):
    """Short passages, 1 instruction negative, no hard negatives, no reversal, no audit row: none of
    the bundle's rules applies to a user's file."""
    seeds = _jsonl(tmp_path / "seeds.jsonl", [MINIMAL, _seed(2, instruction_type="my own type")])
    code, out, err = _validate(capsys, seeds, _hand_written_followir(tmp_path / "fir"))
    assert (code, err) == (0, "") and out.splitlines() == [
        f"0 problems ({seeds}: seed schema and consistency; {tmp_path / 'fir'})"
    ]


def test_audits_apply_to_a_user_file_only_when_named(tmp_path, capsys, bundled_seeds):
    rows = copy.deepcopy(bundled_seeds[:20])
    edited = next(i for i, s in enumerate(rows) if s.get("abstract_reversal"))
    rows[edited]["abstract_reversal"] = "Something else entirely, please."
    seeds = _jsonl(tmp_path / "seeds.jsonl", rows)
    fir = _v1_subset(tmp_path / "fir")
    assert _validate(capsys, seeds, fir)[0] == 0
    code, out, _ = _validate(capsys, seeds, fir, "--audit", f"abstract={ABSTRACT_AUDIT_PATH}")
    assert code == 1 and f"{rows[edited]['id']}: the abstract reversal changed after its review" in out
    assert out.splitlines()[-1].startswith("1 problems") and "audits abstract" in out
    code, _, err = _validate(capsys, seeds, fir, "--audit", "reviews=a.jsonl")
    assert code == 2 and "unknown audit kind 'reviews'" in err


def test_the_release_rules_name_line_and_field_and_skip_a_user_file(tmp_path, bundled_seeds):
    """A copy of the bundle with one seed cut to 2 hard negatives: the release's checks name its
    line and field; the same file checked as a user's own has no problem."""
    rows = copy.deepcopy(bundled_seeds)
    rows[4]["hard_negatives"] = rows[4]["hard_negatives"][:2]
    seeds = _jsonl(tmp_path / "seeds.jsonl", rows)
    fir = _v1_subset(tmp_path / "fir")
    assert validate_bundle(seeds, fir) == [
        f"{seeds}:5: field 'hard_negatives': 2 passages (the release needs 3+)"
    ]
    assert validate_data(seeds, fir) == []


def test_the_bundled_seed_file_keeps_the_release_rules(tmp_path, capsys):
    """The same short hand-written folder, but the bundled seeds: the release's rules and audits."""
    assert is_bundled(SEEDS_PATH) and is_bundled(str(SEEDS_PATH.parent / ".." / "data" / "seeds.jsonl"))
    code, out, _ = _validate(capsys, SEEDS_PATH, _hand_written_followir(tmp_path / "fir"))
    assert code == 0 and "the release's rules and audits" in out.splitlines()[-1]


# ---- broken seed files --------------------------------------------------------------------


def _seed_lines(case: str) -> tuple[list, str]:
    """The lines of a broken seed file, and what the error must say after ``<file>:``."""
    good = [MINIMAL, _seed(2), _seed(3)]
    if case == "bad JSON":
        return [good[0], '{"id": "my-2", "query": "rye"', good[2]], "2: invalid JSON"
    if case == "missing field":
        return [
            good[0],
            {k: v for k, v in good[1].items() if k != "instruction"},
        ], "2: field 'instruction': missing"
    if case == "wrong type":
        return [*good[:2], {**good[2], "instruction_negatives": "a passage"}], (
            "3: field 'instruction_negatives': must be a list"
        )
    if case == "wrong type in a passage":
        bad = {**good[1], "instruction_negatives": [{"id": "x", "text": 7}]}
        return [good[0], bad], "2: field 'instruction_negatives[0]': missing or empty 'text'"
    if case == "duplicate id":
        return [*good[:2], _seed(1)], "3: field 'id': duplicate id 'my-1' (first on line 1)"
    if case == "misspelt field":  # N* would silently be the first instruction negative
        return [good[0], {**good[1], "reference_negative_idx": 0}], (
            "2: field 'reference_negative_idx': is not a seed field; did you mean 'reference_negative_index'?"
        )
    if case == "another toolkit's name":  # the hard negatives would silently be random passages
        return [good[0], {**good[1], "negatives": [{"id": "n", "text": "Some other passage."}]}], (
            "2: field 'negatives': is not a seed field; did you mean 'hard_negatives'?"
        )
    if case == "query holding its instruction":  # read as q + " " + I: the instruction twice
        glued = {**good[1], "query": good[1]["query"] + " " + good[1]["instruction"].upper()}
        return [good[0], glued], "2: field 'query': ends with the seed's instruction"
    if case == "key given twice":  # a hand edit that appended the corrected field: the last won
        line = json.dumps(good[1])[:-1] + ', "instruction": "Only sourdough."}'
        return [good[0], line], "2: field 'instruction': given twice in one object"
    if case == "key given twice on a last line without a newline":  # not a cut write: never dropped
        line = json.dumps(good[1])[:-1] + ', "instruction": "Only sourdough."}'
        return [good[0], line, None], "2: field 'instruction': given twice in one object"
    raise ValueError(case)


@pytest.mark.parametrize(
    "case",
    [
        "bad JSON",
        "missing field",
        "wrong type",
        "wrong type in a passage",
        "duplicate id",
        "misspelt field",
        "another toolkit's name",
        "query holding its instruction",
        "key given twice",
        "key given twice on a last line without a newline",
    ],
)
def test_a_malformed_seed_row_is_one_line_naming_file_line_and_field(tmp_path, capsys, case):
    lines, says = _seed_lines(case)
    seeds = _jsonl(tmp_path / "seeds.jsonl", lines)
    code, out, err = _validate(capsys, seeds, _hand_written_followir(tmp_path / "fir"))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and f"{seeds}:{says}" in err


def test_seeds_that_disagree_are_listed_by_line_and_field(tmp_path, capsys):
    clash = _seed(2, hard_negatives=[{"id": "my-1-pos", "text": "Another text under a known id."}])
    twice = _seed(3)
    twice["instruction_negatives"].append(dict(twice["positive"]))
    seeds = _jsonl(tmp_path / "seeds.jsonl", [MINIMAL, clash, twice])
    code, out, _ = _validate(capsys, seeds, _hand_written_followir(tmp_path / "fir"))
    assert code == 1 and out.splitlines()[:-1] == [
        f"{seeds}:2: field 'hard_negatives[0]': passage id 'my-1-pos' has another text on line 1",
        f"{seeds}:3: field 'instruction_negatives[1]': passage id 'my-3-pos' is also positive",
    ]


def test_an_eval_document_copied_from_the_seeds_is_named(tmp_path, capsys):
    fir = _hand_written_followir(tmp_path / "fir")
    corpus = fir / "corpus.jsonl"
    corpus.write_text(
        corpus.read_text().replace(
            "Granite forms deep underground from slowly cooling magma.", MINIMAL["positive"]["text"]
        )
    )
    code, out, _ = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [MINIMAL]), fir)
    assert (
        code == 1
        and out.splitlines()[0] == f"{corpus}:3: field 'text': document 'd3' repeats a training passage"
    )


def test_an_eval_document_cut_into_a_seed_passage_is_named(tmp_path, capsys):
    """A passage made from a test document's first sentences, or with one sentence added, passed:
    only whole-text copies were compared."""
    from ifir_lib.seeds.cues import NearCopies

    doc = " ".join(
        f"Sentence {w} tells how the town\u2019s old stone bridge over the river was rebuilt in {1900 + i}."
        for i, w in enumerate("abcdefgh")
    )
    near = NearCopies(
        [doc[: len(doc) // 2], "An unrelated passage about cooking rice in a steel pot for ten people today."]
    )
    assert near.match(doc)[0] == 0 and near.match(doc + " One more sentence about the bridge.")[0] == 0
    assert (
        near.match("A passage about cooking rice in a steel pot for ten people, with other words around.")
        is None
    )
    fir = _hand_written_followir(tmp_path / "fir")
    corpus = fir / "corpus.jsonl"
    corpus.write_text(
        corpus.read_text().replace("Granite forms deep underground from slowly cooling magma.", doc)
    )
    seed = copy.deepcopy(MINIMAL)
    # cut to its first sentences; the document's typographic apostrophes are normalised as the passage's
    seed["hard_negatives"] = [{"id": "my-1-hn1", "text": " ".join(doc.split(". ")[:4]) + "."}]
    code, out, _ = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [seed]), fir)
    assert code == 1 and "document 'd3' and training passage 'my-1-hn1' of seed 'my-1' share" in out


LEAKS = {  # a seed that holds what the folder tests, in another form than an exact copy
    "query + instruction_og": (
        {
            "query": "Columnar  basalt formation",
            "instruction": "documents about how basalt columns form are relevant.",
        },
        "queries.jsonl:1: field 'instruction_og': query 'q1' with its instruction_og repeats training seed "
        "'my-1' (query + instruction)",
    ),
    "title + ' ' + text": (
        {
            "positive": {
                "id": "my-1-pos",
                "text": "Giant's Causeway A tourist guide to the causeway's columns.",
            }
        },
        "corpus.jsonl:2: field 'title': document 'd2' as title + ' ' + text repeats a training passage",
    ),
    "a doubled space and other case": (
        {"positive": {"id": "my-1-pos", "text": "basalt columns  form as LAVA cools and contracts.\n"}},
        "corpus.jsonl:1: field 'text': document 'd1' repeats a training passage",
    ),
    "full-width letters (NFKC)": (
        {
            "positive": {
                "id": "my-1-pos",
                "text": "Granite forms deep underground from slowly cooling \uff4d\uff41gma.",
            }
        },
        "corpus.jsonl:3: field 'text': document 'd3' repeats a training passage",
    ),
}


@pytest.mark.parametrize("case", list(LEAKS))
def test_a_seed_that_repeats_the_folder_in_another_form_is_named(tmp_path, capsys, case):
    fields, says = LEAKS[case]
    fir = _hand_written_followir(tmp_path / "fir")
    code, out, _ = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [{**MINIMAL, **fields}]), fir)
    assert code == 1 and out.splitlines()[:-1] == [f"{fir}/{says}"]


# ---- broken FollowIR-format folders -------------------------------------------------------

LISTED = {  # well-formed rows that name what the folder lacks: listed, exit 1
    "qrels naming an unknown document": (
        "qrels_og/test.jsonl",
        _qrel("q1", "ghost", 1),
        "3: field 'corpus-id': document 'ghost' is not in corpus.jsonl",
    ),
    "qrels naming an unknown query": (
        "qrels_changed/test.jsonl",
        _qrel("q9", "d1", 1),
        "3: field 'query-id': query 'q9' is not in queries.jsonl",
    ),
    "a candidate not in the corpus": (
        "top_ranked.jsonl",
        {"qid": "q1", "pid": ["d3", "d404"]},
        "4: field 'pid': document 'd404' is not in corpus.jsonl",
    ),
    "a query without a changed instruction": (
        "queries.jsonl",
        {"_id": "q2", "text": "obsidian", "instruction_og": "Volcanic glass."},
        "2: field 'instruction_changed': missing or empty: query 'q2' cannot be scored",
    ),
}


@pytest.mark.parametrize("case", list(LISTED))
def test_folder_rows_naming_what_it_lacks_are_listed(tmp_path, capsys, case):
    name, row, says = LISTED[case]
    fir = _hand_written_followir(tmp_path / "fir")
    with (fir / name).open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    code, out, _ = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [MINIMAL]), fir)
    assert code == 1 and f"{fir / name}:{says}" in out.splitlines()


def test_rows_scored_as_they_stand_are_notes_not_problems(tmp_path, capsys):
    """A faithful export whose changed document is not among the query's candidates (mteb scores
    it, as 0 in p-MRR) made ``ifir data validate`` exit 1 as if the folder were broken; it is a
    note now, with exit 0, and a real problem beside it still fails."""
    fir = _hand_written_followir(tmp_path / "fir")
    _jsonl(
        fir / "top_ranked.jsonl", [{"qid": "q1", "pid": d} for d in ("d1", "d3")]
    )  # d2 changed, not pooled
    seeds = _jsonl(tmp_path / "seeds.jsonl", [MINIMAL])
    code, out, _ = _validate(capsys, seeds, fir)
    lines = out.splitlines()
    assert code == 0, out
    assert lines[0].startswith(f"note (scored as it stands): {fir / 'qrels_og' / 'test.jsonl'}:1:")
    assert "changed documents not among its candidates" in lines[0]
    assert lines[-1].startswith("0 problems and 1 notes")
    with (fir / "qrels_og" / "test.jsonl").open("a") as fh:
        fh.write(json.dumps(_qrel("q1", "ghost", 1)) + "\n")
    code, out, _ = _validate(capsys, seeds, fir)
    assert code == 1 and out.splitlines()[-1].startswith("1 problems and ")


MALFORMED = {  # rows no loader can read: one line, exit 2
    "bad JSON": ("corpus.jsonl", '{"_id": "d4", "text": ', "4: invalid JSON"),
    "a missing field": (
        "queries.jsonl",
        {"_id": "q2", "text": "obsidian"},
        "2: field 'instruction_og': missing",
    ),
    "a wrong-typed field": (
        "queries.jsonl",
        {"_id": "q2", "text": "obsidian", "instruction_og": "Glass.", "instruction_changed": 3},
        "2: field 'instruction_changed': must be a string",
    ),
    "a duplicate id": (
        "corpus.jsonl",
        {"_id": "d2", "text": "Another document under an id in use."},
        "4: field '_id': duplicate id 'd2' (first on line 2)",
    ),
    "a score that is no number": ("qrels_og/test.jsonl", _qrel("q1", "d3", "high"), "3: field 'score'"),
    "a fractional score": (  # int() cut it to 0: d3 lost its judgment and 0 problems were reported
        "qrels_og/test.jsonl",
        _qrel("q1", "d3", 0.5),
        "3: field 'score': not a whole number: 0.5",
    ),
    "an infinite score": (  # int() raised OverflowError, a traceback
        "qrels_changed/test.jsonl",
        _qrel("q1", "d3", "Infinity"),
        "3: field 'score': not a finite number: 'Infinity'",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_folder_row_is_one_line(tmp_path, capsys, case):
    name, row, says = MALFORMED[case]
    fir = _hand_written_followir(tmp_path / "fir")
    with (fir / name).open("a") as fh:
        fh.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    code, out, err = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [MINIMAL]), fir)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and f"{fir / name}:{says}" in err


@pytest.mark.parametrize("missing", ["top_ranked.jsonl", "qrels_changed/test.jsonl"])
def test_a_missing_file_is_named(tmp_path, capsys, missing):
    fir = _hand_written_followir(tmp_path / "fir")
    (fir / missing).unlink()
    code, out, err = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [MINIMAL]), fir)
    assert code == 2 and out == "" and err.strip().splitlines() == [err.strip()]
    assert (
        f"{fir / missing}: file not found; a FollowIR-format folder holds corpus.jsonl, queries.jsonl" in err
    )


def test_a_copy_of_the_bundled_set_passes_and_a_cut_one_is_named(tmp_path, capsys):
    fir = shutil.copytree(FOLLOWIR_DIR, tmp_path / "v1")
    seeds = _jsonl(tmp_path / "seeds.jsonl", [MINIMAL])
    assert _validate(capsys, seeds, fir)[0] == 0
    corpus = fir / "corpus.jsonl"
    lines = corpus.read_text().splitlines(keepends=True)
    dropped = json.loads(lines[0])["_id"]
    corpus.write_text("".join(lines[1:]))
    code, out, _ = _validate(capsys, seeds, fir)
    named = [line for line in out.splitlines() if f"document {dropped!r} is not in corpus.jsonl" in line]
    assert code == 1 and named and all(line.startswith(f"{fir}/") for line in named)


def test_a_query_whose_words_move_into_the_instruction_is_not_a_leak(tmp_path, capsys):
    """Query and instruction are compared as a pair: the same words split at another place are
    another query (joined into one text they would match)."""
    fields = {
        "query": "Columnar basalt",
        "instruction": "formation documents about how basalt columns form are relevant.",
    }
    fir = _hand_written_followir(tmp_path / "fir")
    code, out, _ = _validate(capsys, _jsonl(tmp_path / "seeds.jsonl", [{**MINIMAL, **fields}]), fir)
    assert code == 0 and "0 problems" in out


def test_fields_of_their_own_are_counted_and_a_passage_title_is_read_as_evaluation_reads_it(tmp_path, caplog):
    """Fields the schema does not read (``query_id``, ``source``) are named in one warning; a
    passage's ``title`` (BEIR's layout) was dropped, while evaluation encodes title + " " + text."""
    rows = [_seed(i, query_id=f"q{i}", source="mine", position=i) for i in (1, 2)]
    text = rows[0]["positive"]["text"]
    rows[0]["positive"]["title"] = "Rye starters"
    seeds = _jsonl(tmp_path / "seeds.jsonl", rows)
    with caplog.at_level("WARNING"):
        loaded = load_seeds(seeds, stage="train")
    said = "fields the seed schema does not read, left out: query_id (2 rows), source (2 rows), position (2 rows)"
    assert said in caplog.text  # 'position' is not taken for a misspelt 'positive'
    rows[1]["positive"]["title"] = ""  # an empty title leaves the text as it is
    assert load_seeds(_jsonl(tmp_path / "again.jsonl", rows), stage="train")[1]["positive"] == {
        "id": "my-2-pos",
        "text": rows[1]["positive"]["text"],
    }
    assert loaded[0]["positive"] == {"id": "my-1-pos", "text": "Rye starters " + text}
