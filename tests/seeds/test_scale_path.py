"""The Arrow data path: Promptriever rows -> ArrowSeeds -> synthesis -> a trainer-ready Dataset.

Checked against the list path (``load_promptriever``, lists of seeds) on the same rows, in the
hub's schema (generated Parquet shards and the hand-written JSONL fixture).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ifir_lib.core.errors import ConfigError, DataError
from ifir_lib.seeds import arrow as arrow_seeds
from ifir_lib.seeds.arrow import ArrowSeeds
from ifir_lib.seeds.promptriever import load_promptriever, promptriever_to_arrow, seeds_to_arrow
from ifir_lib.seeds.schema import VERSION_FIELDS, seed_fingerprint
from ifir_lib.synthesis.run import SynthesisConfig, load_synthesis, merge_shards, synthesize
from ifir_lib.testing.promptriever import fake_rows, write_fake_promptriever
from ifir_lib.training.trainer import TrainConfig, train
from ifir_lib.training.trainsets import build_trainset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
TEMPLATE = SynthesisConfig(backend="template", progress=False, use_cache=False, fsync=False)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """60 generated rows in 3 Parquet shards (30 with instructions), 4 hard negatives each."""
    d = tmp_path_factory.mktemp("src")
    return d, write_fake_promptriever(d, 60, negatives=4, shard_rows=25)


def test_arrow_path_gives_the_list_paths_seeds(shards, tmp_path):
    src, _ = shards
    # the folder, not shard by shard: the pair of query 12 (rows 24, 25) straddles two shards
    listed = load_promptriever(src)
    arrow = load_promptriever(src, as_dataset=True, out_dir=tmp_path / "a")
    assert isinstance(arrow, ArrowSeeds) and len(arrow) == len(listed) == 30
    assert all(s["counterpart_positive"] == s["positive"] for s in listed)  # every pair found
    assert list(arrow) == listed
    assert arrow[-1] == listed[-1] and list(arrow.take([3, 1])) == [listed[3], listed[1]]
    # the fixture: titles joined to texts, rows without instruction negatives skipped
    fx = FIXTURES / "promptriever_rows.jsonl"
    assert list(promptriever_to_arrow(fx, tmp_path / "fx")) == load_promptriever(fx)
    assert list(promptriever_to_arrow(src, tmp_path / "lim", limit=7)) == listed[:7]


@pytest.mark.parametrize("order", ["bare first", "instructed first"])
def test_counterparts_match_across_batch_and_shard_boundaries(tmp_path, order):
    """Generated pairs in odd-sized shards and batches, so a query's bare row and its instructed
    row often fall in different batches or shards (before or after it): both paths give the same
    seeds, every seed finds its bare row, and a ``limit`` gives the same seeds at any batch size."""
    t = fake_rows(0, 40, 40, negatives=3)
    if order == "instructed first":
        t = t.take(pa.array(range(39, -1, -1)))
    src = tmp_path / "src"
    src.mkdir()
    for i, lo in enumerate(range(0, 40, 13)):
        pq.write_table(t.slice(lo, 13), src / f"train-{i:05d}.parquet")
    listed = load_promptriever(src)
    assert len(listed) == 20 and all(s["counterpart_positive"] == s["positive"] for s in listed)
    assert len({s["id"] for s in listed}) == 20
    for bs in (1, 2, 3, 5, 13, 10_000):
        arrow = promptriever_to_arrow(src, tmp_path / f"a{bs}", batch_size=bs)
        assert list(arrow) == listed, bs
        meta = json.loads((tmp_path / f"a{bs}" / "meta.json").read_text())
        assert (meta["bare_rows"], meta["counterparts"], meta["rows_read"]) == (20, 20, 40)
    # a limit stops at the row of its last seed: the bare rows after it are not read
    short = load_promptriever(src, limit=5)
    assert [s["id"] for s in short] == [s["id"] for s in listed[:5]]
    for bs in (1, 3, 13, 10_000):
        assert list(promptriever_to_arrow(src, tmp_path / f"l{bs}", batch_size=bs, limit=5)) == short, bs
    assert ("counterpart_positive" in short[-1]) == (order == "bare first")


def test_remapping_the_files_mid_pass_changes_nothing(shards, tmp_path, monkeypatch):
    """The files are mapped afresh every REMAP_PASSAGES passages read (bounded RSS); force it often."""
    src, _ = shards
    arrow = promptriever_to_arrow(src, tmp_path / "a")
    expected = list(arrow)
    monkeypatch.setattr(arrow_seeds, "REMAP_PASSAGES", 5)
    again = ArrowSeeds.open(tmp_path / "a")
    first = again._ptab
    assert [b for batch in again.iter_batches(4) for b in batch] == expected
    assert again._ptab is not first and again.passage(3) == arrow.passage(3)


def test_version_columns_give_each_seeds_fingerprint(shards, tmp_path):
    """Training checks a reversal's seed version from only ``VERSION_FIELDS`` (no hard negatives):
    those dicts are the full seeds cut to the columns, with the same ``seed_fingerprint``."""
    src, _ = shards
    arrow = promptriever_to_arrow(src, tmp_path / "a").take([5, 0, 17, 3])
    full = list(arrow)
    slim = [s for batch in arrow.iter_batches(3, columns=VERSION_FIELDS) for s in batch]
    assert slim == [{k: s[k] for k in VERSION_FIELDS} for s in full]
    assert all("hard_negatives" not in s for s in slim)
    for a, b in zip(full, slim):
        for i in range(len(a["instruction_negatives"])):
            assert seed_fingerprint(a, i) == seed_fingerprint(b, i)


def test_passages_are_stored_once(shards, tmp_path):
    src, files = shards
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    fields = ("positive_passages", "new_negatives", "negative_passages")
    for counterparts in (False, True):  # the bare-query rows' passages are kept with the counterparts
        arrow = promptriever_to_arrow(src, tmp_path / f"a{counterparts}", counterparts=counterparts)
        named = [
            p["docid"] for r in rows if r["has_instruction"] or counterparts for f in fields for p in r[f]
        ]
        assert len(named) > len(set(named))  # the source repeats passages...
        ids = arrow.passages["id"]
        assert len(ids) == len(set(ids)) == len(set(named))  # ...the passages table holds each once
    assert set(arrow.seeds.column_names) >= {"positive", "instruction_negatives", "hard_negatives"}
    assert arrow.seeds.features["positive"].dtype == "int64"  # seed rows point at passage rows


def test_counterparts_survive_the_arrow_tables_and_give_the_same_all_orig(tmp_path, bundled_seeds):
    """Seeds with and without a source counterpart: ``seeds_to_arrow`` keeps both kinds as they
    are, a folder written before the counterpart columns existed still reads, and All-orig from
    the tables equals All-orig from the list."""
    seeds = [dict(s) for s in bundled_seeds[:20]]
    for s in seeds[::3]:
        s["counterpart_positive"] = {"id": "cp-" + s["id"], "text": "the bare query's own positive"}
        s["counterpart_hard_negatives"] = s["hard_negatives"][1:] if s is not seeds[0] else []
    arrow = seeds_to_arrow(seeds, tmp_path / "seeds")
    assert list(arrow) == seeds and arrow.seeds.features["counterpart_positive"].dtype == "int64"
    a = build_trainset("all-orig", arrow, budget=16, num_negatives=3, out_dir=tmp_path / "ts")
    b = build_trainset("all-orig", seeds, budget=16, num_negatives=3)
    assert a.manifest() == b.manifest() and b.counts["counterparts"]["source"] > 0
    old = tmp_path / "old"  # the tables as written before: no counterpart columns
    old.mkdir()
    for f in ("passages.arrow", "meta.json"):
        (old / f).write_bytes((tmp_path / "seeds" / f).read_bytes())
    table = pa.ipc.open_stream(str(tmp_path / "seeds" / "seeds.arrow")).read_all()
    table = table.drop_columns(["counterpart_positive", "counterpart_hard_negatives"])
    with pa.ipc.new_stream(str(old / "seeds.arrow"), table.schema) as w:
        w.write_table(table)
    bare = [{k: v for k, v in s.items() if not k.startswith("counterpart_")} for s in seeds]
    assert list(ArrowSeeds.open(old)) == bare


def test_bad_row_names_source_row_and_field(tmp_path):
    bad = {
        "query_id": "q9",
        "query": "x",
        "only_query": "x",
        "only_instruction": "  ",
        "has_instruction": True,
        "positive_passages": [{"docid": "p", "title": "", "text": "t"}],
        "negative_passages": [],
        "new_negatives": [{"docid": "n", "title": "", "text": "u"}],
    }
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({**bad, "has_instruction": False}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"rows.jsonl:2: field 'instruction': must be a non-empty string"):
        promptriever_to_arrow(f, tmp_path / "out")


def test_a_passage_id_with_two_texts_is_counted_and_training_refuses_it(shards, tmp_path, caplog):
    """The Arrow path kept the first text of an id given two, with no word: a migraine query's
    positive became a solar-panel passage. The list keeps each row's own text; training refuses it."""

    def row(qid, query, pos):
        p = lambda d, t: {"docid": d, "title": "", "text": t}  # noqa: E731
        return {
            "query_id": qid,
            "query": query,
            "only_query": query,
            "only_instruction": "Only recent studies.",
            "has_instruction": True,
            "positive_passages": [p("D1", pos)],
            "new_negatives": [p(f"N{qid}", f"An older study on {query}.")],
            "negative_passages": [p(f"H{qid}", f"Nothing about {query}.")],
        }

    f = tmp_path / "rows.jsonl"
    rows = [
        row("q1", "solar panels", "Solar panels saved 30%."),
        row("q2", "migraine", "Skipping breakfast."),
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    arrow = promptriever_to_arrow(f, tmp_path / "out")
    assert "1 passage(s) came again under an id read before with another text (ids 'D1')" in caplog.text
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["passage_text_clashes"] == 1
    assert [s["positive"]["text"] for s in arrow] == ["Solar panels saved 30%."] * 2  # the first is kept
    listed = load_promptriever(f)
    assert [s["positive"]["text"] for s in listed] == ["Solar panels saved 30%.", "Skipping breakfast."]
    with pytest.raises(DataError, match="passage id 'D1' has another text"):
        build_trainset("ins-orig", listed, num_negatives=1)
    with pytest.raises(
        DataError, match=r"meta.json: field 'passage_text_clashes': 1 passage id\(s\) came with two"
    ):
        build_trainset("ins-orig", arrow, num_negatives=1, out_dir=tmp_path / "ts")  # the Arrow path too
    caplog.clear()
    promptriever_to_arrow(shards[0], tmp_path / "clean")  # repeated passages with one text each
    assert "another text" not in caplog.text


def test_synthesis_streams_arrow_seeds_with_shards_and_resume(shards, tmp_path):
    src, files = shards
    arrow = promptriever_to_arrow(src, tmp_path / "a")
    listed = list(arrow)
    full = synthesize(listed, tmp_path / "list.jsonl", TEMPLATE)
    parts = [synthesize(arrow, tmp_path / f"s{i}.jsonl", TEMPLATE, shard=f"{i}/2") for i in range(2)]
    assert sum(p.keys for p in parts) == full.keys == 30 and all(p.written == p.keys for p in parts)
    m = merge_shards([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"], tmp_path / "m.jsonl", seeds=listed)
    assert m.complete and m.rows == 30

    def strip(rows):
        return sorted((r["key"], r["status"], r["reversal"]) for r in rows)

    assert strip(load_synthesis(tmp_path / "m.jsonl")) == strip(load_synthesis(tmp_path / "list.jsonl"))
    # resume: a cut last line is repaired and only that key is redone
    p = tmp_path / "s0.jsonl"
    p.write_bytes(p.read_bytes()[:-20])
    again = synthesize(arrow, p, TEMPLATE, shard="0/2")
    assert (again.keys, again.skipped, again.written) == (parts[0].keys, parts[0].keys - 1, 1)
    assert synthesize(arrow, p, TEMPLATE, shard="0/2").written == 0


def test_build_trainset_returns_the_trainers_dataset(bundled_seeds, tmp_path):
    from datasets import Dataset

    arrow = seeds_to_arrow(bundled_seeds, tmp_path / "seeds")
    assert list(arrow) == bundled_seeds
    for mode in ("ins-orig", "ins-dv", "all-orig", "ins-dv-template"):
        a = build_trainset(mode, arrow, budget=12, num_negatives=3, out_dir=tmp_path / "ts")
        b = build_trainset(mode, bundled_seeds, budget=12, num_negatives=3)
        assert a.examples is None and a.manifest() == b.manifest()  # same examples, same hash
        da, db = a.dataset, b.dataset
        assert isinstance(da, Dataset) and da.column_names == db.column_names
        assert da.remove_columns("label").to_list() == db.remove_columns("label").to_list()
        # labels: other integers, the same partition of groups, queries and documents
        for cols in (slice(0, 1), slice(1, 2), slice(2, None)):
            pairs = {(x, y) for la, lb in zip(da["label"], db["label"]) for x, y in zip(la[cols], lb[cols])}
            assert len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs})


def test_the_trainer_takes_the_arrow_trainset_as_it_is(bundled_seeds, tmp_path):
    arrow = seeds_to_arrow(bundled_seeds[:40], tmp_path / "seeds")
    cfg = TrainConfig.preset("cpu-smoke", max_steps=2, num_negatives=3)
    ts = build_trainset("ins-dv", arrow, budget=16, num_negatives=3, out_dir=tmp_path / "ts")
    res = train(ts.dataset, tmp_path / "run", cfg, mode="ins-dv", manifest=ts.manifest(), device="cpu")
    assert [r["step"] for r in res.log] == [1, 2] and all(r["loss"] > 0 for r in res.log)


def test_bench_scale_prints_json_last(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
        sys.executable,
        str(REPO / "bench" / "bench_scale.py"),
        "--rows",
        "2000",
        "--workdir",
        str(tmp_path),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    last = json.loads(out.stdout.strip().splitlines()[-1])
    stages = {"load_convert", "synthesis", "synthesis_resume", "trainset"}
    assert last["rows"] == 2000 and set(last["peak_rss_gb"]) == set(last["rows_per_s"]) == stages
    assert set(last["peak_anon_gb"]) == stages
    assert last["seeds"] == 1000 and last["examples"] == 1000
    assert all(0 < v < 3 for v in last["peak_rss_gb"].values())
    assert list(tmp_path.iterdir()) == []  # the generated data is deleted


def test_a_seed_id_given_twice_from_python_or_arrow_is_refused(bundled_seeds, tmp_path):
    """A second export numbered from the same ids: the copy of another seed under ``A-001`` would
    train with A-001's reversal (reversals are keyed by id). ``load_seeds`` refuses it in a file;
    the list path, ``seeds_to_arrow`` and a folder written before this check refuse it too."""
    seeds = bundled_seeds[:30]
    other = next(s for s in seeds if s["id"] != seeds[0]["id"])

    def renamed(p):  # the copy's passages get their own ids: no passage id clashes
        return {**p, "id": p["id"] + "-copy"}

    copy = {**other, "id": seeds[0]["id"], "positive": renamed(other["positive"])}
    for f in ("instruction_negatives", "hard_negatives"):
        copy[f] = [renamed(p) for p in other[f]]
    twice = [*seeds, copy]
    with pytest.raises(ConfigError, match=f"seed id '{seeds[0]['id']}' is given twice .*#1 and #31"):
        build_trainset("ins-dv", twice, num_negatives=3)
    with pytest.raises(ConfigError, match=f"'{seeds[0]['id']}' is given twice"):
        seeds_to_arrow(twice, tmp_path / "twice", batch_size=7)
    assert not (tmp_path / "twice" / "seeds.arrow").exists()
    # a folder that holds the repeat (written by hand, or by a version without the check)
    folder = tmp_path / "old"
    first = seeds_to_arrow(seeds, folder)
    with pytest.raises(ConfigError, match=f"'{seeds[0]['id']}' is given twice"):
        build_trainset("ins-dv", first.take([*range(30), 0]), num_negatives=3, out_dir=tmp_path / "sets")
