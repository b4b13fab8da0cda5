"""Price a synthesis run before sending anything: requests, tokens, cost and wall time.

``price_synthesis(seeds, cfg)`` plans the run exactly as ``synthesize`` would (``--limit``,
``--shard``, ``--negative``), renders every prompt (``prompts``), and counts input tokens the
way an OpenAI-compatible server sees them: the model's chat template applied, then tokenized.
The tokenizer is loaded from local files only (``local_files_only=True``: a folder, a
``.gguf`` file, ``minilm``, or a hub id already in the cache); without one, tokens are
*estimated* as characters / 4 and the report says so.

Output tokens cannot be counted before the model writes them, so the report gives three figures
per request (arXiv 2604.18845, Appendix A asks for reasoning, then the answer):

- ``answer``: the mean length of the seeds' reference reversals inside the answer tags, a lower
  bound (a model that wrote no reasoning at all);
- ``expected``: ``--output-tokens`` when given (e.g. a pilot run's completion tokens per request),
  else the answer-only lower bound;
- ``ceiling``: ``max_tokens``, which no answer exceeds.

Wall time is requests / (requests per second per connection x concurrency), or output tokens /
(tokens per second per connection x concurrency), from a rate measured on the real server at
that concurrency; prefill and queueing are inside the measured rate, not modelled.

Not handled here: sending requests (``synthesize``), keys already written by an earlier run
(the whole plan is priced), cached-input discounts of API providers.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.models import ALIASES, resolve_model
from ..seeds.schema import load_seeds
from .backends import resolve_chat_model
from .prompts import PromptTemplate, load_template, render_prompt
from .run import plan

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text with BPE tokenizers
ANSWER_WRAP = "<answer><new_instruction>{}</new_instruction></answer>"  # checks.parse_answer


def parse_price(text: str) -> tuple[float, float]:
    """``'0.15,1.5' -> (0.15, 1.5)``: USD per 1M input and output tokens, both >= 0."""
    parts = str(text).split(",")
    try:
        pin, pout = (float(x) for x in parts)
    except ValueError:
        raise ConfigError(
            f"--price expects IN,OUT in USD per 1M tokens (e.g. 0.15,1.50), got {text!r}"
        ) from None
    if not (math.isfinite(pin) and math.isfinite(pout)) or pin < 0 or pout < 0:
        raise ConfigError(f"--price: both prices must be finite and >= 0, got {text!r}")
    return pin, pout


class TokenCounter:
    """Counts tokens with a local tokenizer, or estimates characters / 4 when there is none.

    ``TokenCounter('minilm').prompt('cat dog')`` -> 4 (``[CLS] cat dog [SEP]``: MiniLM has no chat
    template, so its special tokens are added instead); ``TokenCounter(None).prompt('cat dog')``
    -> 2 (7 characters / 4, rounded up).
    """

    def __init__(self, name: str | None):
        self.name, self.tokenizer, self.why_not = name, None, None
        if name:
            self.tokenizer, self.why_not = _load_tokenizer(name)
        self.chat = bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    @property
    def method(self) -> str:
        if self.tokenizer is None:
            why = f"; {self.why_not}" if self.why_not else ""
            return f"estimate: characters / {CHARS_PER_TOKEN} (no local tokenizer{why})"
        how = "chat template applied" if self.chat else "no chat template: plain text + special tokens"
        return f"tokenizer {self.name} ({how})"

    def prompt(self, text: str) -> int:
        """Input tokens of one user message, as the server sees it."""
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        if self.chat:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def text(self, text: str) -> int:
        """Tokens of generated text (no special tokens)."""
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _load_tokenizer(name: str):
    """``(tokenizer, None)`` from local files, or ``(None, why)``; never touches the network."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None, "transformers is not installed"
    try:
        folder = resolve_model(name) if name in ALIASES else None
        gguf = None
        if folder is None:
            folder, gguf = resolve_chat_model(name)
        kw = {"gguf_file": gguf} if gguf else {}
        # long prompts exceed e.g. MiniLM's 512: counting them is the point, so silence that warning
        logging.getLogger("transformers.tokenization_utils_base").setLevel(logging.ERROR)
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True, **kw)
        tok.model_max_length = int(1e12)
        return tok, None
    except Exception as e:  # noqa: BLE001 - any failure means: estimate, and say why
        return None, f"{name!r} not found locally ({type(e).__name__})"


@dataclass(frozen=True)
class PricingReport:
    """What a dry run found. Token figures are totals unless named ``*_per_request``."""

    seeds: int
    requests: int
    backend: str
    model: str
    template: str
    token_method: str
    tokens_exact: bool
    input_tokens: int
    input_tokens_max: int
    shared_prefix_tokens: int  # the prompt's fixed head, identical in every request (prefix caching)
    answer_tokens_per_request: float | None  # reference reversals in the answer tags: a lower bound
    answer_samples: int
    expected_output_per_request: float | None
    expected_output_source: str
    ceiling_output_per_request: int  # max_tokens
    price_in_out_per_mtok: tuple[float, float] | None
    price_source: str
    concurrency: int
    requests_per_s: float | None  # per connection, measured
    tokens_per_s: float | None  # output tokens per second per connection, measured
    note: str = ""

    @property
    def input_tokens_per_request(self) -> float:
        return self.input_tokens / self.requests if self.requests else 0.0

    @property
    def expected_output_tokens(self) -> float | None:
        e = self.expected_output_per_request
        return None if e is None else e * self.requests

    @property
    def ceiling_output_tokens(self) -> int:
        return self.ceiling_output_per_request * self.requests

    def cost_usd(self, output_tokens: float | None) -> float | None:
        """``(in_tok x price_in + out_tok x price_out) / 1e6``; None without a price or an output figure."""
        if self.price_in_out_per_mtok is None or output_tokens is None:
            return None
        pin, pout = self.price_in_out_per_mtok
        return (self.input_tokens * pin + output_tokens * pout) / 1e6

    def wall_time_s(self, output_tokens: float | None = None) -> float | None:
        """Seconds for all requests at ``concurrency`` connections, from the measured rate.

        ``requests_per_s``: ``requests / (rate x concurrency)``; else ``tokens_per_s``:
        ``output_tokens / (rate x concurrency)`` (default: the expected output). None without a rate.
        """
        if self.requests_per_s:
            return self.requests / (self.requests_per_s * self.concurrency)
        out = self.expected_output_tokens if output_tokens is None else output_tokens
        if self.tokens_per_s and out is not None:
            return out / (self.tokens_per_s * self.concurrency)
        return None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["price_in_out_per_mtok"] = list(self.price_in_out_per_mtok) if self.price_in_out_per_mtok else None
        d.update(
            input_tokens_per_request=self.input_tokens_per_request,
            expected_output_tokens=self.expected_output_tokens,
            ceiling_output_tokens=self.ceiling_output_tokens,
            cost_usd_expected=self.cost_usd(self.expected_output_tokens),
            cost_usd_ceiling=self.cost_usd(self.ceiling_output_tokens),
            wall_time_s_expected=self.wall_time_s(),
            wall_time_s_ceiling=self.wall_time_s(self.ceiling_output_tokens),
        )
        return d

    def format(self) -> str:
        """A readable table: one line per figure, expected and ceiling side by side."""
        d = self.to_dict()
        approx = "" if self.tokens_exact else "~"

        def num(x, unit=""):
            return "--" if x is None else f"{approx}{x:,.0f}{unit}"

        def usd(x):
            return "--" if x is None else f"${x:,.2f}"

        def dur(s):
            return "--" if s is None else f"{s:,.0f} s ({s / 3600:,.2f} h)"

        exp = self.expected_output_per_request
        rows = [
            ("seeds / requests", f"{self.seeds:,} / {self.requests:,}", ""),
            ("input tokens, total", num(self.input_tokens), ""),
            (
                "input tokens, per request",
                f"{approx}{self.input_tokens_per_request:,.1f} (max {self.input_tokens_max:,}, "
                f"shared prefix {self.shared_prefix_tokens:,})",
                "",
            ),
            (
                "output tokens, per request",
                "--" if exp is None else f"{approx}{exp:,.1f}",
                f"{self.ceiling_output_per_request:,}",
            ),
            ("output tokens, total", num(d["expected_output_tokens"]), f"{self.ceiling_output_tokens:,}"),
            ("cost (USD)", usd(d["cost_usd_expected"]), usd(d["cost_usd_ceiling"])),
            (
                f"wall time at concurrency {self.concurrency}",
                dur(d["wall_time_s_expected"]),
                dur(d["wall_time_s_ceiling"]) if not self.requests_per_s else "(rate per request)",
            ),
        ]
        w = max(len(r[0]) for r in rows)
        lines = [
            f"synthesis dry run [{self.backend}:{self.model}, {self.template}] -- nothing was sent",
            f"  tokens: {self.token_method}",
            f"  expected output: {self.expected_output_source}",
            f"  ceiling: max_tokens = {self.ceiling_output_per_request} per request",
            f"  price: {self.price_source}",
            f"  rate: {_rate_text(self)}",
        ]
        if self.note:
            lines.append(f"  note: {self.note}")
        w2, w3 = (max(len(r[i]) for r in rows) for i in (1, 2))
        lines.append(f"  {'':<{w}}  {'expected':>{w2}}  {'ceiling':>{w3}}")
        lines += [f"  {a:<{w}}  {b:>{w2}}  {c:>{w3}}".rstrip() for a, b, c in rows]
        return "\n".join(lines)


def _rate_text(r: PricingReport) -> str:
    if r.requests_per_s:
        return f"{r.requests_per_s:g} requests/s per connection (measured, given)"
    if r.tokens_per_s:
        return f"{r.tokens_per_s:g} output tokens/s per connection (measured, given)"
    return "none given (--requests-per-s or --tokens-per-s), so no wall time"


def price_synthesis(
    seeds: list[dict] | str | Path,
    cfg,
    *,
    tokenizer: str | None = None,
    output_tokens: float | None = None,
    price: tuple[float, float] | None = None,
    requests_per_s: float | None = None,
    tokens_per_s: float | None = None,
) -> PricingReport:
    """Dry-run ``synthesize(seeds, ..., cfg)``: count and price it; send nothing, write nothing.

    Args:
        seeds: seed rows or a seed JSONL path (validated as for synthesis).
        cfg: a ``SynthesisConfig`` (model, template, limit, shard, negative, max_tokens, concurrency).
        tokenizer: where to find the tokenizer (default ``cfg.model``); missing -> chars/4 estimate.
        output_tokens: expected completion tokens per request (default: the answer-only lower bound).
        price: USD per 1M (input, output) tokens (default: ``cfg.price()``, the built-in table).
        requests_per_s, tokens_per_s: a measured rate per connection, for the wall time.

    Example: 2 seeds whose prompts tokenize to 4 and 5 tokens, ``output_tokens=10``,
    ``price=(1, 2)`` -> 9 input tokens, 20 output, cost (9 x 1 + 20 x 2) / 1e6 USD.
    """
    _check_rates(output_tokens, requests_per_s, tokens_per_s)
    seed_rows = (
        load_seeds(seeds, limit=cfg.limit, stage="synthesis")
        if isinstance(seeds, (str, Path))
        else list(seeds)[: cfg.limit]
    )
    items = plan(seed_rows, cfg.negative_policy(), cfg.rng_seed, cfg.shard)
    tmpl = load_template(cfg.template)
    counter = TokenCounter(tokenizer or cfg.model)
    total, longest, prefix_tokens = _count_prompts(items, tmpl, counter)
    answers = _answer_tokens(items, counter)
    answer_mean = sum(answers) / len(answers) if answers else None
    expected, source = _expected_output(output_tokens, answer_mean, len(answers))
    price, price_source = _price(cfg, price)
    note = ""
    if cfg.backend in ("template", "reference"):
        note = f"backend {cfg.backend!r} sends no request; the figures are what an LLM backend would need"
    return PricingReport(
        seeds=len(seed_rows),
        requests=len(items),
        backend=cfg.backend,
        model=cfg.model,
        template=f"{tmpl.name} {tmpl.full_version}",
        token_method=counter.method,
        tokens_exact=counter.exact,
        input_tokens=total,
        input_tokens_max=longest,
        shared_prefix_tokens=prefix_tokens,
        answer_tokens_per_request=answer_mean,
        answer_samples=len(answers),
        expected_output_per_request=expected,
        expected_output_source=source,
        ceiling_output_per_request=cfg.max_tokens,
        price_in_out_per_mtok=price,
        price_source=price_source,
        concurrency=cfg.concurrency,
        requests_per_s=requests_per_s,
        tokens_per_s=tokens_per_s,
        note=note,
    )


def _check_rates(output_tokens: float | None, requests_per_s: float | None, tokens_per_s: float | None):
    """``ConfigError`` unless each figure given is a positive finite number."""
    for flag, v in (("--output-tokens", output_tokens), ("--requests-per-s", requests_per_s)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{flag} must be a positive number, got {v}")
    if tokens_per_s is not None and not (math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise ConfigError(f"--tokens-per-s must be a positive number, got {tokens_per_s}")


def _count_prompts(items, tmpl: PromptTemplate, counter: TokenCounter) -> tuple[int, int, int]:
    """``(total, longest, shared prefix)`` input tokens of the planned requests' prompts; the shared
    prefix is what the first two prompts have in common (0 with fewer than two)."""
    total, longest, first_two = 0, 0, []
    for _, seed, j in items:
        prompt = render_prompt(seed, j, tmpl)
        n = counter.prompt(prompt)
        total, longest = total + n, max(longest, n)
        if len(first_two) < 2:
            first_two.append(prompt)
    prefix = os.path.commonprefix(first_two) if len(first_two) == 2 else ""
    return total, longest, counter.text(prefix) if prefix else 0


def _answer_tokens(items, counter: TokenCounter) -> list[int]:
    """Tokens of the planned seeds' reference reversals, as the model would write the answer."""
    return [counter.text(ANSWER_WRAP.format(s["reference_reversal"])) for _, s, _ in items if _ref(s)]


def _expected_output(
    output_tokens: float | None, answer_mean: float | None, n_answers: int
) -> tuple[float | None, str]:
    """``(expected output tokens per request, where the figure comes from)``."""
    if output_tokens is not None:
        return float(output_tokens), f"{output_tokens:g} tokens per request (--output-tokens)"
    if answer_mean is not None:
        return answer_mean, (
            f"lower bound: answer only, the mean of {n_answers} reference reversals in the answer "
            "tags; the prompt asks for reasoning first, so pass --output-tokens from a pilot run"
        )
    return None, "unknown: the seeds have no reference reversals; pass --output-tokens"


def _price(cfg, price: tuple[float, float] | None) -> tuple[tuple[float, float] | None, str]:
    """``(USD per 1M input and output tokens, where it comes from)``: ``price``, else the built-in table."""
    if price is not None:
        return price, f"${price[0]:g} / ${price[1]:g} per 1M input / output tokens (--price)"
    if cfg.price() is not None:
        price = tuple(cfg.price())
        return price, (
            f"${price[0]:g} / ${price[1]:g} per 1M input / output tokens "
            f"(built-in estimate for {cfg.model}; override with --price)"
        )
    return None, f"none for {cfg.model!r}: pass --price IN,OUT for a cost"


def _ref(seed: dict) -> bool:
    r = seed.get("reference_reversal")
    return isinstance(r, str) and bool(r.strip())
