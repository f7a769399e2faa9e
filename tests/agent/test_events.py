"""events.jsonl as the agent appends it: whole lines from concurrent threads, read back by trial_events.

Reads nothing; writes an events.jsonl under tmp_path.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mle_world.agent.events import EventLog
from mle_world.records import LLMCallEvent
from mle_world.trial_events import read_events


def test_concurrent_events_land_as_whole_lines_in_a_new_directory(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "not" / "yet" / "events.jsonl")

    def emit_many(worker: int) -> None:
        for i in range(150):
            log.emit(
                LLMCallEvent(
                    ts=datetime.now(UTC),
                    role="coder",
                    model="m",
                    purpose=f"w{worker}",
                    prompt_tokens=i,
                    completion_tokens=None,
                    latency_s=0.001 * i,
                    outcome="retry",
                    error="ConnectionError: é中 " + "x" * (i * 40),  # lines up to 6 KB, not ASCII
                )
            )

    threads = [threading.Thread(target=emit_many, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = read_events(log.path)
    assert events.bad_lines == 0 and len(events.llm) == 900
    for worker in range(6):
        mine = [e for e in events.llm if e.purpose == f"w{worker}"]
        assert [e.prompt_tokens for e in mine] == list(range(150))
        assert mine[3].error == "ConnectionError: é中 " + "x" * 120
    assert log.llm_time_s == pytest.approx(sum(e.latency_s for e in events.llm))
