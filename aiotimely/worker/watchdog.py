"""Honouring a stop signal while an operator never yields.

A computation stops on SIGINT or SIGTERM through the event loop (``loop.add_signal_handler``): the loop runs the
stop once it is free. An operator whose logic loops without awaiting never frees it, so the stop would never
run. :class:`Watchdog` keeps a Python-level handler beside the loop's (Python runs those between bytecodes,
even inside such a loop) and a thread that watches the loop's heartbeat once a stop was asked for: when the
loop has not turned for :data:`RUNAWAY_AFTER` seconds, or at a second signal while it has not, it raises
:class:`RunawayStop` where the main thread is, naming the operator running there. That stops the computation
at once (its operators' cleanup does not run: the loop is not free to run it).
"""

from __future__ import annotations

import _thread
import asyncio
import os
import signal
import threading
import time
from types import FrameType
from typing import Any, Callable

__all__ = ["Watchdog", "RunawayStop", "RUNAWAY_AFTER", "runaway_in"]

RUNAWAY_AFTER = 1.0
"""Seconds the event loop may stay busy in one go after a stop signal before the stop is forced
(``AIOTIMELY_STOP_RUNAWAY`` overrides it)."""

_BEAT = 0.1


class RunawayStop(SystemExit):
    """A stop forced inside code that never yields (a ``SystemExit``: asyncio lets it through at once)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.message = message


def runaway_in(frame: FrameType | None) -> str:
    """What runs at ``frame``, in words: the innermost operator (an object with ``describe()`` in a frame of its
    ``schedule``), else the code's own name and line."""
    innermost = frame
    while frame is not None:
        owner = frame.f_locals.get("self")
        if frame.f_code.co_name == "schedule" and callable(getattr(owner, "describe", None)):
            return str(owner.describe())  # type: ignore[union-attr]
        frame = frame.f_back
    if innermost is None:
        return "code that never yields"
    return f"{innermost.f_code.co_name} ({innermost.f_code.co_filename}:{innermost.f_lineno})"


class Watchdog:
    """Forces a stop that the event loop cannot run because something never yields (see the module)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, signals: list[int], after: float | None = None) -> None:
        self._loop = loop
        self._signals = signals
        self._after = after if after is not None else float(os.environ.get("AIOTIMELY_STOP_RUNAWAY", RUNAWAY_AFTER))
        self._previous: dict[int, Any] = {}
        self._tick = time.monotonic()
        self._asked: int | None = None      # the first stop signal
        self._force = False
        self._beaten = False                # the loop turned since the first stop signal
        self._thread: threading.Thread | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._done = threading.Event()

    def install(self) -> None:
        """Stand beside the loop's handlers of ``signals`` (install after ``loop.add_signal_handler``)."""
        for sig in self._signals:
            previous = signal.getsignal(sig)
            self._previous[sig] = previous
            signal.signal(sig, self._python_handler(previous))

    def uninstall(self) -> None:
        """Give the loop's handlers back, and stop watching."""
        self._done.set()
        if self._ticker is not None:
            self._ticker.cancel()
        for sig, previous in self._previous.items():
            if previous is not None:
                signal.signal(sig, previous)
        self._previous.clear()

    def _python_handler(self, previous: Any) -> Callable[[int, FrameType | None], None]:
        def handler(signum: int, frame: FrameType | None) -> None:
            if self._force or (self._asked is not None and (not self._beaten or self._stalled())):
                # (forced by the watching thread; or a second signal, the loop busy since the first)
                raise RunawayStop(signum, f"{runaway_in(frame)} has not yielded for "
                                          f"{time.monotonic() - self._tick:.1f} s")
            if self._asked is None:
                self._asked = signum
                self._tick = time.monotonic()
                self._loop.call_soon_threadsafe(self._beat)
                self._thread = threading.Thread(target=self._watching, name="aiotimely-stop-watchdog", daemon=True)
                self._thread.start()
            if callable(previous):
                previous(signum, frame)

        return handler

    def _stalled(self) -> bool:
        return time.monotonic() - self._tick > self._after

    def _beat(self) -> None:
        """From the first stop signal on, the loop beats; the watching thread forces the stop if it stops."""
        self._tick = time.monotonic()
        self._beaten = True
        if not self._done.is_set():
            self._ticker = self._loop.call_later(_BEAT, self._beat)

    def _watching(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)  # (they go to the main thread, where they act)
        while not self._done.wait(_BEAT):
            if self._stalled() and self._asked is not None:
                self._force = True
                _thread.interrupt_main(signal.Signals(self._asked))  # (the handler above runs, and raises)
                return
