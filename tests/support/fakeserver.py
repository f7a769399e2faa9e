"""A scripted OpenAI-compatible HTTP server on loopback for tests: /v1/models and /v1/chat/completions.

Reads scripted replies (a queue and/or a callable); records every request and the usage it sent.

Usage::

    with FakeOpenAIServer(model="fake-coder") as server:
        server.push(Reply(content="hello", usage=(12, 3)))
        server.fail_next(2, status=500)
        client = openai.OpenAI(base_url=server.url, api_key="x")

Each role normally gets its own server (as in production, one URL per role). A reply is a
`Reply`, a plain string (content), or a callable `(request_json) -> Reply | str` set as `default`.
`outage(...)` scripts an outage (HTTP 500s, 429s with Retry-After, or refused connections) that
starts at a given chat request and lasts some seconds or for good; `Reply(garbage=...)` answers
with a broken body (protocol garbage). `HOSTILE_MODEL_ID` and `HOSTILE_FORMULA_ID` are model ids a
hostile server names, for the output-escaping tests.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

DEFAULT_USAGE = (10, 5)
TERMINAL_ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b]0;OWNED\x07\u202e"
"""OSC 52 (writes the clipboard), OSC 0 (the window title) and a right-to-left override."""
HOSTILE_FORMULA = '=HYPERLINK("http://127.0.0.1:9/f","x")'
HOSTILE_MODEL_ID = "<img src=http://127.0.0.1:9/x>" + TERMINAL_ESCAPES + HOSTILE_FORMULA
"""A model id a hostile server serves (`FakeOpenAIServer(HOSTILE_MODEL_ID)`): an HTML beacon, terminal
escapes and a spreadsheet formula; every output must show it inert, and stored JSON keep it exactly."""
HOSTILE_FORMULA_ID = HOSTILE_FORMULA + TERMINAL_ESCAPES + "<img src=http://127.0.0.1:9/y>"
"""The same, starting as a formula (a CSV cell a spreadsheet would evaluate)."""
Garbage = Literal["html", "truncated", "no_choices", "no_usage", "bad_tool_args", "wrong_content_type"]
OutageKind = Literal["500", "429", "refuse"]
BILLED: tuple[Garbage | None, ...] = (None, "no_choices", "bad_tool_args")
"""Answers whose body carries the usage of what the server generated (unusable or not)."""


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    `status` other than 200 sends an OpenAI-style error body with `error_message`.
    `usage=None` omits the usage object entirely (unknown usage).
    `tool_call` = (name, arguments dict) answers with a tool call instead of content.
    """

    content: str | None = ""
    tool_call: tuple[str, dict[str, Any]] | None = None
    usage: tuple[int, int] | None = DEFAULT_USAGE
    status: int = 200
    error_message: str = "scripted error"
    delay_s: float = 0.0
    trickle_s: float = 0.0
    """Seconds between the body's bytes, after the headers (a gateway keeping the connection alive)."""
    finish_reason: str | None = None
    """The choice's finish_reason (default: stop, or tool_calls for a tool call), e.g. length."""
    garbage: Garbage | None = None
    """A broken 200 answer: an HTML page, truncated JSON, no/empty choices, no usage (not garbage to the
    agent: some servers omit it), tool-call arguments that are not JSON, or a JSON body sent as text/plain."""


Responder = Callable[[dict[str, Any]], "Reply | str"]


@dataclass
class SentRecord:
    """What the server answered to one chat request (for comparing with the agent's events)."""

    status: int
    model: str
    usage: tuple[int, int] | None
    """The usage in the body: of a completion, or of an unusable answer that still carried it."""
    request: dict[str, Any] = field(repr=False)


class FakeOpenAIServer:
    """A threaded http.server speaking enough of the OpenAI API for the agent and its tests."""

    def __init__(
        self,
        model: str = "fake-model",
        *,
        default: Responder | Reply | str | None = None,
        latency_s: float = 0.0,
        reject_tools: bool = False,
        response_formats: tuple[str, ...] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_model_len: int | None = 32768,
        capacity: int | None = None,
        also_serves: tuple[str, ...] = (),
        known_models_only: bool = False,
        required_key: str | None = None,
        echo_tools: bool = False,
        quote_refused_key: bool = False,
        answers_as: str | None = None,
    ) -> None:
        """`also_serves`: more model ids on /v1/models; `known_models_only`: 404 for a chat request
        naming another model (vLLM's answer); `required_key`: 401 without `Bearer <key>`;
        `echo_tools`: with nothing scripted, a request with tools gets a call of its chosen tool;
        `quote_refused_key`: the 401 quotes the Authorization header it refused (as some gateways do);
        `answers_as`: the model id completions report (a gateway routing an alias), not the requested one;
        `response_formats`: the `response_format` types accepted (None: any), another one is answered
        with llama-cpp-python's 500."""
        self.answers_as = answers_as
        self.model = model
        self.served = (model, *also_serves)
        self.known_models_only = known_models_only
        self.required_key = required_key
        self.echo_tools = echo_tools
        self.quote_refused_key = quote_refused_key
        self.default = default
        self.latency_s = latency_s
        self.reject_tools = reject_tools
        self.response_formats = response_formats
        self.max_model_len = max_model_len
        self._capacity = threading.BoundedSemaphore(capacity) if capacity else None
        """At most this many chat requests are answered at once (others queue), like a GPU's batch."""
        self.requests: list[dict[str, Any]] = []
        self.sent: list[SentRecord] = []
        self._queue: deque[Reply | str | Responder] = deque()
        self._failures: deque[int] = deque()
        self._lock = threading.Lock()
        self._host = host
        self._server = self._listen(port)
        self._thread: threading.Thread | None = None
        self._outage: tuple[OutageKind, float | None, float | None, int] | None = None
        self._outage_until: float | None = None
        self.outage_started: float | None = None
        self.outage_ended: float | None = None
        self._chat_count = 0
        self._dead = False
        self.in_flight = 0
        self.max_in_flight = 0
        """Most chat requests this server was answering at once."""

    # ---- scripting -------------------------------------------------------------------
    def push(self, *replies: Reply | str | Responder) -> None:
        """Queue replies for the next chat requests (FIFO); `default` answers when empty."""
        with self._lock:
            self._queue.extend(replies)

    def outage(
        self,
        seconds: float | None,
        kind: OutageKind = "500",
        *,
        after_requests: int = 0,
        retry_after_s: float | None = None,
    ) -> None:
        """From the chat request after the first `after_requests` ones, for `seconds` (None: for good):
        answer 500, answer 429 with `Retry-After`, or refuse connections (listener closed, open
        connections dropped without an answer)."""
        with self._lock:
            self._outage = (kind, seconds, retry_after_s, after_requests)
            start = self._chat_count >= after_requests
        if start:
            self._start_outage()

    @property
    def in_outage(self) -> bool:
        with self._lock:
            return self._outage_active()

    def _outage_active(self) -> bool:
        if self.outage_started is None or self.outage_ended is not None:
            return False
        if self._outage_until is not None and time.monotonic() >= self._outage_until:
            self.outage_ended = time.monotonic()
            return False
        return True

    def _start_outage(self) -> None:
        with self._lock:
            if self._outage is None or self.outage_started is not None:
                return
            kind, seconds, _, _ = self._outage
            self.outage_started = time.monotonic()
            self._outage_until = None if seconds is None else self.outage_started + seconds
        if kind == "refuse":
            threading.Thread(target=self._refuse_for, args=(seconds,), daemon=True).start()

    def _refuse_for(self, seconds: float | None) -> None:
        port = self.port
        self._server.shutdown()
        self._server.server_close()
        if seconds is None:
            return
        time.sleep(max(0.0, (self._outage_until or 0.0) - time.monotonic()))
        for _ in range(100):  # the port may linger briefly in use
            try:
                self._server = self._listen(port)
                break
            except OSError:
                time.sleep(0.1)
        with self._lock:
            self.outage_ended = time.monotonic()
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def fail_next(self, count: int, status: int = 500) -> None:
        """Answer the next `count` chat requests with HTTP `status` (e.g. 500, 429, 503)."""
        with self._lock:
            self._failures.extend([status] * count)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("_path", "").endswith("/chat/completions")]

    def usage_sent(self) -> tuple[int, int]:
        """Sum of prompt and completion tokens returned in successful responses."""
        prompt = sum(s.usage[0] for s in self.sent if s.status == 200 and s.usage)
        completion = sum(s.usage[1] for s in self.sent if s.status == 200 and s.usage)
        return prompt, completion

    # ---- lifecycle -------------------------------------------------------------------
    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer((self._host, port), self._handler_class())
        server.daemon_threads = True
        return server

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open (keep-alive) connections: a dead server."""
        with self._lock:
            self._dead = True
            self._outage = None  # a scheduled reopening must not bring the server back
            self._outage_until = None
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- request handling ------------------------------------------------------------
    def _next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            if self._failures:
                status = self._failures.popleft()
                return Reply(status=status, error_message=f"scripted HTTP {status}", usage=None)
            item: Reply | str | Responder | None = self._queue.popleft() if self._queue else self.default
        if item is None and self.echo_tools and request.get("tools"):
            choice = request.get("tool_choice")
            name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
            return Reply(
                content=None, tool_call=(name or request["tools"][0]["function"]["name"], {"ok": True})
            )
        if item is None:
            return Reply(content="(no scripted reply)")
        if callable(item) and not isinstance(item, Reply):
            item = item(request)
        if isinstance(item, str):
            return Reply(content=item)
        return item

    def _garbage_body(self, reply: Reply, model: str) -> tuple[bytes, str]:
        """Body and content type of a broken 200 answer."""
        good = self._completion_body(reply, model)
        kind = reply.garbage
        if kind == "html":
            return b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"
        if kind == "truncated":
            return json.dumps(good).encode()[:40], "application/json"
        if kind == "no_choices":
            return json.dumps({**good, "choices": []}).encode(), "application/json"
        if kind == "no_usage":
            return json.dumps({k: v for k, v in good.items() if k != "usage"}).encode(), "application/json"
        if kind == "bad_tool_args":
            call = {
                "id": "call_x",
                "type": "function",
                "function": {"name": "submit_review", "arguments": "{not json"},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason or "tool_calls"}
            return json.dumps({**good, "choices": [choice]}).encode(), "application/json"
        return json.dumps(good).encode(), "text/plain"

    def _completion_body(self, reply: Reply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish = "stop"
        if reply.tool_call is not None:
            name, arguments = reply.tool_call
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(self.sent)}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
            finish = "tool_calls"
        finish = reply.finish_reason or finish
        body: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.sent)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.answers_as or model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if reply.usage is not None:
            body["usage"] = {
                "prompt_tokens": reply.usage[0],
                "completion_tokens": reply.usage[1],
                "total_tokens": reply.usage[0] + reply.usage[1],
            }
        return body

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # TCP_NODELAY, as real servers set: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _send(
                self,
                status: int,
                body: dict[str, Any] | bytes,
                content_type: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _outage_answer(self) -> bool:
                """Answer (or drop) a chat request during an outage; False when there is none."""
                with fake._lock:
                    if fake._dead:
                        self.close_connection = True
                        return True
                    active = fake._outage_active()
                    kind, _, retry_after, _ = fake._outage or ("500", None, None, 0)
                if not active:
                    return False
                if kind == "refuse":
                    self.close_connection = True  # dropped without an answer, like a dead server
                    return True
                status = int(kind)
                headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
                message = "rate limited" if status == 429 else "server restarting"
                self._send(status, {"error": {"message": message, "code": status}}, headers=headers)
                return True

            def _refused_key(self) -> bool:
                """Answer 401 when a key is required and this request does not carry it."""
                if (
                    fake.required_key is None
                    or self.headers.get("Authorization") == f"Bearer {fake.required_key}"
                ):
                    return False
                message = "invalid api key"
                if fake.quote_refused_key:
                    message += f" (got {self.headers.get('Authorization')})"
                self._send(401, {"error": {"message": message, "type": "auth", "code": 401}})
                return True

            def do_GET(self) -> None:  # noqa: N802
                with fake._lock:
                    fake.requests.append({"_path": self.path})
                if self._outage_answer() or self._refused_key():
                    return
                if self.path.rstrip("/").endswith("/models"):
                    entries = []
                    for served in fake.served:
                        entry: dict[str, Any] = {
                            "id": served,
                            "object": "model",
                            "created": 0,
                            "owned_by": "fake",
                        }
                        if fake.max_model_len is not None:
                            entry["max_model_len"] = fake.max_model_len
                        entries.append(entry)
                    self._send(200, {"object": "list", "data": entries})
                else:
                    self._send(404, {"error": {"message": "not found", "type": "not_found"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    request = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}})
                    return
                request["_path"] = self.path
                request["_auth"] = self.headers.get("Authorization")
                with fake._lock:
                    fake.requests.append(request)
                if self._refused_key():
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found", "type": "not_found"}})
                    return
                model = str(request.get("model", fake.model))
                if fake.known_models_only and model not in fake.served:
                    self._send(
                        404, {"error": {"message": f"The model `{model}` does not exist.", "code": 404}}
                    )
                    return
                with fake._lock:
                    fake._chat_count += 1
                    trigger = fake._outage is not None and fake._chat_count > fake._outage[3]
                if trigger:
                    fake._start_outage()
                if self._outage_answer():
                    return
                with fake._lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if fake._capacity is not None:
                        with fake._capacity:
                            self._answer_chat(request, model)
                    else:
                        self._answer_chat(request, model)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _answer_chat(self, request: dict[str, Any], model: str) -> None:
                if fake.latency_s:
                    time.sleep(fake.latency_s)
                if fake.reject_tools and request.get("tools"):
                    with fake._lock:
                        fake.sent.append(SentRecord(400, model, None, request))
                    self._send(
                        400,
                        {
                            "error": {
                                "message": "tools not supported by this server",
                                "type": "invalid_request_error",
                                "code": 400,
                            }
                        },
                    )
                    return
                kind = (request.get("response_format") or {}).get("type")
                if (
                    fake.response_formats is not None
                    and kind is not None
                    and kind not in fake.response_formats
                ):
                    with fake._lock:
                        fake.sent.append(SentRecord(500, model, None, request))
                    # llama-cpp-python 0.3.36's answer: its request model's validation error, as a 500.
                    allowed = " or ".join(repr(k) for k in fake.response_formats)
                    message = (
                        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
                        f"'type'), 'msg': \"Input should be {allowed}\", 'input': {kind!r}}}"
                    )
                    self._send(500, {"error": {"message": message, "type": "internal_server_error"}})
                    return
                reply = fake._next_reply(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                with fake._lock:
                    fake.sent.append(
                        SentRecord(
                            reply.status,
                            model,
                            reply.usage if reply.status == 200 and reply.garbage in BILLED else None,
                            request,
                        )
                    )
                if reply.status != 200:
                    self._send(
                        reply.status,
                        {
                            "error": {
                                "message": reply.error_message,
                                "type": "server_error",
                                "code": reply.status,
                            }
                        },
                    )
                    return
                if reply.garbage is not None:
                    data, content_type = fake._garbage_body(reply, model)
                    self._send(200, data, content_type)
                    return
                if reply.trickle_s:
                    self._trickle(json.dumps(fake._completion_body(reply, model)).encode(), reply.trickle_s)
                    return
                self._send(200, fake._completion_body(reply, model))

            def _trickle(self, data: bytes, pause_s: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.flush()
                try:
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(pause_s)
                except OSError:  # the client gave up
                    self.close_connection = True

        return Handler


def prompt_text(request: dict[str, Any]) -> str:
    """All message contents of a chat request joined (for responders that route on the prompt)."""
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
