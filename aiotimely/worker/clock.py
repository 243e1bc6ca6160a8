"""The wall clock, injected: what reads "now" (processing-time windows, timers) reads it through a :class:`Clock`,
so that tests drive time by hand instead of sleeping (as trio's ``MockClock`` and bytewax's
``EventClock(now_getter=...)`` do).

Times are ``int`` milliseconds. :data:`WALL_CLOCK` is the real one; :class:`ManualClock` moves only when told.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "WallClock", "MonotonicClock", "ManualClock", "WALL_CLOCK", "MONOTONIC"]


class Clock(Protocol):
    """A source of "now" in ms, and a way to wait for a later "now"."""

    def now(self) -> int:
        """The current time, in ms."""
        ...

    async def wait_until(self, deadline: int) -> None:
        """Return once :meth:`now` has reached ``deadline`` (ms)."""
        ...


class WallClock:
    """The system's clock: ms since the epoch, waited for with ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> int:
        return time.time_ns() // 1_000_000

    async def wait_until(self, deadline: int) -> None:
        # a millisecond more: now() (floored to the ms) has reached the deadline when the sleep ends
        await asyncio.sleep(max(0.0, deadline / 1000 - time.time()) + 0.001)

    def __repr__(self) -> str:
        return "WallClock()"


WALL_CLOCK = WallClock()
"""The default clock."""


class MonotonicClock:
    """``time.monotonic`` as a :class:`~aiotimely.worker.clock.Clock`: ms since an arbitrary start, never
    moving back; waited for with ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def wait_until(self, deadline: int) -> None:
        # a millisecond more: now() (floored to the ms) has reached the deadline when the sleep ends
        await asyncio.sleep(max(0.0, deadline / 1000 - time.monotonic()) + 0.001)

    def __repr__(self) -> str:
        return "MonotonicClock()"


MONOTONIC = MonotonicClock()
"""The real clock for durations (timeouts, periods, pacing): the wall clock's steps do not stretch them."""


class ManualClock:
    """A clock that stands still until :meth:`advance` or :meth:`set` moves it; waiters whose deadline it then
    reaches are woken (their futures resolved on the loop they wait on)."""

    __slots__ = ("_now", "_waiting", "_seq")

    def __init__(self, start: int = 0) -> None:
        self._now = start
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []   # (deadline, n, future), by deadline
        self._seq = itertools.count()

    def now(self) -> int:
        return self._now

    async def wait_until(self, deadline: int) -> None:
        if deadline <= self._now:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (deadline, next(self._seq), future))
        await future

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` later."""
        if ms < 0:
            raise ValueError(f"a clock moves forward only, not by {ms} ms")
        self.set(self._now + ms)

    def set(self, now: int) -> None:
        """Move the clock to ``now`` (not earlier than it is), and wake the waiters it reaches."""
        if now < self._now:
            raise ValueError(f"a clock moves forward only: it is at {self._now}, not {now}")
        self._now = now
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            future = heapq.heappop(waiting)[2]
            if not future.done():
                future.set_result(None)

    def waiting(self) -> int:
        """How many waiters wait for a later time (cancelled ones included until the clock passes them)."""
        return len(self._waiting)

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"
