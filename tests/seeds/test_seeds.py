"""Seed schema, bundled-data validation, Promptriever loading, `ifir data stats`."""

import copy
import json
import logging
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.seeds import schema as seed_io
from ifir_lib.seeds.promptriever import PROMPTRIEVER_SCHEMA, load_promptriever, promptriever_to_arrow
from ifir_lib.seeds.schema import load_seeds
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.trainsets import build_trainset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _write(tmp_path, rows):
    p = tmp_path / "seeds.jsonl"
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return p


def test_malformed_seed_files_name_file_line_and_field(tmp_path, bundled_seeds):
    good = bundled_seeds[0]
    with pytest.raises(DataError, match=r"seeds\.jsonl:2: invalid JSON"):
        seed_io.load_seeds(_write(tmp_path, [good, '{"id": "x", "query": ']))
    missing = {k: v for k, v in bundled_seeds[1].items() if k != "instruction"}
    with pytest.raises(DataError, match=r"seeds\.jsonl:3: field 'instruction': missing"):
        seed_io.load_seeds(_write(tmp_path, [good, bundled_seeds[2], missing]))
    bad_neg = {**bundled_seeds[1], "instruction_negatives": [{"id": "z"}]}
    with pytest.raises(DataError, match=r":2: field 'instruction_negatives\[0\]': missing or empty 'text'"):
        seed_io.load_seeds(_write(tmp_path, [good, bad_neg]))
    with pytest.raises(DataError, match=r":2: field 'id': duplicate id"):
        seed_io.load_seeds(_write(tmp_path, [good, good]))


def test_a_passage_id_with_another_text_names_both_lines_and_the_field(tmp_path):
    """Two seed files that both number their passages pos-1, neg-1 ..., concatenated: the loss
    tells documents apart by id, so one seed's positive would be encoded with the other's text."""
    a, b = make_seed(0), make_seed(1)
    b["positive"]["id"] = a["positive"]["id"]
    path = _write(tmp_path, [a, make_seed(2), b])
    with pytest.raises(DataError) as err:
        load_seeds(path, stage="train")
    assert str(err.value) == (
        f"{path}:3: field 'positive': passage id {a['positive']['id']!r} has another text on line 1"
    )
    b["positive"]["text"] = a["positive"]["text"]  # the same passage under the same id: fine
    assert len(load_seeds(_write(tmp_path, [a, make_seed(2), b]), stage="train")) == 3
    c = {**make_seed(3), "counterpart_positive": {"id": a["positive"]["id"], "text": "Another text."}}
    c["counterpart_hard_negatives"] = []
    with pytest.raises(DataError, match=r":2: field 'counterpart_positive': passage id .* on line 1"):
        load_seeds(_write(tmp_path, [a, c]), stage="train")


def test_the_same_seed_under_two_ids_is_one_warning(tmp_path, caplog):
    seeds = [make_seed(i) for i in range(8)]
    copies = []
    for s in seeds[:7]:
        t = copy.deepcopy(s)
        t["id"], t["instruction"] = "export2-" + s["id"], s["instruction"].upper() + "  "
        copies.append(t)
    with caplog.at_level(logging.WARNING, logger="ifir_lib.seeds.schema"):
        assert len(load_seeds(_write(tmp_path, seeds + copies), stage="train")) == 15
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "7 seed(s) repeat another seed's query, instruction and positive" in warned[0]
    assert "'seed-0000' = 'export2-seed-0000'" in warned[0] and warned[0].count(" = ") == 5
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ifir_lib.seeds.schema"):
        load_seeds(_write(tmp_path, seeds), stage="train")
    assert not caplog.records


def test_narratives_come_as_a_set(tmp_path, bundled_seeds):
    base = {k: v for k, v in bundled_seeds[0].items() if k not in seed_io.NARRATIVE_FIELDS}
    full = {**base, **{f: f"A relevant document ... ({f})" for f in seed_io.NARRATIVE_FIELDS}}
    assert seed_io.load_seeds(_write(tmp_path, [base, {**full, "id": "other"}]))[1]["narrative"]
    partial = {k: v for k, v in full.items() if k != "aug_narrative"}
    with pytest.raises(DataError, match=r":2: field 'aug_narrative': the narratives come as a set"):
        seed_io.load_seeds(_write(tmp_path, [base, {**partial, "id": "other"}]))
    with pytest.raises(DataError, match=r":1: field 'narrative': must be a non-empty string"):
        seed_io.load_seeds(_write(tmp_path, [{**full, "narrative": " "}]))


def test_promptriever_rows_map_to_seeds():
    seeds = load_promptriever(FIXTURES / "promptriever_rows.jsonl")
    assert [s["id"] for s in seeds] == ["1001", "1003"]  # the bare-query rows are no seeds
    s = seeds[0]
    assert s["query"] == "what causes tides" and s["instruction"].startswith("A relevant document explains")
    assert s["positive"] == {
        "id": "p1",
        "text": "Tides The Moon's gravity pulls on the oceans, raising a bulge of water on the side facing it.",
    }
    assert [p["id"] for p in s["instruction_negatives"]] == ["i1"] and [
        p["id"] for p in s["hard_negatives"]
    ] == ["n1", "n2"]
    assert len(seeds[1]["instruction_negatives"]) == 2


def test_promptriever_counterparts_arrive_through_both_paths_and_train_all_orig(tmp_path):
    """Each instruction row's bare-query row (same query_id, before or after it) becomes the
    seed's counterpart, alike through the list and the Arrow path; a bare query without an
    instruction row (1004) is nobody's. All-orig then trains on the source rows' passages."""
    fx = FIXTURES / "promptriever_rows.jsonl"
    rows = [json.loads(line) for line in fx.read_text().splitlines()]
    listed = load_promptriever(fx)
    arrow = promptriever_to_arrow(fx, tmp_path / "a")
    assert list(arrow) == listed and [s["id"] for s in listed] == ["1001", "1003"]
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert (meta["bare_rows"], meta["counterparts"]) == (3, 2)
    for s in listed:
        (bare,) = [r for r in rows if r["query_id"] == s["id"] and not r["has_instruction"]]
        assert s["counterpart_positive"]["id"] == bare["positive_passages"][0]["docid"]
        assert [p["id"] for p in s["counterpart_hard_negatives"]] == [
            p["docid"] for p in bare["negative_passages"]
        ]
        assert s["counterpart_hard_negatives"] != s["hard_negatives"]  # the bare row's own negatives
    off = load_promptriever(fx, counterparts=False)
    assert off == list(promptriever_to_arrow(fx, tmp_path / "b", counterparts=False))
    assert not any("counterpart_positive" in s for s in off)
    revs = {s["id"]: {"reversal": "Only advice for clay soil.", "negative_index": 0} for s in listed}
    for seeds in (listed, arrow):  # All-* take the seeds with a reversal, as All-DV needs them
        ts = build_trainset("all-orig", seeds, revs, budget=2, num_negatives=3, out_dir=tmp_path / "ts")
        assert ts.counts["counterparts"] == {"source": 2, "built": 0}
    ts = build_trainset("all-orig", listed, revs, budget=2, num_negatives=3)
    query = {e["group"]: e for e in ts.examples if e["view"] == "query"}
    assert [p["id"] for p in query["1001"]["negatives"][:2]] == ["n4", "n1"]  # not the seed's n1, n2
    assert [p["id"] for p in query["1003"]["negatives"][:2]] == ["n7", "n3"]
    assert query["1001"]["query"] == "what causes tides" and query["1001"]["instruction"] == ""


def test_counterpart_fields_come_as_a_pair(tmp_path, bundled_seeds):
    pos = {"id": "cp", "text": "the bare query's positive"}
    base = {**bundled_seeds[0], "counterpart_positive": pos, "counterpart_hard_negatives": []}
    assert seed_io.load_seeds(_write(tmp_path, [base]))[0]["counterpart_positive"] == pos
    alone = {k: v for k, v in base.items() if k != "counterpart_hard_negatives"}
    with pytest.raises(
        DataError, match=r":1: field 'counterpart_hard_negatives': the counterpart comes as a pair"
    ):
        seed_io.load_seeds(_write(tmp_path, [alone]))
    bad = {**base, "counterpart_hard_negatives": [{"id": "x", "text": " "}]}
    with pytest.raises(
        DataError, match=r":1: field 'counterpart_hard_negatives\[0\]': missing or empty 'text'"
    ):
        seed_io.load_seeds(_write(tmp_path, [bad]))


def test_cli_bad_seed_file_is_one_clear_line(tmp_path):
    p = _write(tmp_path, ['{"id": "a"'])
    out = subprocess.run(
        [sys.executable, "-m", "ifir_lib", "data", "stats", "--seeds", str(p)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{p}:1: invalid JSON" in out.stderr


def test_each_stage_checks_only_what_it_reads(tmp_path):
    """A Promptriever-style row (no instruction type, no hard negatives) is fine for synthesis and
    training, which fill what they do not need; the bundled-data check still demands both."""
    rows = []
    for i in range(4):
        s = make_seed(i, negatives=1)
        del s["instruction_type"], s["hard_negatives"]
        rows.append(s)
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=f"{path}:1: field 'hard_negatives': missing"):
        load_seeds(path)
    seeds = load_seeds(path, stage="synthesis")
    assert seeds[0]["instruction_type"] == "unknown" and seeds[0]["hard_negatives"] == []
    ts = build_trainset("ins-dv", load_seeds(path, stage="train"), budget=4, num_negatives=3)
    assert len(ts.examples) == 4 and all(len(e["negatives"]) == 3 for e in ts.examples)
    del rows[2]["positive"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=f"{path}:3: field 'positive': missing"):
        load_seeds(path, stage="synthesis")


def _prow(qid, instruction="Only organic advice.", has=True, **kw):
    """A Promptriever row in the hub schema; ``kw`` overrides fields (``None`` drops one)."""
    row = {
        "query_id": qid,
        "query": f"query {qid} {instruction}",
        "only_query": f"query {qid}",
        "only_instruction": instruction,
        "has_instruction": has,
        "positive_passages": [{"docid": f"p{qid}", "title": "Title", "text": f" positive {qid} "}],
        "negative_passages": [{"docid": f"h{i}", "title": "", "text": f"hard {i}"} for i in range(4)],
        "new_negatives": [{"docid": f"i{qid}-{i}", "title": None, "text": f"excluded {i}"} for i in range(5)],
    }
    row.update(kw)
    return {k: v for k, v in row.items() if v is not None}


def test_list_and_arrow_paths_map_the_same_rows_alike(tmp_path):
    """One mapping rule: the list path and the Arrow path give the same seeds on the same rows,
    rows without an instruction (or its negatives) skipped on both."""
    rows = [
        _prow("1"),
        _prow("2", instruction="", has=False),  # the bare query: no instruction
        _prow("3", new_negatives=[]),  # no instruction negative
        _prow("4", has=None),  # has_instruction missing
        _prow("5", only_query="   "),  # a blank only_query: the query, less its instruction, is used
        _prow("6", negative_passages=None, positive_passages=[{"docid": "p6", "text": "no title"}]),
        _prow("7", instruction="  Only recent work.  "),
    ]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PROMPTRIEVER_SCHEMA), parquet)
    for src in (jsonl, parquet):
        listed = load_promptriever(src, max_hard_negatives=2)
        arrow = promptriever_to_arrow(src, tmp_path / f"a-{src.suffix}", max_hard_negatives=2)
        assert list(arrow) == listed
        assert [s["id"] for s in listed] == ["1", "5", "6", "7"]
        one, five, six, seven = listed
        assert one["positive"] == {"id": "p1", "text": "Title positive 1"}
        assert [p["id"] for p in one["instruction_negatives"]] == ["i1-0", "i1-1", "i1-2"]
        assert [p["text"] for p in one["hard_negatives"]] == ["hard 0", "hard 1"]
        assert (one["instruction_type"], one["domain"], one["reference_reversal"]) == (
            "unknown",
            "msmarco",
            None,
        )
        assert five["query"] == "query 5"  # not "query 5 Only organic advice.": trained as q + " " + I
        assert six["hard_negatives"] == [] and six["positive"] == {"id": "p6", "text": "no title"}
        assert seven["instruction"] == "Only recent work."
        assert load_promptriever(src, limit=2, max_hard_negatives=2) == listed[:2]


def test_an_export_without_the_instruction_flag_is_an_error_not_zero_seeds(tmp_path):
    """Without ``has_instruction`` (or with its column misspelled) every row was skipped: the list
    path returned [] and the Arrow path wrote ``"seeds": 0``, without a word."""
    rows = [
        {("has_instructions" if k == "has_instruction" else k): v for k, v in _prow(q).items()} for q in "123"
    ]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    says = r"rows.jsonl: 3 row\(s\) read, none a seed: .*; has_instruction absent or null in every row"
    with pytest.raises(DataError, match=says):
        load_promptriever(src)
    with pytest.raises(DataError, match=says):
        promptriever_to_arrow(src, tmp_path / "arrow")


def test_list_and_arrow_paths_name_the_same_bad_row(tmp_path):
    f = tmp_path / "rows.jsonl"
    bad = _prow("2", positive_passages=[{"docid": "p", "title": "", "text": "  "}])
    f.write_text(json.dumps(_prow("1")) + "\n" + json.dumps(bad) + "\n")
    for load in (load_promptriever, lambda src: promptriever_to_arrow(src, tmp_path / "a")):
        with pytest.raises(DataError, match=r"rows.jsonl:2: field 'positive': missing or empty 'text'"):
            load(f)


def test_a_parquet_shard_given_twice_is_refused_in_both_paths(tmp_path):
    """A re-download saved beside the original ('train-00000 (1).parquet') would double every
    seed under the same ids; both paths name the file, the row and the id instead."""
    rows = [_prow("1"), _prow("2", instruction="", has=False), _prow("3")]
    table = pa.Table.from_pylist(rows, schema=PROMPTRIEVER_SCHEMA)
    shards = tmp_path / "shards"
    shards.mkdir()
    pq.write_table(table, shards / "train-00000.parquet")
    assert [s["id"] for s in load_promptriever(shards)] == ["1", "3"]
    pq.write_table(table, shards / "train-00001.parquet")
    says = (
        rf"train-00001\.parquet:1: field 'query_id': seed id '1' was already read at "
        rf"{shards / 'train-00000.parquet'} row 1"
    )
    with pytest.raises(DataError, match=says):
        load_promptriever(shards)
    with pytest.raises(DataError, match=says):
        promptriever_to_arrow(shards, tmp_path / "arrow", batch_size=1)
    jsonl = tmp_path / "rows.jsonl"  # one file: the row of the repeat, counted in that file
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in [*rows, _prow("3")]))
    with pytest.raises(DataError, match=r"rows\.jsonl:4: field 'query_id': seed id '3' .* row 3"):
        load_promptriever(jsonl)


def test_seed_fingerprint_changes_with_what_a_reversal_was_written_from():
    from ifir_lib.seeds.schema import seed_fingerprint

    seed = make_seed(0)
    same = json.loads(json.dumps(seed))
    same["hard_negatives"] = []  # not part of what a reversal is written from
    assert seed_fingerprint(seed, 0) == seed_fingerprint(same, 0)
    for field in ("query", "instruction"):
        edited = dict(seed, **{field: seed[field] + " (edited)"})
        assert seed_fingerprint(edited, 0) != seed_fingerprint(seed, 0), field
    reordered = dict(seed, instruction_negatives=seed["instruction_negatives"][::-1])
    assert seed_fingerprint(reordered, 0) != seed_fingerprint(seed, 0)
    assert seed_fingerprint(seed, 0) != seed_fingerprint(seed, 1)
    assert seed_fingerprint(seed, 9) != seed_fingerprint(seed, 0)


def test_seed_fingerprint_reads_only_passage_ids_and_texts():
    """Extra passage fields (a title, a score) are dropped by the Arrow path: the digest of a seed
    and of its Arrow copy must agree, so they do not enter it."""
    from ifir_lib.seeds.schema import seed_fingerprint

    seed = make_seed(0)
    extra = json.loads(json.dumps(seed))
    extra["positive"]["title"] = "A title"
    extra["instruction_negatives"][0]["score"] = 0.5
    assert seed_fingerprint(extra, 0) == seed_fingerprint(seed, 0)
    extra["positive"]["text"] += " (edited)"
    assert seed_fingerprint(extra, 0) != seed_fingerprint(seed, 0)


def test_an_only_query_that_holds_its_instruction_is_named_on_both_paths(tmp_path):
    """The Arrow path checked a query holding its instruction only where it fell back to
    ``query``: an ``only_query`` exported with the instruction trained it twice."""
    f = tmp_path / "rows.jsonl"
    bad = _prow("2", only_query="query 2 only organic  advice.")  # re-cased and re-spaced
    f.write_text(json.dumps(_prow("1")) + "\n" + json.dumps(bad) + "\n")
    for load in (load_promptriever, lambda src: promptriever_to_arrow(src, tmp_path / "a")):
        with pytest.raises(
            DataError, match=r"rows.jsonl:2: field 'only_query': ends with the row's only_instruction"
        ):
            load(f)
