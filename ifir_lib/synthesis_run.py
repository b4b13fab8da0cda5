"""The synthesis loop: plan items -> rows appended to the output file, with counts.

``run_items`` drives the LLM (bounded concurrency, one task per request) or a baseline, writes
each row as it arrives (a row that cost a request is flushed at once and fsync'd soon after, off
the event loop) and fills a ``SynthesisSummary``. The row schema is in ``synthesize``'s
docstring. Not handled here: settings and resuming (``synthesize``), the file layout
(``synthesis_io``), requests (``llm``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BackendError, RequestFailed
from .jsonl import dumps
from .llm import LLM
from .prompts import PromptTemplate, render_prompt
from .reversal_checks import Parsed, parse_and_validate
from .template_baseline import TEMPLATE_BASELINE_VERSION, template_reversal

# ``cfg`` below is a ``synthesize.SynthesisConfig``, read by attribute only (that module imports this one)
STATUSES = ("accepted", "declined", "rejected", "failed")


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
        lines = [
            f"synthesis -> {self.out}  [{self.backend}:{self.model}, {self.template} {self.template_version}]",
            f"  keys {self.keys}: {self.skipped} already done, {self.written} written "
            f"({self.accepted} accepted, {self.declined} declined, {self.rejected} rejected, {self.failed} failed)",
            f"  requests {self.requests} (retries {self.retries}), cache hits {self.cached}, "
            f"tokens {self.prompt_tokens} in / {self.completion_tokens} out, est. cost {cost}, {self.elapsed_s:.1f}s",
        ]
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


def cost_usd(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float:
    """``cost_usd(1_000_000, 500_000, (0.15, 1.5)) -> 0.15 + 0.75 = 0.9``."""
    if not price:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def _reason_class(reason: str | None) -> str:
    return (reason or "").split(":")[0].split(" after ")[0].split(" (")[0]


def row_identity(cfg, tmpl: PromptTemplate) -> tuple[str, str, str]:
    """``(model, template, template_version)`` recorded in rows; the baselines have no prompt."""
    if cfg.backend == "template":
        return "template", "template_reversal", TEMPLATE_BASELINE_VERSION
    if cfg.backend == "reference":
        return "reference", "reference_reversal", "seed"
    return cfg.model, tmpl.name, tmpl.full_version


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
) -> dict:
    """One output row (the schema in the module docstring); ``c`` is the ``Completion`` if any."""
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
        "backend": cfg.backend,
        "model": model,
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


async def _llm_row(
    key: str, seed: dict, j: int, messages: list[dict], cfg, tmpl: PromptTemplate, llm: LLM
) -> dict:
    t0 = time.monotonic()
    try:
        c = await llm.complete(messages)
    except RequestFailed as e:
        return _row(
            key, seed, j, cfg, tmpl, Parsed("failed", None, None, e.reason), None, attempts=e.attempts, t0=t0
        )
    return _row(key, seed, j, cfg, tmpl, parse_and_validate(c.text, seed, cfg), c.text, c, t0=t0)


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


async def run_items(
    items, cfg, out: Path, tmpl: PromptTemplate, llm: LLM | None, summary: SynthesisSummary
) -> None:
    from tqdm.auto import tqdm

    from .progress import progress_enabled

    counts = collections.Counter()
    rejects, fails = collections.Counter(), collections.Counter()
    slots = asyncio.Semaphore(cfg.concurrency)  # bounds the tasks alive at once, not just requests
    bar = tqdm(
        total=len(items) if hasattr(items, "__len__") else None,
        desc=f"synthesize [{cfg.backend}]",
        unit="row",
        disable=not (cfg.progress and progress_enabled()),
        dynamic_ncols=True,
        leave=True,
    )
    with out.open("a", encoding="utf-8") as fh:
        sync = _GroupSync(fh.fileno()) if cfg.fsync else None
        last_postfix, last_flush = [0.0], [time.monotonic()]

        def write(row: dict):
            fh.write(dumps(row))
            # A row that cost a request is flushed at once (in the OS: survives a kill of this
            # process) and fsync'd soon after (survives a power cut). Rows replayed from the
            # cache or a baseline are free to redo, so they ride along with the next flush.
            if row["attempts"] > 0 or time.monotonic() - last_flush[0] > 0.5:
                fh.flush()
                last_flush[0] = time.monotonic()
                if sync is not None and row["attempts"] > 0:
                    sync.request()
            counts[row["status"]] += 1
            counts["cached"] += row["cached"]
            if row["status"] == "rejected":
                rejects[_reason_class(row["reason"])] += 1
            elif row["status"] == "failed":
                fails[_reason_class(row["reason"])] += 1
            if not row["cached"]:
                summary.cost_usd += row["cost_usd"]
            if not bar.disable:
                bar.update(1)
                now = time.monotonic()
                if now - last_postfix[0] > 0.2:  # formatting the counts per row would cost more than the row
                    last_postfix[0] = now
                    _show_counts(bar, counts)

        tasks: set[asyncio.Task] = set()
        fatal: list[BackendError] = []

        async def work(key, seed, j, messages):
            try:
                write(await _llm_row(key, seed, j, messages, cfg, tmpl, llm))
            except BackendError as e:  # the run cannot go on: stop the other requests too
                if not fatal:
                    fatal.append(e)
                    for t in tasks:
                        if t is not asyncio.current_task():
                            t.cancel()
            finally:
                slots.release()

        try:
            for n, (key, seed, j) in enumerate(items):
                if fatal:
                    break
                if llm is None:
                    write(_baseline_row(key, seed, j, cfg, tmpl))
                    continue
                messages = [{"role": "user", "content": render_prompt(seed, j, tmpl)}]
                t0 = time.monotonic()
                hit = llm.lookup(messages)
                if hit is not None:  # answered from the cache: no task, no slot
                    write(
                        _row(
                            key,
                            seed,
                            j,
                            cfg,
                            tmpl,
                            parse_and_validate(hit.text, seed, cfg),
                            hit.text,
                            hit,
                            t0=t0,
                        )
                    )
                    if n % 256 == 0:
                        await asyncio.sleep(0)  # let in-flight requests progress
                    continue
                await slots.acquire()
                if fatal:
                    break
                t = asyncio.create_task(work(key, seed, j, messages))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            results = await asyncio.gather(*list(tasks), return_exceptions=True)
            if fatal:
                raise fatal[0]
            for r in results:  # a bug in a task must not pass silently
                if isinstance(r, Exception):
                    raise r
        finally:
            fh.flush()
            if sync is not None:
                await sync.drain()
            _show_counts(bar, counts)
            bar.close()
            summary.written = sum(counts[s] for s in STATUSES)
            for s in STATUSES:
                setattr(summary, s, counts[s])
            summary.cached = counts["cached"]
            summary.reject_reasons, summary.fail_reasons = dict(rejects), dict(fails)
