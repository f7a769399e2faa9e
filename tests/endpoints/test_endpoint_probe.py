"""check-endpoints probes against a loopback OpenAI-compatible server (real HTTP, real client).

Reads the probe results and the rendered rich table; writes nothing outside pytest's tmp dirs.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import subprocess
import sys
import threading

import pytest
import yaml
from fakeserver import Reply
from rich.console import Console

from mle_world.cli.display import RichDisplay
from mle_world.errors import UserError
from mle_world.launch.endpoints import (
    check_endpoints,
    endpoint_records,
    probe_all,
    probe_endpoint,
    probe_rows,
)
from mle_world.records import EndpointSettings


def _console() -> tuple[RichDisplay, io.StringIO]:
    buffer = io.StringIO()
    return RichDisplay(Console(file=buffer, width=200, color_system=None)), buffer


def test_healthy_endpoints_table(start_server) -> None:
    servers = {role: start_server(models=(f"{role}-model",)) for role in ("coder", "world", "feedback")}
    endpoints = {role: EndpointSettings(url=srv.url) for role, srv in servers.items()}
    console, out = _console()

    probes = check_endpoints(endpoints, console)

    assert [p.role for p in probes] == ["coder", "feedback", "world"]
    for p in probes:
        assert p.ok and p.reachable and p.error is None
        assert p.served_models == (f"{p.role}-model",)
        assert p.model == f"{p.role}-model"
        assert p.max_model_len == 32768
        assert p.tool_calls is True
        assert p.latency_s is not None and p.latency_s >= 0
    text = out.getvalue()
    for header in ("url", "served model", "max context", "latency", "tool calls"):
        assert header in text
    assert "coder-model" in text and "32768" in text and "yes" in text
    # the probe used a 1-token completion and a forced named tool choice
    posts = servers["coder"].chat_requests
    assert posts[0]["max_tokens"] == 1
    assert posts[1]["tool_choice"] == {"type": "function", "function": {"name": "report_ok"}}


def test_one_role_down_is_one_line_user_error(start_server, dead_url) -> None:
    coder, feedback = start_server(), start_server()
    endpoints = {
        "coder": EndpointSettings(url=coder.url),
        "world": EndpointSettings(url=dead_url),
        "feedback": EndpointSettings(url=feedback.url),
    }
    console, out = _console()

    with pytest.raises(UserError) as info:
        check_endpoints(endpoints, console)

    message = str(info.value)
    assert message == f"check-endpoints: world endpoint {dead_url} unreachable: connection refused"
    assert "\n" not in message
    assert info.value.exit_code == 2
    # the table still shows every role, including the healthy ones
    assert "unreachable: connection refused" in out.getvalue()
    assert out.getvalue().count("test-model") == 2


def test_server_without_tool_calling_is_reported_not_fatal(start_server) -> None:
    srv = start_server(tools=False, max_model_len=None, models=("gemma3-270m",))
    console, out = _console()

    probes = check_endpoints({"feedback": EndpointSettings(url=srv.url)}, console)

    (probe,) = probes
    assert probe.ok
    assert probe.tool_calls is False
    assert probe.tool_error == "HTTP 400: tools not supported by this server"
    assert probe.max_model_len is None  # llama.cpp-like: no max_model_len on /v1/models
    text = out.getvalue()
    assert "no tool calling" in text and "JSON fallback" in text
    assert "n/a" in text


def test_a_server_that_omits_usage_is_usable_and_a_note_says_so(start_server) -> None:
    """Some OpenAI-compatible servers and proxies omit `usage`: the trial runs (its tokens unknown), and the
    launch's probe says so once, naming the endpoint, before any trial spends a GPU-hour."""
    srv = start_server(default=Reply(content="OK", usage=None))
    usual = start_server()
    console, out = _console()
    probes = check_endpoints(
        {"coder": EndpointSettings(url=srv.url), "world": EndpointSettings(url=usual.url)}, console
    )
    assert [(p.role, p.ok, p.reports_usage) for p in probes] == [
        ("coder", True, False),
        ("world", True, True),
    ]
    text = out.getvalue()
    assert text.count("answers without token usage") == 1
    assert f"note: coder endpoint {srv.url} answers without token usage" in text


def test_a_base_url_without_v1_is_named_in_the_404(tmp_path) -> None:
    """`--coder-url http://host:8000` (no /v1) was 'unreachable: HTTP 404: Error code: 404' and nothing more."""
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path)
    )  # 404 for /models
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bare = f"http://127.0.0.1:{server.server_address[1]}"
        probe = probe_endpoint("coder", EndpointSettings(url=bare))
    finally:
        server.shutdown()
    assert not probe.reachable and probe.error is not None
    assert probe.error.endswith(f"(OpenAI-compatible servers answer under /v1: {bare}/v1?)"), probe.error


def test_configured_model_not_served(start_server) -> None:
    srv = start_server(models=("other",))
    probe = probe_endpoint("coder", EndpointSettings(url=srv.url, model="wanted"))
    assert probe.reachable and not probe.ok
    assert probe.error == "does not serve the configured model 'wanted' (serves other)"


@pytest.mark.parametrize(("served", "configured"), [(8192, None), (32768, 8192)])
def test_max_tokens_that_leave_no_room_for_a_prompt_fail_the_check(start_server, served, configured) -> None:
    """vLLM started with --max-model-len 8192 (to fit memory) under the coder's max_tokens 8192: every
    coder request would overflow, every step end as a context overflow, and each trial 'complete' with
    nothing. The check refuses it before the sweep (config's context_length counts as the server's)."""
    srv = start_server(models=("coder-model",), max_model_len=served)
    settings = EndpointSettings(url=srv.url, max_tokens=8192, context_length=configured)
    with pytest.raises(UserError) as error:
        check_endpoints({"coder": settings}, _console()[0])
    assert str(error.value) == (
        f"check-endpoints: coder endpoint {srv.url} max_tokens 8192 leaves 0 of the 8192-token context for"
        " prompts (at least 1024 needed): lower endpoints.coder.max_tokens or serve a longer max_model_len"
    )
    assert not srv.chat_requests  # refused before any completion
    ok = probe_endpoint("coder", EndpointSettings(url=srv.url, max_tokens=4096, context_length=configured))
    assert ok.ok, ok.error


def test_configured_model_is_used(start_server) -> None:
    srv = start_server(models=("a", "b"))
    probe = probe_endpoint("coder", EndpointSettings(url=srv.url, model="b"))
    assert probe.ok and probe.model == "b" and probe.served_models == ("a", "b")


def test_key_from_key_env_is_sent_never_shown(start_server, monkeypatch) -> None:
    secret = "sk-very-secret-value"
    srv = start_server(required_key=secret)
    monkeypatch.setenv("MLEW_TEST_KEY", secret)
    settings = EndpointSettings(url=srv.url, key_env="MLEW_TEST_KEY")
    console, out = _console()

    probes = check_endpoints({"coder": settings}, console)

    assert probes[0].ok
    assert secret not in out.getvalue()
    assert secret not in repr(probes)
    records = endpoint_records({"coder": settings}, probes)
    assert records[0].served_models == ("test-model",) and records[0].probed
    assert records[0].key_env == "MLEW_TEST_KEY"
    assert secret not in records[0].model_dump_json()


def test_wrong_key_is_an_http_error(start_server, monkeypatch) -> None:
    srv = start_server(required_key="right")
    monkeypatch.delenv("MLEW_UNSET_KEY", raising=False)
    probe = probe_endpoint("world", EndpointSettings(url=srv.url, key_env="MLEW_UNSET_KEY"))
    assert not probe.ok
    assert probe.error == "unreachable: HTTP 401: invalid api key"


def test_a_refusal_that_quotes_the_key_is_shown_without_it(start_server, monkeypatch) -> None:
    """The check's one line goes to the terminal and to Slurm or nohup logs: a gateway quoting the key it
    refused must not put the key there."""
    srv = start_server(required_key="the-right-key", quote_refused_key=True)
    monkeypatch.setenv("MLEW_TEST_KEY", "sk-stale-key-4e9a1")
    with pytest.raises(UserError) as error:
        check_endpoints({"coder": EndpointSettings(url=srv.url, key_env="MLEW_TEST_KEY")}, _console()[0])
    assert "invalid api key (got Bearer [REDACTED:MLEW_TEST_KEY])" in str(error.value)
    assert "sk-stale-key-4e9a1" not in str(error.value)


def test_all_down_lists_every_role(dead_url) -> None:
    endpoints = {role: EndpointSettings(url=dead_url) for role in ("coder", "world", "feedback")}
    console, _ = _console()
    with pytest.raises(UserError) as info:
        check_endpoints(endpoints, console, prefix="launch")
    message = str(info.value)
    assert message.startswith("launch: coder endpoint")
    assert message.count("unreachable: connection refused") == 3


def test_render_and_records_without_probe(start_server) -> None:
    srv = start_server()
    endpoints = {"coder": EndpointSettings(url=srv.url)}
    probes = probe_all(endpoints, check_tools=False)
    assert probes[0].tool_calls is None
    assert probe_rows(probes)[0][-2:] == ("-", "ok")  # tool calls not checked, status ok
    (record,) = endpoint_records(endpoints)
    assert record.probed is False and record.served_models == ()


def test_run_paper_check_endpoints_exit_codes(start_server, dead_url, repo) -> None:
    """The CLI subcommand end to end: table and exit 0 when healthy, one line and exit 2 when a role is down."""
    coder, world, feedback = start_server(), start_server(), start_server(tools=False)
    base = [sys.executable, str(repo / "run_paper.py"), "check-endpoints"]
    urls = ["--coder-url", coder.url, "--feedback-url", feedback.url]
    env = {**os.environ, "COLUMNS": "200"}

    healthy = subprocess.run(
        [*base, *urls, "--world-url", world.url], capture_output=True, text=True, timeout=120, env=env
    )
    assert healthy.returncode == 0, healthy.stderr
    assert "test-model" in healthy.stdout and "tool calls" in healthy.stdout

    down = subprocess.run(
        [*base, *urls, "--world-url", dead_url], capture_output=True, text=True, timeout=120, env=env
    )
    assert down.returncode == 2
    assert down.stderr.strip().splitlines()[-1] == (
        f"run_paper.py: error: check-endpoints: world endpoint {dead_url} unreachable: connection refused"
    )
    assert "Traceback" not in down.stderr


def test_every_replica_is_probed_and_one_dead_replica_is_a_note(start_server, dead_url) -> None:
    live = start_server(models=("coder-model",))
    endpoints = {"coder": EndpointSettings(url=(live.url, dead_url))}
    console, out = _console()

    probes = check_endpoints(endpoints, console)

    assert [(p.url, p.ok) for p in probes] == [(live.url, True), (dead_url, False)]
    text = out.getvalue()
    assert live.url in text and dead_url in text and "unreachable: connection refused" in text
    assert f"note: coder replica {dead_url} is down" in text
    records = endpoint_records(endpoints, probes)
    assert [(r.url, r.served_models) for r in records] == [(live.url, ("coder-model",)), (dead_url, ())]


def test_a_role_fails_only_when_every_replica_fails(dead_url) -> None:
    other = dead_url.replace("/v1", "/other/v1")
    with pytest.raises(UserError, match=r"coder endpoint .* unreachable.*; coder endpoint .* unreachable"):
        check_endpoints({"coder": EndpointSettings(url=f"{dead_url},{other}")}, _console()[0])


def test_endpoints_file_feeds_the_sweep_and_launch_json(tmp_path, start_server, repo) -> None:
    """--endpoints-file: every replica's URL in launch.json with the file's path; --ROLE-url still wins."""
    a, b = start_server(), start_server()
    listing = tmp_path / "endpoints.yaml"
    listing.write_text(f"coder: [{a.url}, {b.url}]\nworld: [{a.url}]\n")
    out = tmp_path / "out"
    base = [sys.executable, str(repo / "run_paper.py"), "--config", str(repo / "configs" / "demo.yaml")]
    dry = [*base, "--regime", "ungated", "--dry-run", "--summary", "--runtime", "process"]
    proc = subprocess.run(
        [*dry, "--data-dir", str(tmp_path), "--output-dir", str(out), "--endpoints-file", str(listing),
         "--world-url", b.url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "launch.json").read_text())
    assert record["endpoints_file"] == str(listing)
    urls = [(e["role"], e["url"]) for e in record["endpoints"]]
    assert ("coder", a.url) in urls and ("coder", b.url) in urls and ("world", b.url) in urls
    assert ("world", a.url) not in urls
    resolved = yaml.safe_load((out / "agent-config.yaml").read_text())
    assert {tuple(c["endpoints"]["coder"]["url"]) for c in resolved["configurations"].values()} == {
        (a.url, b.url)
    }

    listing.write_text("coder: http://not-a-list/v1\n")
    bad = subprocess.run(
        [*dry, "--data-dir", str(tmp_path), "--output-dir", str(tmp_path / "o2"), "--endpoints-file", str(listing)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().endswith(
        f"{listing}: coder: expected a list in brackets, e.g. [http://not-a-list/v1], got 'http://not-a-list/v1'"
    )
    # check-endpoints reads the file too and shows both coder replicas.
    listing.write_text(f"coder: [{a.url}, {b.url}]\n")
    check = subprocess.run(
        [base[0], base[1], "check-endpoints", *base[2:], "--endpoints-file", str(listing), "--feedback-url", a.url, "--world-url", a.url],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert a.url in check.stdout and b.url in check.stdout
