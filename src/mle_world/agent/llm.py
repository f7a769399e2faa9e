"""Chat clients for the three endpoint roles (coder, feedback, world) over the `openai` client.

Reads the endpoint settings and the key variable they name; writes one `LLMCallEvent` per attempt.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import openai

from mle_world.agent.events import EventSink
from mle_world.records import EndpointSettings, LLMCallEvent, Role

Message = dict[str, str]


@dataclass(frozen=True)
class ChatReply:
    """The parts of a completion the agent uses, with usage exactly as the server reported it."""

    content: str
    tool_arguments: str | None
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float


class EndpointFailure(Exception):
    """An endpoint could not serve a request after bounded retries (infra failure of the trial)."""

    def __init__(self, role: Role, cause: str) -> None:
        super().__init__(f"{role}: {cause}")
        self.role = role
        self.cause = cause


class ToolsUnsupported(Exception):
    """The server rejected a request because it carried tools (no tool-calling support)."""


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
    ) -> ChatReply: ...


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: sleep U(0, min(cap, base * 2**attempt))."""

    base_s: float = 1.0
    cap_s: float = 60.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2**attempt)))


_RETRYABLE = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


def _is_tools_rejection(error: openai.BadRequestError) -> bool:
    text = str(error).lower()
    return "tool" in text or "function" in text


def _usage(response: Any) -> tuple[int | None, int | None]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return None, None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return (prompt if isinstance(prompt, int) else None, completion if isinstance(completion, int) else None)


class EndpointClient:
    """A `ChatModel` over one OpenAI-compatible endpoint.

    The openai client's own retries are disabled so that every attempt, including failed ones,
    becomes an event; retries here are bounded by `max_retries` (connection errors, 429, 5xx).
    The model id is discovered from /v1/models on first use when the settings leave it null.
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
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.role = role
        self.settings = settings
        self.events = events
        self.backoff = backoff or Backoff()
        self._rng = rng or random.Random(0)
        self._rng_lock = threading.Lock()
        self._sleep = sleep
        env = os.environ if environ is None else environ
        key = env.get(settings.key_env, "") if settings.key_env else ""
        # vLLM accepts any key, and the openai client refuses an empty one.
        self._client = openai.OpenAI(
            base_url=settings.url,
            api_key=key or "EMPTY",
            max_retries=0,
            timeout=settings.timeout_s,
        )
        self._model = settings.model
        self._model_lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    def _delay(self, attempt: int) -> float:
        with self._rng_lock:
            return self.backoff.delay(attempt, self._rng)

    def model(self) -> str:
        """The configured model id, or the first id the server lists."""
        with self._model_lock:
            if self._model is not None:
                return self._model
            last = "no attempt"
            for attempt in range(self.settings.max_retries + 1):
                try:
                    page = self._client.models.list()
                    ids = [m.id for m in page.data]
                    if not ids:
                        raise EndpointFailure(self.role, f"{self.settings.url}/models lists no model")
                    self._model = ids[0]
                    return self._model
                except _RETRYABLE as error:
                    last = f"{type(error).__name__}: {error}"
                except openai.APIStatusError as error:
                    raise EndpointFailure(self.role, f"model discovery: {error}") from error
                if attempt < self.settings.max_retries:
                    self._sleep(self._delay(attempt))
            raise EndpointFailure(self.role, f"model discovery failed: {last}")

    def _event(
        self,
        purpose: str,
        model: str | None,
        latency: float,
        outcome: Literal["ok", "retry", "error"],
        error: str | None = None,
        usage: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.events.emit(
            LLMCallEvent(
                ts=datetime.now(UTC),
                role=self.role,
                model=model,
                purpose=purpose,
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                latency_s=latency,
                outcome=outcome,
                error=error,
            )
        )

    def chat(
        self,
        messages: Sequence[Message],
        *,
        purpose: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> ChatReply:
        model = self.model()
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "temperature": self.settings.temperature if temperature is None else temperature,
            "max_tokens": self.settings.max_tokens,
            "timeout": min(self.settings.timeout_s, timeout_s) if timeout_s else self.settings.timeout_s,
        }
        if tools:
            kwargs["tools"] = list(tools)
            if tool_choice:
                kwargs["tool_choice"] = dict(tool_choice)
        last = "no attempt"
        for attempt in range(self.settings.max_retries + 1):
            final = attempt == self.settings.max_retries
            start = time.monotonic()
            try:
                response = self._client.chat.completions.create(**kwargs)
            except _RETRYABLE as error:
                last = f"{type(error).__name__}: {error}"
                self._event(purpose, model, time.monotonic() - start, "error" if final else "retry", last)
                if not final:
                    self._sleep(self._delay(attempt))
                continue
            except openai.BadRequestError as error:
                self._event(purpose, model, time.monotonic() - start, "error", f"BadRequestError: {error}")
                if tools and _is_tools_rejection(error):
                    raise ToolsUnsupported(str(error)) from error
                raise EndpointFailure(self.role, f"request rejected: {error}") from error
            except openai.APIStatusError as error:
                self._event(
                    purpose, model, time.monotonic() - start, "error", f"{type(error).__name__}: {error}"
                )
                raise EndpointFailure(self.role, f"{type(error).__name__}: {error}") from error
            latency = time.monotonic() - start
            usage = _usage(response)
            choice = response.choices[0] if response.choices else None
            message = choice.message if choice is not None else None
            content = (message.content if message is not None else None) or ""
            tool_arguments: str | None = None
            calls = getattr(message, "tool_calls", None) if message is not None else None
            if calls:
                function = getattr(calls[0], "function", None)
                tool_arguments = getattr(function, "arguments", None)
            self._event(purpose, model, latency, "ok", usage=usage)
            return ChatReply(
                content=content,
                tool_arguments=tool_arguments,
                model=model,
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                latency_s=latency,
            )
        raise EndpointFailure(self.role, f"gave up after {self.settings.max_retries + 1} attempts: {last}")
