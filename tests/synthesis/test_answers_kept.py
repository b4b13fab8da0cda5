"""What a server's answers leave in rows, caches and verdicts (review 46b): a short placeholder key
is no secret to look for in answers, a dated snapshot is the model asked for, and a judge failure
kept from an earlier run on a since-edited seed is no failure of this run."""

import json

from ifir_lib import cli
from ifir_lib.seeds.schema import seed_fingerprint
from ifir_lib.synthesis.backends import _same_model
from ifir_lib.testing import openai_server
from ifir_lib.testing.inputs import write_seeds
from ifir_lib.testing.openai_server import DEFAULT_MODEL


def _llm(url: str) -> list[str]:
    """The local server's model and URL, retried once without waiting."""
    return ["--model", DEFAULT_MODEL, "--base-url", url, "--max-retries", "1", "--backoff", "0.01"]


def test_a_short_placeholder_key_in_an_ordinary_answer_is_no_echo(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")  # placeholder key for a local vLLM / llama.cpp
    monkeypatch.setattr(
        openai_server,
        "default_reversal",
        lambda p: (
            "Reasoning.\n<answer><new_instruction>Only the latest reports on this; exclude "
            "anything older.</new_instruction></answer>"
        ),
    )
    seeds, out = tmp_path / "seeds.jsonl", tmp_path / "o.jsonl"
    write_seeds(seeds, 2)
    synth = ["synthesize", "--preset", "paper", "--seeds", str(seeds), "--out", str(out), "--no-progress"]
    rc = cli.main([*synth, "--backend", "openai", *_llm(server.url)])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rc == 0 and all(r["status"] != "failed" for r in rows), (
        "ordinary answers failed: 'latest' holds the key 'test'"
    )


SEED = {
    "id": "py",
    "query": "python",
    "instruction": "Only documents about the snake species.",
    "instruction_type": "required_attribute",
    "positive": {"id": "snake", "text": "The python is a large constricting snake found in Africa and Asia."},
    "instruction_negatives": [
        {"id": "code", "text": "Python is a programming language popular for data science."}
    ],
    "hard_negatives": [
        {"id": "h1", "text": "Boa constrictors."},
        {"id": "h2", "text": "Monty Python sketches."},
    ],
}
GOOD = "Only documents about the programming language."


def test_a_judge_failure_kept_on_an_edited_seed_is_no_failure_of_this_run(server, tmp_path, capsys):
    seeds, rows = tmp_path / "seeds.jsonl", tmp_path / "rows.jsonl"
    seeds.write_text(json.dumps(SEED) + "\n")
    base = {
        "seed_id": "py",
        "negative_index": 0,
        "negative_id": "code",
        "backend": "test",
        "model": "m",
        "seed_sha": seed_fingerprint(SEED, 0),
    }
    rows.write_text(json.dumps({**base, "key": "py#0", "status": "accepted", "reversal": GOOD}) + "\n")
    args = ["verify", "--in", str(rows), "--seeds", str(seeds), "--no-embedder", "--judge-backend", "openai"]
    args += _llm(server.url)
    server.rules = {GOOD: "500"}
    assert cli.main(args) == 1  # in place: the row keeps 'judge request failed'
    capsys.readouterr()
    # the seed is edited (its instruction sharpened); the old row is now stale, not re-judged
    seeds.write_text(json.dumps({**SEED, "instruction": "Only documents about the snake."}) + "\n")
    server.rules = {}
    rc = cli.main(args)
    assert rc == 0, "a stale row's old failure keeps verify at exit 1; 'rerun to retry' never retries it"
    assert "request(s) failed" not in capsys.readouterr().out


def test_a_dated_snapshot_is_the_model_asked_for():
    """OpenAI answers gpt-4o-mini as gpt-4o-mini-2024-07-18: no fallback to warn of on every run."""
    assert _same_model("gpt-4o-mini-2024-07-18", "gpt-4o-mini") and _same_model("gpt-4-0613", "gpt-4")
    assert not _same_model("gpt-4o", "gpt-4o-mini") and not _same_model("gpt-4o-mini-fallback", "gpt-4o-mini")
