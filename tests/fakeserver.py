"""A scripted OpenAI-compatible HTTP server on loopback for tests: /v1/models and /v1/chat/completions.

Reads scripted replies (a queue and/or a callable); records every request and the usage it sent.

Usage::

    with FakeOpenAIServer(model="fake-coder") as server:
        server.push(Reply(content="hello", usage=(12, 3)))
        server.fail_next(2, status=500)
        client = openai.OpenAI(base_url=server.url, api_key="x")

Each role normally gets its own server (as in production, one URL per role). A reply is a
`Reply`, a plain string (content), or a callable `(request_json) -> Reply | str` set as `default`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_USAGE = (10, 5)


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


Responder = Callable[[dict[str, Any]], "Reply | str"]


@dataclass
class SentRecord:
    """What the server answered to one chat request (for comparing with the agent's events)."""

    status: int
    model: str
    usage: tuple[int, int] | None
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
        host: str = "127.0.0.1",
        port: int = 0,
        max_model_len: int | None = 32768,
    ) -> None:
        self.model = model
        self.default = default
        self.latency_s = latency_s
        self.reject_tools = reject_tools
        self.max_model_len = max_model_len
        self.requests: list[dict[str, Any]] = []
        self.sent: list[SentRecord] = []
        self._queue: deque[Reply | str | Responder] = deque()
        self._failures: deque[int] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- scripting -------------------------------------------------------------------
    def push(self, *replies: Reply | str | Responder) -> None:
        """Queue replies for the next chat requests (FIFO); `default` answers when empty."""
        with self._lock:
            self._queue.extend(replies)

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
        if item is None:
            return Reply(content="(no scripted reply)")
        if callable(item) and not isinstance(item, Reply):
            item = item(request)
        if isinstance(item, str):
            return Reply(content=item)
        return item

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
        body: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.sent)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
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

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                with fake._lock:
                    fake.requests.append({"_path": self.path})
                if self.path.rstrip("/").endswith("/models"):
                    entry: dict[str, Any] = {
                        "id": fake.model,
                        "object": "model",
                        "created": 0,
                        "owned_by": "fake",
                    }
                    if fake.max_model_len is not None:
                        entry["max_model_len"] = fake.max_model_len
                    self._send(200, {"object": "list", "data": [entry]})
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
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found", "type": "not_found"}})
                    return
                model = str(request.get("model", fake.model))
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
                reply = fake._next_reply(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                with fake._lock:
                    fake.sent.append(
                        SentRecord(reply.status, model, reply.usage if reply.status == 200 else None, request)
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
                self._send(200, fake._completion_body(reply, model))

        return Handler


def prompt_text(request: dict[str, Any]) -> str:
    """All message contents of a chat request joined (for responders that route on the prompt)."""
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
