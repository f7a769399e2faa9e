"""The openai SDK's response classes are built before threads parse replies (agent/llm/response_models.py).

Each case runs in a fresh interpreter (in this one, other tests built the classes long ago); nothing is
written. The race it guards against: two threads parsing the first reply of a class at once, one of
them building the class's deferred schema, failed the other with PydanticUserError ("BaseModel cannot
be instantiated directly") or AttributeError: a CI run lost a resumed trial to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.timeout(120)

PARSED = [
    "ChatCompletion",
    "Choice",
    "ChatCompletionMessage",
    "ChatCompletionMessageFunctionToolCall",
    "Function",
    "CompletionUsage",
    "ChoiceLogprobs",
    "SyncPage[Model]",
    "Model",
]
"""The classes a chat completion (with a tool call and usage) and a /models page are parsed into."""

WARM = {
    "client": (
        "from mle_world.agent.events import MemorySink\n"
        "from mle_world.agent.llm.client import EndpointClient\n"
        "from mle_world.records import EndpointSettings\n"
        "EndpointClient('coder', EndpointSettings(url='http://127.0.0.1:9/v1'), MemorySink())\n"
    ),
    "probe_all": "from mle_world.launch.endpoints import probe_all\nprobe_all({})\n",
}
"""What each entry point that parses replies in threads runs first."""

STATE = """
import json
from openai.pagination import SyncPage
from openai.types import Model
from openai.types.chat import ChatCompletion
from openai.types.chat.chat_completion import Choice, ChoiceLogprobs
from openai.types.chat.chat_completion_message import ChatCompletionMessage
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall, Function)
from openai.types.completion_usage import CompletionUsage
classes = [ChatCompletion, Choice, ChatCompletionMessage, ChatCompletionMessageFunctionToolCall, Function,
           CompletionUsage, ChoiceLogprobs, SyncPage[Model], Model]
def unbuilt():
    return [c.__name__ for c in classes
            if not c.__pydantic_complete__ or "__pydantic_core_schema__" not in c.__dict__]
before = unbuilt()
"""

RACE = """
import sys, threading
sys.setswitchinterval(1e-6)  # a thread switch anywhere, as a loaded machine makes them
body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,
    "finish_reason": "stop", "logprobs": None, "message": {"role": "assistant", "content": "hi",
    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
barrier, errors = threading.Barrier(8), []
def parse():
    barrier.wait()
    try:
        ChatCompletion.construct(**body)  # what the SDK's raw.parse() does with a reply
    except Exception as error:
        errors.append(f"{type(error).__name__}: {error}"[:200])
threads = [threading.Thread(target=parse) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
"""


def run(script: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "DEFER_PYDANTIC_BUILD"}  # the SDK's default: defer
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("entry", sorted(WARM))
def test_entry_point_builds_every_class_a_reply_is_parsed_into(entry: str) -> None:
    got = run(STATE + WARM[entry] + "print(json.dumps({'before': before, 'after': unbuilt()}))")
    assert got["before"], "the SDK built its classes at import: this test no longer shows anything"
    assert got["after"] == [], got


def test_replies_parsed_at_once_after_the_client_is_built() -> None:
    # Without the build, 6 of 10 such processes had at least one thread fail; four at once, so that a
    # regression passes by luck about once in forty runs.
    script = STATE + WARM["client"] + RACE + "print(json.dumps({'errors': errors}))"
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: run(script), range(4)))
    assert [r["errors"] for r in results] == [[]] * 4, results
