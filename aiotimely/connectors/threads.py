"""Blocking functions off the event loop: ``to_thread(stream, fn)`` runs ``fn`` in worker threads.

A worker's operators share one event loop, so a function that blocks (a
synchronous database driver, an HTTP client without asyncio, heavy numeric code
that releases the GIL) stalls every operator and, past the peer timeout, looks to
the other processes like a dead peer. ``to_thread`` is :func:`~.aiter.to_async`
with the call made in a thread by anyio (``anyio.to_thread.run_sync``), under an
``anyio.CapacityLimiter`` of the operator's own: at most ``max_in_flight`` threads
for it, whatever else uses threads (snapshot writes go through the loop's default
executor and are never queued behind a slow user function), and the operator stops
taking input while they are all busy.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import anyio
import anyio.to_thread

from ..stream import Stream
from .aiter import to_async

__all__ = ["to_thread"]


def to_thread(
    stream: Stream,
    fn: Callable[..., Any],
    *,
    per: str = "batch",
    max_in_flight: int = 4,
    name: str = "ToThread",
) -> Stream:
    """Call the blocking ``fn(time, records)`` per batch (or ``fn(record)`` per record, ``per="record"``) in a
    thread, at most ``max_in_flight`` at once; the result is the stream of the records whose calls completed, at
    their times (a probe on it says what was delivered). An exception in ``fn`` fails the computation, naming
    the operator and the time of the call."""
    if not callable(fn):
        raise TypeError(f"{name}: fn must be a callable")
    if max_in_flight < 1:
        raise ValueError(f"{name}: max_in_flight must be at least 1, not {max_in_flight}")
    limiter: anyio.CapacityLimiter | None = None

    async def call(*args: Any) -> Any:
        nonlocal limiter
        if limiter is None:  # made on the worker's loop, where it is used
            limiter = anyio.CapacityLimiter(max_in_flight)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter)

    return to_async(stream, call, per=per, max_in_flight=max_in_flight, name=name)
