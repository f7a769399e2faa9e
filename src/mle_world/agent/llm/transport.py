"""The endpoint clients' HTTP transport: a response must arrive whole within its read timeout.

Reads nothing and writes nothing; wraps httpx2's transport (the one module that imports the HTTP package).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2


class _DeadlineStream(httpx2.SyncByteStream):
    """A response body that fails with ReadTimeout once its request's deadline has passed."""

    def __init__(self, stream: httpx2.SyncByteStream, deadline: float, request: httpx2.Request) -> None:
        self._stream = stream
        self._deadline = deadline
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx2.ReadTimeout(
                    "the response did not arrive whole within its timeout (it trickled in)",
                    request=self._request,
                )
            yield chunk

    def close(self) -> None:
        self._stream.close()


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx's read timeout limits each wait for bytes, not the whole response: a server or gateway that
    sends a byte now and then (keep-alive whitespace, a trickle) held a request for as long as it liked,
    past the attempt's timeout and the trial's deadline. Here the body must be complete within the
    request's read timeout from when it was sent; the last wait for bytes can add at most one more."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        limit = (request.extensions.get("timeout") or {}).get("read")
        start = time.monotonic()
        response = super().handle_request(request)
        if isinstance(limit, int | float) and isinstance(response.stream, httpx2.SyncByteStream):
            response.stream = _DeadlineStream(response.stream, start + limit, request)
        return response


def http_client(max_connections: int = 100) -> httpx2.Client:
    """An httpx client for `openai.OpenAI(http_client=...)`: the SDK's defaults, our transport."""
    limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx2.Client(transport=DeadlineTransport(limits=limits), follow_redirects=True)
