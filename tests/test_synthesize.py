"""Synthesis without an LLM: parsing, validation, the baselines, prompt, keys, shards, files."""
import json
import random

import pytest

from ifir_lib import synthesis_run
from ifir_lib import synthesize as syn
from ifir_lib import prompts
from ifir_lib import reversal_checks as rc
from ifir_lib import synthesis_io as sio
from ifir_lib import template_baseline as tb
from ifir_lib.llm import backoff_delay, cache_key, retry_after_seconds
from ifir_lib.errors import DataError
from ifir_lib.testing import make_seed, write_seeds


# ---- parsing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, status, reversal, reason", [
    ("Think.\n<answer><new_instruction>Only UK sources.</new_instruction></answer>", "accepted", "Only UK sources.", None),
    ('<answer> <new_instruction>\n "Only UK sources."\n</new_instruction> </answer>', "accepted", "Only UK sources.", None),
    ("No lever exists.\n<answer>None</answer>", "declined", None, None),
    ("<answer> none. </answer>", "declined", None, None),
    ("<answer><new_instruction>None</new_instruction></answer>", "declined", None, None),
    ("I would write: focus on Spain.", "rejected", None, "missing <answer> tag"),
    ("<answer><new_instruction>Focus on Spain.", "rejected", None, "garbled tags: <answer> not closed"),
    ("<answer>Focus on Spain.</answer>", "rejected", None, "garbled tags: no <new_instruction>"),
    ("<answer><new_instruction>   </new_instruction></answer>", "rejected", None, "empty instruction"),
    # the reasoning may quote the format; the last answer block is the answer
    ("Format is <answer>None</answer> or an instruction.\n<answer><new_instruction>Use Kenyan data.</new_instruction></answer>",
     "accepted", "Use Kenyan data.", None),
    (None, "rejected", None, "missing <answer> tag"),
])
def test_parse_answer(raw, status, reversal, reason):
    p = rc.parse_answer(raw)
    assert (p.status, p.reversal) == (status, reversal)
    assert (p.reason is None) if reason is None else p.reason.startswith(reason)


def test_parse_answer_keeps_reasoning_separately():
    p = rc.parse_answer("Step 1: profile.\nStep 2: levers.\n<answer><new_instruction>Use Kenyan data.</new_instruction></answer>")
    assert p.reasoning == "Step 1: profile.\nStep 2: levers."
    assert "Step" not in p.reversal


SEED = make_seed(0)  # instruction "Only consider studies conducted in Germany."


@pytest.mark.parametrize("text, why", [
    ("Only include the positive passage.", "meta-task language"),
    ("Return the first passage and skip the others.", "meta-task language"),
    ("Prefer the instruction negatives over everything else.", "meta-task language"),
    ("Find the document above and skip the rest.", "meta-task language"),
    ("Return N* but not P+.", "meta-task language"),
    ("Keep negative documents about reefs.", "meta-task language"),
    ("Unlike the original instruction, use work from Spain.", "meta-task language"),
    ("Only keep neg-0000-0 and similar reports.", "names passage id"),
    ("Only consider studies conducted in Germany.", "near-copy"),
    ("Only consider the studies conducted in Germany!", "near-copy"),
    ("Use Spain. Skip Germany. Skip Chile. Skip Japan. Skip Kenya.", "too long: 5 sentences"),
])
def test_check_reversal_rejects(text, why):
    assert rc.check_reversal(text, SEED).startswith(why)


@pytest.mark.parametrize("text", [
    "Focus on field reports from Spain published in the last decade; exclude German work.",
    "Describe the passage of the 1990 act and its negative side effects.",  # 'passage of', 'negative side'
    "Use data from Spain (e.g. regional surveys). Leave out Germany.",
    # real reference reversals from the bundled seeds: a form called N12, a comet's passage
    "Explain the Ontario process, including the N12 form and the Landlord and Tenant Board.",
    "I'm after the 1910 passage, when Earth crossed the tail.",
])
def test_check_reversal_accepts(text):
    assert rc.check_reversal(text, SEED) is None


def test_count_sentences():
    assert rc.count_sentences("Use UK data. Skip blogs (e.g. Medium). U.S. reports are fine! Why? Because.") == 5
    assert rc.count_sentences("One sentence only") == 1


# ---- the template baseline -------------------------------------------------------------------------------
@pytest.mark.parametrize("instruction, expected", [
    ("Exclude studies published before 2010.", "Only include studies published before 2010."),
    ("Documents must be peer-reviewed.", "Documents must not be peer-reviewed."),
    ("Only consider documents written for experts.", "Do not consider documents written for experts."),
    # one swap per sentence; each sentence flips
    ("Relevant documents must cite trials. Blog posts are not relevant.",
     "Relevant documents must not cite trials. Blog posts are relevant."),
    ("I only want information about the 1990s.", "I do not want information about the 1990s."),
    ("Only carcass-search field surveys.", "Anything except carcass-search field surveys."),
    ("Written for a general audience", "Find documents that do not satisfy this requirement: Written for a general audience"),
])
def test_template_reversal(instruction, expected):
    assert tb.template_reversal(instruction) == expected


# ---- which negative, keys, shards -----------------------------------------------------------------------
def test_choose_negatives_modes():
    s = make_seed(1, negatives=3)
    assert sio.choose_negatives(s, "first") == [0]
    assert sio.choose_negatives(s, "all") == [0, 1, 2]
    picks = {sio.choose_negatives(make_seed(i, negatives=3), "random", 7)[0] for i in range(30)}
    assert picks == {0, 1, 2}  # 30 seeds, 3 choices: all appear
    # depends on the seed and rng_seed only, not on call order
    assert sio.choose_negatives(s, "random", 7) == sio.choose_negatives(s, "random", 7)
    with pytest.raises(ValueError):
        sio.choose_negatives(s, "best")


def test_plan_keys_and_shards_partition():
    seeds = [make_seed(i) for i in range(40)]
    assert [k for k, _, _ in sio.plan(seeds[:2], "all")] == ["seed-0000#0", "seed-0000#1", "seed-0001#0", "seed-0001#1"]
    shards = [{k for k, _, _ in sio.plan(seeds, "first", shard=f"{i}/3")} for i in range(3)]
    assert set.union(*shards) == {s["id"] for s in seeds}
    assert sum(map(len, shards)) == 40 and all(shards)  # disjoint, none empty
    assert sio.shard_of("seed-0007", 3) == sio.shard_of("seed-0007", 3)
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError, match="--shard expects"):
            sio.parse_shard(bad)


# ---- prompt ----------------------------------------------------------------------------------------------
def test_prompt_has_appendix_a_structure():
    s = make_seed(2, negatives=3)
    t = prompts.load_template("reversal_prompt.j2")
    text = prompts.render_prompt(s, 1, t)
    heads = ["# 1. Goal", "# 2. Inputs", "# 3. Output format", "# 4. Definitions", "# 5. Method", "# 6. Guardrails",
             "# 7. Checklist"]
    assert [text.index(h) for h in heads] == sorted(text.index(h) for h in heads)
    assert "<answer><new_instruction>" in text and "<answer>None</answer>" in text
    data = [s["query"], s["instruction"], s["positive"]["text"], s["instruction_negatives"][1]["text"],
            "1. " + s["instruction_negatives"][0]["text"], "2. " + s["instruction_negatives"][2]["text"]]
    pos = [text.rindex(d) for d in data]
    assert pos == sorted(pos)  # query, I, P+, N*, then the remaining negatives numbered
    assert "neg-" not in text and "pos-" not in text  # ids never reach the model
    assert "(none)" in prompts.render_prompt(make_seed(3, negatives=1), 0, t)
    assert t.name == "reversal_prompt" and t.version == "1.0" and len(t.sha) == 8
    assert t.full_version == f"1.0+{t.sha}"


# ---- baselines and rows -----------------------------------------------------------------------------------
ROW_FIELDS = {"key", "seed_id", "negative_index", "negative_id", "backend", "model", "status", "reason", "reversal",
              "reasoning", "raw", "template", "template_version", "usage", "cost_usd", "instruction_type", "attempts",
              "cached", "elapsed_s"}


def test_template_and_reference_backends(tmp_path):
    seeds = [make_seed(0), make_seed(1, reference=False)]
    cfg = syn.SynthesisConfig(backend="reference", progress=False, cache_dir=str(tmp_path / "cache"))
    s = syn.synthesize(seeds, tmp_path / "ref.jsonl", cfg)
    rows = sio.load_synthesis(tmp_path / "ref.jsonl")
    assert (s.accepted, s.declined, s.requests) == (1, 1, 0)
    assert [r["status"] for r in rows] == ["accepted", "declined"]
    assert rows[0]["reversal"] == seeds[0]["reference_reversal"]
    assert all(set(r) == ROW_FIELDS for r in rows)

    s = syn.synthesize(seeds, tmp_path / "tpl.jsonl", cfg.replace(backend="template", negative="all"))
    rows = sio.load_synthesis(tmp_path / "tpl.jsonl")
    assert [r["key"] for r in rows] == ["seed-0000#0", "seed-0000#1", "seed-0001#0", "seed-0001#1"]
    assert rows[0]["reversal"] == "Do not consider studies conducted in Germany."
    assert rows[0]["template"] == "template_reversal" and rows[0]["template_version"] == tb.TEMPLATE_BASELINE_VERSION
    assert (tmp_path / "tpl.config.json").exists()
    with pytest.raises(ValueError, match="reference"):
        syn.SynthesisConfig(backend="reference", negative="all")


def test_config_smoke_and_overrides():
    c = syn.SynthesisConfig()
    assert (c.model, c.concurrency, c.backend) == ("Qwen/Qwen3-Next-80B-A3B-Instruct", 64, "openai")
    sm = syn.SynthesisConfig.preset("smoke")
    assert (sm.backend, sm.model, sm.limit) == ("transformers", "smollm2", 2)
    with pytest.raises(ValueError, match="unknown backend"):
        syn.SynthesisConfig(backend="gpt")
    assert synthesis_run.cost_usd(1_000_000, 500_000, (0.15, 1.5)) == pytest.approx(0.15 + 0.75)
    assert synthesis_run.cost_usd(10, 10, None) == 0.0


# ---- files: cut lines, corruption, merge ----------------------------------------------------------------
def _row(key, status="accepted", reversal="Use data from Spain."):
    sid = key.split("#")[0]
    return {"key": key, "seed_id": sid, "negative_index": int(key.split("#")[1]) if "#" in key else 0,
            "status": status, "reversal": reversal if status == "accepted" else None}


def test_load_synthesis_tolerates_cut_last_line(tmp_path):
    p = tmp_path / "out.jsonl"
    p.write_text(json.dumps(_row("a")) + "\n" + json.dumps(_row("b")) + "\n" + '{"key": "c", "sta')
    assert [r["key"] for r in sio.load_synthesis(p)] == ["a", "b"]
    assert p.read_text().endswith('"sta')  # read-only
    assert sio.prepare_output(p, retry_failed=True) == {"a", "b"}  # resume repairs it
    assert p.read_text().endswith("}\n") and len(p.read_text().splitlines()) == 2

    p.write_text(json.dumps(_row("a")) + "\n{broken\n" + json.dumps(_row("b")) + "\n")
    with pytest.raises(DataError, match=r"out.jsonl:2: invalid JSON"):
        sio.load_synthesis(p)


def test_prepare_output_drops_failed_and_duplicates(tmp_path):
    p = tmp_path / "out.jsonl"
    rows = [_row("a"), _row("b", "failed"), _row("a"), _row("c", "declined")]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert sio.prepare_output(p, retry_failed=True) == {"a", "c"}
    assert [json.loads(x)["key"] for x in p.read_text().splitlines()] == ["a", "c"]


def test_merge_shards(tmp_path):
    seeds = [make_seed(i) for i in range(4)]
    write_seeds(tmp_path / "seeds.jsonl", 4)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(_row(s["id"])) + "\n" for s in seeds[:2]))
    b.write_text("".join(json.dumps(r) + "\n" for r in [_row(seeds[1]["id"], reversal="Other."), _row(seeds[2]["id"])]))
    m = sio.merge_shards([a, b], tmp_path / "m.jsonl", tmp_path / "seeds.jsonl")
    assert (m.rows, m.duplicates, m.conflicts, m.missing, m.complete) == (3, 1, 1, ["seed-0003"], False)
    assert [r["key"] for r in sio.load_synthesis(tmp_path / "m.jsonl")] == [s["id"] for s in seeds[:3]]


# ---- retry arithmetic and cache keys -----------------------------------------------------------------------
def test_retry_after_and_backoff():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({}) is None
    assert 0 <= retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) <= 0.0  # a past date: 0
    rng = random.Random(0)
    for failures, lo, hi in [(1, 0.5, 1.0), (3, 2.0, 4.0), (10, 30.0, 60.0)]:
        d = backoff_delay(failures, 1.0, 60.0, rng)
        assert lo <= d <= hi
    assert backoff_delay(1, 0.01, 60.0, rng, retry_after=3.0) == 3.0  # Retry-After is a floor


def test_cache_key_covers_model_prompt_and_params():
    m = [{"role": "user", "content": "x"}]
    k = cache_key("openai", "m", m, {"temperature": 0.7})
    assert len(k) == 64
    assert k != cache_key("openai", "m2", m, {"temperature": 0.7})
    assert k != cache_key("openai", "m", [{"role": "user", "content": "y"}], {"temperature": 0.7})
    assert k != cache_key("openai", "m", m, {"temperature": 0.0})
    assert k == cache_key("openai", "m", m, {"temperature": 0.7})
