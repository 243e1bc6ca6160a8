"""The window operator's logic, run at each activation: apply the complete times in order to the open windows
(sending early results and late records of each), then send the results of the windows the frontier has passed.

The pieces it drives: :class:`.state.Windows` (what is open), :class:`EarlyResults` (when partial results go),
:class:`LateRecords` (what happens to late records), :class:`ClockTimer` (processing time: waking on the clock).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ....worker.clock import Clock
from ...capability import Capability
from ...operator import OperatorRuntime
from ...ports import InputPort, OperatorOutput
from ..pool import CapabilityPool
from .deadlines import outermost
from .state import Due, Windows

__all__ = ["WindowLogic", "EarlyResults", "LateRecords", "ClockTimer"]


class EarlyResults:
    """``early=True``: partial results at every time applied that changed windows; ``early=N``: only at the first
    such time in each period of ``N`` units of dataflow time (for every window changed since)."""

    __slots__ = ("period", "_last")

    def __init__(self, period: int) -> None:
        self.period = period
        self._last: Any = None              # the period of the last early results

    def due(self, time: Any) -> bool:
        """Whether windows changed up to dataflow time ``time`` send their partial results at it."""
        period = outermost(time) // self.period
        if self.period != 1 and period == self._last:
            return False
        self._last = period
        return True


class LateRecords:
    """``late=``: the late records of the time applied dropped (``"drop"``), or sent on the second output at that
    time, as they are (``"stream"``) or as their count (``"count"``)."""

    __slots__ = ("policy", "output")

    def __init__(self, policy: str, output: OperatorOutput | None) -> None:
        self.policy = policy
        self.output = output

    def send(self, cap: Capability, records: list[Any]) -> None:
        """Deal with ``records`` (late at ``cap.time``), and clear them."""
        if records and self.output is not None:
            with cap.delayed(cap.time, 1) as late_cap:
                self.output.session(late_cap).give_many(records if self.policy == "stream" else [len(records)])
        records.clear()


class ClockTimer:
    """Processing time: the operator is woken (one helper task) when the clock reaches the end of the first
    window still open; until then the results wait at the latest dataflow time the input frontier reaches."""

    __slots__ = ("op", "clock", "pool", "_activator", "_deadline", "_task")

    def __init__(self, op: OperatorRuntime, clock: Clock, pool: CapabilityPool[Any]) -> None:
        self.op = op
        self.clock = clock
        self.pool = pool
        self._activator = op.activator()
        self._deadline: int | None = None
        self._task: asyncio.Task[Any] | None = None

    def follow(self, frontier: list[Any], first_end: Any) -> None:
        """After a close: if a window is still open (the first ends at ``first_end``), move the capabilities
        its results wait on up to the frontier, and wake at its end."""
        if first_end is None:
            return
        if frontier:
            self.pool.downgrade_to(frontier[0])
        self.wake_at(first_end)

    def wake_at(self, deadline: int) -> None:
        """Be activated when the clock reaches ``deadline`` (ms), unless already woken no later."""
        task = self._task
        if self._deadline is not None and self._deadline <= deadline and task is not None and not task.done():
            return
        if task is not None:
            task.cancel()
        self._deadline = deadline
        self._task = self.op.start_soon(self._wake(deadline), name="the window timer")

    async def _wake(self, deadline: int) -> None:
        await self.clock.wait_until(deadline)
        self._activator.activate()


class WindowLogic:
    """Called at each activation: apply what is complete, then close what the frontier has passed."""

    __slots__ = ("op", "input", "order", "windows", "output", "pool", "early", "late", "timer")

    def __init__(self, op: OperatorRuntime, inp: InputPort, windows: Windows, output: OperatorOutput,
                 pool: CapabilityPool[Any], early: EarlyResults | None, late: LateRecords,
                 timer: ClockTimer | None) -> None:
        self.op = op
        self.input = inp
        self.order = inp.time_order()
        self.windows = windows
        self.output = output
        self.pool = pool
        self.early = early
        self.late = late
        self.timer = timer

    def __call__(self) -> None:
        op, windows, early, late = self.op, self.windows, self.early, self.late
        for cap, records in self.order.ready():
            op.current_time = cap.time          # (an error names the time being applied)
            windows.apply(cap, records)
            if early is not None and windows.touched and early.due(cap.time):
                # each window changed since the last early results, as it stands, at this time
                self.output.session(cap).give_many(windows.take_changed())
            late.send(cap, windows.late)
        frontier = list(self.input.frontier)
        self.send(windows.close(frontier))
        if self.timer is not None:
            self.timer.follow(frontier, windows.next_end())

    def send(self, due: Due) -> None:
        """Send closed windows' results, earliest time first, each with the pool's capability for its time, and
        release the pool's holds of the windows closed."""
        sending, counts = due
        if not sending:
            return
        times = sorted(sending)
        output = self.output
        for t, cap in zip(times, self.pool.capabilities(times), strict=True):
            output.session(cap).give_many(sending[t])
        self.pool.release_all(counts)
