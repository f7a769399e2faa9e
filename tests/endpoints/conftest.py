"""A minimal OpenAI-compatible loopback server for the endpoint probe tests.

Reads HTTP requests on 127.0.0.1 (an ephemeral port); writes JSON answers shaped like vLLM's
/v1/models and /v1/chat/completions, and records the requests it saw.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class ServerOptions:
    """What the loopback server pretends to be."""

    models: tuple[str, ...] = ("test-model",)
    max_model_len: int | None = 32768
    """Reported on /v1/models like vLLM; None mimics llama.cpp (field absent)."""
    tools: bool = True
    """False answers any request with `tools` by HTTP 400 "tools are not supported"."""
    required_key: str | None = None
    """When set, requests without `Authorization: Bearer <key>` get 401."""
    requests: list[dict[str, Any]] = field(default_factory=list)


class LoopbackServer:
    """A running server: `url` is the base URL including /v1."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        handler = _make_handler(options)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _make_handler(options: ServerOptions) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            return

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if options.required_key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {options.required_key}":
                return True
            self._send(401, {"error": {"message": "invalid api key", "type": "auth", "code": 401}})
            return False

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            options.requests.append({"method": "GET", "path": self.path})
            if not self._authorized():
                return
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, {"error": {"message": "not found", "code": 404}})
                return
            data = []
            for model in options.models:
                entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": "vllm"}
                if options.max_model_len is not None:
                    entry["max_model_len"] = options.max_model_len
                data.append(entry)
            self._send(200, {"object": "list", "data": data})

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            options.requests.append({"method": "POST", "path": self.path, "body": body})
            if not self._authorized():
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found", "code": 404}})
                return
            if body.get("model") not in options.models:
                message = f"The model `{body.get('model')}` does not exist."
                self._send(404, {"error": {"message": message, "code": 404}})
                return
            message: dict[str, Any] = {"role": "assistant", "content": "OK"}
            finish = "stop"
            if body.get("tools"):
                if not options.tools:
                    self._send(400, {"error": {"message": "tools are not supported", "code": 400}})
                    return
                choice = body.get("tool_choice") or {}
                name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
                name = name or body["tools"][0]["function"]["name"]
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps({"ok": True})},
                        }
                    ],
                }
                finish = "tool_calls"
            self._send(
                200,
                {
                    "id": "cmpl-0",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                },
            )

    return Handler


@pytest.fixture
def start_server() -> Iterator[Callable[..., LoopbackServer]]:
    """Yields `start(**ServerOptions fields) -> LoopbackServer`; every started server is stopped."""
    started: list[LoopbackServer] = []

    def start(**options: Any) -> LoopbackServer:
        server = LoopbackServer(ServerOptions(**options)).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


@pytest.fixture
def dead_url() -> str:
    """A loopback URL on a port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
