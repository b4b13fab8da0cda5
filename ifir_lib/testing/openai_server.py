"""A local OpenAI-compatible chat-completions server: for tests, the benchmark and smoke runs.

It is a stand-in for a real LLM endpoint, not a model: its reversals are deterministic
templates, useful to exercise the client, retries, caching and resume end to end without a GPU
or an API key. Run it with ``python -m ifir_lib.testing.openai_server [latency_s]``.

A small aiohttp app on 127.0.0.1 (random free port) run in a background thread, so the real
``openai`` client talks real HTTP to it. By default it answers every request with a well-formed
polarity reversal derived from the prompt (a deterministic sentence built from the chosen
negative); faults can be injected per request:

- ``server.faults``: a list of faults consumed one per request, in arrival order;
- ``server.rules``: ``{substring: fault}``, a fault applied to *every* request whose prompt
  contains the substring (a seed that always fails, whatever the arrival order).

Faults: ``"429"`` (with ``Retry-After: server.retry_after``), ``"500"``, ``"slow"`` (reply after
``server.slow_s``), ``"drop"`` (close the connection without answering), ``"tagless"``,
``"none"`` (the model declines), ``"garbled"``, ``"echo_auth"`` (HTTP 200 whose answer repeats the
request's Authorization header, as a gateway passing an upstream error on as content does),
``"truncated"`` (an answer revised, then cut at ``finish_reason: "length"``), ``"content_filter"``
(the same text, cut by moderation), ``"abort"`` (vLLM's aborted generation: empty content),
``"null_content"`` (``content: null``), ``"finish_null"`` (a whole answer, ``finish_reason: null``), ``"other_model"`` (the reply names
another model, as a gateway's fallback does), ``"no_usage"`` (a whole answer without a ``usage``
block, as some gateways and local servers send).
``server.latency_s`` delays every reply.
``server.api_key`` (if set) must match the bearer token or the reply is 401 (echoing the key,
as some real servers do, so the client must redact it); ``server.models`` lists the known
models, others get 404. ``server.requests`` counts chat requests (``GET /_stats`` reports
it, ``POST /_stats`` also resets it); ``server.auth_headers`` records each Authorization header, ``server.queries`` each URL query.

Not handled: streaming, tools, the judge's reasoning (judge prompts get a fixed yes/no reply,
revised and cut under ``"truncated"`` / ``"content_filter"``).
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import threading

from aiohttp import web

DEFAULT_MODEL = "test-model"


def _tag(prompt: str, name: str) -> str:
    m = re.search(rf"<{name}>\s*(.*?)\s*</{name}>", prompt, re.S)
    return m.group(1) if m else ""


def _usage(prompt: str, text: str | None) -> dict:
    n_in, n_out = len(prompt) // 4, len(text or "") // 4
    return {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}


def default_reversal(prompt: str) -> str:
    """A deterministic, well-formed reply: reasoning, then a reversal built from N*'s first words."""
    words = re.findall(r"[A-Za-z][A-Za-z'-]+", _tag(prompt, "specific_instruction_negative"))[:6]
    topic = " ".join(words) or "the opposite attribute"
    return (
        f"The chosen document differs from the other one in its focus.\n"
        f"<answer><new_instruction>Only include documents centred on {topic}; "
        f"exclude anything that lacks this focus.</new_instruction></answer>"
    )


# the finish_reason a fault's reply carries (others: "stop"); "finish_null" sends null, as some
# servers do for a normal end
_FINISH = {"truncated": "length", "content_filter": "content_filter", "abort": "abort", "finish_null": None}


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error"):
    """An error reply in the OpenAI API's shape: ``{"error": {"message", "type", "code"}}``."""
    return web.json_response({"error": {"message": message, "type": kind, "code": code}}, status=status)


class FakeOpenAIServer:
    def __init__(self, latency_s: float = 0.0):
        self.latency_s = latency_s
        self.slow_s = 3.0
        self.retry_after = "1"
        self.faults: list[str] = []
        self.rules: dict[str, str] = {}
        self.api_key: str | None = None
        self.models = {DEFAULT_MODEL}
        self.requests = 0
        self.auth_headers: list[str] = []
        self.queries: list[dict] = []  # each request's URL query parameters
        self.bodies: list[dict] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self):
        with self._lock:
            self.requests, self.faults, self.rules = 0, [], {}
            self.auth_headers, self.bodies, self.queries = [], [], []

    # ---- request handling -------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        auth = request.headers.get("Authorization", "")
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        with self._lock:
            self.requests += 1
            self.auth_headers.append(auth)
            self.queries.append(dict(request.query))
            self.bodies.append(body)
            fault = self.faults.pop(0) if self.faults else None
            for sub, f in self.rules.items():
                if sub in prompt:
                    fault = f
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            given = auth.removeprefix("Bearer ")
            return _error(401, f"Incorrect API key provided: {given}", "invalid_api_key")
        if body.get("model") not in self.models:
            return _error(404, f"The model `{body.get('model')}` does not exist", "model_not_found")
        if fault == "429":
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": self.retry_after},
            )
        if fault == "500":
            return web.json_response(
                {"error": {"message": "internal error", "type": "server_error"}}, status=500
            )
        if fault == "drop":
            request.transport.close()  # the client sees the connection die mid-request
            return web.Response(status=500)  # never reaches the client: the transport is closed
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        if "<judge>" in prompt:
            text = "Both checked.\n<answer><a>yes</a><b>no</b></answer>"
            if fault in ("truncated", "content_filter"):  # a verdict revised, then cut
                text += "\nWait, A misses the point. Revised:\n<answer><a>no</a><b>ye"
        elif fault == "tagless":
            text = "I think the new instruction should focus on the other document."
        elif fault == "none":
            text = "No attribute separates these documents cleanly.\n<answer>None</answer>"
        elif fault == "echo_auth":
            text = f"Upstream error 401: the provider rejected the request (Authorization: {auth})"
        elif fault == "garbled":
            text = "<answer><new_instruction>Only recent reports</answer>"
        elif fault in ("truncated", "content_filter"):  # a revision cut after an answer it abandons
            text = (
                "<answer><new_instruction>Only prescription drugs.</new_instruction></answer>\n"
                "Wait, that keeps the positive in. Revised:\n<answer><new_instruction>Only preventive"
            )
        elif fault in ("abort", "null_content"):
            text = "" if fault == "abort" else None
        else:
            text = default_reversal(prompt)
        finish = _FINISH.get(fault, "stop")
        return web.json_response(
            {
                "id": f"chatcmpl-{self.requests}",
                "object": "chat.completion",
                "created": 0,
                "model": "some-other-model" if fault == "other_model" else body.get("model"),
                "choices": [
                    {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}
                ],
                **({} if fault == "no_usage" else {"usage": _usage(prompt, text)}),
            }
        )

    async def _stats(self, request: web.Request) -> web.Response:
        """For a server in another process (the benchmark): the request count, reset on POST."""
        with self._lock:
            n = self.requests
            if request.method == "POST":
                self.requests = 0
        return web.json_response({"requests": n})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in sorted(self.models)]}
        )

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()

        def run():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_get("/v1/models", self._models)
            app.router.add_get("/_stats", self._stats)
            app.router.add_post("/_stats", self._stats)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
            self._loop.run_until_complete(self._runner.setup())
            site = web.SockSite(self._runner, sock)
            self._loop.run_until_complete(site.start())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="fake-openai")
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self):
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def free_port() -> int:
    """A port nobody listens on (bound, then released): an unreachable endpoint for tests."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# python -m ifir_lib.testing.openai_server [latency_s]: prints its URL, serves until killed
if __name__ == "__main__":
    srv = FakeOpenAIServer(latency_s=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0).start()
    print(srv.url, flush=True)
    threading.Event().wait()
