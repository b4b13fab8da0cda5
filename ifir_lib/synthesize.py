"""Polarity-reversal synthesis (arXiv 2604.18845, Appendix A; docs/method.md §2): seeds -> reversal rows.

For each seed (query q, instruction I, positive P+, instruction negatives N1..Nk) and a chosen
negative N*, a backend writes a complementary instruction I' under which N* is relevant and P+
is not. Backends: ``openai`` and ``transformers`` (an LLM prompted with the Appendix A structure,
``templates/reversal_prompt.j2``), ``template`` (a deterministic negation of I: an honest, naive
baseline) and ``reference`` (the seed's bundled ``reference_reversal``).

The run is resumable and shardable: rows are appended to a JSONL file as they arrive (a row that
cost a request is flushed at once and fsync'd right after, off the event loop); a restart
repairs a line cut by a kill, skips the keys already written, and retries rows that failed; LLM
answers are cached on disk, so a rerun sends no request. One row per key::

    {"key": "<seed_id>" | "<seed_id>#<neg_index>", "seed_id", "negative_index", "negative_id",
     "backend", "model", "status": "accepted"|"declined"|"rejected"|"failed", "reason",
     "reversal", "reasoning", "raw", "template", "template_version",
     "usage": {"prompt_tokens", "completion_tokens"}, "cost_usd", "instruction_type",
     "attempts", "cached", "elapsed_s"}

Not handled here: the prompt (``prompts``); HTTP, retries and the cache (``llm``); parsing and
checks (``reversal_checks``); the template baseline (``template_baseline``); keys, shards, resume
and merge (``synthesis_io``); the retriever and LLM-judge checks (``verify``); turning rows into
training examples (``trainsets``). Validation is a filter for broken outputs, not a proof that a
reversal is correct (the paper applied no filter).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import config as _config
from .errors import ConfigError
from .jsonl import atomic_write_text
from .llm import LLM, ResponseCache, run_sync
from .locks import exclusive
from .prompts import DEFAULT_TEMPLATE, load_template
from .seeds import load_seeds
from .synthesis_io import NEGATIVE_MODES, iter_plan, parse_shard, plan, prepare_output
from .synthesis_run import SynthesisSummary, row_identity, run_items

log = logging.getLogger(__name__)

BACKENDS = ("openai", "transformers", "template", "reference")

# USD per 1M tokens (input, output). Estimates from public price lists in 2025-26; override per
# run (``SynthesisConfig(prices=...)`` or ``--price``). Local models cost 0.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (0.15, 1.50),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4o": (2.50, 10.00),
    "smollm2": (0.0, 0.0),
}


SYNTHESIS_PRESETS = {
    "paper": {},
    "smoke": dict(
        backend="transformers",
        model="smollm2",
        max_tokens=64,
        temperature=0.0,
        concurrency=1,
        limit=2,
        timeout_s=60.0,
    ),
}


@dataclass(frozen=True)
class SynthesisConfig:
    """Settings for one synthesis run; defaults are the paper-scale run (arXiv 2604.18845).

    The paper used Qwen3-Next-80B-A3B-Instruct and does not state decoding settings or which
    negative becomes N*; temperature 0.7 / top_p 0.8 are Qwen's recommended Instruct settings,
    and N* = the first instruction negative. ``preset('smoke')`` runs SmolLM2-135M on 2 seeds on a CPU.
    """

    backend: str = "openai"
    model: str = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    base_url: str | None = None  # None: $OPENAI_BASE_URL or api.openai.com
    api_key_env: str = "OPENAI_API_KEY"  # the key itself is never stored
    temperature: float = 0.7
    top_p: float = 0.8
    max_tokens: int = 2048  # room for the step-by-step reasoning
    timeout_s: float = 120.0  # per request
    concurrency: int = 64
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    negative: str = "first"  # which negative is N*: first | random | all
    rng_seed: int = 0  # for negative="random"
    shard: str | None = None  # "i/n"
    limit: int | None = None  # first N seeds (before sharding)
    template: str = DEFAULT_TEMPLATE  # a name in ifir_lib/templates or a path
    max_sentences: int = 4
    copy_ratio: float = 0.9  # difflib ratio above which I' is a near-copy of I
    copy_jaccard: float = 0.8  # word-set Jaccard above which I' is a near-copy
    use_cache: bool = True
    cache_dir: str | None = None  # None: config.cache_dir()/llm (IFIR_CACHE overrides)
    retry_failed: bool = True  # on resume, drop failed rows and try them again
    fsync: bool = True
    progress: bool = True
    device: str | None = None  # transformers backend; None: cuda if available
    prices: dict = field(default_factory=lambda: dict(DEFAULT_PRICES))

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}")
        if self.negative not in NEGATIVE_MODES:
            raise ConfigError(
                f"unknown negative mode {self.negative!r}; choose from {', '.join(NEGATIVE_MODES)}"
            )
        if self.backend == "reference" and self.negative != "first":
            raise ConfigError(
                "backend 'reference' has one reversal per seed, for the negative the seed names "
                "(reference_negative_index); use --negative first"
            )
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.shard is not None:
            try:
                parse_shard(self.shard)
            except ValueError as e:
                raise ConfigError(str(e)) from None

    @classmethod
    def preset(cls, name: str = "paper", **overrides) -> SynthesisConfig:
        """``paper`` (the defaults) or ``smoke``: SmolLM2-135M in-process, 2 seeds, short answers,
        under a minute on a laptop CPU (most of it reading the GGUF file)."""
        if name not in SYNTHESIS_PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(SYNTHESIS_PRESETS)}")
        return cls(**{**SYNTHESIS_PRESETS[name], **overrides})

    def replace(self, **changes) -> SynthesisConfig:
        return dataclasses.replace(self, **changes)

    def decoding(self) -> dict:
        """What goes into each request (and into the cache key)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}

    def price(self) -> tuple[float, float] | None:
        return self.prices.get(self.model)

    def llm_cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else _config.cache_dir() / "llm"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["prices"] = {k: list(v) for k, v in self.prices.items()}
        return d


def build_llm(cfg: SynthesisConfig) -> LLM:
    """The ``LLM`` (backend + retries + cache) that ``cfg`` describes; openai/transformers only."""
    from .llm_backends import OpenAIBackend, TransformersBackend

    if cfg.backend == "openai":
        backend = OpenAIBackend(cfg.model, cfg.base_url, cfg.api_key_env, cfg.timeout_s)
    elif cfg.backend == "transformers":
        backend = TransformersBackend(cfg.model, cfg.device)
    else:
        raise ValueError(f"backend {cfg.backend!r} does not call an LLM")
    cache = ResponseCache(cfg.llm_cache_dir()) if cfg.use_cache else None
    return LLM(
        backend,
        cfg.decoding(),
        concurrency=cfg.concurrency,
        max_retries=cfg.max_retries,
        backoff_base_s=cfg.backoff_base_s,
        backoff_max_s=cfg.backoff_max_s,
        cache=cache,
    )


def synthesize(
    seeds: list[dict] | str | Path = _config.SEEDS_PATH,
    out: str | Path = "reversals.jsonl",
    config: SynthesisConfig | None = None,
    **overrides,
) -> SynthesisSummary:
    """Write one polarity reversal per key to ``out`` (JSONL), resuming whatever is there.

    Args:
        seeds: seed rows or a seed JSONL path (validated in full before any request).
        out: the output JSONL; its config goes next to it as ``<out stem>.config.json``.
        config: a ``SynthesisConfig``; ``overrides`` replace its fields (``limit=10``).

    Raises ``DataError`` for bad seeds or a corrupt output file and ``BackendError`` when the run
    cannot go on (bad key, unknown model, unreachable server); rows written so far are kept.

    Example: 3 seeds, ``negative='all'``, 2 negatives each -> 6 rows keyed ``s1#0, s1#1, ...``;
    run it again -> 0 rows written, 0 requests.
    """
    cfg = (config or SynthesisConfig()).replace(**overrides) if overrides else (config or SynthesisConfig())
    t0 = time.monotonic()
    seed_rows = (
        load_seeds(seeds, limit=cfg.limit, stage="synthesis")
        if isinstance(seeds, (str, Path))
        else seeds.head(cfg.limit or len(seeds))  # ArrowSeeds: streamed from disk, never all in memory
        if hasattr(seeds, "iter_batches")
        else list(seeds)[: cfg.limit]
    )
    tmpl = load_template(cfg.template)
    out = Path(out)
    items = (plan if isinstance(seed_rows, list) else iter_plan)(
        seed_rows, "reference" if cfg.backend == "reference" else cfg.negative, cfg.rng_seed, cfg.shard
    )
    with exclusive(out, "synthesis output"):  # a second writer fails here, before reading anything
        return _synthesize_locked(seeds, seed_rows, items, out, cfg, tmpl, t0)


def _pending(items, done: set[str], summary: SynthesisSummary):
    """The planned items whose key is not in ``done``, counting ``keys`` and ``skipped`` as they pass."""
    for it in items:
        summary.keys += 1
        if it[0] in done:
            summary.skipped += 1
        else:
            yield it


def _synthesize_locked(seeds, seed_rows, items, out: Path, cfg, tmpl, t0: float) -> SynthesisSummary:
    done = prepare_output(out, cfg.retry_failed)
    model, tname, tversion = row_identity(cfg, tmpl)
    summary = SynthesisSummary(
        str(out),
        cfg.backend,
        model,
        price_known=cfg.price() is not None or cfg.backend in ("template", "reference"),
        template=tname,
        template_version=tversion,
    )
    atomic_write_text(
        out.with_name(out.stem + ".config.json"),
        json.dumps(
            {
                "config": cfg.to_dict(),
                "template": tname,
                "template_version": tversion,
                "seeds": str(seeds) if isinstance(seeds, (str, Path)) else f"<{len(seed_rows)} rows>",
            },
            indent=2,
        ),
        fsync=False,
    )
    pending = _pending(items, done, summary)  # keys and skipped are counted as the items pass
    if isinstance(items, list):
        pending = list(pending)  # a list run knows its total for the progress bar
        nothing = not pending
    else:  # streamed: look at the first pending item only
        first = next(pending, None)
        nothing, pending = first is None, itertools.chain([first], pending)
    if nothing:  # nothing to do: no backend, no request, no model load
        summary.elapsed_s = time.monotonic() - t0
        return summary
    llm = build_llm(cfg) if cfg.backend in ("openai", "transformers") else None

    async def main():
        try:
            await run_items(pending, cfg, out, tmpl, llm, summary)
        finally:
            if llm is not None:
                await llm.aclose()

    try:
        run_sync(main())
    finally:
        if llm is not None:
            st = llm.stats
            summary.requests, summary.retries = st.requests, st.retries
            summary.prompt_tokens, summary.completion_tokens = st.prompt_tokens, st.completion_tokens
            summary.retry_reasons = dict(st.retry_reasons)
        summary.elapsed_s = time.monotonic() - t0
    return summary
