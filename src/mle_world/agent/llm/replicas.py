"""The replicas of one endpoint role: their health, outstanding requests and which one serves next.

Reads nothing and writes nothing; the pool's state lives in memory for one session of one trial.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

C = TypeVar("C")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: sleep U(0, min(cap, base * 2**attempt))."""

    base_s: float = 1.0
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2 ** min(attempt, 30))))


class Replica(Generic[C]):
    """One server of a role; mutable, guarded by its pool's lock."""

    __slots__ = (
        "client",
        "failures",
        "index",
        "last_error",
        "outstanding",
        "probing",
        "retry_at",
        "served",
        "suspended",
        "url",
    )

    def __init__(self, index: int, url: str, client: C) -> None:
        self.index = index
        self.url = url
        self.client = client
        self.outstanding = 0
        self.served = 0
        """Requests this replica answered (load-spread statistics)."""
        self.failures = 0
        """Failed attempts since the last answered request (drives the backoff)."""
        self.suspended = False
        """Out of rotation after a failure, until a probe or a request succeeds."""
        self.retry_at = 0.0
        """Earliest time a failed replica is probed again (backoff and Retry-After)."""
        self.probing = False
        self.last_error: str | None = None

    @property
    def healthy(self) -> bool:
        return not self.suspended


@dataclass(frozen=True)
class Lease(Generic[C]):
    """A replica handed out for one attempt; `probe` means it failed before and must be probed first."""

    replica: Replica[C]
    probe: bool


class ReplicaPool(Generic[C]):
    """Least-outstanding-requests choice over healthy replicas, failover and probe-back.

    A failure takes a replica out of rotation until its `retry_at` (jittered exponential backoff,
    never earlier than the server's Retry-After); then one caller probes it and, on success, it
    serves again. When every replica has failed the role is down: `on_down` fires once, and
    `on_up` fires when any replica answers again.
    """

    def __init__(
        self,
        replicas: Sequence[tuple[str, C]],
        *,
        backoff: Backoff,
        rng: random.Random,
        clock: Callable[[], float],
        on_down: Callable[[str], None] = lambda cause: None,
        on_up: Callable[[], None] = lambda: None,
    ) -> None:
        if not replicas:
            raise ValueError("a role needs at least one replica")
        self.replicas = [Replica(i, url, client) for i, (url, client) in enumerate(replicas)]
        self.backoff = backoff
        self._rng = rng
        self._clock = clock
        self._on_down = on_down
        self._on_up = on_up
        self._lock = threading.Lock()
        self._down = False
        # Each trial starts its rotation somewhere else, so many short trials do not all favour replica 0.
        self._turn = rng.randrange(len(self.replicas))

    @property
    def down(self) -> bool:
        """Every replica has failed its last attempt (the role is in an outage)."""
        with self._lock:
            return self._down

    def acquire(self, *, force: bool = False) -> Lease[C] | None:
        """The replica for the next attempt, or None when every replica is backing off; `force`
        hands out the one whose backoff ends first even so (a last attempt before giving up)."""
        now = self._clock() + (float("inf") if force else 0.0)
        with self._lock:
            # Probe-back: a suspended replica whose backoff has passed gets the next attempt (after a
            # cheap probe), whether or not others are healthy, so a restarted server rejoins.
            due = [r for r in self.replicas if r.suspended and not r.probing and r.retry_at <= now]
            if due:
                chosen = min(due, key=lambda r: r.retry_at)
                chosen.probing = True
                chosen.outstanding += 1
                return Lease(chosen, probe=True)
            healthy = [r for r in self.replicas if r.healthy]
            if not healthy:
                return None
            # Ties rotate, so equal replicas share requests evenly even when each finishes at once.
            n = len(self.replicas)
            chosen = min(healthy, key=lambda r: (r.outstanding, (r.index - self._turn) % n))
            self._turn = (chosen.index + 1) % n
            chosen.outstanding += 1
            return Lease(chosen, probe=False)

    def last_error(self) -> str | None:
        """The most recent failure of any replica (for the message when giving up)."""
        with self._lock:
            failed = [r for r in self.replicas if r.last_error is not None]
            return max(failed, key=lambda r: r.retry_at).last_error if failed else None

    def wait_s(self) -> float:
        """How long until some replica may be tried: 0 while one is healthy."""
        now = self._clock()
        with self._lock:
            if any(r.healthy for r in self.replicas):
                return 0.0
            waiting = [r.retry_at for r in self.replicas if not r.probing]
            return max(0.0, min(waiting) - now) if waiting else self.backoff.base_s

    def restored(self, lease: Lease[C]) -> None:
        """A probe of a suspended replica passed: back in rotation (the role is up only once it serves)."""
        with self._lock:
            lease.replica.suspended = False
            lease.replica.probing = False

    def succeeded(self, lease: Lease[C]) -> None:
        """The replica answered a request."""
        recovered = False
        with self._lock:
            replica = lease.replica
            replica.outstanding -= 1
            replica.probing = False
            replica.suspended = False
            replica.failures = 0
            replica.last_error = None
            replica.served += 1
            if self._down:
                self._down = False
                recovered = True
        if recovered:
            self._on_up()

    def failed(self, lease: Lease[C], error: str, retry_after_s: float | None = None) -> None:
        """The replica failed an attempt: out of rotation until its backoff (and Retry-After) passed."""
        now = self._clock()
        went_down = False
        with self._lock:
            replica = lease.replica
            replica.outstanding -= 1
            replica.probing = False
            replica.failures += 1
            replica.suspended = True
            replica.last_error = error
            delay = self.backoff.delay(replica.failures - 1, self._rng)
            replica.retry_at = now + max(delay, retry_after_s or 0.0)
            if not self._down and not any(r.healthy for r in self.replicas):
                self._down = True
                went_down = True
        if went_down:
            self._on_down(error)

    def forget_outage(self) -> bool:
        """A request gave up during an outage: report the next one afresh. True if one was open."""
        with self._lock:
            was, self._down = self._down, False
            return was

    def released(self, lease: Lease[C]) -> None:
        """The attempt ended without saying anything about the replica's health (e.g. a 400)."""
        with self._lock:
            lease.replica.outstanding -= 1
            lease.replica.probing = False
