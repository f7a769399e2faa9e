"""Probes of the three OpenAI-compatible endpoints (coder, world, feedback) for check-endpoints and launch.

Reads each replica's `/v1/models`, one 1-token chat completion and one forced tool call through the
`openai` client; shows the table on the given display. API keys are never shown.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import openai
from openai import OpenAI
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionNamedToolChoiceParam

from mle_world.agent import RESERVE_TOKENS, Redactor, build_response_models, http_client
from mle_world.errors import UserError
from mle_world.launch.display import Display
from mle_world.records import ROLES, EndpointRecord, EndpointSettings, Role

DEFAULT_API_KEY = "EMPTY"
"""Key sent when `key_env` is unset or names an unset variable (vLLM without --api-key accepts any)."""
PROBE_TIMEOUT_S = 30.0
MIN_PROMPT_TOKENS = 1024
"""Prompt tokens a role's context must leave besides `max_tokens`: AIDE's fixed draft sections alone are
about 3,700 characters (1,200 tokens at the agent's 3 characters a token) before the task description.
With less, every request overflows: the trial's steps all end as context overflows, and it 'completes'."""
PROBE_TOOL_NAME = "report_ok"
_PROBE_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Report that the endpoint works.",
        "parameters": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        },
    },
}
_PROBE_CHOICE: ChatCompletionNamedToolChoiceParam = {
    "type": "function",
    "function": {"name": PROBE_TOOL_NAME},
}

ClientFactory = Callable[[EndpointSettings, float], OpenAI]
"""Builds the client for one endpoint from its settings and the probe timeout (the test seam)."""


@dataclass(frozen=True)
class EndpointProbe:
    """What probing one role's endpoint found."""

    role: Role
    url: str
    reachable: bool
    """`/v1/models` answered."""
    served_models: tuple[str, ...] = ()
    model: str | None = None
    """Model used for the completion: the configured one, else the first served id."""
    max_model_len: int | None = None
    """Context length from vLLM's `max_model_len` on /v1/models; None when not reported (llama.cpp)."""
    latency_s: float | None = None
    """Wall time of a 1-token chat completion."""
    tool_calls: bool | None = None
    """A forced named tool_choice produced the tool call; None when not tested."""
    tool_error: str | None = None
    """Why tool calling is unsupported (the agent then uses its JSON fallback)."""
    error: str | None = None
    """Why the endpoint is unusable; None when it works."""
    reports_usage: bool | None = None
    """The completion carried token usage; None when no completion was made. Some OpenAI-compatible
    servers and proxies omit it: the trials' token counts and per-token costs are then unknown."""

    @property
    def ok(self) -> bool:
        """The endpoint answered /v1/models and a completion with a usable model."""
        return self.reachable and self.error is None


def api_key_for(settings: EndpointSettings) -> str:
    """The key to send: the value of the variable named by `key_env`, else "EMPTY"."""
    if settings.key_env:
        return os.environ.get(settings.key_env) or DEFAULT_API_KEY
    return DEFAULT_API_KEY


def default_client_factory(settings: EndpointSettings, timeout_s: float) -> OpenAI:
    """An `OpenAI` client for the endpoint's (first) replica, without retries (a probe should answer fast)."""
    return OpenAI(
        base_url=settings.urls[0],
        api_key=api_key_for(settings),
        timeout=timeout_s,
        max_retries=0,
        http_client=http_client(),
    )


def replica_settings(settings: EndpointSettings) -> list[EndpointSettings]:
    """One settings object per replica URL (each with a single URL)."""
    if len(settings.urls) == 1:
        return [settings]
    return [settings.model_copy(update={"url": url}) for url in settings.urls]


def describe_error(exc: BaseException) -> str:
    """A short, key-free reason for a failed request (e.g. "connection refused", "HTTP 404: ...")."""
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause: BaseException | None = exc
        texts = []
        while cause is not None:
            texts.append(str(cause))
            cause = cause.__cause__ or cause.__context__
        joined = " ".join(texts).lower()
        if "refused" in joined:
            return "connection refused"
        if "name or service not known" in joined or "nodename nor servname" in joined:
            return "unknown host"
        if "timed out" in joined or "timeout" in joined:
            return "timed out"
        detail = next((t for t in reversed(texts) if t and t != "Connection error."), "")
        return f"connection error: {detail}".rstrip(": ") if detail else "connection error"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {_status_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return _one_line(inner["message"])
        if isinstance(inner, str):
            return _one_line(inner)
        if isinstance(body.get("message"), str):
            return _one_line(body["message"])
    return _one_line(exc.message)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _max_model_len(model: Any) -> int | None:
    extra = getattr(model, "model_extra", None) or {}
    value = extra.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def probe_endpoint(
    role: Role,
    settings: EndpointSettings,
    *,
    client_factory: ClientFactory = default_client_factory,
    timeout_s: float = PROBE_TIMEOUT_S,
    check_tools: bool = True,
) -> EndpointProbe:
    """Probe one endpoint (the first replica of `settings`): /v1/models, a 1-token completion, and a
    forced named tool call.

    Never raises for endpoint failures; they are reported in `EndpointProbe.error`
    (fatal) or `EndpointProbe.tool_error` (tool calling unsupported, not fatal).
    """
    client = client_factory(settings, timeout_s)
    url = settings.urls[0]
    redactor = Redactor({settings.key_env or "key": api_key_for(settings)})

    def describe(exc: BaseException) -> str:
        """The error without the key (a gateway may quote the credential it refused)."""
        return redactor.text(describe_error(exc))

    try:
        page = client.models.list()
        models = list(page.data)
    except openai.OpenAIError as exc:
        hint = ""
        if isinstance(exc, openai.NotFoundError) and not url.rstrip("/").endswith("/v1"):
            # The client asks <url>/models: a base URL without the API's /v1 finds nothing there.
            hint = f" (OpenAI-compatible servers answer under /v1: {url.rstrip('/')}/v1?)"
        return EndpointProbe(role=role, url=url, reachable=False, error=f"unreachable: {describe(exc)}{hint}")
    served = tuple(m.id for m in models)
    if not served:
        return EndpointProbe(
            role=role, url=url, reachable=True, error="serves no model (/v1/models is empty)"
        )
    if settings.model is not None and settings.model not in served:
        return EndpointProbe(
            role=role,
            url=url,
            reachable=True,
            served_models=served,
            error=f"does not serve the configured model {settings.model!r} (serves {', '.join(served)})",
        )
    model_id = settings.model or served[0]
    max_len = next((_max_model_len(m) for m in models if m.id == model_id), None)
    base = EndpointProbe(
        role=role, url=url, reachable=True, served_models=served, model=model_id, max_model_len=max_len
    )
    context = settings.context_length or max_len
    if context is not None and context - settings.max_tokens - RESERVE_TOKENS < MIN_PROMPT_TOKENS:
        room = max(0, context - settings.max_tokens - RESERVE_TOKENS)
        return replace(
            base,
            error=(
                f"max_tokens {settings.max_tokens} leaves {room} of the {context}-token context for prompts"
                f" (at least {MIN_PROMPT_TOKENS} needed): lower endpoints.{role}.max_tokens or serve a"
                " longer max_model_len"
            ),
        )

    started = time.perf_counter()
    try:
        completion = client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": "Reply with OK."}],
            max_tokens=1,
            temperature=0.0,
        )
    except openai.OpenAIError as exc:
        return replace(base, error=f"completion failed: {describe(exc)}")
    latency = time.perf_counter() - started
    usage = getattr(completion, "usage", None)
    reports_usage = isinstance(getattr(usage, "prompt_tokens", None), int)
    probe = replace(base, latency_s=latency, reports_usage=reports_usage)
    if not check_tools:
        return probe

    try:
        response = client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": f"Call {PROBE_TOOL_NAME} with ok=true."}],
            tools=[_PROBE_TOOL],
            tool_choice=_PROBE_CHOICE,
            max_tokens=64,
            temperature=0.0,
        )
    except openai.OpenAIError as exc:
        return replace(probe, tool_calls=False, tool_error=describe(exc))
    calls = response.choices[0].message.tool_calls if response.choices else None
    names = [getattr(getattr(c, "function", None), "name", None) for c in calls or ()]
    if PROBE_TOOL_NAME in names:
        return replace(probe, tool_calls=True)
    return replace(probe, tool_calls=False, tool_error="the reply had no tool call for a forced tool_choice")


def probe_all(
    endpoints: Mapping[Role, EndpointSettings],
    *,
    client_factory: ClientFactory = default_client_factory,
    timeout_s: float = PROBE_TIMEOUT_S,
    check_tools: bool = True,
) -> list[EndpointProbe]:
    """Probe every replica of every configured role concurrently; results in ROLES order (coder,
    feedback, world), replicas in their configured order."""
    targets = [(r, one) for r in ROLES if r in endpoints for one in replica_settings(endpoints[r])]
    build_response_models()  # the probes parse replies in threads: build the SDK's classes first
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets)))) as pool:
        futures = [
            pool.submit(
                probe_endpoint,
                role,
                settings,
                client_factory=client_factory,
                timeout_s=timeout_s,
                check_tools=check_tools,
            )
            for role, settings in targets
        ]
        return [f.result() for f in futures]


PROBE_COLUMNS = ("role", "url", "served model", "max context", "latency", "tool calls", "status")


def probe_rows(probes: list[EndpointProbe]) -> list[tuple[str, ...]]:
    """One row of PROBE_COLUMNS per replica."""
    rows: list[tuple[str, ...]] = []
    for p in probes:
        if p.tool_calls is None:
            tools = "-"
        else:
            tools = "yes" if p.tool_calls else "no"
        rows.append(
            (
                p.role,
                p.url,
                p.model or (", ".join(p.served_models) if p.served_models else "-"),
                str(p.max_model_len) if p.max_model_len is not None else ("n/a" if p.reachable else "-"),
                f"{p.latency_s * 1000:.0f} ms" if p.latency_s is not None else "-",
                tools,
                "ok" if p.ok else (p.error or "failed"),
            )
        )
    return rows


def failure_line(probes: list[EndpointProbe], prefix: str = "check-endpoints") -> str | None:
    """One line naming every role none of whose replicas works, or None when every role is usable.

    A role with at least one working replica is usable: the agent's client fails over and probes
    the others back; the table and a note show the dead ones.
    """
    usable = {p.role for p in probes if p.ok}
    failed = [f"{p.role} endpoint {p.url} {p.error}" for p in probes if not p.ok and p.role not in usable]
    return f"{prefix}: " + "; ".join(failed) if failed else None


def check_endpoints(
    endpoints: Mapping[Role, EndpointSettings],
    display: Display,
    *,
    client_factory: ClientFactory = default_client_factory,
    timeout_s: float = PROBE_TIMEOUT_S,
    prefix: str = "check-endpoints",
) -> list[EndpointProbe]:
    """Probe all roles, show the table on `display`, and raise `UserError` if any role is unusable.

    The error is one line, e.g. `check-endpoints: world endpoint http://h:8001/v1 unreachable:
    connection refused`. Tool-call support missing is reported in the table, not an error.
    """
    probes = probe_all(endpoints, client_factory=client_factory, timeout_s=timeout_s)
    display.table("Endpoints", PROBE_COLUMNS, probe_rows(probes), right=("max context", "latency"))
    usable = {p.role for p in probes if p.ok}
    for p in probes:
        if not p.ok and p.role in usable:
            note = f"note: {p.role} replica {p.url} is down ({p.error}); its share goes to the live replicas"
            display.say(note)
        if p.ok and p.tool_calls is False:
            note = f"note: {p.role} endpoint has no tool calling ({p.tool_error})"
            display.say(note + "; the agent uses its JSON fallback")
        if p.ok and p.reports_usage is False:
            display.say(
                f"note: {p.role} endpoint {p.url} answers without token usage: the trials record its calls' "
                "tokens and per-token costs as unknown (costs/*.csv: calls_unknown_usage)"
            )
    line = failure_line(probes, prefix)
    if line is not None:
        raise UserError(line)
    return probes


def endpoint_records(
    endpoints: Mapping[Role, EndpointSettings], probes: list[EndpointProbe] | None = None
) -> tuple[EndpointRecord, ...]:
    """launch.json entries, one per replica: URL, key variable name and served model ids (never a key)."""
    by_url = {(p.role, p.url): p for p in probes or []}
    records = []
    for role in ROLES:
        if role not in endpoints:
            continue
        settings = endpoints[role]
        for url in settings.urls:
            probe = by_url.get((role, url))
            records.append(
                EndpointRecord(
                    role=role,
                    url=url,
                    key_env=settings.key_env,
                    served_models=probe.served_models if probe else (),
                    probed=probe is not None,
                )
            )
    return tuple(records)
