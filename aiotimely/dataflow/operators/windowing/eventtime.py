"""How a window operator finds a record's event time: the dataflow time of its batch (the default), a function
of the record (``time=fn``), the time a timed record carries (``timed=True``: ``(t, record)`` pairs), or the
wall clock when the operator applies it (``time="processing"``).

The loops over records stay in the window classes (one pass per batch, no call per record beyond the user's
function); a strategy says, per batch, what those loops iterate over: :meth:`EventTime.pairs`.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable

from ....worker.clock import Clock
from .deadlines import outermost

__all__ = ["EventTime", "DataflowTime", "FieldTime", "TimedRecords", "ProcessingTime"]


def _zero(record: Any) -> int:
    return 0


class EventTime:
    """A record's event time (base class)."""

    __slots__ = ()

    function: Callable[[Any], Any] | None = None
    """The event time as a function of the record, when it is one (loops call it inline)."""

    per_batch = False
    """Every record of a batch has the same event time, :meth:`batch_time`."""

    def batch_time(self, d: Any) -> int:
        """The event time of every record of a batch at dataflow time ``d`` (when :attr:`per_batch`)."""
        raise NotImplementedError

    def pairs(self, records: list[Any], d: Any) -> Iterable[tuple[Any, Any]]:
        """``(event time, record)`` for each record of a batch at dataflow time ``d``."""
        return zip(itertools.repeat(self.batch_time(d)), records)

    def record_time(self, item: Any) -> Any:
        """The event time of one item of a batch (``None`` if the batch's time is it)."""
        return None

    def route(self, key: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
        """The exchange function for the input: by ``key`` of the record, or all to worker 0 without a key."""
        return _zero if key is None else key

    def error(self, records: list[Any], at: Any) -> TypeError:
        """The error for a batch at dataflow time ``at`` with an event time that is not an int: its first."""
        for r in records:
            t = self.record_time(r)
            if type(t) is not int:
                return TypeError(f"the event time of record {r!r:.200} is {t!r}: event times must be ints")
        return TypeError(f"an event time at dataflow time {at!r} is not an int")


class DataflowTime(EventTime):
    """The event time is the dataflow time (inside an iteration: its outermost coordinate)."""

    __slots__ = ()
    per_batch = True

    def batch_time(self, d: Any) -> int:
        return outermost(d)  # type: ignore[no-any-return]


class ProcessingTime(EventTime):
    """The event time is the clock's time (ms) when the operator applies the batch."""

    __slots__ = ("clock",)
    per_batch = True

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def batch_time(self, d: Any) -> int:
        return self.clock.now()


class FieldTime(EventTime):
    """The event time is ``fn(record)``, an int."""

    __slots__ = ("function",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.function = fn

    def pairs(self, records: list[Any], d: Any) -> Iterable[tuple[Any, Any]]:
        return zip(map(self.function, records), records, strict=True)  # type: ignore[arg-type]

    def record_time(self, item: Any) -> Any:
        return self.function(item)  # type: ignore[misc]


class TimedRecords(EventTime):
    """The records are timed pairs ``(t, record)`` (``Stream.timed``): the event time is ``t``."""

    __slots__ = ()

    def pairs(self, records: list[Any], d: Any) -> Iterable[tuple[Any, Any]]:
        return records

    def record_time(self, item: Any) -> Any:
        return item[0]

    def route(self, key: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
        if key is None:
            return _zero
        return lambda pair: key(pair[1])
