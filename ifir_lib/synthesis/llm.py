"""One async interface to an LLM, plus what every request needs at scale.

The backends (``backends``: ``openai`` against any OpenAI-compatible server, ``transformers``
in-process) answer chat messages. ``LLM`` wraps one backend with bounded concurrency, retries
(exponential backoff with jitter on 429 / 5xx / connection errors / timeouts, honouring
Retry-After; the openai client's own retries are off so ours are counted), a disk cache keyed by
sha256(backend, model, messages, decoding params), and counters for requests and tokens.

Not handled here: prompts (``prompts``), parsing (``checks``) and output rows
(``run``, ``verify``); the non-LLM baselines (``template``, the seeds'
reference); streaming and tool calls; batched generation on the transformers backend (for throughput, serve the model with vLLM and use
``openai``). The API key is read from the environment and never stored, cached or logged.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import hashlib
import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import BackendError, RequestFailed
from ..core.jsonl import atomic_write_text

log = logging.getLogger(__name__)


class _Transient(Exception):
    """Worth retrying. ``connect`` marks "could not open a connection at all"."""

    def __init__(self, reason: str, retry_after: float | None = None, connect: bool = False):
        super().__init__(reason)
        self.reason, self.retry_after, self.connect = reason, retry_after, connect


@dataclass
class Completion:
    """One chat answer. ``attempts`` counts HTTP attempts (0 for a cache hit); ``truncated``: cut
    mid-answer, so its last ``<answer>`` may be one the model was about to revise; ``cut_by`` says
    why (``"length"``: ``max_tokens``; ``"content_filter"``: the server's moderation)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False
    elapsed_s: float = 0.0
    truncated: bool = False  # the answer stopped mid-way (finish_reason "length" or "content_filter")
    cut_by: str | None = None
    served_model: str | None = None  # the model the reply named, where not the one asked for
    usage_missing: bool = False  # the reply had no usage block: its tokens (and cost) are unknown

    def cut_note(self, max_tokens: int) -> str:
        """Why a truncated answer is not whole, for a row's reason."""
        if self.cut_by == "content_filter":
            return "the server's content filter stopped the answer (finish_reason 'content_filter')"
        return f"the answer reached max_tokens ({max_tokens})"


# ---- retry policy -------------------------------------------------------------------------------
def retry_after_seconds(headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date).

    ``{"Retry-After": "2"} -> 2.0``; ``{"retry-after-ms": "1500"} -> 1.5``; absent -> None.
    """
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(ra).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def backoff_delay(
    failures: int, base_s: float, max_s: float, rng: random.Random, retry_after: float | None = None
) -> float:
    """Exponential backoff with "equal jitter": half the step fixed, half random.

    ``failures=1, base=1 -> U(0.5, 1.0)``; ``failures=4 -> U(4, 8)``; capped at ``max_s``. A
    server's Retry-After is a floor (it knows when capacity frees up), also capped at ``max_s``.
    """
    step = min(max_s, base_s * 2 ** (failures - 1))
    delay = step / 2 + rng.uniform(0, step / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_s))
    return delay


# ---- cache -------------------------------------------------------------------------------------
def cache_key(backend: str, model: str, messages: list[dict], params: dict, where: str = "") -> str:
    """sha256 over everything that determines the answer (the API key does not).

    ``where`` is the backend's ``cache_where``: the endpoint of a self-hosted server (two servers
    may serve other weights under one model name) or the file identity of local weights; ``""``
    for OpenAI's own API, which keeps the keys cached before it was part of them.
    Messages are hashed as length-prefixed fields rather than JSON: escaping a 4 kB prompt costs
    more than hashing it, and the prefixes keep ``("ab", "c")`` apart from ``("a", "bc")``.
    """
    head = [backend, model, params, where] if where else [backend, model, params]
    h = hashlib.sha256(json.dumps(head, sort_keys=True).encode("utf-8"))
    for m in messages:
        for part in (m.get("role", ""), m.get("content", "")):
            b = str(part).encode("utf-8")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
    return h.hexdigest()


class ResponseCache:
    """One JSON file per answer under ``root/<key[:2]>/<key>.json``.

    Files are written atomically, so shard workers sharing the folder and a kill at any moment
    leave only whole entries; an unreadable entry counts as a miss.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:  # plain open(): Path objects cost more than the read on a warm rerun
            with open(os.path.join(self.root, key[:2], key + ".json"), "rb") as fh:
                return json.loads(fh.read())
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict) -> None:
        # no fsync: a lost cache entry only costs one repeated request
        atomic_write_text(self._path(key), json.dumps(value, ensure_ascii=False), fsync=False)


# ---- the wrapper every caller uses ----------------------------------------------------------------
@dataclass
class LLMStats:
    """Counters for one run: HTTP attempts, retries by reason, tokens of *new* answers."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    no_usage: int = 0  # new answers without a usage block: their tokens are not in the two above
    retry_reasons: collections.Counter = field(default_factory=collections.Counter)


class LLM:
    """One backend + concurrency bound + retries + cache. ``await llm.complete(messages)``.

    Args:
        backend: an ``OpenAIBackend`` or ``TransformersBackend`` (anything with ``name``,
            ``model``, ``redact`` and ``async __call__(messages, params) -> (text, in, out, cut)``).
        params: decoding parameters sent with every request (part of the cache key).
        concurrency: requests in flight at most (``asyncio.Semaphore``); backoff sleeps keep
            their slot, so a rate-limited server is not hit harder while it recovers.
        max_retries: retries after the first attempt for transient errors.
        cache: a ``ResponseCache`` or None. Only successful answers are cached.
    """

    def __init__(
        self,
        backend,
        params: dict,
        *,
        concurrency: int = 8,
        max_retries: int = 6,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        cache: ResponseCache | None = None,
        rng_seed: int = 0,
    ):
        self.backend, self.params, self.cache = backend, dict(params), cache
        self.max_retries, self.backoff_base_s, self.backoff_max_s = max_retries, backoff_base_s, backoff_max_s
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._rng = random.Random(rng_seed)
        self._warned_served: set[str] = set()
        self.stats = LLMStats()

    @property
    def model(self) -> str:
        return self.backend.model

    @property
    def where(self) -> str:
        """The server or local weights behind the model name (the backend's ``cache_where``)."""
        return getattr(self.backend, "cache_where", "")

    @property
    def endpoint(self) -> str:
        """What rows record as the server or weights (the backend's ``endpoint``; OpenAI's own API
        is named there, though its cache keys leave it out)."""
        return getattr(self.backend, "endpoint", self.where)

    def _key(self, messages: list[dict]) -> str:
        return cache_key(self.backend.name, self.backend.model, messages, self.params, self.where)

    def lookup(self, messages: list[dict]) -> Completion | None:
        """The cached answer to ``messages``, or None (no request is sent). An entry an earlier
        version kept that is no answer (empty and not cut, or one repeating the credentials: a
        gateway's error) is a miss, asked again and replaced."""
        if self.cache is None:
            return None
        t0 = time.monotonic()
        hit = self.cache.get(self._key(messages))
        if hit is None or not isinstance(hit.get("text"), str):
            return None
        echoes = getattr(self.backend, "_echoes_secret", None)
        if (not hit["text"] and not hit.get("truncated")) or (echoes is not None and echoes(hit["text"])):
            return None
        self.stats.cache_hits += 1
        return Completion(
            hit["text"],
            int(hit.get("prompt_tokens", 0)),
            int(hit.get("completion_tokens", 0)),
            attempts=0,
            cached=True,
            elapsed_s=time.monotonic() - t0,
            truncated=bool(hit.get("truncated", False)),
            cut_by=hit.get("cut_by") or ("length" if hit.get("truncated") else None),
            served_model=hit.get("served_model"),
            usage_missing=bool(hit.get("usage_missing")),
        )

    async def complete(self, messages: list[dict]) -> Completion:
        """Answer ``messages``; raise ``RequestFailed`` (this request) or ``BackendError`` (the run)."""
        hit = self.lookup(messages)
        if hit is not None:
            return hit
        t0 = time.monotonic()
        key = self._key(messages)
        async with self._sem:
            attempt = 0
            while True:
                attempt += 1
                self.stats.requests += 1
                try:
                    text, n_in, n_out, cut, *served = await self.backend(messages, self.params)
                    cut = cut if isinstance(cut, str) or cut is None else ("length" if cut else None)
                    served = self._served(served[0] if served else None)
                    break
                except _Transient as e:
                    reason = self.backend.redact(e.reason)
                    if e.connect and self.stats.ok == 0 and attempt >= 2:
                        # never reached the server in this run: a wrong URL, not a blip
                        raise BackendError(f"{reason} ({attempt} attempts)") from None
                    if attempt > self.max_retries:
                        self.stats.failed += 1
                        raise RequestFailed(f"{reason} after {attempt} attempts", attempt) from None
                    self.stats.retries += 1
                    self.stats.retry_reasons[reason] += 1
                    delay = backoff_delay(
                        attempt, self.backoff_base_s, self.backoff_max_s, self._rng, e.retry_after
                    )
                    log.info("retry %d after %s in %.2fs", attempt, reason, delay)
                    await asyncio.sleep(delay)
                except RequestFailed as e:
                    self.stats.failed += 1
                    e.attempts = attempt
                    raise
        self.stats.ok += 1
        missing = n_in is None or n_out is None  # no usage block: counted, its cost unknown
        n_in, n_out = n_in or 0, n_out or 0
        self.stats.no_usage += missing
        self.stats.prompt_tokens += n_in
        self.stats.completion_tokens += n_out
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "text": text,
                    "prompt_tokens": n_in,
                    "completion_tokens": n_out,
                    "truncated": cut is not None,
                    "cut_by": cut,
                    **({"served_model": served} if served else {}),
                    **({"usage_missing": True} if missing else {}),
                    "backend": self.backend.name,
                    "model": self.backend.model,
                    "created": time.time(),
                },
            )
        return Completion(
            text,
            n_in,
            n_out,
            attempts=attempt,
            cached=False,
            elapsed_s=time.monotonic() - t0,
            truncated=cut is not None,
            cut_by=cut,
            served_model=served,
            usage_missing=missing,
        )

    def _served(self, served: str | None) -> str | None:
        """``served`` (the model a reply named, not the one asked for), warned about once per
        model: a gateway's fallback answers under another model's name."""
        if served and served not in self._warned_served:
            self._warned_served.add(served)
            log.warning(
                "asked %s for model %r, the reply names %r; rows record it as served_model",
                self.backend.name,
                self.backend.model,
                served,
            )
        return served

    async def aclose(self):
        await self.backend.aclose()


def run_sync(coro):
    """Run a coroutine to completion from sync code, also inside Jupyter.

    A notebook kernel already runs an event loop, where ``asyncio.run`` refuses to start; there
    the coroutine runs on a private loop in a worker thread instead.
    """
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
