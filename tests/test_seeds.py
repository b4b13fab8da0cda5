"""Seed schema, bundled-data validation, Promptriever loading, `ifir data stats`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.seeds import schema as seed_io

FIXTURES = Path(__file__).parent / "fixtures"


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
    seeds = seed_io.load_promptriever(FIXTURES / "promptriever_rows.jsonl")
    assert [s["id"] for s in seeds] == ["1001", "1003"]  # the row without instruction negatives is skipped
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
    from ifir_lib.core.errors import DataError
    from ifir_lib.seeds.schema import load_seeds
    from ifir_lib.testing.inputs import make_seed
    from ifir_lib.training.trainsets import build_trainset

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
