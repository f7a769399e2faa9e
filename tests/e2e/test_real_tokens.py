"""One short trial against a real llama.cpp server (gemma3 270M): result, grading report and a cost
CSV whose token counts equal the usage the server returned (seen through a recording proxy)."""

from __future__ import annotations

import csv
import http.server
import json
import threading
import urllib.request
from pathlib import Path

import pytest
from e2ekit import cli

from mle_world.launch.endpoints import PROBE_TOOL_NAME

pytestmark = [pytest.mark.llama, pytest.mark.slow]


class UsageProxy(http.server.ThreadingHTTPServer):
    """Forwards to the real server and keeps every `usage` it returned."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.usages: list[tuple[dict, dict]] = []  # type: ignore[type-arg]
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: UsageProxy

    def log_message(self, *args: object) -> None:
        pass

    def _forward(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
        path = self.path[3:] if self.path.startswith("/v1") else self.path
        request = urllib.request.Request(
            self.server.upstream + path,
            data=body,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as upstream:
                status, payload = upstream.status, upstream.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        if method == "POST" and status == 200:
            data = json.loads(payload)
            if "usage" in data:
                with self.server.lock:
                    self.server.usages.append((json.loads(body or b"{}"), data["usage"]))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802
        self._forward("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._forward("POST")


def test_one_real_tokens_trial(tmp_path: Path, llama_url: str, data_dir: Path, fast_config: Path) -> None:
    proxy = UsageProxy(llama_url)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    out = tmp_path / "real"
    try:
        proc = cli(
            "--config",
            str(fast_config),
            "-c",
            "iris-species",
            "-m",
            "wm-point",
            "-i",
            "1",
            "--grade",
            "--runtime",
            "process",
            "--data-dir",
            str(data_dir),
            "--gpu-device",
            "none",
            "--no-progress",
            "--coder-url",
            proxy.url,
            "--feedback-url",
            proxy.url,
            "--world-url",
            proxy.url,
            "--output-dir",
            str(out),
            timeout=900,
        )
    finally:
        proxy.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    trial = out / "runs" / "wm-point" / "iris-species_seed34"
    result = json.loads((trial / "result.json").read_text())
    # One step (a draft: coder and feedback calls, generated on the CPU): the token accounting is what
    # is checked, and a second step doubled the suite's longest test (133 s of 2 cores under xdist).
    assert result["status"] == "completed" and result["steps"] == 1
    report = json.loads((out / "runs" / "wm-point" / "iris-species_seed34_grading_report.json").read_text())
    assert report["competition_id"] == "iris-species"
    assert isinstance(report["valid_submission"], bool)

    # Probes (1-token completion, forced probe tool call) are the launcher's, not the trial's.
    def is_probe(request: dict) -> bool:  # type: ignore[type-arg]
        choice = request.get("tool_choice")
        forced = isinstance(choice, dict) and choice.get("function", {}).get("name") == PROBE_TOOL_NAME
        return request.get("max_tokens") == 1 or forced

    trial_usage = [u for req, u in proxy.usages if not is_probe(req)]
    assert trial_usage, "the agent made no completed calls"
    rows = list(csv.DictReader((out / "costs" / "wm-point.iris-species.seed34.csv").open()))
    llm_rows = [r for r in rows if r["role"] in ("coder", "feedback", "world")]
    assert sum(int(r["prompt_tokens"] or 0) for r in llm_rows) == sum(u["prompt_tokens"] for u in trial_usage)
    assert sum(int(r["completion_tokens"] or 0) for r in llm_rows) == sum(
        u["completion_tokens"] for u in trial_usage
    )
    assert sum(int(r["calls"]) for r in llm_rows) >= len(trial_usage)
