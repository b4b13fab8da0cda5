"""Synthesis files: which negative is N*, keys and shards, cut lines, resume, merge."""

import collections
import copy
import json

import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import DataError
from ifir_lib.synthesis import run as sio
from ifir_lib.testing.inputs import make_seed, write_seeds


def test_choose_negatives_policies():
    s = make_seed(1, negatives=3)
    assert sio.choose_negatives(s, "first") == [0]
    assert sio.choose_negatives(s, "all") == [0, 1, 2]
    picks = {sio.choose_negatives(make_seed(i, negatives=3), "random", 7)[0] for i in range(30)}
    assert picks == {0, 1, 2}  # 30 seeds, 3 choices: all appear
    # depends on the seed and rng_seed only, not on call order
    assert sio.choose_negatives(s, "random", 7) == sio.choose_negatives(s, "random", 7)
    with pytest.raises(ValueError, match="unknown negative policy 'best'"):
        sio.choose_negatives(s, "best")
    with pytest.raises(ValueError, match="unknown negative policy 'best'"):
        sio.SynthesisConfig(negative="best")


def test_plan_keys_and_shards_partition():
    seeds = [make_seed(i) for i in range(40)]
    assert [k for k, _, _ in sio.plan(seeds[:2], "all")] == [
        "seed-0000#0",
        "seed-0000#1",
        "seed-0001#0",
        "seed-0001#1",
    ]
    shards = [{k for k, _, _ in sio.plan(seeds, "first", shard=f"{i}/3")} for i in range(3)]
    assert set.union(*shards) == {s["id"] for s in seeds}
    assert sum(map(len, shards)) == 40 and all(shards)  # disjoint, none empty
    assert sio.shard_of("seed-0007", 3) == sio.shard_of("seed-0007", 3)
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError, match="--shard expects"):
            sio.parse_shard(bad)


def _row(key, status="accepted", reversal="Use data from Spain."):
    sid = key.split("#")[0]
    return {
        "key": key,
        "seed_id": sid,
        "negative_index": int(key.split("#")[1]) if "#" in key else 0,
        "status": status,
        "reversal": reversal if status == "accepted" else None,
    }


def test_load_synthesis_tolerates_cut_last_line(tmp_path):
    p = tmp_path / "out.jsonl"
    p.write_text(json.dumps(_row("a")) + "\n" + json.dumps(_row("b")) + "\n" + '{"key": "c", "sta')
    assert [r["key"] for r in sio.load_synthesis(p)] == ["a", "b"]
    assert p.read_text().endswith('"sta')  # read-only
    assert set(sio.prepare_output(p, retry_failed=True)) == {"a", "b"}  # resume repairs it
    assert p.read_text().endswith("}\n") and len(p.read_text().splitlines()) == 2

    p.write_text(json.dumps(_row("a")) + "\n{broken\n" + json.dumps(_row("b")) + "\n")
    with pytest.raises(DataError, match=r"out.jsonl:2: invalid JSON"):
        sio.load_synthesis(p)


def test_prepare_output_drops_failed_and_duplicates(tmp_path):
    p = tmp_path / "out.jsonl"
    rows = [_row("a"), _row("b", "failed"), _row("a"), _row("c", "declined")]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert set(sio.prepare_output(p, retry_failed=True)) == {"a", "c"}
    assert [json.loads(x)["key"] for x in p.read_text().splitlines()] == ["a", "c"]


def test_iter_synthesis_one_row_per_key(tmp_path):
    p = tmp_path / "out.jsonl"
    rows = [_row("a", "failed"), _row("b"), _row("a"), _row("b", "declined")]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first = list(sio.iter_synthesis(p))  # the first row of each key, as load_synthesis returns
    assert [(r["key"], r["status"]) for r in first] == [("a", "failed"), ("b", "accepted")]
    assert first == sio.load_synthesis(p)
    skipped = collections.Counter()
    resumed = [(r["key"], r["status"]) for r in sio.iter_synthesis(p, drop_failed=True, skipped=skipped)]
    assert resumed == [("b", "accepted"), ("a", "accepted")]  # how a resumed run retries failed rows
    assert skipped == {"failed": 1, "duplicate": 1}
    p.write_text(json.dumps({"seed_id": "a"}) + "\n")
    with pytest.raises(DataError, match="out.jsonl:1.*key"):
        list(sio.iter_synthesis(p))


def test_merge_shards(tmp_path):
    seeds = [make_seed(i) for i in range(4)]
    write_seeds(tmp_path / "seeds.jsonl", 4)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(_row(s["id"])) + "\n" for s in seeds[:2]))
    b.write_text(
        "".join(json.dumps(r) + "\n" for r in [_row(seeds[1]["id"], reversal="Other."), _row(seeds[2]["id"])])
    )
    m = sio.merge_shards([a, b], tmp_path / "m.jsonl", tmp_path / "seeds.jsonl")
    assert (m.rows, m.duplicates, m.conflicts, m.missing, m.complete) == (3, 1, 1, ["seed-0003"], False)
    assert [r["key"] for r in sio.load_synthesis(tmp_path / "m.jsonl")] == [s["id"] for s in seeds[:3]]


def test_a_shard_still_being_written_is_not_merged(tmp_path, capsys):
    """Merged while its synthesis ran, a shard lost every row written after; --no-check then read
    "0 missing" though nothing was checked."""
    from ifir_lib.core.errors import OutputLocked
    from ifir_lib.core.locks import exclusive

    seeds = [make_seed(i) for i in range(2)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(_row(seeds[0]["id"])) + "\n")
    b.write_text(json.dumps(_row(seeds[1]["id"])) + "\n")
    with exclusive(b, "synthesis output"):
        with pytest.raises(OutputLocked, match=f"{b}: this shard"):
            sio.merge_shards([a, b], tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()
    assert main(["synthesize-merge", str(a), str(b), "--out", str(tmp_path / "m.jsonl"), "--no-check"]) == 0
    assert "completeness not checked (--no-check)" in capsys.readouterr().out


def test_a_merge_of_a_shard_from_another_seeds_file_is_not_complete(tmp_path, capsys):
    """Shards from two versions of one seeds file (same ids) merged as "0 missing", exit 0: the
    keys of the other version have no row training can use, and it skips them."""
    seeds = [make_seed(i) for i in range(6)]
    edited = [dict(s, positive={**s["positive"], "text": s["positive"]["text"] + " Edited."}) for s in seeds]
    cfg = lambda shard: sio.SynthesisConfig(backend="template", progress=False, shard=shard)  # noqa: E731
    sio.synthesize(seeds, tmp_path / "a0.jsonl", cfg("0/2"))
    sio.synthesize(edited, tmp_path / "b1.jsonl", cfg("1/2"))
    seeds_file = tmp_path / "seeds.jsonl"
    seeds_file.write_text("".join(json.dumps(s) + "\n" for s in seeds))
    m = sio.merge_shards([tmp_path / "a0.jsonl", tmp_path / "b1.jsonl"], tmp_path / "m.jsonl", seeds_file)
    in_b1 = [s["id"] for s in seeds if sio.shard_of(s["id"], 2) == 1]
    assert m.missing == [] and m.stale == in_b1 and not m.complete
    sio.synthesize(seeds, tmp_path / "a1.jsonl", cfg("1/2"))
    shards = [str(tmp_path / f) for f in ("a0.jsonl", "a1.jsonl")]
    assert sio.merge_shards(shards, tmp_path / "m2.jsonl", seeds_file).complete
    args = [
        "synthesize-merge",
        str(tmp_path / "a0.jsonl"),
        str(tmp_path / "b1.jsonl"),
        "--seeds",
        str(seeds_file),
    ]
    assert main([*args, "--out", str(tmp_path / "m3.jsonl")]) == 1
    assert f"{len(in_b1)} key(s) have rows only for another version of their seed" in capsys.readouterr().err


def test_prepare_output_keeps_each_seed_version(tmp_path):
    """A key redone after its seed changed has two rows (two ``seed_sha``): both are kept, and only
    a repeat of the same version is a duplicate."""
    p = tmp_path / "out.jsonl"
    rows = [{**_row("a"), "seed_sha": "old"}, _row("b"), {**_row("a"), "seed_sha": "new"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in [*rows, rows[2]]))
    done = sio.prepare_output(p, retry_failed=True)
    assert done == {
        "a": {"seed_id": "a", "written_for": {("old", 0, None), ("new", 0, None)}},
        "b": {"seed_id": "b", "written_for": {(None, 0, None)}},
    }
    assert [json.loads(x) for x in p.read_text().splitlines()] == rows  # the repeat of a/new dropped
    assert [r["seed_sha"] for r in sio.iter_synthesis(p, by_version=True) if r["key"] == "a"] == [
        "old",
        "new",
    ]
    assert [r.get("seed_sha") for r in sio.load_synthesis(p)] == ["old", None]  # one per key, the first


def test_old_rows_with_a_moved_negative_are_redone_as_training_would(tmp_path):
    """Rows of earlier versions (no ``seed_sha``) whose ``negative_id`` is no longer the seed's
    negative at that index (negatives reordered) are stale, as training (``seeds.schema.written_for``)
    calls them: refused, then redone with ``redo_changed``; a row whose negative did not move is current."""
    from ifir_lib.core.errors import ConfigError

    out = tmp_path / "o.jsonl"
    seeds = [make_seed(i) for i in range(3)]
    sio.synthesize(seeds, out, sio.SynthesisConfig(backend="template", progress=False))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    old = [{k: v for k, v in r.items() if k != "seed_sha"} for r in rows]  # as an earlier version wrote them
    out.write_text("".join(json.dumps(r) + "\n" for r in old))
    edited = [dict(s) for s in seeds]
    edited[0]["instruction_negatives"] = list(reversed(seeds[0]["instruction_negatives"]))
    with pytest.raises(ConfigError, match=r"1 key was written for another version .* e\.g\. seed-0000;"):
        sio.synthesize(edited, out, sio.SynthesisConfig(backend="template", progress=False))
    s = sio.synthesize(
        edited, out, sio.SynthesisConfig(backend="template", progress=False, redo_changed=True)
    )
    assert (s.keys, s.skipped, s.redone) == (3, 2, 1)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["key"] for r in rows] == ["seed-0000", "seed-0001", "seed-0002", "seed-0000"]  # appended
    assert rows[-1]["negative_id"] == edited[0]["instruction_negatives"][0]["id"] != rows[0]["negative_id"]


def test_a_row_is_stale_when_the_seed_s_other_instruction_negatives_change(tmp_path):
    """The prompt shows the other instruction negatives ("must stay irrelevant") and training labels
    them irrelevant under I': a row written before one of them was replaced paired the old I' with
    the new passage. v1 digests (before the others counted) are still checked as v1."""
    from ifir_lib.core.errors import ConfigError
    from ifir_lib.seeds.schema import _fingerprint_v1, written_for

    out = tmp_path / "o.jsonl"
    seeds = [make_seed(i, negatives=2) for i in range(3)]
    sio.synthesize(seeds, out, sio.SynthesisConfig(backend="template", progress=False))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["seed_sha"].startswith("v2:") and written_for(r, s) for r, s in zip(rows, seeds))
    edited = copy.deepcopy(seeds)
    edited[0]["instruction_negatives"][1] = {"id": "new-neg", "text": "A passage the LLM never saw."}
    with pytest.raises(ConfigError, match=r"1 key was written for another version .* e\.g\. seed-0000;"):
        sio.synthesize(edited, out, sio.SynthesisConfig(backend="template", progress=False))
    v1 = {**rows[0], "seed_sha": _fingerprint_v1(seeds[0], 0)}  # as rows were written before v2
    assert written_for(v1, edited[0])  # v1 never covered the others: checked as it was
    assert not written_for({**v1, "seed_sha": _fingerprint_v1(edited[1], 0)}, edited[0])
    assert not written_for({**v1, "seed_sha": 123}, edited[0])  # another tool's row: stale, not a crash


def _shard(tmp_path, name, backend, shard, **kw):
    cfg = sio.SynthesisConfig(backend=backend, progress=False, shard=shard, **kw)
    return sio.synthesize([make_seed(i) for i in range(6)], tmp_path / name, cfg)


def test_merge_refuses_shards_of_other_negative_policies_without_their_sidecars(tmp_path):
    """Shards copied back from a cluster without their sidecars: the rows did not record the N*
    policy, so shards written under 'first' and 'random' were merged into one file."""
    from ifir_lib.core.errors import ConfigError

    _shard(tmp_path, "s0.jsonl", "template", "0/2", negative="first")
    _shard(tmp_path, "s1.jsonl", "template", "1/2", negative="random")
    for name in ("s0.jsonl", "s1.jsonl"):
        sio.sidecar_path(tmp_path / name).unlink()
    with pytest.raises(ConfigError, match="negative 'first' -> 'random'"):
        sio.merge_shards([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"], tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()


def test_merge_refuses_shards_of_other_options_and_writes_a_sidecar(tmp_path):
    from ifir_lib.core.errors import ConfigError

    _shard(tmp_path, "s0.jsonl", "template", "0/2")
    _shard(tmp_path, "s1.jsonl", "reference", "1/2")
    m = tmp_path / "m.jsonl"
    with pytest.raises(ConfigError) as e:
        sio.merge_shards([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"], m)
    assert str(e.value) == (
        f"shards {tmp_path / 's0.jsonl'} and {tmp_path / 's1.jsonl'} were written with other options "
        "(backend 'template' -> 'reference', model 'template' -> 'reference', negative 'first' -> 'reference', "
        f"template 'template_reversal' -> 'reference_reversal', template_version '{sio.TEMPLATE_BASELINE_VERSION}' -> 'seed'); "
        "merge only shards of one run; nothing was written"
    )
    assert not m.exists() and not sio.sidecar_path(m).exists()
    # a shard without a sidecar is checked by its rows
    sio.sidecar_path(tmp_path / "s1.jsonl").unlink()
    with pytest.raises(ConfigError, match="backend 'template' -> 'reference'"):
        sio.merge_shards([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"], m)

    _shard(tmp_path, "t1.jsonl", "template", "1/2")
    sio.merge_shards([tmp_path / "s0.jsonl", tmp_path / "t1.jsonl"], m, [make_seed(i) for i in range(6)])
    side = json.loads(sio.sidecar_path(m).read_text())
    assert [r["identity"]["backend"] for r in side["runs"]] == ["template"]
    assert side["merged_from"] == [str(tmp_path / "s0.jsonl"), str(tmp_path / "t1.jsonl")]
    with pytest.raises(
        ConfigError, match=r"m.jsonl holds rows written with other options \(backend 'template'"
    ):
        sio.synthesize([make_seed(i) for i in range(6)], m, backend="reference", progress=False)


def test_shards_that_disagree_on_a_key_s_status_are_a_conflict(tmp_path):
    """One shard accepted a key, another rejected it: the first path on the command line decided
    whether the seed trains, and the merge counted no conflict, so ``--on-conflict error`` (the
    CLI's) never refused. A failed row still gives way to any other."""
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    a.write_text(json.dumps(_row("seed-0000", status="rejected")) + "\n")
    b.write_text(json.dumps(_row("seed-0000")) + "\n")
    c.write_text(json.dumps(_row("seed-0000", status="failed")) + "\n")
    m = sio.merge_shards([a, b], tmp_path / "m.jsonl")
    assert (m.duplicates, m.conflicts) == (1, 1)
    with pytest.raises(
        DataError, match=rf"{b}: field 'reversal': key 'seed-0000' is accepted here and rejected in {a}"
    ):
        sio.merge_shards([a, b], tmp_path / "m2.jsonl", on_conflict="error")
    m = sio.merge_shards([c, b], tmp_path / "m3.jsonl", on_conflict="error")
    assert m.conflicts == 0 and sio.load_synthesis(tmp_path / "m3.jsonl")[0]["status"] == "accepted"
    c.write_text(json.dumps(_row("seed-0000", status="declined")) + "\n")  # neither trains: no conflict
    assert sio.merge_shards([a, c], tmp_path / "m4.jsonl", on_conflict="error").conflicts == 0


def test_a_merge_never_replaces_an_out_holding_rows_the_shards_lack(tmp_path, capsys):
    """``synthesize-merge --out X`` rewrote an X that held rows of its own: a finished output
    named as --out went from 6 rows to one shard's, and incremental merges (s0 -> m, then
    s1 -> m) kept only the last shard; both exit 0, and ``complete`` read True unchecked."""
    from ifir_lib.core.errors import ConfigError

    full = tmp_path / "full.jsonl"
    sio.synthesize(
        [make_seed(i) for i in range(6)], full, sio.SynthesisConfig(backend="template", progress=False)
    )
    _shard(tmp_path, "s0.jsonl", "template", "0/2")
    _shard(tmp_path, "s1.jsonl", "template", "1/2")
    s0, s1, before = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl", full.read_bytes()
    n0 = len(s0.read_text().splitlines())
    with pytest.raises(
        ConfigError, match=rf"--out {full} already holds {6 - n0} row\(s\) that are not in the shards"
    ):
        sio.merge_shards([s0], full)
    assert full.read_bytes() == before
    m = tmp_path / "m.jsonl"
    assert main(["synthesize-merge", str(s0), "--out", str(m), "--no-check"]) == 0
    assert main(["synthesize-merge", str(s1), "--out", str(m), "--no-check"]) == 2
    assert "pass it as a shard too" in capsys.readouterr().err and len(m.read_text().splitlines()) == n0
    s = sio.merge_shards([m, s1], m)  # --out among the shards: adds to it
    assert s.rows == 6 and s.complete is None  # no seeds given: completeness unknown
    assert sio.merge_shards([s0, s1], m).rows == 6  # the same merge again: nothing lost
