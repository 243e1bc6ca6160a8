"""Operators that hold records until their time is complete: delay, accumulate, count, reclock.

Each holds a capability per pending time (delay, accumulate and reclock in a
:class:`~.pool.CapabilityPool`; settle through its input's ``timed_order``), so its frontier interest is
``IF_CAPABILITY``: while it holds nothing, time passing costs it nothing.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from ...errors import CapabilityError
from ...progress import FrontierInterest
from ..builder import OperatorBuilder, check_function
from ..capability import Capability, CapabilityRef
from ..operator import Logic
from ..ports import OperatorOutput, TimeOrder
from ..stream import S
from .pool import CapabilityPool

__all__ = ["delay", "delay_batch", "accumulate", "count", "reclock", "settle"]

IF_CAPABILITY = FrontierInterest.IF_CAPABILITY

_ABSENT = object()
"""Nothing waits for a time yet (an accumulator may be ``None``)."""


class _Pending:
    """Per pending time, what goes out at it once the time is complete (the records moved to it, an accumulator),
    with a capability for the time from a :class:`~.pool.CapabilityPool`: held exactly while something waits."""

    __slots__ = ("values", "pool")

    def __init__(self, values: dict[Any, Any]) -> None:
        self.values = values
        """time -> what goes out at it (the dict may be kept state: restored on resume)."""
        self.pool: CapabilityPool[Any] = CapabilityPool()

    def restore(self, initial: Capability) -> None:
        """Hold the times of the values restored from a snapshot, from the operator's initial capability."""
        for time in self.values:
            self.pool.hold(time, initial)

    def slot(self, cap: Capability | CapabilityRef, time: Any, empty: Callable[[], Any]) -> Any:
        """What waits for ``time``: ``empty()`` (and the time held from ``cap``) if nothing did yet."""
        value = self.values.get(time, _ABSENT)
        if value is _ABSENT:
            self.pool.hold(time, cap)
            value = self.values[time] = empty()
        return value

    def put(self, time: Any, value: Any) -> None:
        """Replace what waits for ``time`` (held already: see :meth:`slot`)."""
        self.values[time] = value

    def take_passed(self, still_open: Callable[[Any], bool]) -> list[tuple[Any, Capability, Any]]:
        """Remove the times for which ``still_open(time)`` is false, earliest first: each with its capability
        (the caller sends with it, then drops it) and what waited for it."""
        values = self.values
        return [(t, cap, values.pop(t)) for t, cap in self.pool.take_passed(still_open)]


class _NewTime:
    """``delay``'s function, checked: the time a record moves to must be a time of the scope, and not earlier."""

    __slots__ = ("name", "fn", "check_time", "less_equal")

    def __init__(self, name: str, fn: Callable[[Any, Any], Any], ttype: Any) -> None:
        self.name = name
        self.fn = fn
        self.check_time: Callable[[Any], None] = ttype.check_time
        self.less_equal: Callable[[Any, Any], bool] = ttype.less_equal

    def of(self, record: Any, time: Any) -> Any:
        """The time ``record``, at ``time``, moves to."""
        t = self.fn(record, time)
        try:
            self.check_time(t)
        except (TypeError, ValueError) as e:
            raise self.refused(t, time, e) from None
        if not self.less_equal(time, t):
            raise self.refused(t, time, None)
        return t

    def grouped(self, records: list[Any], time: Any) -> dict[Any, list[Any]]:
        """``records`` (at ``time``) by the time each moves to, in order: :meth:`of` for a whole batch, as one call
        (this loop is delay's cost per record)."""
        fn, check_time, less_equal = self.fn, self.check_time, self.less_equal
        groups: dict[Any, list[Any]] = {}
        for record in records:
            t = fn(record, time)
            try:
                check_time(t)
            except (TypeError, ValueError) as e:
                raise self.refused(t, time, e) from None
            if not less_equal(time, t):
                raise self.refused(t, time, None)
            group = groups.get(t)
            if group is None:
                groups[t] = [record]
            else:
                group.append(record)
        return groups

    def refused(self, t: Any, time: Any, error: Exception | None) -> CapabilityError:
        """The error for a new time ``t`` (of a record at ``time``) that is not a time (``error``), or earlier."""
        if error is not None:
            return CapabilityError(f"{self.name}: the function returned {t!r} for time {time!r}: {error}")
        return CapabilityError(f"{self.name}: the function returned {t!r} for a record at {time!r}; it must not be "
                               "earlier")


def _delaying(stream: S, name: str, new_time: Callable[[Any, Any], Any], per_record: bool) -> S:
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    op = builder.op
    later = _NewTime(name, new_time, stream.scope.ttype)

    def constructor(capabilities: list[Capability]) -> Logic:
        # Records move to their new time once their own time is complete (in order), so that what waits is
        # exactly what a snapshot between two times must keep.
        waiting = _Pending(op.recovery.keep("waiting", dict))    # new time -> records (restored on resume)
        waiting.restore(capabilities[0])
        capabilities[0].drop()
        order = inp.time_order()

        def run() -> None:
            for cap, batch in order.ready():
                time = cap.time
                if per_record:
                    for t, records in later.grouped(batch, time).items():
                        waiting.slot(cap, t, list).extend(records)
                else:
                    waiting.slot(cap, later.of(None, time), list).extend(batch)
            for t, held, records in waiting.take_passed(inp.less_equal):
                out.push(t, records)
                held.drop()

        return run

    builder.build(constructor)
    return result  # type: ignore[no-any-return]


def delay(stream: S, fn: Callable[[Any, Any], Any]) -> S:
    check_function(fn, stream.scope, "Delay", "the function", "delay(lambda r, t: t + 10)")
    return _delaying(stream, "Delay", fn, per_record=True)


def delay_batch(stream: S, fn: Callable[[Any], Any]) -> S:
    check_function(fn, stream.scope, "DelayBatch", "the function", "delay_batch(lambda t: t + 10)")
    return _delaying(stream, "DelayBatch", lambda _record, time: fn(time), per_record=False)


def accumulate(stream: S, init: Any, fn: Callable[[Any, list[Any]], Any], *, name: str = "Accumulate") -> S:
    check_function(fn, stream.scope, name, "the function", "accumulate(0, lambda acc, rs: acc + sum(rs))")
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    pending = _Pending({})

    def start() -> Any:
        return copy.copy(init)

    def run() -> None:
        for ref, batch in inp.drain():
            time = ref.time
            pending.put(time, fn(pending.slot(ref, time, start), batch))
        for time, cap, acc in pending.take_passed(inp.less_equal):
            out.push(time, [acc])
            cap.drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def count(stream: S) -> S:
    return accumulate(stream, 0, lambda acc, records: acc + len(records), name="Count")


class _HeldData:
    """``reclock``: the data not yet released, as ``[time, records]`` in the order it came (kept state: restored
    on resume), released at the clock's times."""

    __slots__ = ("batches", "less_equal")

    def __init__(self, batches: list[Any], less_equal: Callable[[Any, Any], bool]) -> None:
        self.batches = batches
        self.less_equal = less_equal

    def add(self, time: Any, records: list[Any]) -> None:
        self.batches.append([time, records])

    def take_until(self, t: Any) -> list[Any]:
        """The records of the times up to ``t``, in the order they came; forgotten here."""
        less_equal, batches = self.less_equal, self.batches
        due = [r for time, batch in batches if less_equal(time, t) for r in batch]
        batches[:] = [[time, batch] for time, batch in batches if not less_equal(time, t)]   # (in place: kept)
        return due


class _ClockTimes:
    """``reclock``: the clock's times not yet passed, in the order they came (kept state: restored on resume),
    each with a capability from a :class:`~.pool.CapabilityPool` to release the data held until it."""

    __slots__ = ("times", "pool")

    def __init__(self, times: list[Any]) -> None:
        self.times = times
        self.pool: CapabilityPool[Any] = CapabilityPool()

    def restore(self, initial: Capability) -> None:
        """Hold the times restored from a snapshot, from the operator's initial capability."""
        for time in self.times:
            if time not in self.pool:
                self.pool.hold(time, initial)

    def add(self, cap: Capability) -> None:
        """The clock ticked at ``cap.time`` (held once, however often it ticks there)."""
        time = cap.time
        if time not in self.pool:
            self.pool.hold(time, cap)
            self.times.append(time)

    def take_passed(self, still_open: Callable[[Any], bool]) -> list[tuple[Any, Capability]]:
        """Remove the times for which ``still_open(time)`` is false, earliest first, with their capabilities (the
        caller sends with each, then drops it)."""
        taken = self.pool.take_passed(still_open)
        for time, _ in taken:
            self.times.remove(time)
        return taken


def reclock(stream: S, clock: S) -> S:
    builder = OperatorBuilder(stream.scope, "Reclock")
    data = builder.new_input(stream, interest=IF_CAPABILITY)
    ticks = builder.new_input(clock, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    op = builder.op
    less_equal = stream.scope.ttype.less_equal

    def open_on_either(t: Any) -> bool:
        return data.less_equal(t) or ticks.less_equal(t)

    def constructor(capabilities: list[Capability]) -> Logic:
        # Both inputs in one time order: what waits between two times is what a snapshot must keep.
        held = _HeldData(op.recovery.keep("held", list), less_equal)
        clock_times = _ClockTimes(op.recovery.keep("clock", list))
        clock_times.restore(capabilities[0])
        capabilities[0].drop()
        order = TimeOrder.joint([data, ticks])

        def run() -> None:
            for cap, (records, tick) in order.ready_all():
                if records:
                    held.add(cap.time, records)
                if tick:
                    clock_times.add(cap)
            for t, tick_cap in clock_times.take_passed(open_on_either):
                due = held.take_until(t)
                if due:
                    out.push(t, due)
                tick_cap.drop()

        return run

    builder.build(constructor)
    return result  # type: ignore[no-any-return]


def settle(stream: S) -> S:
    builder = OperatorBuilder(stream.scope, "Settle")
    inp = builder.new_input(stream, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    output = OperatorOutput(out)

    def constructor(capabilities: list[Capability]) -> Logic:
        capabilities[0].drop()
        order = inp.timed_order()

        def run() -> None:
            for time, records in order.ready():
                with order.capability(time).delayed(time) as cap:
                    output.session(cap).give_many(records)

        return run

    builder.build(constructor)
    return result  # type: ignore[no-any-return]
