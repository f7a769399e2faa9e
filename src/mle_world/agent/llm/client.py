"""Chat clients for the three endpoint roles (coder, feedback, world) over the `openai` client.

Reads the endpoint settings and the key variable they name; writes one `LLMCallEvent` per attempt
(and, through the outage listener, one `DowntimeEvent` when a role goes down or comes back).

Longer than 400 lines because one call's retry policy spans replicas, the outage window, the request cap
and the events it writes; they share the call's state.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, NoReturn, Protocol, TypeVar

import openai
import pydantic
from openai.types.chat import ChatCompletion
from tenacity import RetryCallState, Retrying, retry_if_exception_type

from mle_world.agent.events import EventSink
from mle_world.agent.llm.redaction import Redactor
from mle_world.agent.llm.replicas import Backoff, Lease, ReplicaPool
from mle_world.agent.llm.response_models import build_response_models
from mle_world.agent.llm.structured import ReplySchema, refuses_structured_output, response_format
from mle_world.agent.llm.transport import http_client
from mle_world.records import EndpointSettings, LLMCallEvent, Role

__all__ = [
    "Backoff",
    "ChatModel",
    "ChatReply",
    "EndpointClient",
    "EndpointFailure",
    "Message",
    "OutageListener",
    "ReplySchema",
    "ToolsUnsupported",
]

log = logging.getLogger(__name__)
Message = dict[str, str]
T = TypeVar("T")
PROBE_TIMEOUT_S = 5.0
"""Limit of the GET /models probe that brings a failed replica back (a hung server fails it fast)."""
MIN_ATTEMPT_TIMEOUT_S = 1.0
MAX_RESAMPLES = 3
"""Replies with unusable tool-call arguments asked for again (next seed) before the last one is returned
as it stands: the model's output, not an outage, so it neither waits nor pauses the budget, and the caller
(the reviewer's JSON fallback) handles what is still unusable."""
TokenCounts = tuple[int | None, int | None]


@dataclass(frozen=True)
class ChatReply:
    """The parts of a completion the agent uses, with usage exactly as the server reported it."""

    content: str
    tool_arguments: str | None
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    finish_reason: str | None = None
    """As the server said: `length` means the reply was cut at max_tokens."""


class EndpointFailure(Exception):
    """An endpoint could not serve a request within the outage window (infra failure of the trial)."""

    def __init__(self, role: Role, cause: str) -> None:
        super().__init__(f"{role}: {cause}")
        self.role = role
        self.cause = cause


class ToolsUnsupported(Exception):
    """The server rejected a request because it carried tools (no tool-calling support)."""


class _StructuredRefused(Exception):
    """The server refused a request's `response_format` (raised out of the retry policy: no outage)."""

    def __init__(self, error: openai.APIStatusError) -> None:
        super().__init__(str(error))
        self.error = error


class ContextOverflow(Exception):
    """The server rejected a request as longer than its context window (HTTP 400).

    A node-level event: the caller shrinks the prompt and retries, or gives up on that node;
    it never ends the trial.
    """


class ChatModel(Protocol):
    """One endpoint role; the plug-in point the loop, reviewer and world model talk to."""

    role: Role

    def chat(
        self,
        messages: Sequence[Message],
        *,
        purpose: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        seed: int | None = None,
        reply_schema: ReplySchema | None = None,
    ) -> ChatReply: ...

    def context_length(self) -> int | None:
        """Tokens the endpoint accepts (prompt + completion), or None when unknown."""
        ...

    @property
    def max_tokens(self) -> int:
        """Completion tokens requested per call (reserved out of the context length)."""
        ...


class OutageListener(Protocol):
    """Told when every replica of a role is down and when the role answers again (the budget pauses)."""

    def down(self, role: Role, cause: str) -> None: ...

    def up(self, role: Role, phase: Literal["up", "ended"] = "up", cause: str | None = None) -> None: ...


class _NoListener:
    def down(self, role: Role, cause: str) -> None:
        pass

    def up(self, role: Role, phase: Literal["up", "ended"] = "up", cause: str | None = None) -> None:
        pass


class _Fault(Exception):
    """One failed attempt that is the endpoint's fault: outage, overload, hang or protocol garbage."""

    def __init__(
        self,
        cause: str,
        retry_after_s: float | None = None,
        *,
        resample: bool = False,
        usage: TokenCounts = (None, None),
    ) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after_s = retry_after_s
        self.resample = resample
        """The server answered but the model's output is unusable: retry with the next seed."""
        self.usage = usage
        """What the server billed for this answer (it generated it even if it is unusable)."""


def _retryable_status(error: openai.APIStatusError) -> bool:
    return error.status_code in (408, 409, 429) or error.status_code >= 500


def _retry_after(error: openai.APIStatusError) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `retry-after` in seconds or as a date)."""
    headers = error.response.headers
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (ValueError, TypeError):
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with each lone surrogate (a JSON `\\ud800` escape in a reply or an error body decodes to
    one) as U+FFFD: UTF-8 cannot encode them, and the journal, events.jsonl and status.json are UTF-8
    JSON, so one in a plan, a review or a server's error failed the trial's next checkpoint."""
    return text if _SURROGATE.search(text) is None else _SURROGATE.sub("\ufffd", text)


def storable_arguments(arguments: str) -> str:
    """Tool-call arguments whose decoded strings hold no lone surrogate (re-encoded only when one is
    escaped in them; arguments that are not JSON keep their text, surrogates replaced)."""
    if "\\u" not in arguments:
        return storable(arguments)
    try:
        encoded = json.dumps(json.loads(arguments), ensure_ascii=False)
    except (ValueError, RecursionError):  # no JSON, or nested past the parser's recursion limit
        return storable(arguments)
    return encoded if _SURROGATE.search(encoded) is None else storable(encoded)


def _describe(error: BaseException) -> str:
    if isinstance(error, openai.APITimeoutError):
        return "APITimeoutError: request timed out"
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error.__context__
        return f"APIConnectionError: {cause or error}"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


def _is_tools_rejection(error: openai.BadRequestError) -> bool:
    text = str(error).lower()
    return "tool" in text or "function" in text


_CONTEXT_MARKERS = (
    "maximum context length",  # vLLM, OpenAI
    "maximum model length",  # vLLM's engine: "The decoder prompt (length N) is longer than the maximum model length of M"
    "context_length_exceeded",  # OpenAI error code
    "context length",
    "exceed_context_size",  # llama.cpp error type
    "exceeds the available context size",  # llama.cpp
    "exceed context window",  # llama-cpp-python's own ValueError text
    "prompt is too long",
)


def is_context_overflow(error: openai.BadRequestError) -> bool:
    """A 400 saying the prompt plus max_tokens does not fit the model's context window."""
    text = str(error).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _max_model_len(model: Any) -> int | None:
    """vLLM lists `max_model_len` on each model of /v1/models (an extra field of the openai type)."""
    value = getattr(model, "max_model_len", None)
    if value is None and getattr(model, "model_extra", None):
        value = model.model_extra.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage_of(completion: Any) -> TokenCounts:
    usage = getattr(completion, "usage", None)
    return _count(getattr(usage, "prompt_tokens", None)), _count(getattr(usage, "completion_tokens", None))


def _parse_completion(raw: Any, wants_tool: bool, *, resample: bool = True) -> tuple[ChatCompletion, Any]:
    """The completion and its first message, or `_Fault` for a body that is not a usable completion.

    `resample` False: tool-call arguments that are not JSON are returned as they stand (the last resample).
    """
    content_type = str(raw.headers.get("content-type", ""))
    if "json" not in content_type.lower():
        raise _Fault(
            f"protocol garbage: content type {content_type or 'missing'!r} with status {raw.status_code}"
        )
    try:
        completion = raw.parse()
    except (ValueError, TypeError, pydantic.ValidationError, openai.APIResponseValidationError) as error:
        raise _Fault(f"protocol garbage: unparseable body ({type(error).__name__}: {error})") from error
    if not isinstance(completion, ChatCompletion):
        raise _Fault(f"protocol garbage: body is not a chat completion ({type(completion).__name__})")
    usage = _usage_of(completion)
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _Fault("protocol garbage: no choices in the completion", usage=usage)
    message = getattr(choices[0], "message", None)
    if message is None:
        raise _Fault("protocol garbage: the choice has no message", usage=usage)
    if not isinstance(getattr(message, "content", None), str | None):
        # The SDK builds the model without validating it: a list or number would reach the prompts' parsers.
        raise _Fault("protocol garbage: the message content is not text", usage=usage)
    if wants_tool and resample:
        for call in getattr(message, "tool_calls", None) or ():
            arguments = getattr(getattr(call, "function", None), "arguments", None)
            try:
                json.loads(arguments if isinstance(arguments, str) else "")
            except (ValueError, RecursionError):  # nested past the parser's limit: no usable arguments
                finish = getattr(choices[0], "finish_reason", None)
                cut = " (cut at max_tokens)" if finish == "length" else ""
                raise _Fault(
                    f"protocol garbage: tool call arguments are not JSON{cut}", resample=True, usage=usage
                ) from None
    return completion, message


@dataclass
class _Call:
    """State of one logical request across its attempts (local to the calling thread)."""

    purpose: str
    model: str | None
    deadline: float
    first_fault: float | None = None
    """When the current outage began (None while the endpoint has not failed this request)."""
    attempts: int = 0
    resamples: int = 0
    """Replies whose content was unusable so far: a seeded request is retried with seed + resamples
    (the same seed would sample the same broken output; the sequence stays reproducible)."""
    pending: dict[str, Any] = field(default_factory=dict)
    """The last failed attempt's event, emitted as `retry` before the next or as `error` on giving up."""

    def limit(self, window: float) -> float:
        """When retrying ends: the window after the first fault, and never after the deadline."""
        return min(self.deadline, (self.first_fault or self.deadline) + window)


class EndpointClient:
    """A `ChatModel` over one role's replicas of an OpenAI-compatible server.

    The openai client's own retries are disabled so that every attempt becomes an event. An attempt
    that fails by the endpoint's fault (connection error, timeout, 408/409/429/5xx, a body that is
    not a usable completion) takes its replica out of rotation and is retried on another replica at
    once, or, when every replica is down, after exponential backoff with jitter (never earlier than
    `Retry-After`). Retrying stops after `outage_window_s` of continuous failure, or when the trial's
    time left plus that window has passed; then `EndpointFailure`. The model id is discovered from
    /v1/models on first use when the settings leave it null.
    """

    def __init__(
        self,
        role: Role,
        settings: EndpointSettings,
        events: EventSink,
        *,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        outages: OutageListener | None = None,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        # Before any thread parses a reply: the SDK's lazily built response classes are not thread-safe.
        build_response_models()
        self.role = role
        self.settings = settings
        self.events = events
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self._clock = clock
        self._outages = outages or _NoListener()
        self._probe_timeout_s = probe_timeout_s
        env = os.environ if environ is None else environ
        key = env.get(settings.key_env, "") if settings.key_env else ""
        # A server's error text may echo the key (some gateways do): never into events, results or logs.
        self._redactor = Redactor({settings.key_env or "key": key})
        # vLLM accepts any key, and the openai client refuses an empty one.
        clients = [
            (
                url,
                openai.OpenAI(
                    base_url=url,
                    api_key=key or "EMPTY",
                    max_retries=0,
                    timeout=settings.timeout_s,
                    http_client=http_client(),
                ),
            )
            for url in settings.urls
        ]
        self.pool: ReplicaPool[openai.OpenAI] = ReplicaPool(
            clients,
            backoff=self.backoff,
            rng=rng or random.Random(0),
            clock=clock,
            on_down=lambda cause: self._outages.down(role, cause),
            on_up=lambda: self._outages.up(role),
        )
        self._slots = threading.BoundedSemaphore(settings.max_concurrent)
        self._model = settings.model
        self._context: int | None = settings.context_length
        self._probed = settings.context_length is not None
        self._model_lock = threading.Lock()
        self._no_usage_from: set[str] = set()
        """Replica URLs already warned about for answering without `usage` (one warning each)."""
        self._warn_lock = threading.Lock()
        self._structured = settings.structured_output
        """The endpoint's constrained decoding; `none` once the server refused it (rest of the trial)."""

    def close(self) -> None:
        for replica in self.pool.replicas:
            replica.client.close()

    def _warn_no_usage(self, url: str) -> None:
        """Some OpenAI-compatible servers and proxies omit `usage`: the completion is used, its tokens and
        cost are recorded as unknown (never 0), and the trial's log says so once per endpoint."""
        with self._warn_lock:
            if url in self._no_usage_from:
                return
            self._no_usage_from.add(url)
        log.warning(
            "%s endpoint %s answers without token usage: its calls' tokens and cost are recorded as "
            "unknown (costs/*.csv: calls_unknown_usage)",
            self.role,
            self._redactor.text(url),
        )

    def _describe(self, error: BaseException) -> str:
        """One line about a failed request, without the endpoint's key."""
        return storable(self._redactor.text(_describe(error)))

    # ---- the retry policy --------------------------------------------------------------
    def _call(self, call: _Call, send: Callable[[openai.OpenAI, float], T]) -> T:
        """Run `send(client, timeout)` on some replica until it succeeds or the outage window closes."""
        window = self.settings.outage_window_s

        def stop(state: RetryCallState) -> bool:
            return self._clock() >= call.limit(window)

        def wait(state: RetryCallState) -> float:
            outcome = state.outcome
            if outcome is not None and getattr(outcome.exception(), "resample", False):
                return 0.0  # the replica answered: ask it again at once, with the next seed
            # The last wait ends at the window's end, where one more (forced) attempt is made.
            return max(0.0, min(self.pool.wait_s(), call.limit(window) - self._clock()))

        def before_sleep(state: RetryCallState) -> None:
            self._flush(call, "retry")

        retrying = Retrying(
            stop=stop,
            wait=wait,
            retry=retry_if_exception_type(_Fault),
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        if not self._slots.acquire(timeout=max(0.0, call.deadline - self._clock())):
            raise EndpointFailure(self.role, f"no request slot free before the deadline ({call.purpose})")
        try:
            result: T = retrying(self._attempt, call, send)
            return result
        except _Fault as fault:
            self._flush(call, "error")
            elapsed = self._clock() - (call.first_fault or self._clock())
            cause = f"gave up after {elapsed:.1f} s and {call.attempts} attempts: {fault.cause}"
            if self.pool.forget_outage():
                self._outages.up(self.role, "ended", cause)
            raise EndpointFailure(self.role, cause) from fault
        finally:
            self._slots.release()

    def _attempt(self, call: _Call, send: Callable[[openai.OpenAI, float], T]) -> T:
        last_chance = self._clock() >= call.limit(self.settings.outage_window_s) - 1e-3
        lease = self.pool.acquire(force=last_chance)
        if lease is None:
            if call.first_fault is None:
                call.first_fault = self._clock()
            raise _Fault(self.pool.last_error() or "every replica is down")
        call.attempts += 1
        replica = lease.replica
        if lease.probe:
            try:
                replica.client.models.list(timeout=self._attempt_timeout(call, self._probe_timeout_s))
            except openai.OpenAIError as error:
                wait = _retry_after(error) if isinstance(error, openai.APIStatusError) else None
                self._fault(call, lease, f"{replica.url}: probe failed: {self._describe(error)}", wait, 0.0)
            self.pool.restored(lease)
        start = self._clock()
        try:
            result = send(replica.client, self._attempt_timeout(call, self.settings.timeout_s))
        except openai.APIStatusError as error:
            latency = self._clock() - start
            if _retryable_status(error):
                self._fault(call, lease, self._describe(error), _retry_after(error), latency)
            self.pool.released(lease)
            self._event(call, latency, "error", self._describe(error))
            raise
        except openai.APIConnectionError as error:  # also APITimeoutError: a hung server
            self._fault(call, lease, f"{replica.url}: {self._describe(error)}", None, self._clock() - start)
        except _Fault as fault:
            latency = self._clock() - start
            if fault.resample:
                # The model's output, not an outage: the replica stays in rotation, no downtime.
                call.resamples += 1
                self.pool.succeeded(lease)
                call.pending = {
                    "latency": latency,
                    "error": self._redactor.text(f"{replica.url}: {fault.cause}"),
                    "usage": fault.usage,
                }
                raise
            self._fault(call, lease, f"{replica.url}: {fault.cause}", None, latency, fault.usage)
        except BaseException:
            self.pool.released(lease)
            raise
        self.pool.succeeded(lease)
        return result

    def _attempt_timeout(self, call: _Call, limit: float) -> float:
        return max(MIN_ATTEMPT_TIMEOUT_S, min(limit, call.deadline - self._clock()))

    def _fault(
        self,
        call: _Call,
        lease: Lease[openai.OpenAI],
        cause: str,
        retry_after: float | None,
        latency: float,
        usage: TokenCounts = (None, None),
    ) -> None:
        """Book a failed attempt against its replica and raise it for the retry policy."""
        cause = self._redactor.text(cause)
        if call.first_fault is None:
            call.first_fault = self._clock()
        self.pool.failed(lease, cause, retry_after)
        call.pending = {"latency": latency, "error": cause, "usage": usage}
        raise _Fault(cause, retry_after)

    def _flush(self, call: _Call, outcome: Literal["retry", "error"]) -> None:
        if call.pending:
            pending = call.pending
            self._event(
                call, pending["latency"], outcome, pending["error"], pending.get("usage", (None, None))
            )
            call.pending = {}

    def _event(
        self,
        call: _Call,
        latency: float,
        outcome: Literal["ok", "retry", "error"],
        error: str | None = None,
        usage: TokenCounts = (None, None),
        finish_reason: str | None = None,
        served_model: str | None = None,
    ) -> None:
        if call.model is None:  # model discovery is not an LLM call
            return
        self.events.emit(
            LLMCallEvent(
                ts=datetime.now(UTC),
                role=self.role,
                model=call.model,
                purpose=call.purpose,
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                latency_s=latency,
                outcome=outcome,
                error=error,
                finish_reason=finish_reason,
                served_model=served_model if served_model != call.model else None,
            )
        )

    def _deadline(self, timeout_s: float | None) -> float:
        """Time left in the trial (or the per-request limit) plus the outage window, from now."""
        left = self.settings.timeout_s if timeout_s is None else max(0.0, timeout_s)
        return self._clock() + left + self.settings.outage_window_s

    def _raise_for_status(self, error: openai.APIStatusError, tools: bool) -> NoReturn:
        """The exception a final HTTP error of a chat request becomes."""
        if isinstance(error, openai.BadRequestError):
            if is_context_overflow(error):
                raise ContextOverflow(self._describe(error)) from error
            if tools and _is_tools_rejection(error):
                raise ToolsUnsupported(self._redactor.text(str(error))) from error
            raise EndpointFailure(self.role, f"request rejected: {self._describe(error)}") from error
        raise EndpointFailure(self.role, self._describe(error)) from error

    def _refused_structured_output(self, error: openai.APIStatusError) -> None:
        """The server refused the request's `response_format`: none for the rest of the trial (the
        replies are parsed and validated as ever), and the trial's log says so once."""
        with self._warn_lock:
            if self._structured == "none":
                return
            setting, self._structured = self._structured, "none"
        log.warning(
            "%s endpoint refused structured_output %s (%s); asking without it for the rest of the trial",
            self.role,
            setting,
            self._describe(error),
        )

    # ---- requests ----------------------------------------------------------------------
    @property
    def max_tokens(self) -> int:
        return self.settings.max_tokens

    def context_length(self) -> int | None:
        """The config's `context_length`, else the served model's `max_model_len` from /v1/models."""
        self.model()
        return self._context

    def model(self) -> str:
        """The configured model id, or the first id the server lists (and its max_model_len)."""
        with self._model_lock:
            if self._model is not None and not self._probed:
                # A configured id needs no listing; one best-effort look for the context length.
                self._probed = True
                try:
                    data = self.pool.replicas[0].client.models.list(timeout=self._probe_timeout_s).data
                    served = next((m for m in data if m.id == self._model), None)
                    self._context = _max_model_len(served) if served is not None else None
                except (openai.OpenAIError, ValueError, TypeError, AttributeError, pydantic.ValidationError):
                    pass
            if self._model is not None:
                return self._model

            def send(client: openai.OpenAI, timeout: float) -> tuple[str, int | None]:
                try:
                    data = client.models.list(timeout=timeout).data
                    ids = [m.id for m in data]
                except (ValueError, TypeError, AttributeError, pydantic.ValidationError) as error:
                    raise _Fault(f"protocol garbage: unusable /models body ({error})") from error
                if not ids:
                    raise EndpointFailure(self.role, f"{client.base_url}models lists no model")
                return storable(ids[0]), _max_model_len(data[0])

            try:
                self._model, served_context = self._call(_Call("models", None, self._deadline(None)), send)
                self._probed = True
                if self._context is None:
                    self._context = served_context
            except EndpointFailure as error:
                raise EndpointFailure(self.role, f"model discovery failed: {error.cause}") from error
            except openai.APIStatusError as error:
                raise EndpointFailure(self.role, f"model discovery: {self._describe(error)}") from error
            return self._model

    def chat(
        self,
        messages: Sequence[Message],
        *,
        purpose: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        seed: int | None = None,
        reply_schema: ReplySchema | None = None,
    ) -> ChatReply:
        """One completion; `timeout_s` is the trial's time left (the request never outlives it by
        more than the outage window). `reply_schema`: the JSON object the reply must be, which the
        request asks the server to enforce when the endpoint's `structured_output` says so."""
        model = self.model()
        body: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "temperature": self.settings.temperature if temperature is None else temperature,
            "max_tokens": self.settings.max_tokens,
        }
        if seed is not None:
            # vLLM honours a per-request seed, so a rerun of the trial sees the same samples.
            body["seed"] = seed
        if tools:
            body["tools"] = list(tools)
            if tool_choice:
                body["tool_choice"] = dict(tool_choice)
        constrained = response_format(self._structured, reply_schema) if reply_schema else None
        if constrained is not None:
            body["response_format"] = constrained
        call = _Call(purpose, model, self._deadline(timeout_s))
        latency = 0.0

        def send(client: openai.OpenAI, timeout: float) -> tuple[ChatCompletion, Any]:
            nonlocal latency
            start = self._clock()
            if seed is not None:
                body["seed"] = seed + call.resamples
            # The raw response: its content type is checked before the body is parsed.
            try:
                raw = client.chat.completions.with_raw_response.create(**body, timeout=timeout)
            except openai.APIStatusError as error:
                if constrained is not None and refuses_structured_output(error):
                    # Not an outage, even as a 500 (llama-cpp-python's answer to the json_schema type).
                    latency = self._clock() - start
                    raise _StructuredRefused(error) from error
                raise
            parsed = _parse_completion(raw, bool(tools), resample=call.resamples < MAX_RESAMPLES)
            latency = self._clock() - start
            if _usage_of(parsed[0]) == (None, None):
                self._warn_no_usage(str(client.base_url))
            return parsed

        try:
            completion, message = self._call(call, send)
        except _StructuredRefused as refusal:
            self._event(call, latency, "error", self._describe(refusal.error))
            self._refused_structured_output(refusal.error)
            return self.chat(
                messages,
                purpose=purpose,
                temperature=temperature,
                tools=tools,
                tool_choice=tool_choice,
                timeout_s=timeout_s,
                seed=seed,
            )
        except openai.APIStatusError as error:
            self._raise_for_status(error, bool(tools))
        counts = _usage_of(completion)
        tool_arguments: str | None = None
        calls = getattr(message, "tool_calls", None)
        if calls:
            arguments = getattr(getattr(calls[0], "function", None), "arguments", None)
            tool_arguments = storable_arguments(arguments) if isinstance(arguments, str) else arguments
        finish = getattr(completion.choices[0], "finish_reason", None)
        finish_reason = finish if isinstance(finish, str) else None
        answered_as = getattr(completion, "model", None)
        self._event(
            call,
            latency,
            "ok",
            usage=counts,
            finish_reason=finish_reason,
            served_model=storable(answered_as) if isinstance(answered_as, str) and answered_as else None,
        )
        return ChatReply(
            content=storable(getattr(message, "content", None) or ""),
            tool_arguments=tool_arguments,
            model=model,
            prompt_tokens=counts[0],
            completion_tokens=counts[1],
            latency_s=latency,
            finish_reason=finish_reason,
        )
