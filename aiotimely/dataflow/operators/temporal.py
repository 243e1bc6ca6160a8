"""Operators that hold records until their time is complete: delay, accumulate, count, reclock.

Each holds a capability per pending time, so its frontier interest is
``IF_CAPABILITY``: while it holds nothing, time passing costs it nothing.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable

from ...errors import CapabilityError
from ...progress import FrontierInterest
from ..builder import OperatorBuilder, check_function
from ..capability import Capability, CapabilityRef
from ..operator import Logic
from ..ports import OperatorOutput, TimeOrder
from ..stream import S

if TYPE_CHECKING:
    from ..ports import InputPort

__all__ = ["delay", "delay_batch", "accumulate", "count", "reclock", "settle"]

IF_CAPABILITY = FrontierInterest.IF_CAPABILITY


class _Stash:
    """Per pending time: the capability to send at it, and what to send."""

    def __init__(self) -> None:
        self.entries: dict[Any, list[Any]] = {}   # time -> [capability, payload]

    def slot(self, ref: CapabilityRef, time: Any, empty: Callable[[], Any]) -> list[Any]:
        entry = self.entries.get(time)
        if entry is None:
            entry = self.entries[time] = [ref.delayed(time), empty()]
        return entry

    def ready(self, frontiers: list[InputPort]) -> list[tuple[Any, Capability, Any]]:
        """Pop the entries whose time every frontier has passed, earliest first."""
        due = sorted(t for t in self.entries if not any(f.less_equal(t) for f in frontiers))
        return [(t, *self.entries.pop(t)) for t in due]


def _delaying(stream: S, name: str, new_time: Callable[[Any, Any], Any], per_record: bool) -> S:
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    op = builder.op
    ttype = stream.scope.ttype

    def later(record: Any, time: Any) -> Any:
        t = new_time(record, time)
        try:
            ttype.check_time(t)
        except (TypeError, ValueError) as e:
            raise CapabilityError(f"{name}: the function returned {t!r} for time {time!r}: {e}") from None
        if not ttype.less_equal(time, t):
            raise CapabilityError(
                f"{name}: the function returned {t!r} for a record at {time!r}; it must not be earlier"
            )
        return t

    def constructor(capabilities: list[Capability]) -> Logic:
        # Records move to their new time once their own time is complete (in order), so that what waits is
        # exactly what a snapshot between two times must keep.
        waiting: dict[Any, list[Any]] = op.recovery.keep("waiting", dict)    # new time -> records (restored on resume)
        held = {t: capabilities[0].delayed(t) for t in waiting}
        capabilities[0].drop()
        order = inp.time_order()

        def slot(cap: Capability, t: Any) -> list[Any]:
            records = waiting.get(t)
            if records is None:
                held[t] = cap.delayed(t)
                records = waiting[t] = []
            return records

        def run() -> None:
            for cap, batch in order.ready():
                time = cap.time
                if per_record:
                    for record in batch:
                        slot(cap, later(record, time)).append(record)
                else:
                    slot(cap, later(None, time)).extend(batch)
            for t in sorted(t for t in held if not inp.less_equal(t)):
                out.push(t, waiting.pop(t))
                held.pop(t).drop()

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
    stash = _Stash()

    def run() -> None:
        for ref, batch in inp.drain():
            entry = stash.slot(ref, ref.time, lambda: copy.copy(init))
            entry[1] = fn(entry[1], batch)
        for time, cap, acc in stash.ready([inp]):
            out.push(time, [acc])
            cap.drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def count(stream: S) -> S:
    return accumulate(stream, 0, lambda acc, records: acc + len(records), name="Count")


def reclock(stream: S, clock: S) -> S:
    builder = OperatorBuilder(stream.scope, "Reclock")
    data = builder.new_input(stream, interest=IF_CAPABILITY)
    ticks = builder.new_input(clock, interest=IF_CAPABILITY)
    out, result = builder.new_output()
    op = builder.op
    ttype = stream.scope.ttype

    def constructor(capabilities: list[Capability]) -> Logic:
        # Both inputs in one time order: what waits between two times is what a snapshot must keep.
        held: list[Any] = op.recovery.keep("held", list)     # [time, records] of data not yet released
        clocks: list[Any] = op.recovery.keep("clock", list)  # clock times not yet passed
        tick_caps = {t: capabilities[0].delayed(t) for t in clocks}
        capabilities[0].drop()
        order = TimeOrder.joint([data, ticks])

        def run() -> None:
            for cap, (records, tick) in order.ready_all():
                if records:
                    held.append([cap.time, records])
                if tick and cap.time not in tick_caps:
                    tick_caps[cap.time] = cap.delayed(cap.time)
                    clocks.append(cap.time)
            for t in sorted(t for t in tick_caps if not data.less_equal(t) and not ticks.less_equal(t)):
                due = [r for time, batch in held if ttype.less_equal(time, t) for r in batch]
                held[:] = [[time, batch] for time, batch in held if not ttype.less_equal(time, t)]
                if due:
                    out.push(t, due)
                clocks.remove(t)
                tick_caps.pop(t).drop()

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
