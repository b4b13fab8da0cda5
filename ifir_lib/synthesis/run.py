"""Polarity-reversal synthesis (arXiv 2604.18845, Appendix A; docs/method.md §2): seeds -> reversal rows.

For each seed (query q, instruction I, positive P+, instruction negatives N1..Nk) and a chosen
negative N*, a backend writes a complementary instruction I' under which N* is relevant and P+
is not. Backends: ``openai`` and ``transformers`` (an LLM prompted with the Appendix A structure,
``templates/reversal_prompt.j2``), ``template`` (a deterministic negation of I: an honest, naive
baseline) and ``reference`` (the seed's bundled ``reference_reversal``).

The module, in reading order:

- **config and presets**: ``SynthesisConfig`` (its defaults are the paper-scale run) and
  ``SYNTHESIS_PRESETS`` (``paper``, ``cpu``, ``smoke``); ``build_llm`` makes the client it describes.
- **the plan**: which negatives become N* (the *negative policy*: ``first``, ``random``, ``all``,
  or ``reference``, the seed's own), each row's key, and this shard's share of the seeds:
  ``iter_plan`` yields ``(key, seed, negative_index)`` items.
- **the run**: ``synthesize`` locks the output, makes it a resume point, skips the keys already
  done (refusing, before any request, keys whose rows were written for another version of their
  seed unless ``redo_changed`` redoes them) and runs the loop over the rest, returning a
  ``SynthesisSummary``.
- **rows**: one row per key, from an LLM answer or a baseline (the schema below).
- **the loop**: ``run_items`` drives the LLM (bounded concurrency, one task per request) or a
  baseline and appends each row as it arrives, counting statuses, tokens and cost.
- **reading and resuming**: ``iter_synthesis`` is the one reader of the file format (one row per
  key, the first, or per key and seed version; ``load_synthesis`` is the same as a list);
  ``prepare_output`` repairs a file before a run appends to it.
- **merging shards**: ``merge_shards`` joins shard files of one identity into one, one row per
  key and seed version, with a sidecar.

Reads the seeds (a JSONL path, validated in full before any request; rows; or ``ArrowSeeds``,
streamed from disk), the prompt template and the LLM response cache. For an output ``out`` it
writes:

- ``out``, appended to: one JSON row per key, ``"<seed_id>"``, or ``"<seed_id>#<neg_index>"``
  when every negative becomes N* in turn (``negative='all'``)::

    {"key", "seed_id", "negative_index", "negative_id", "seed_sha", "backend", "model",
     "endpoint"? (the server, OpenAI's own API included, or local weights), "negative" (the N* policy),
     "negative_rng_seed"? (under ``random``),
     "decoding": {"temperature", "top_p", "max_tokens"} | null (the baselines),
     "served_model"? (the model the reply named, where not ``model``: a gateway's fallback),
     "status": "accepted"|"declined"|"rejected"|"failed", "reason", "reversal", "reasoning",
     "raw", "template", "template_version", "usage": {"prompt_tokens", "completion_tokens"},
     "usage_missing"? (true: the reply had no usage block, so its tokens and cost_usd read 0),
     "cost_usd", "instruction_type", "attempts", "cached", "elapsed_s"}

  ``seed_sha`` (``seeds.schema.seed_fingerprint``) names the version of the seed and N* the row
  was written for: a rerun after the seed was edited (or with another seeds file reusing the
  ids) is refused unless ``redo_changed`` (``--redo-changed``) appends a new row for each such
  key; the old row stays (the file is append-only) and training takes the row written for the
  seed as it is. Rows without ``seed_sha`` (earlier versions) count as written for it. Rows of
  seeds no longer in the seeds file are kept, counted in one warning.

- ``<out stem>.config.json``: the ``SynthesisConfig`` (``to_dict``, its URL without
  credentials), the template's name and version, where the seeds came from, the output's
  *identity* (``output_identity``: backend, model, endpoint, negative policy, template name and
  version, an LLM's decoding) and ``runs``, every option set that wrote rows. A rerun under another
  identity is refused before anything is touched (``check_identity``; an output without a
  sidecar is checked against its rows' own backend, model, endpoint, negative policy, template
  and decoding) unless
  ``extend`` (``--extend``) adds its rows deliberately (keys already in the file are kept, not
  redone);
- ``<out>.lock``, held while a run writes ``out``: a second writer fails at once (``core.locks``);
- the LLM response cache (``<cache dir>/llm``), one answer per model, prompt and decoding.

The run is resumable and shardable: a row that cost a request is flushed at once and fsync'd
right after, off the event loop; a restart sets aside a line cut by a kill (a side file named in
a warning), drops duplicate rows (same key and seed version) and (``retry_failed``) failed rows,
skips the keys already written and tries the rest; cached answers make a rerun send no request. Shards split the seeds by a stable hash of their id.

Not handled here: the prompt (``prompts``); HTTP, retries and the cache (``llm``, ``backends``);
parsing and checks (``checks``); the template baseline (``template``); the dry run and its price
(``pricing``); the retriever and LLM-judge checks (``verify``); turning rows into training
examples (``training.trainsets``). Validation is a filter for broken outputs, not a proof that
a reversal is correct (the paper applied no filter).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import itertools
import json
import logging
import os
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core import config as _config
from ..core.errors import BackendError, ConfigError, DataError, RequestFailed
from ..core.jsonl import atomic_write_text, dumps, read_jsonl, set_aside_cut_tail, write_jsonl
from ..core.locks import check_not_written, check_writable, exclusive
from ..core.progress import progress
from ..core.secrets import redact_url
from ..seeds.schema import load_seeds, seed_fingerprint, written_for
from .backends import OpenAIBackend, TransformersBackend, backend_endpoint
from .checks import COPY_SPAN, Parsed, parse_and_validate
from .llm import LLM, ResponseCache, run_sync
from .prompts import DEFAULT_TEMPLATE, PromptTemplate, load_template, render_prompt
from .template import TEMPLATE_BASELINE_VERSION, template_reversal

log = logging.getLogger(__name__)

BACKENDS = ("openai", "transformers", "template", "reference")
# Which instruction negatives become N* (``SynthesisConfig.negative``, ``--negative``). A fourth
# policy, "reference", is the seed's own ``reference_negative_index``: backend ``reference`` uses
# it, for the bundled reference reversals.
NEGATIVE_POLICIES = ("first", "random", "all")
STATUSES = ("accepted", "declined", "rejected", "failed")

# ---- config and presets ----------------------------------------------------------------------

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

# The project's one preset set (``core.config.PRESET_NAMES``), in its order; the CLI offers these keys.
SYNTHESIS_PRESETS = {
    "paper": {},
    # A machine with 2 cores and no GPU cannot run the generator itself. SmolLM2-135M in-process
    # (what smoke runs) took ~6.5 s a seed on such a machine at smoke's 64 tokens, ~2 h for the
    # 1,123 bundled seeds, and each answer of a 5-seed trial was cut before its <answer> tag
    # (rejected); with room for the reasoning it would take several times longer. So cpu
    # is the paper run (same model, prompt and decoding: its rows and cache entries are paper's)
    # sent to an endpoint elsewhere or to a local CPU server (Ollama, llama.cpp), which decodes a
    # handful of sequences at a time. 64 requests in flight would wait there past the 120 s
    # timeout and be sent again from scratch (``llm`` retries timeouts) until they fail; 4 keep
    # it busy, and a request may take minutes. The client needs little CPU per row either way.
    "cpu": dict(concurrency=4, timeout_s=600.0),
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
    negative: str = "first"  # the negative policy: which negative is N* (first | random | all)
    rng_seed: int = 0  # for negative="random"
    shard: str | None = None  # "i/n"
    limit: int | None = None  # first N seeds (before sharding)
    template: str = DEFAULT_TEMPLATE  # a name in ifir_lib/templates or a path
    max_sentences: int = 4
    copy_ratio: float = 0.9  # difflib ratio above which I' is a near-copy of I
    copy_jaccard: float = 0.8  # word-set Jaccard above which I' is a near-copy
    copy_span: int = COPY_SPAN  # consecutive words shared with a passage that make I' a copy of it
    use_cache: bool = True
    cache_dir: str | None = None  # None: config.cache_dir()/llm (IFIR_CACHE overrides)
    retry_failed: bool = True  # on resume, drop failed rows and try them again
    extend: bool = False  # add rows under other identity options (output_identity) to an existing output
    # on resume, synthesize again the keys whose row was written for another version of its seed
    # (seed_sha differs; the old row stays); off: such a run is refused before any request
    redo_changed: bool = False
    fsync: bool = True
    progress: bool = True
    device: str | None = None  # transformers backend; None: cuda if available
    prices: dict = field(default_factory=lambda: dict(DEFAULT_PRICES))

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}")
        if self.negative not in NEGATIVE_POLICIES:
            raise ConfigError(
                f"unknown negative policy {self.negative!r}; choose from {', '.join(NEGATIVE_POLICIES)}"
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
    def preset(cls, name: str | None = None, **overrides) -> SynthesisConfig:
        """``paper`` (the defaults), ``cpu`` (the paper run from a 2-core machine without a GPU: 4
        requests in flight, up to 10 minutes each; see ``SYNTHESIS_PRESETS``) or ``smoke``
        (SmolLM2-135M in-process, 2 seeds, short answers, under a minute on a laptop CPU, most of
        it reading the GGUF file); None: ``core.config.default_preset()``. ``overrides`` replace
        fields: ``preset('smoke', limit=4)``."""
        name = _config.check_preset(name or _config.default_preset(), "synthesis")
        return cls(**{**SYNTHESIS_PRESETS[name], **overrides})

    def replace(self, **changes) -> SynthesisConfig:
        return dataclasses.replace(self, **changes)

    def negative_policy(self) -> str:
        """The policy the plan uses: ``negative``, or ``'reference'`` (the seed's own) for backend ``reference``."""
        return "reference" if self.backend == "reference" else self.negative

    def decoding(self) -> dict:
        """What goes into each request (and into the cache key)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}

    def price(self) -> tuple[float, float] | None:
        return self.prices.get(self.model)

    def llm_cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else _config.cache_dir() / "llm"

    def __repr__(self) -> str:
        """The dataclass's repr with ``base_url``'s credentials masked (``redact_url``, as in
        ``to_dict``): a notebook showing ``config`` or a log line formatting it keeps no key."""
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        shown["base_url"] = redact_url(self.base_url)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["prices"] = {k: list(v) for k, v in self.prices.items()}
        d["base_url"] = redact_url(d["base_url"])  # the request uses the real one; no copy keeps a key
        return d


def build_llm(cfg: SynthesisConfig) -> LLM:
    """The ``LLM`` (backend + retries + cache) that ``cfg`` describes; openai/transformers only."""
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


# ---- the plan: which negatives, keys, shards ---------------------------------------------------


def choose_negatives(seed: dict, negative: str = "first", rng_seed: int = 0) -> list[int]:
    """Indices of the negatives that become N* under the policy ``negative``: ``first -> [0]``,
    ``all -> [0..k-1]``, ``random -> [j]``, ``reference -> [seed["reference_negative_index"]]``.

    ``random`` draws from ``Random(f"{rng_seed}:{seed_id}")``, so the choice depends on the seed
    alone, not on file order, ``--limit`` or sharding.
    """
    k = len(seed["instruction_negatives"])
    if negative == "reference":
        return [int(seed.get("reference_negative_index") or 0)]
    if negative == "first":
        return [0]
    if negative == "all":
        return list(range(k))
    if negative == "random":
        return [random.Random(f"{rng_seed}:{seed['id']}").randrange(k)]
    raise ValueError(f"unknown negative policy {negative!r}")


def row_key(seed_id: str, negative_index: int, negative: str) -> str:
    """``"s1"`` for one reversal per seed; ``"s1#2"`` under ``negative='all'``."""
    return f"{seed_id}#{negative_index}" if negative == "all" else seed_id


def parse_shard(shard: str) -> tuple[int, int]:
    """``"1/4" -> (1, 4)``; raise ValueError unless ``0 <= i < n``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(shard))
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard expects i/n with 0 <= i < n, got {shard!r}")
    return int(m.group(1)), int(m.group(2))


def shard_of(seed_id: str, num_shards: int) -> int:
    """Stable across machines and Python runs (unlike ``hash()``): sha256 of the id, mod n."""
    return int(hashlib.sha256(seed_id.encode("utf-8")).hexdigest()[:16], 16) % num_shards


def iter_plan(seeds, negative: str = "first", rng_seed: int = 0, shard: str | None = None):
    """``(key, seed, negative_index)`` for this shard, in seed order, one at a time: ``seeds`` may
    be any iterable of seed dicts (``seeds.arrow.ArrowSeeds`` streams them from disk)."""
    i, n = parse_shard(shard) if shard else (0, 1)
    for s in seeds:
        if n == 1 or shard_of(s["id"], n) == i:
            for j in choose_negatives(s, negative, rng_seed):
                yield row_key(s["id"], j, negative), s, j


def plan(
    seeds: list[dict], negative: str = "first", rng_seed: int = 0, shard: str | None = None
) -> list[tuple[str, dict, int]]:
    """``[(key, seed, negative_index), ...]`` for this shard, in seed order."""
    return list(iter_plan(seeds, negative, rng_seed, shard))


# ---- the run: synthesize() --------------------------------------------------------------------


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

    Raises ``DataError`` for bad seeds or a corrupt output file, ``ConfigError`` before any work
    when ``out`` cannot be written, holds rows of other identity options (``check_identity``;
    ``extend=True`` adds to it deliberately) or rows written for another version of their seed
    (``redo_changed=True`` writes them again), and ``BackendError`` when the run cannot go on (bad
    key, unknown model, unreachable server); rows written so far are kept.

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
    out = Path(out)
    check_writable(out)  # before any template, lock or request
    tmpl = load_template(cfg.template)
    items = (plan if isinstance(seed_rows, list) else iter_plan)(
        seed_rows, cfg.negative_policy(), cfg.rng_seed, cfg.shard
    )
    with exclusive(out, "synthesis output"):  # a second writer fails here, before reading anything
        return _synthesize_locked(seeds, seed_rows, items, out, cfg, tmpl, t0)


def _pending(items, done: dict, redo: set[str], summary: SynthesisSummary):
    """The planned items whose key is not in ``done`` or is to be redone (``redo``), counting
    ``keys``, ``skipped`` and ``redone`` as they pass."""
    for it in items:
        summary.keys += 1
        if it[0] in done and it[0] not in redo:
            summary.skipped += 1
        else:
            summary.redone += it[0] in redo
            yield it


def _changed_keys(out: Path, items, done: dict, cfg) -> set[str]:
    """The planned keys already in ``out`` whose rows were all written for another version of their
    seed (``seeds.schema.written_for``, the check training makes, fails for each row: its
    ``seed_sha`` differs from ``seed_fingerprint(seed, its negative_index)`` now, or its
    ``negative_id`` is no longer that negative's id): the keys to redo under ``cfg.redo_changed``. Without it, any such
    key is a ``ConfigError``, before any request."""
    stale = []
    for key, seed, _ in items:
        if key not in done:
            continue
        # The rule training applies (seeds.schema.written_for): a row without seed_sha (written
        # before rows recorded it) is taken as written for the seed as it is now when its index is
        # one of the seed's negatives and its negative_id (when it has one) is that negative's id;
        # a row without either is checked on its index only (its version is unknown).
        versions = done[key]["written_for"]
        if not any(
            written_for({"seed_sha": sha, "negative_index": j, "negative_id": nid}, seed)
            for sha, j, nid in versions
        ):
            stale.append(key)
    if stale and not cfg.redo_changed:
        n = len(stale)
        raise ConfigError(
            f"{out}: {n} key{'s were' if n > 1 else ' was'} written for another version of their seed (its query, "
            f"instruction, positive or N* changed, or another seeds file reuses the ids), e.g. "
            f"{', '.join(stale[:5])}; pass --redo-changed to synthesize them again (the old rows "
            "stay in the file), or write to another --out"
        )
    return set(stale)


def _warn_orphans(out: Path, done: dict, seed_rows, cfg, where: str) -> None:
    """One warning counting the keys in ``out`` whose seed is not in the seeds (a seed removed
    from the file): their rows stay. Not checked under ``limit``, which reads only some seeds."""
    if cfg.limit is not None or not done:
        return
    ids = set(seed_rows.column("id") if hasattr(seed_rows, "column") else (s["id"] for s in seed_rows))
    orphans = [k for k, d in done.items() if d["seed_id"] not in ids]
    if orphans:
        log.warning(
            "%s: %d key%s a seed that is not in %s (e.g. %s; removed from the seeds file?): "
            "their rows are kept in the file, not synthesized again",
            out,
            len(orphans),
            "s name" if len(orphans) > 1 else " names",
            where,
            ", ".join(orphans[:5]),
        )


def _synthesize_locked(seeds, seed_rows, items, out: Path, cfg, tmpl, t0: float) -> SynthesisSummary:
    ident = output_identity(cfg, tmpl)
    runs = check_identity(out, ident, cfg.extend)  # before the file is touched
    done = prepare_output(out, cfg.retry_failed)
    where = str(seeds) if isinstance(seeds, (str, Path)) else f"<{len(seed_rows)} rows>"
    redo = set()
    if done:  # a streamed plan is walked twice: keys and fingerprints first, then the run
        planned = (
            items
            if isinstance(items, list)
            else iter_plan(seed_rows, cfg.negative_policy(), cfg.rng_seed, cfg.shard)
        )
        redo = _changed_keys(out, planned, done, cfg)
        _warn_orphans(out, done, seed_rows, cfg, where)
    model, tname, tversion = row_identity(cfg, tmpl)
    summary = SynthesisSummary(
        str(out),
        cfg.backend,
        model,
        price_known=cfg.price() is not None or cfg.backend in ("template", "reference"),
        template=tname,
        template_version=tversion,
    )
    write_sidecar(out, cfg, ident, runs, where)
    pending = _pending(items, done, redo, summary)  # keys, skipped and redone are counted as they pass
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
            _warn_no_usage(summary, st.no_usage, st.ok)
        summary.elapsed_s = time.monotonic() - t0
    return summary


def _warn_no_usage(summary: SynthesisSummary, no_usage: int, answers: int) -> None:
    """Count the new replies that carried no ``usage`` block into ``summary`` (its cost and tokens
    are then a lower bound), with a warning: they were costed $0 without a word."""
    summary.no_usage, summary.cost_is_lower_bound = no_usage, no_usage > 0
    if no_usage:
        log.warning(
            "%d of %d replies had no usage block: their tokens are unknown and costed $0, so the "
            "run's cost ($%.4f) and token counts are a lower bound (their rows say usage_missing)",
            no_usage,
            answers,
            summary.cost_usd,
        )


# ---- the output's identity, its sidecar, the output path ---------------------------------------
# The options that change what a row means. A rerun with other ones would mix rows of two meanings
# in one file (or count the old rows as done), so it is refused unless ``extend`` says so.
DECODING_FIELDS = ("temperature", "top_p", "max_tokens")
IDENTITY_FIELDS = (
    "backend",
    "model",
    "endpoint",
    "negative",
    "rng_seed",
    "template",
    "template_version",
    *DECODING_FIELDS,
)


def output_identity(cfg, tmpl: PromptTemplate) -> dict:
    """The options that make a row what it is: backend, model, the server or weights behind the
    model name (``endpoint``: a self-hosted URL, OpenAI's own API as ``backends.OPENAI_API_ENDPOINT``
    or local weights, ``backends.backend_endpoint``; absent for the baselines and hub ids), negative policy (and its random seed under
    ``random``), prompt template name and version, and for an LLM backend the decoding
    (temperature, top_p, max_tokens). Concurrency, timeouts, retries, ``limit``, ``shard`` and
    progress are not part of it."""
    model, tname, tversion = row_identity(cfg, tmpl)
    ident = {"backend": cfg.backend, "model": model, **row_endpoint(cfg), "negative": cfg.negative_policy()}
    if cfg.negative_policy() == "random":
        ident["rng_seed"] = cfg.rng_seed
    return {**ident, "template": tname, "template_version": tversion, **(row_decoding(cfg) or {})}


def row_endpoint(cfg) -> dict:
    """``{"endpoint": ...}`` for a backend served from somewhere a model name does not pin down (a
    server, OpenAI's own API included, or local weights), else ``{}``. Only identities read from
    outputs and rows written before endpoints were recorded (OpenAI's own API: before it was
    named) lack it; ``same_identity`` reads that as unknown."""
    where = (
        backend_endpoint(cfg.backend, cfg.model, cfg.base_url)
        if cfg.backend in ("openai", "transformers")
        else ""
    )
    return {"endpoint": where} if where else {}


def same_identity(a: dict, b: dict) -> bool:
    """True when two identities agree on every field both record. A field one of them lacks is
    unknown, not different: sidecars written before the decoding was part of the identity whose
    config does not record it either (``recorded_runs`` fills it from the config), and
    identities read from rows (``rows_identities``) written before rows recorded their endpoint
    (OpenAI's own API: before it was named, ``backends.OPENAI_API_ENDPOINT``) and negative policy.
    New identities of an LLM served from a URL always record it. (``rng_seed`` is there only under ``negative='random'``; a policy change is a
    difference by itself.)"""
    return not identity_diffs(a, b)


def identity_diffs(old: dict, new: dict) -> list[str]:
    """``["model 'a' -> 'b'", ...]``: the fields both identities record that differ."""
    return [
        f"{k} {old[k]!r} -> {new[k]!r}" for k in IDENTITY_FIELDS if k in old and k in new and old[k] != new[k]
    ]


def rows_identities(out: str | Path) -> list[dict]:
    """The identities the rows of ``out`` carry themselves, in order of first appearance: backend,
    model, template, template_version and, in rows that record them, the endpoint, the negative
    policy (with its ``rng_seed`` under ``random``) and the decoding. For an output
    without a sidecar (deleted, or written by ``merge_shards`` before it wrote one). Read line by
    line; the distinct identities are few."""
    found: list[dict] = []
    for _, r in read_jsonl(out):
        ident = {
            k: r[k]
            for k in ("backend", "model", "endpoint", "negative", "template", "template_version")
            if k in r
        }
        if "negative_rng_seed" in r:
            ident["rng_seed"] = r["negative_rng_seed"]
        if isinstance(r.get("decoding"), dict):
            ident.update({k: r["decoding"][k] for k in DECODING_FIELDS if k in r["decoding"]})
        if ident and ident not in found:
            found.append(ident)
    return found


def sidecar_path(out: str | Path) -> Path:
    """``<out stem>.config.json``, next to the output."""
    out = Path(out)
    return out.with_name(out.stem + ".config.json")


def recorded_runs(out: str | Path) -> list[dict]:
    """The option sets that wrote rows to ``out``, oldest first, from its sidecar: one dict per
    identity, ``{"identity", "config", "seeds"}``; ``[]`` without a sidecar. A sidecar of the
    older format (one ``config``) counts as one run. An LLM run whose identity lacks the decoding
    (an older sidecar) takes it from its ``config`` (``_with_config_decoding``). Raises ``DataError``
    for an unreadable one."""
    side = sidecar_path(out)
    if not side.exists():
        return []
    try:
        doc = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        msg = f"unreadable ({e}); move it away to record this run's options anew"
        raise DataError(side, None, msg) from None
    if not isinstance(doc, dict):
        raise DataError(side, None, "expected a JSON object")
    if isinstance(doc.get("runs"), list):
        runs = [r for r in doc["runs"] if isinstance(r, dict) and isinstance(r.get("identity"), dict)]
        return [_with_config_decoding(r) for r in runs]
    c = doc.get("config")
    if not isinstance(c, dict) or "backend" not in c:
        return []
    backend = c["backend"]
    policy = "reference" if backend == "reference" else c.get("negative", "first")
    ident = {
        "backend": backend,
        "model": backend if backend in ("template", "reference") else c.get("model"),
        "negative": policy,
        **({"rng_seed": c.get("rng_seed", 0)} if policy == "random" else {}),
        "template": doc.get("template"),
        "template_version": doc.get("template_version"),
    }
    return [_with_config_decoding({"identity": ident, "config": c, "seeds": doc.get("seeds")})]


def _with_config_decoding(run: dict) -> dict:
    """``run`` with the decoding its ``config`` recorded filled into an LLM run's identity where the
    identity lacks it (sidecars written before the decoding was part of the identity), so a rerun
    under another decoding is refused as for a newer sidecar, and the old entry is not replaced.
    A field neither records stays unknown (not checked); the baselines decode nothing."""
    ident, c = run["identity"], run.get("config")
    if ident.get("backend") not in ("openai", "transformers") or not isinstance(c, dict):
        return run
    known = {k: c[k] for k in DECODING_FIELDS if k not in ident and _is_number(c.get(k))}
    return {**run, "identity": {**ident, **known}} if known else run


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_identity(out: Path, ident: dict, extend: bool = False) -> list[dict]:
    """The runs recorded for ``out`` (``recorded_runs``); ``[]`` when ``out`` holds no row yet.

    Without a sidecar, the identities the rows carry stand in for it (``rows_identities``; rows of
    earlier versions record no decoding, endpoint or negative policy: those are not checked).
    Raises ``ConfigError`` (nothing touched) when ``out`` holds rows written under other identity
    options and ``extend`` is off; the message lists old -> new for each differing option.
    """
    if not out.exists() or out.stat().st_size == 0:
        return []
    runs = recorded_runs(out)
    if not runs:  # no sidecar: the rows' own identities, recorded as runs without a config
        runs = [
            {"identity": i, "config": None, "seeds": None, "from_rows": True} for i in rows_identities(out)
        ]
    if not runs or extend or any(same_identity(r["identity"], ident) for r in runs):
        return runs
    diffs = identity_diffs(runs[-1]["identity"], ident)
    raise ConfigError(
        f"{out} holds rows written with other options ({', '.join(diffs)}); "
        "write to another --out, or pass --extend to add rows under the new options"
    )


def write_sidecar(out: Path, cfg, ident: dict, runs: list[dict], seeds: str) -> None:
    """Write ``<out stem>.config.json``: this run's config (``config``, ``template``,
    ``template_version``, ``identity``, ``seeds``) and ``runs``, every option set that wrote rows
    (one entry per identity, its latest config; an entry that records less, from an older sidecar
    or the rows, gives way to this run's when they agree). No secret: ``to_dict`` redacts the URL."""
    run = {"identity": ident, "config": cfg.to_dict(), "seeds": seeds}
    runs = [r for r in runs if not same_identity(r["identity"], ident)] + [run]
    _write_sidecar_doc(out, runs)


def _write_sidecar_doc(out: Path, runs: list[dict], **extra) -> None:
    """The sidecar for ``runs`` (oldest first): the last one's fields at the top, as the older
    one-run format had them, then ``runs`` and ``extra``."""
    last = runs[-1]
    doc = {
        "config": last["config"],
        "template": last["identity"].get("template"),
        "template_version": last["identity"].get("template_version"),
        "seeds": last["seeds"],
        "identity": last["identity"],
        "runs": runs,
        **extra,
    }
    atomic_write_text(sidecar_path(out), json.dumps(doc, indent=2), fsync=False)


@dataclass
class SynthesisSummary:
    """What one ``synthesize`` call did. Costs and tokens count only requests sent in this run."""

    out: str
    backend: str
    model: str
    # rows: planned for this shard, already in the output file, written now
    keys: int = 0
    skipped: int = 0
    written: int = 0
    redone: int = 0  # of the written: keys whose seed changed since their row (``redo_changed``)
    # the written rows by status, and answers that came from the response cache
    accepted: int = 0
    declined: int = 0
    rejected: int = 0
    failed: int = 0
    cached: int = 0
    # traffic of this run: HTTP attempts (or in-process generations), retries, tokens, cost
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    price_known: bool = True
    # new answers whose reply had no usage block: costed $0, so ``cost_usd`` (and the token
    # counts) are a lower bound, ``cost_is_lower_bound``; their rows say ``usage_missing``
    no_usage: int = 0
    cost_is_lower_bound: bool = False
    elapsed_s: float = 0.0
    template: str = ""
    template_version: str = ""
    reject_reasons: dict = field(default_factory=dict)
    fail_reasons: dict = field(default_factory=dict)
    retry_reasons: dict = field(default_factory=dict)

    def format(self) -> str:
        cost = f"${self.cost_usd:.4f}" + (
            "" if self.price_known else f" (no price for {self.model!r}; use --price)"
        )
        if self.no_usage:
            replies = "reply" if self.no_usage == 1 else "replies"
            cost = f"at least {cost} ({self.no_usage} {replies} without a usage block, costed $0)"
        lines = [
            f"synthesis -> {self.out}  [{self.backend}:{self.model}, {self.template} {self.template_version}]",
            f"  keys {self.keys}: {self.skipped} already done, {self.written} written "
            f"({self.accepted} accepted, {self.declined} declined, {self.rejected} rejected, {self.failed} failed)",
            f"  requests {self.requests} (retries {self.retries}), cache hits {self.cached}, "
            f"tokens {self.prompt_tokens} in / {self.completion_tokens} out, est. cost {cost}, {self.elapsed_s:.1f}s",
        ]
        if self.redone:
            lines.append(
                f"  redone {self.redone}: their seed changed since their row was written (the old rows stay in the file)"
            )
        for title, d in (
            ("rejected", self.reject_reasons),
            ("failed", self.fail_reasons),
            ("retried", self.retry_reasons),
        ):
            if d:
                lines.append(
                    f"  {title}: "
                    + ", ".join(f"{k} x{v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))
                )
        return "\n".join(lines)


# ---- rows ---------------------------------------------------------------------------------------
# ``cfg`` below is a ``SynthesisConfig``, read by attribute only.


def cost_usd(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float:
    """``cost_usd(1_000_000, 500_000, (0.15, 1.5)) -> 0.15 + 0.75 = 0.9``."""
    if not price:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def row_identity(cfg, tmpl: PromptTemplate) -> tuple[str, str, str]:
    """``(model, template, template_version)`` recorded in rows; the baselines have no prompt."""
    if cfg.backend == "template":
        return "template", "template_reversal", TEMPLATE_BASELINE_VERSION
    if cfg.backend == "reference":
        return "reference", "reference_reversal", "seed"
    return cfg.model, tmpl.name, tmpl.full_version


def row_decoding(cfg) -> dict | None:
    """The decoding settings an LLM row was written with (``SynthesisConfig.decoding``); None for
    the baselines, which decode nothing."""
    return cfg.decoding() if cfg.backend in ("openai", "transformers") else None


def _row(
    key: str,
    seed: dict,
    j: int,
    cfg,
    tmpl: PromptTemplate,
    parsed: Parsed,
    raw: str | None,
    c=None,
    attempts: int = 0,
    t0: float = 0.0,
    where: str = "",
) -> dict:
    """One output row (the schema in the module docstring); ``c`` is the ``Completion`` if any,
    ``where`` the LLM's server or weights (``LLM.endpoint``; the row's ``endpoint``)."""
    usage = {
        "prompt_tokens": c.prompt_tokens if c else 0,
        "completion_tokens": c.completion_tokens if c else 0,
    }
    model, name, version = row_identity(cfg, tmpl)
    return {
        "key": key,
        "seed_id": seed["id"],
        "negative_index": j,
        "negative_id": seed["instruction_negatives"][j]["id"],
        "seed_sha": seed_fingerprint(seed, j),  # the version of the seed (and N*) it was written for
        "backend": cfg.backend,
        "model": model,
        **({"endpoint": where} if where else {}),
        "negative": cfg.negative_policy(),  # which N* the plan picked: merged shards must agree
        **({"negative_rng_seed": cfg.rng_seed} if cfg.negative_policy() == "random" else {}),
        "decoding": row_decoding(cfg),
        **({"served_model": c.served_model} if c is not None and c.served_model else {}),
        **({"usage_missing": True} if c is not None and c.usage_missing else {}),  # cost_usd: a lower bound
        "status": parsed.status,
        "reason": parsed.reason,
        "reversal": parsed.reversal,
        "reasoning": parsed.reasoning,
        "raw": raw,
        "template": name,
        "template_version": version,
        "usage": usage,
        "cost_usd": round(cost_usd(usage["prompt_tokens"], usage["completion_tokens"], cfg.price()), 8),
        "instruction_type": seed.get("instruction_type"),
        "attempts": c.attempts if c else attempts,
        "cached": bool(c and c.cached),
        "elapsed_s": round(time.monotonic() - t0, 4),
    }


def _baseline_row(key: str, seed: dict, j: int, cfg, tmpl: PromptTemplate) -> dict:
    t0 = time.monotonic()
    if cfg.backend == "reference":
        ref = (seed.get("reference_reversal") or "").strip()
        parsed = (
            Parsed("accepted", ref, None, None)
            if ref
            else Parsed("declined", None, None, "seed has no reference_reversal")
        )
        return _row(key, seed, j, cfg, tmpl, parsed, None, t0=t0)
    raw = template_reversal(seed["instruction"])
    # a negation is a near-copy by construction, so the copy check would reject every row
    parsed = parse_and_validate(
        f"<answer><new_instruction>{raw}</new_instruction></answer>", seed, cfg, check_copy=False
    )
    return _row(key, seed, j, cfg, tmpl, parsed, raw, t0=t0)


def _cached_row(
    key: str, seed: dict, j: int, messages: list[dict], cfg, tmpl: PromptTemplate, llm: LLM
) -> dict | None:
    """The row for an answer already in the response cache (no request, no slot); None on a miss."""
    t0 = time.monotonic()
    hit = llm.lookup(messages)
    if hit is None:
        return None
    return _row(
        key, seed, j, cfg, tmpl, _parsed(hit, seed, j, cfg, tmpl), hit.text, hit, t0=t0, where=llm.endpoint
    )


async def _llm_row(
    key: str, seed: dict, j: int, messages: list[dict], cfg, tmpl: PromptTemplate, llm: LLM
) -> dict:
    t0 = time.monotonic()
    try:
        c = await llm.complete(messages)
    except RequestFailed as e:
        failed = Parsed("failed", None, None, e.reason)
        return _row(key, seed, j, cfg, tmpl, failed, None, attempts=e.attempts, t0=t0, where=llm.endpoint)
    return _row(key, seed, j, cfg, tmpl, _parsed(c, seed, j, cfg, tmpl), c.text, c, t0=t0, where=llm.endpoint)


def _parsed(c, seed: dict, j: int, cfg, tmpl: PromptTemplate) -> Parsed:
    """The checked answer of ``c``; an answer cut at ``max_tokens`` or by the server's content
    filter is rejected whatever it holds (its last whole ``<answer>`` may be one the model was
    revising when it was cut; ``backends.OpenAIBackend._answer`` has the rule)."""
    parsed = parse_and_validate(c.text, seed, cfg, target=j if tmpl.abstract else None)
    if not c.truncated:
        return parsed
    hint = "" if c.cut_by == "content_filter" else "; raise --max-tokens"
    why = f"truncated: {c.cut_note(cfg.max_tokens)}{hint}"
    return Parsed("rejected", None, parsed.reasoning, why)


# ---- the loop: items -> rows appended to the output -----------------------------------------


async def run_items(
    items, cfg, out: Path, tmpl: PromptTemplate, llm: LLM | None, summary: SynthesisSummary
) -> None:
    """Append one row per ``(key, seed, negative_index)`` item to ``out``, filling ``summary``'s
    row counts, cost and reasons.

    A baseline (``llm`` None) or a cached answer is written at once; any other item becomes a
    request task, at most ``cfg.concurrency`` alive. A ``BackendError`` cancels the requests in
    flight and is raised; the rows written so far stay.
    """
    bar = progress(
        total=len(items) if hasattr(items, "__len__") else None,
        desc=f"synthesize [{cfg.backend}]",
        unit="row",
        disable=not cfg.progress,
        delay=0,
        dynamic_ncols=True,
        leave=True,
    )
    with out.open("a", encoding="utf-8") as fh:
        sink = _RowSink(fh, cfg, bar, summary)
        requests = _Requests(cfg, tmpl, llm, sink)
        try:
            for n, (key, seed, j) in enumerate(items):
                if requests.fatal:
                    break
                if llm is None:
                    sink.write(_baseline_row(key, seed, j, cfg, tmpl))
                    continue
                messages = [{"role": "user", "content": render_prompt(seed, j, tmpl)}]
                row = _cached_row(key, seed, j, messages, cfg, tmpl, llm)
                if row is not None:
                    sink.write(row)
                    if n % 256 == 0:
                        await asyncio.sleep(0)  # let in-flight requests progress
                    continue
                if not await requests.start(key, seed, j, messages):
                    break
            await requests.finish()
        finally:
            await sink.close()


class _RowSink:
    """Appends rows to the open output file and counts them: statuses, cache hits, reasons, cost,
    the progress bar. ``close`` flushes, waits for the last fsync and fills the summary."""

    def __init__(self, fh, cfg, bar, summary: SynthesisSummary):
        self.fh, self.bar, self.summary = fh, bar, summary
        self.sync = _GroupSync(fh.fileno()) if cfg.fsync else None
        self.counts = collections.Counter()
        self.rejects, self.fails = collections.Counter(), collections.Counter()
        self.last_postfix, self.last_flush = 0.0, time.monotonic()

    def write(self, row: dict) -> None:
        self.fh.write(dumps(row))
        # A row that cost a request is flushed at once (in the OS: survives a kill of this
        # process) and fsync'd soon after (survives a power cut). Rows replayed from the
        # cache or a baseline are free to redo, so they ride along with the next flush.
        if row["attempts"] > 0 or time.monotonic() - self.last_flush > 0.5:
            self.fh.flush()
            self.last_flush = time.monotonic()
            if self.sync is not None and row["attempts"] > 0:
                self.sync.request()
        self._count(row)

    def _count(self, row: dict) -> None:
        self.counts[row["status"]] += 1
        self.counts["cached"] += row["cached"]
        if row["status"] == "rejected":
            self.rejects[_reason_class(row["reason"])] += 1
        elif row["status"] == "failed":
            self.fails[_reason_class(row["reason"])] += 1
        if not row["cached"]:
            self.summary.cost_usd += row["cost_usd"]
        if not self.bar.disable:
            self.bar.update(1)
            now = time.monotonic()
            if now - self.last_postfix > 0.2:  # formatting the counts per row would cost more than the row
                self.last_postfix = now
                _show_counts(self.bar, self.counts)

    async def close(self) -> None:
        self.fh.flush()
        if self.sync is not None:
            await self.sync.drain()
        _show_counts(self.bar, self.counts)
        self.bar.close()
        s, counts = self.summary, self.counts
        s.written = sum(counts[st] for st in STATUSES)
        for st in STATUSES:
            setattr(s, st, counts[st])
        s.cached = counts["cached"]
        s.reject_reasons, s.fail_reasons = dict(self.rejects), dict(self.fails)


class _Requests:
    """The LLM requests in flight, one task each and at most ``cfg.concurrency`` alive (a slot
    bounds the tasks, not just the requests). The first ``BackendError`` (the run cannot go on)
    lands in ``fatal`` and cancels the other tasks."""

    def __init__(self, cfg, tmpl: PromptTemplate, llm: LLM | None, sink: _RowSink):
        self.cfg, self.tmpl, self.llm, self.sink = cfg, tmpl, llm, sink
        self.slots = asyncio.Semaphore(cfg.concurrency)
        self.tasks: set[asyncio.Task] = set()
        self.fatal: list[BackendError] = []

    async def start(self, key: str, seed: dict, j: int, messages: list[dict]) -> bool:
        """Wait for a slot, then start the request; False (nothing started) once the run stops."""
        await self.slots.acquire()
        if self.fatal:
            return False
        t = asyncio.create_task(self._work(key, seed, j, messages))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)
        return True

    async def _work(self, key: str, seed: dict, j: int, messages: list[dict]) -> None:
        try:
            self.sink.write(await _llm_row(key, seed, j, messages, self.cfg, self.tmpl, self.llm))
        except BackendError as e:  # the run cannot go on: stop the other requests too
            if not self.fatal:
                self.fatal.append(e)
                for t in self.tasks:
                    if t is not asyncio.current_task():
                        t.cancel()
        finally:
            self.slots.release()

    async def finish(self) -> None:
        """Wait for the requests in flight; raise the fatal error, or a task's bug, if any."""
        results = await asyncio.gather(*list(self.tasks), return_exceptions=True)
        if self.fatal:
            raise self.fatal[0]
        for r in results:  # a bug in a task must not pass silently
            if isinstance(r, Exception):
                raise r


class _GroupSync:
    """fsync off the event loop, one at a time; rows written meanwhile ride on the next one.

    An fsync takes milliseconds; done inline it would stall every in-flight request once per row.
    """

    def __init__(self, fd: int):
        self.fd, self.pending, self.task = fd, False, None

    def request(self):
        self.pending = True
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._loop())

    async def _loop(self):
        while self.pending:
            self.pending = False
            await asyncio.to_thread(os.fsync, self.fd)

    async def drain(self):
        while self.task is not None and not self.task.done():
            await asyncio.shield(self.task)
        if self.pending:
            os.fsync(self.fd)


def _reason_class(reason: str | None) -> str:
    return (reason or "").split(":")[0].split(" after ")[0].split(" (")[0]


def _show_counts(bar, counts) -> None:
    """The row counts as the progress bar's postfix (``ok=.. declined=.. ...``)."""
    bar.set_postfix(
        ok=counts["accepted"],
        declined=counts["declined"],
        rejected=counts["rejected"],
        failed=counts["failed"],
        cached=counts["cached"],
        refresh=False,
    )


# ---- reading and resuming output files ------------------------------------------------------


def iter_synthesis(
    path: str | Path,
    drop_failed: bool = False,
    skipped: collections.Counter | None = None,
    by_version: bool = False,
) -> Iterator[dict]:
    """The rows of a synthesis output, one per key, read line by line: the one reader of the format.

    The first row of a key is kept and later ones are skipped; with ``drop_failed``, failed rows
    are skipped too, so a later row of that key is kept instead (how a resumed run retries them).
    With ``by_version``, one row per key *and* ``seed_sha``: a row redone after its seed changed
    (``redo_changed``) is kept beside the old one (how the files are rewritten: nothing is lost;
    rows without ``seed_sha``, from earlier versions, count as one version). A cut last line is
    dropped (``core.jsonl``), and the file is never modified. ``skipped``, when given, counts the
    rows passed over as ``duplicate`` and ``failed``. Raises ``DataError`` for a missing file, a
    bad line or a row without a ``key``.

    Example: rows ``a: failed, b: accepted, a: accepted`` -> ``[a: failed, b]``; with
    ``drop_failed`` -> ``[b, a: accepted]``.
    """
    for _, r in iter_synthesis_lines(path, drop_failed, skipped, by_version):
        yield r


def iter_synthesis_lines(
    path: str | Path,
    drop_failed: bool = False,
    skipped: collections.Counter | None = None,
    by_version: bool = False,
) -> Iterator[tuple[int, dict]]:
    """``iter_synthesis`` with each row's line number: ``(line, row)``, for errors that name it."""
    path = Path(path)
    done: set = set()
    for n, r in read_jsonl(path):
        if "key" not in r:
            raise DataError(path, n, "missing", "key")
        version = (r["key"], r.get("seed_sha")) if by_version else r["key"]
        if version in done or (drop_failed and r.get("status") == "failed"):
            if skipped is not None:
                skipped["duplicate" if version in done else "failed"] += 1
            continue
        done.add(version)
        yield n, r


def load_synthesis(path: str | Path) -> list[dict]:
    """Rows of a synthesis output, one per key (first kept), ignoring a cut last line: ``iter_synthesis`` as a list.

    Read-only: the file is not repaired (``synthesize`` does that when it resumes).
    """
    return list(iter_synthesis(path))


def prepare_output(path: Path, retry_failed: bool) -> dict[str, dict]:
    """Make ``path`` a clean resume point; return the keys already done, each as ``{"seed_id",
    "written_for": {(seed_sha, negative_index, negative_id) of each of its rows (None: a row without
    that field)}}``, what ``seeds.schema.written_for`` checks.

    A cut last line is set aside first (``core.jsonl.set_aside_cut_tail``: the fragment goes to
    ``<path>.cut-<time>-<pid>``, named in a warning; a whole row that only lacks its newline gets
    it), so no appended row is ever glued to it. Then duplicate rows (same key and ``seed_sha``)
    and (with ``retry_failed``) failed rows are dropped, rewriting the file atomically only when
    something changed, so a kill during this step loses nothing. A key's rows for other versions
    of its seed are all kept (``iter_synthesis(by_version=True)``). The file is read line by line
    (twice when it is rewritten): only the keys are held.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        return {}
    set_aside_cut_tail(path, is_whole=_whole_row)  # a fragment goes to a side file, with a warning
    skipped = collections.Counter()
    done: dict[str, dict] = {}
    n_kept = 0
    for r in iter_synthesis(path, retry_failed, skipped, by_version=True):
        n_kept += 1
        d = done.setdefault(r["key"], {"seed_id": r.get("seed_id"), "written_for": set()})
        j = r.get("negative_index", 0)
        j = j if isinstance(j, int) and not isinstance(j, bool) else -1
        nid = r.get("negative_id")  # kept as is (compared as training compares it), made hashable
        nid = nid if isinstance(nid, (str, int, float, type(None))) else json.dumps(nid, sort_keys=True)
        d["written_for"].add((r.get("seed_sha"), j, nid))
    if skipped:
        log.info("%s: rewriting (%d rows kept of %d)", path, n_kept, n_kept + sum(skipped.values()))
        write_jsonl(path, iter_synthesis(path, retry_failed, by_version=True))
    return done


def _whole_row(tail: bytes) -> bool:
    """True when a last line without its newline is a whole row (it parses and has a key)."""
    try:
        row = json.loads(tail.decode("utf-8-sig"))
    except ValueError:
        return False
    return isinstance(row, dict) and "key" in row


# ---- merging shards ----------------------------------------------------------------------------


@dataclass
class MergeSummary:
    out: str
    rows: int
    duplicates: int
    conflicts: int
    missing: list[str]
    failed: int
    unexpected: int
    stale: list[str] = field(default_factory=list)  # keys with rows only for another seed version

    checked: bool = True  # completeness checked against the seeds (merge_shards got seeds)

    @property
    def complete(self) -> bool | None:
        """Every key the seeds imply has a row, none failed nor stale; None (unknown) when no
        seeds were given to check against."""
        if not self.checked:
            return None
        return not self.missing and not self.failed and not self.stale


def merge_shards(
    paths: list[str | Path],
    out: str | Path,
    seeds: list[dict] | str | Path | None = None,
    negative: str | None = None,
    rng_seed: int = 0,
    on_conflict: str = "keep-first",
) -> MergeSummary:
    """Join shard outputs into ``out`` (written atomically, under its lock), one row per key and
    seed version (``seed_sha``), and write its sidecar: the shards' recorded runs, joined.

    The shards must have been written under one identity (``output_identity``, from each shard's
    sidecar, or its rows' when it has none): else a ``ConfigError`` names two shards and the
    options that differ, before anything is written. Duplicates keep the first non-failed row; two
    different accepted reversals for one key, or two statuses (accepted in one shard, rejected or
    declined in another), are counted as ``conflicts``. With ``seeds``,
    completeness is checked against the keys the seeds imply (the policy ``negative`` defaults to
    ``all`` when keys carry ``#``, else the seeds' own ``reference`` negative); a key whose rows
    were all written for another version of its seed (``schema.written_for``: a shard made from
    another seeds file) is ``stale``, and a merge with stale keys is not complete; without
    ``seeds`` nothing is checked and ``MergeSummary.complete`` is None (unknown).
    ``on_conflict='error'`` raises ``DataError`` naming the key and both files, before writing.
    An ``out`` that already holds rows none of the shards has, and is not one of them, is
    refused with a ``ConfigError`` before writing (``_check_out_rows_kept``): the merge replaces
    ``out``, it does not add to it.
    """
    runs = _shard_runs(paths)
    out = Path(out)
    for p in paths:  # a shard still being written: merged now, it lost every row written after
        check_not_written(p, "shard (its synthesis still runs)")
    with exclusive(out, "merged output"):
        best, dups, conflicts = _merge_rows(paths, on_conflict)
        _check_out_rows_kept(out, paths, best)
        versions: dict[str, list] = {}  # key -> its versions (seed_sha), in order of appearance
        for k, sha in best:
            versions.setdefault(k, []).append(sha)
        missing, stale, unexpected, order = [], [], 0, sorted(versions)
        if seeds is not None:
            seeds = load_seeds(seeds, stage="synthesis") if isinstance(seeds, (str, Path)) else seeds
            policy = negative or ("all" if any("#" in k for k in versions) else "reference")
            expected, stale = [], []
            for k, seed, _ in iter_plan(seeds, policy, rng_seed):  # keys only kept: seeds streamed
                expected.append(k)
                if k in versions and not any(written_for(best[k, sha], seed) for sha in versions[k]):
                    stale.append(k)  # every row of it was written for another version of its seed
            missing = [k for k in expected if k not in versions]
            exp = set(expected)
            unexpected = sum(1 for k in versions if k not in exp)
            order = [k for k in expected if k in versions] + sorted(k for k in versions if k not in exp)
        rows = [best[k, sha] for k in order for sha in versions[k]]
        atomic_write_text(out, "".join(dumps(r) for r in rows))
        if runs:
            _write_sidecar_doc(out, runs, merged_from=[str(p) for p in paths])
    return MergeSummary(
        str(out),
        len(rows),
        dups,
        conflicts,
        missing,
        sum(1 for r in rows if r.get("status") == "failed"),
        unexpected,
        stale,
        checked=seeds is not None,
    )


def _check_out_rows_kept(out: Path, paths, best: dict) -> None:
    """Raise ``ConfigError`` (nothing written) when ``out`` already holds rows the merge would
    drop: it is not one of the shards and has rows (key and seed version) none of them has. A
    plausible mistake (a finished output named as --out, incremental merges of one shard at a
    time) that the atomic rewrite would otherwise lose without a word."""
    if not out.exists() or out.stat().st_size == 0 or any(Path(p).resolve() == out.resolve() for p in paths):
        return
    lost = [
        r["key"] for r in iter_synthesis(out, by_version=True) if (r["key"], r.get("seed_sha")) not in best
    ]
    if lost:
        raise ConfigError(
            f"--out {out} already holds {len(lost)} row(s) that are not in the shards (e.g. {lost[0]!r}); "
            "the merge would replace it and lose them: pass it as a shard too, or choose another --out; "
            "nothing was written"
        )


def _merge_rows(paths, on_conflict: str) -> tuple[dict, int, int]:
    """``({(key, seed_sha): row}, duplicates, conflicts)`` over the shards, first non-failed row
    kept; a conflict is two rows that disagree in what training reads (``_disagree``)."""
    best: dict[tuple, dict] = {}
    origin: dict[tuple, str] = {}
    dups = conflicts = 0
    for p in paths:
        for r in iter_synthesis(p, by_version=True):
            v = (r["key"], r.get("seed_sha"))
            if v not in best:
                best[v], origin[v] = r, str(p)
                continue
            dups += 1
            old = best[v]
            if old.get("status") == "failed" and r.get("status") != "failed":
                best[v], origin[v] = r, str(p)
            elif why := _disagree(old, r):
                conflicts += 1
                if on_conflict == "error":
                    raise DataError(
                        p, None, f"key {v[0]!r} {why} in {origin[v]}; nothing was written", "reversal"
                    )
    return best, dups, conflicts


def _disagree(old: dict, new: dict) -> str | None:
    """How two rows of one key and seed version disagree in what training reads (a failed row
    does not count): another accepted reversal, or another status (accepted in one shard and
    rejected or declined in the other: which one the merge kept decided whether the seed trains)."""
    a, b = old.get("status"), new.get("status")
    if "failed" in (a, b):
        return None
    if a == b == "accepted" and old.get("reversal") != new.get("reversal"):
        return "has another accepted reversal"
    if (a == "accepted") != (b == "accepted"):  # rejected vs declined: neither trains
        return f"is {b} here and {a}"
    return None


def _sans_endpoint(ident: dict) -> dict:
    return {k: v for k, v in ident.items() if k != "endpoint"}


def _shard_runs(paths) -> list[dict]:
    """The runs recorded for the shards (``recorded_runs``, or the rows' identities for a shard
    without a sidecar), joined: one entry per identity. Raises ``ConfigError`` when two shards were
    written under different identities (``same_identity``), naming them and the differing options."""
    joined: list[dict] = []
    first = None  # (path, its identities)
    for p in paths:
        p = Path(p)
        runs = recorded_runs(p)
        if not runs and p.exists() and p.stat().st_size:
            runs = [
                {"identity": i, "config": None, "seeds": None, "from_rows": True} for i in rows_identities(p)
            ]
        if not runs:
            continue
        idents = [r["identity"] for r in runs]
        if first is None:
            first = (p, idents)
        else:
            _same_shard_identities(first, (p, idents))
        joined += [r for r in runs if all(r["identity"] != j["identity"] for j in joined)]
    return joined


def _same_shard_identities(a: tuple[Path, list[dict]], b: tuple[Path, list[dict]]) -> None:
    """Raise ``ConfigError`` unless each identity of one shard agrees with one of the other's,
    the endpoint aside: shards are written on several machines, each against its own server of
    one model (docs/paper_scale.md §4), and each shard's rows keep their own ``endpoint``."""
    a = (a[0], [_sans_endpoint(i) for i in a[1]])
    b = (b[0], [_sans_endpoint(i) for i in b[1]])
    for mine, theirs, a_first in ((a[1], b[1], True), (b[1], a[1], False)):
        for i in mine:
            if not any(same_identity(i, j) for j in theirs):  # diffs read a's option -> b's
                diffs = identity_diffs(i, theirs[-1]) if a_first else identity_diffs(theirs[-1], i)
                raise ConfigError(
                    f"shards {a[0]} and {b[0]} were written with other options ({', '.join(diffs)}); "
                    "merge only shards of one run; nothing was written"
                )
