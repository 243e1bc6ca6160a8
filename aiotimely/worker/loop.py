"""Which event loop runs the workers: uvloop when it is installed, asyncio otherwise.

A uvloop loop is kept open for the life of the thread and reused by every run:
closing one (uvloop 0.23) makes the next large blocking write to a pipe — a
program printing its results to a slow reader — stop short at 64 KiB.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Coroutine

__all__ = ["loop_factory", "run"]

_kept = threading.local()


def loop_factory(loop: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for ``loop``: ``"auto"`` (uvloop if installed), ``"uvloop"`` or ``"asyncio"``."""
    if loop not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"loop must be 'auto', 'uvloop' or 'asyncio', not {loop!r}")
    if loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if loop == "uvloop":
            raise RuntimeError(
                "loop='uvloop' was asked for, but uvloop is not installed (pip install uvloop)"
            ) from None
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, Any], loop: str = "auto") -> Any:
    """Run ``main`` to completion on an event loop of the chosen kind."""
    factory = loop_factory(loop)
    if factory is None:
        with asyncio.Runner() as runner:
            return runner.run(main)
    event_loop = getattr(_kept, "loop", None)
    if event_loop is None or event_loop.is_closed():
        event_loop = _kept.loop = factory()
    asyncio.set_event_loop(event_loop)
    try:
        return event_loop.run_until_complete(main)
    finally:
        _settle(event_loop)
        asyncio.set_event_loop(None)


def _settle(event_loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.Runner`` does when it closes, except closing: cancel leftovers, end generators."""
    tasks = asyncio.all_tasks(event_loop)
    for task in tasks:
        task.cancel()
    if tasks:
        event_loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    event_loop.run_until_complete(event_loop.shutdown_asyncgens())
