"""bundle: moved tests."""

import json
import shutil
import subprocess
import sys

from ifir_lib import bundle
from ifir_lib import seeds as seed_io
from ifir_lib.config import FOLLOWIR_DIR, SEEDS_PATH


def test_bundled_data_is_valid_and_large_enough():
    assert bundle.validate_bundle() == []
    s = bundle.data_stats()
    assert s["seeds"] >= 200 and len(s["instruction_types"]) >= 8 and len(s["domains"]) >= 10
    assert s["eval_queries"] >= 30 and s["eval_min_pool"] >= 20
    assert 40 <= s["passage_words"]["min"] and s["passage_words"]["max"] <= 120


def test_validator_catches_train_eval_overlap(tmp_path, bundled_seeds):
    ev = tmp_path / "ev"
    shutil.copytree(FOLLOWIR_DIR, ev)
    corpus = [json.loads(line) for line in (ev / "corpus.jsonl").read_text().splitlines()]
    corpus[0]["text"] = bundled_seeds[3]["hard_negatives"][0]["text"]
    (ev / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    problems = bundle.validate_bundle(SEEDS_PATH, ev)
    assert problems == [f"eval doc {corpus[0]['_id']} repeats a training passage"]


def test_cli_data_stats_json_last_line():
    out = subprocess.run(
        [sys.executable, "-m", "ifir_lib", "data", "stats", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["seeds"] == len(seed_io.load_seeds()) and stats["eval_queries"] >= 30
    assert sum(stats["instruction_types"].values()) == stats["seeds"] and len(stats["domains"]) >= 10
