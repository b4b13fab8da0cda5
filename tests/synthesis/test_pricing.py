"""The synthesis dry run: hand-counted tokens (MiniLM's real tokenizer and the chars/4 estimate),
cost and wall-time arithmetic, bad flags, and the CLI (nothing written, nothing sent)."""

import json

import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import ConfigError
from ifir_lib.synthesis.pricing import TokenCounter, parse_price, price_synthesis
from ifir_lib.synthesis.run import SynthesisConfig
from ifir_lib.testing.inputs import make_seed


@pytest.fixture()
def tiny(tmp_path):
    """Two seeds and a one-line template ``find: {{ query }}`` (rendered with a trailing newline)."""
    tmpl = tmp_path / "tiny.j2"
    tmpl.write_text("find: {{ query }}\n", encoding="utf-8")
    seeds = [make_seed(0), make_seed(1)]
    seeds[0].update(query="cat dog", reference_reversal="cat")
    seeds[1].update(query="red blue green", reference_reversal="blue green")
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in seeds), encoding="utf-8")
    cfg = SynthesisConfig(template=str(tmpl), max_tokens=64, concurrency=2, model="no-such-model")
    return path, cfg


def test_minilm_tokens_hand_counted(tiny):
    path, cfg = tiny
    r = price_synthesis(path, cfg, tokenizer="minilm")
    assert r.tokens_exact and "tokenizer minilm" in r.token_method
    # no chat template, so special tokens are added: [CLS] find : cat dog [SEP] = 6,
    # [CLS] find : red blue green [SEP] = 7
    assert (r.seeds, r.requests, r.input_tokens, r.input_tokens_max) == (2, 2, 6 + 7, 7)
    assert r.shared_prefix_tokens == 2  # "find: " -> find, :
    # <answer><new_instruction>X</new_instruction></answer>: < answer > (3) + < new _ instruction > (5)
    # + X + < / new _ instruction > (6) + < / answer > (4) = 18 + X's tokens; X = "cat" (1), "blue green" (2)
    assert r.answer_tokens_per_request == pytest.approx(((18 + 1) + (18 + 2)) / 2)
    assert r.answer_samples == 2
    assert r.expected_output_per_request == r.answer_tokens_per_request
    assert "lower bound" in r.expected_output_source
    assert r.price_in_out_per_mtok is None and "--price" in r.price_source
    assert r.cost_usd(r.expected_output_tokens) is None and r.wall_time_s() is None


def test_estimate_when_no_local_tokenizer(tiny):
    path, cfg = tiny
    r = price_synthesis(path, cfg, tokenizer=str(path.parent / "no-tokenizer-here"))
    assert not r.tokens_exact and r.token_method.startswith("estimate: characters / 4")
    # "find: cat dog\n" 14 chars -> ceil(3.5) = 4; "find: red blue green\n" 21 chars -> ceil(5.25) = 6
    assert (r.input_tokens, r.input_tokens_max) == (4 + 6, 6)
    # answer wrapper is 8 + 17 + 18 + 9 = 52 chars: "cat" -> ceil(55/4) = 14, "blue green" -> ceil(62/4) = 16
    assert r.answer_tokens_per_request == pytest.approx((14 + 16) / 2)
    assert "~" in r.format() and "estimate" in r.format()
    # no reference reversals and no --output-tokens: the expectation is unknown, not invented
    seeds = [{k: v for k, v in make_seed(i).items() if k != "reference_reversal"} for i in range(2)]
    r = price_synthesis(seeds, cfg, tokenizer=str(path.parent / "none"))
    assert r.expected_output_per_request is None and "unknown" in r.expected_output_source
    assert r.to_dict()["cost_usd_expected"] is None


def test_cost_and_wall_time_arithmetic(tiny):
    path, cfg = tiny
    r = price_synthesis(path, cfg, tokenizer="minilm", output_tokens=10, price=(1.0, 2.0), requests_per_s=0.5)
    d = r.to_dict()
    assert d["expected_output_tokens"] == 2 * 10 and d["ceiling_output_tokens"] == 2 * 64
    assert d["cost_usd_expected"] == pytest.approx((13 * 1.0 + 20 * 2.0) / 1e6)
    assert d["cost_usd_ceiling"] == pytest.approx((13 * 1.0 + 128 * 2.0) / 1e6)
    # 2 requests / (0.5 requests/s per connection x 2 connections)
    assert d["wall_time_s_expected"] == pytest.approx(2 / (0.5 * 2))
    r = price_synthesis(path, cfg, tokenizer="minilm", output_tokens=10, tokens_per_s=5.0)
    # output tokens / (5 tokens/s per connection x 2 connections)
    assert r.wall_time_s() == pytest.approx(20 / (5 * 2))
    assert r.to_dict()["wall_time_s_ceiling"] == pytest.approx(128 / (5 * 2))
    # the built-in price table is used, and says so, when no --price is given
    r = price_synthesis(path, cfg.replace(prices={"no-such-model": (3.0, 4.0)}), tokenizer="minilm")
    assert r.price_in_out_per_mtok == (3.0, 4.0) and "built-in" in r.price_source


def test_plan_follows_negative_limit_and_shard(tiny):
    path, cfg = tiny
    assert price_synthesis(path, cfg.replace(negative="all"), tokenizer="minilm").requests == 2 * 2
    assert price_synthesis(path, cfg.replace(limit=1), tokenizer="minilm").input_tokens == 6
    shards = [price_synthesis(path, cfg.replace(shard=f"{i}/2"), tokenizer="minilm") for i in range(2)]
    assert sum(s.requests for s in shards) == 2 and sum(s.input_tokens for s in shards) == 13


@pytest.mark.parametrize("bad", ["x,1", "1", "1,2,3", "-1,2", "nan,1", ""])
def test_bad_price_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match="--price"):
        parse_price(bad)


def test_bad_rates_are_errors(tiny):
    path, cfg = tiny
    for kw in ({"output_tokens": 0}, {"requests_per_s": -1.0}, {"tokens_per_s": float("inf")}):
        with pytest.raises(ConfigError):
            price_synthesis(path, cfg, tokenizer="minilm", **kw)


def test_cli_dry_run(tiny, capsys):
    path, cfg = tiny
    before = sorted(p.name for p in path.parent.iterdir())
    args = ["synthesize", "--dry-run", "--seeds", str(path), "--template", cfg.template, "--model", "m"]
    args += ["--tokenizer", "minilm", "--concurrency", "2", "--max-tokens", "64"]
    assert main([*args, "--price", "1,2", "--output-tokens", "10", "--requests-per-s", "0.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (d["requests"], d["input_tokens"], d["expected_output_tokens"]) == (2, 13, 20)
    assert d["cost_usd_expected"] == pytest.approx((13 + 20 * 2) / 1e6) and d["wall_time_s_expected"] == 2
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "nothing was sent" in table
    assert [ln.split()[-1] for ln in table.splitlines() if "input tokens, total" in ln] == ["13"]
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no output, no config file
    assert main([*args, "--price", "0.1;0.2"]) == 2
    assert "--price expects IN,OUT" in capsys.readouterr().err
    assert main(["synthesize", "--seeds", str(path), "--backend", "template"]) == 2
    assert "--out is required" in capsys.readouterr().err


def test_token_counter_chat_template_adds_the_wrapper():
    """A tokenizer with a chat template counts the rendered chat, not the bare text."""
    c = TokenCounter("minilm")
    bare = c.prompt("cat dog")
    c.chat = True
    c.tokenizer.chat_template = "{% for m in messages %}user: {{ m['content'] }}\n{% endfor %}assistant:"
    try:
        # user : cat dog assistant : (no special tokens: the template carries its own)
        assert c.prompt("cat dog") == 6 and bare == 4
    finally:
        c.tokenizer.chat_template = None
