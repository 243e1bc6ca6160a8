"""When a window is complete, and at which dataflow time its result goes: the side of a window that depends on the
dataflow's times (int, ``Product`` inside iterations) or on the wall clock (processing time).

A window ``[start, end)`` is complete once the frontier has passed its *deadline*, ``end + lateness``; a record at
dataflow time ``d`` is late for windows ending at or before the *horizon* ``d - lateness``. Open windows wait
in heaps by end (``(end, ...)`` entries); :meth:`Deadlines.due` pops those the frontier has passed.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

from ....progress import Product
from ....worker.clock import Clock

__all__ = ["Deadlines", "IntDeadlines", "ProductDeadlines", "ClockDeadlines", "outermost", "with_outer"]


def outermost(time: Any) -> Any:
    """The outermost coordinate of a (nested) ``Product`` time; an int time itself."""
    while type(time) is Product:
        time = time.outer
    return time


def with_outer(time: Any, value: int) -> Any:
    """``time`` with its outermost coordinate replaced by ``value``."""
    if type(time) is Product:
        return Product(with_outer(time.outer, value), time.inner)
    return value


class Deadlines:
    """The dataflow-time side of windows (base class): window ids, output times, the late horizon, and which
    waiting windows the frontier has completed."""

    __slots__ = ("lateness",)

    total = True
    """Int dataflow times: a window id is its start (inside iterations: ``(start, the time's other coordinates)``,
    windows being per round)."""

    def __init__(self, lateness: int) -> None:
        self.lateness = lateness

    def rest(self, d: Any) -> Any:
        """What a window id holds besides its start for records at dataflow time ``d`` (``None`` for int times)."""
        return None

    def horizon(self, d: Any) -> int:
        """Windows ending at or before this are complete at dataflow time ``d``: records for them are late."""
        return outermost(d) - self.lateness  # type: ignore[no-any-return]

    def start_of(self, wid: Any) -> int:
        """The start of window ``wid``."""
        return wid  # type: ignore[no-any-return]

    def out_time(self, wid: Any, end: int) -> Any:
        """The time window ``wid`` (ending at ``end``) waits for and sends its result at: its deadline."""
        return end + self.lateness

    def delivered(self, out_time: Any, resume: Any) -> bool:
        """Whether a restored window waiting for ``out_time`` was sent, and delivered, before the snapshot a
        dataflow resumes from at ``resume`` was complete."""
        return out_time < resume  # type: ignore[no-any-return]

    def due(self, entries: list[Any], frontier: list[Any], id_at: int) -> list[Any]:
        """Pop the entries (a heap by end; the window id at ``id_at``) of the windows the frontier has passed,
        earliest first (all of them once the frontier is empty: the input is done)."""
        raise NotImplementedError


class IntDeadlines(Deadlines):
    """Int dataflow times: a window sends at ``end + lateness``, once the frontier has reached it."""

    __slots__ = ()

    def reached(self, frontier: list[Any]) -> Any:
        """The time the frontier has reached (``None``: it is empty, every time is complete)."""
        return frontier[0] if frontier else None

    def due(self, entries: list[Any], frontier: list[Any], id_at: int) -> list[Any]:
        h = self.reached(frontier)
        lateness, pop = self.lateness, heapq.heappop
        due = []
        while entries and (h is None or entries[0][0] + lateness <= h):
            due.append(pop(entries))
        return due


class ClockDeadlines(IntDeadlines):
    """Processing time: windows of wall-clock time (ms) complete when the clock reaches their end; a window's
    result goes at the dataflow time the operator has reached then (no lateness: no record is late)."""

    __slots__ = ("clock",)

    def __init__(self, clock: Clock) -> None:
        super().__init__(0)
        self.clock = clock

    def reached(self, frontier: list[Any]) -> Any:
        return self.clock.now() if frontier else None

    def out_time(self, wid: Any, end: int) -> Any:
        return end              # a window's capability is found by its end (on the wall clock)

    def delivered(self, out_time: Any, resume: Any) -> bool:
        return False


class ProductDeadlines(Deadlines):
    """``Product`` times (windows inside an iteration, per round): a window sends at the time of its round with
    the outer coordinate moved to ``end + lateness``, once the input frontier has passed every time before it."""

    __slots__ = ("_open",)

    total = False

    def __init__(self, lateness: int, still_open: Callable[[Any], bool]) -> None:
        super().__init__(lateness)
        self._open = still_open             # the input's less_equal: records at that time may still come

    def rest(self, d: Any) -> Any:
        return with_outer(d, 0)

    def start_of(self, wid: Any) -> int:
        return wid[0]  # type: ignore[no-any-return]

    def out_time(self, wid: Any, end: int) -> Any:
        return with_outer(wid[1], end + self.lateness)

    def delivered(self, out_time: Any, resume: Any) -> bool:
        return False

    def due(self, entries: list[Any], frontier: list[Any], id_at: int) -> list[Any]:
        still_open, lateness = self._open, self.lateness
        due, kept = [], []
        for entry in entries:
            end, wid = entry[0], entry[id_at]
            if frontier and still_open(with_outer(wid[1], end + lateness - 1)):
                kept.append(entry)
            else:
                due.append(entry)
        if due:
            entries[:] = kept
            heapq.heapify(entries)
            due.sort()
        return due
