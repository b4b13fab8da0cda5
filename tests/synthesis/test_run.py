"""Synthesis without an LLM: parsing, validation, the baselines, prompt, keys, shards, files."""

import pytest

from ifir_lib.core.config import PRESET_NAMES
from ifir_lib.core.errors import ConfigError
from ifir_lib.synthesis import run as sio
from ifir_lib.synthesis import run as syn
from ifir_lib.synthesis import run as synthesis_run
from ifir_lib.synthesis import template as tb
from ifir_lib.testing.inputs import make_seed

# ---- parsing ---------------------------------------------------------------------------------------


# ---- the template baseline -------------------------------------------------------------------------------


# ---- which negative, keys, shards -----------------------------------------------------------------------


# ---- prompt ----------------------------------------------------------------------------------------------


# ---- baselines and rows -----------------------------------------------------------------------------------
ROW_FIELDS = {
    "key",
    "seed_id",
    "negative_index",
    "negative_id",
    "seed_sha",
    "backend",
    "model",
    "negative",
    "decoding",
    "status",
    "reason",
    "reversal",
    "reasoning",
    "raw",
    "template",
    "template_version",
    "usage",
    "cost_usd",
    "instruction_type",
    "attempts",
    "cached",
    "elapsed_s",
}


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
    assert (
        rows[0]["template"] == "template_reversal"
        and rows[0]["template_version"] == tb.TEMPLATE_BASELINE_VERSION
    )
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


def test_presets_are_the_project_set(monkeypatch):
    assert tuple(syn.SYNTHESIS_PRESETS) == PRESET_NAMES  # the CLI offers these keys
    paper, cpu = syn.SynthesisConfig.preset("paper"), syn.SynthesisConfig.preset("cpu")
    assert paper == syn.SynthesisConfig()
    # cpu: the paper run (same rows, same cache keys) with few requests in flight, patient ones
    assert cpu.replace(concurrency=64, timeout_s=120.0) == paper
    assert (cpu.concurrency, cpu.timeout_s) == (4, 600.0)
    assert syn.SynthesisConfig.preset("cpu", concurrency=8).concurrency == 8
    with pytest.raises(ConfigError, match="unknown synthesis preset 'fast'; choose from paper, cpu, smoke"):
        syn.SynthesisConfig.preset("fast")
    monkeypatch.setenv("IFIR_SMOKE", "1")  # no name: default_preset(), smoke in smoke mode
    assert syn.SynthesisConfig.preset() == syn.SynthesisConfig.preset("smoke")


# ---- files: cut lines, corruption, merge ----------------------------------------------------------------


# ---- retry arithmetic and cache keys -----------------------------------------------------------------------


def test_rows_without_seed_sha_count_as_current_and_orphans_are_kept(tmp_path, caplog):
    """Rows of earlier versions (no ``seed_sha``) are taken as written for the seed as it is; rows
    of a seed removed from the seeds are kept, counted in one warning."""
    import json

    out = tmp_path / "o.jsonl"
    seeds = [make_seed(i) for i in range(3)]
    cfg = syn.SynthesisConfig(backend="template", progress=False)
    syn.synthesize(seeds, out, cfg)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "seed_sha"}) + "\n" for r in rows))
    edited = [{**seeds[0], "instruction": "Only consider studies conducted in Kenya."}, *seeds[1:]]
    s = syn.synthesize(edited, out, cfg)  # unknown version: not refused, not redone
    assert (s.skipped, s.written) == (3, 0)

    with caplog.at_level("WARNING", logger="ifir_lib.synthesis.run"):
        s = syn.synthesize(seeds[1:], out, cfg)
    assert (s.keys, s.skipped, s.written) == (2, 2, 0)
    [w] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "o.jsonl: 1 key names a seed that is not in <2 rows> (e.g. seed-0000" in w
    assert "their rows are kept" in w
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == [s["id"] for s in seeds]


def test_extend_under_another_negative_policy_is_not_taken_for_a_seed_change(tmp_path):
    """A key's row stays valid for its own negative: ``--extend`` with a policy that picks another
    N* for the same key keeps the row (as --extend says), it is not refused as stale."""
    out = tmp_path / "o.jsonl"
    seeds = [make_seed(i) for i in range(6)]
    assert any(syn.choose_negatives(s, "random", 3) != [0] for s in seeds)
    cfg = syn.SynthesisConfig(backend="template", progress=False)
    syn.synthesize(seeds, out, cfg)
    s = syn.synthesize(seeds, out, cfg.replace(negative="random", rng_seed=3, extend=True))
    assert (s.skipped, s.written, s.redone) == (6, 0, 0)
