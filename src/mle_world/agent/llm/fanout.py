"""Concurrent LLM calls: one function over a step's items in threads, results in order.

Reads and writes nothing itself (the calls are HTTP requests to the endpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def fan_out(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """Run `fn` over `items` in threads (HTTP calls), preserving order; one item runs inline."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="llm")
    try:
        futures = [pool.submit(fn, item) for item in items]
        return [future.result() for future in futures]
    finally:
        # Never wait here for calls still in flight: on preemption or failure the trial must stop now.
        pool.shutdown(wait=False, cancel_futures=True)
