"""The signals :func:`~aiotimely.execute` takes over while it runs, and the record of how a stop went.

Each signal cancels the computation's task: the first drains it, a second stops it hard (see
:class:`~aiotimely.execution.supervisor.Supervisor`). An operator that never yields keeps the loop from
seeing a signal at all: the :class:`~aiotimely.worker.watchdog.Watchdog` installed beside the handlers forces
that stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Iterator

from ..worker.watchdog import RunawayStop, Watchdog
from .stopping import DID_NOT_DRAIN, DRAINED, STOPPED, SUSPENDED

__all__ = ["Stop", "stop_signals", "runaway_line"]


class Stop:
    """How a stop went, for the one line that says it; and the signals :func:`~aiotimely.execute` takes over
    while it runs (each cancels the computation's task: the first drains it, a second stops it hard)."""

    def __init__(self, signals: list[int]) -> None:
        self.handles = signals
        self.signals: list[int] = []
        """The signals received, in order."""
        self.asked = False
        """The computation was asked to stop (a signal, or its task cancelled)."""
        self.reason: str | None = None
        """Why the dataflows did not drain (``None``: they did, or had not started)."""
        self.early = False
        """The stop was asked for while the processes were connecting."""
        self.suspended = False
        """The dataflows keep snapshots: they stopped at a final snapshot, complete everywhere (not drained)."""
        self.watchdog: Watchdog | None = None
        """Forces the stop when an operator never yields (see :mod:`aiotimely.worker.watchdog`)."""

    @contextlib.contextmanager
    def handling(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> Iterator[None]:
        """Within the block, each signal of :attr:`handles` that ``loop`` can handle cancels ``task``."""
        handled = self._install(loop, task)
        try:
            yield
        finally:
            self._uninstall(loop, handled)

    def _install(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> list[int]:
        handled = []
        for sig in self.handles:
            try:
                loop.add_signal_handler(sig, self._arrived, sig, task)
            except (NotImplementedError, RuntimeError, ValueError):  # (not on this platform or loop)
                continue
            handled.append(sig)
        if handled:
            self.watchdog = Watchdog(loop, handled)
            self.watchdog.install()
        return handled

    def _uninstall(self, loop: asyncio.AbstractEventLoop, handled: list[int]) -> None:
        if self.watchdog is not None:
            self.watchdog.uninstall()
            self.watchdog = None
        for sig in handled:
            loop.remove_signal_handler(sig)

    def _arrived(self, sig: int, task: asyncio.Task[Any]) -> None:
        self.signals.append(sig)
        task.cancel()

    def outcome(self) -> str:
        """How the dataflows ended: drained, suspended at a final snapshot, or why not drained."""
        if self.reason is not None:
            return f"{DID_NOT_DRAIN}{self.reason}"
        return SUSPENDED if self.suspended else DRAINED

    def line(self) -> str:
        """The line that says it: ``aiotimely: stopped by SIGINT after the dataflows drained``, or why they did not."""
        by = f"by {signal.Signals(self.signals[0]).name}" if self.signals else "(its task was cancelled)"
        return f"{STOPPED}{by} {self.outcome()}"


def stop_signals() -> list[int]:
    """The signals :func:`~aiotimely.execute` stops on: SIGINT and SIGTERM, on the main thread, unless the
    program has handlers of its own for them."""
    if threading.current_thread() is not threading.main_thread():
        return []
    found = []
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) is default:
            found.append(int(sig))
    return found


def runaway_line(runaway: RunawayStop) -> str:
    """The line that says the watchdog stopped the program at once, because an operator never yielded."""
    return (f"{STOPPED}by {signal.Signals(runaway.signum).name} at once: {runaway.message}: the event loop was "
            "not free to stop gracefully (an operator's logic that loops must await, e.g. "
            "'await asyncio.sleep(0)'); its cleanup did not run")
