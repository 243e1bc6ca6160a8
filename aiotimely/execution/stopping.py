"""How a computation asked to stop goes: the grace period it gets to drain, the words of the line that says how
it went, and the graceful stop of an application's worker whose ``async with`` block was cancelled."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from ..worker import Scheduler
from ..worker.computation import Halted

__all__ = ["STOP_GRACE", "stop_grace", "STOPPED", "DRAINED", "SUSPENDED", "DID_NOT_DRAIN", "why_not_drained",
           "drain"]

log = logging.getLogger("aiotimely")

STOP_GRACE = 10.0
"""Seconds a computation asked to stop (Ctrl-C, SIGTERM, or its task cancelled) gets to drain before it stops
hard; ``AIOTIMELY_STOP_GRACE`` overrides it."""


def stop_grace() -> float:
    """:data:`STOP_GRACE`, or ``AIOTIMELY_STOP_GRACE`` when set."""
    return float(os.environ.get("AIOTIMELY_STOP_GRACE", STOP_GRACE))


STOPPED = "aiotimely: stopped "
DRAINED = "after the dataflows drained"
SUSPENDED = "at a final snapshot (a restart with the same recovery directory resumes from it)"
DID_NOT_DRAIN = "before the dataflows drained: "
_MISSED_SNAPSHOTS = "before its final snapshots were complete (a restart resumes from the latest complete one): "


def why_not_drained(error: BaseException, *, started: bool) -> str | None:
    """Why a computation asked to stop did not drain, from the error it ended with (``None``: there was nothing
    to drain yet)."""
    if isinstance(error, asyncio.CancelledError):
        return "stopped while they ran" if started else None
    if isinstance(error, Halted):
        return str(error)
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0]}" if first else type(error).__name__


async def drain(scheduler: Scheduler) -> None:
    """An application's worker whose block was cancelled: stop gracefully, for up to the grace period (what
    :class:`~aiotimely.execution.supervisor.Supervisor` does for :func:`~aiotimely.execute`'s workers); say in
    one logged line if the dataflows did not drain."""
    computation = scheduler.computation
    computation.request_stop()
    grace = stop_grace()
    waiting, missed = _graceful_end(scheduler)
    try:
        await asyncio.wait([waiting], timeout=grace)
    except asyncio.CancelledError:  # cancelled again: stop at once
        pass
    if not waiting.done():
        waiting.cancel()
        log.warning("%s(its task was cancelled) %sthe grace period ended (%g s, AIOTIMELY_STOP_GRACE)",
                    STOPPED, missed, grace)
    elif not waiting.cancelled() and waiting.exception() is not None:
        log.warning("%s(its task was cancelled) %s%s", STOPPED, missed,
                    why_not_drained(waiting.exception() or Exception(), started=True))


def _graceful_end(scheduler: Scheduler) -> tuple[asyncio.Future[Any], str]:
    """What a stopping worker waits for, and the words for not reaching it: a recoverable computation's final
    snapshots (nothing ends), or else the end of every dataflow, its inputs closed."""
    computation = scheduler.computation
    if computation.suspending:
        return asyncio.ensure_future(computation.final_snapshots()), _MISSED_SNAPSHOTS
    scheduler.end_build()
    return asyncio.ensure_future(scheduler.step_until_done()), DID_NOT_DRAIN
