"""Operators that hold records until their time is complete: delay, accumulate, count, reclock.

Each holds a capability per pending time, so its frontier interest is
``IF_CAPABILITY``: while it holds nothing, time passing costs it nothing.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable

from ...errors import CapabilityError
from ...progress import FrontierInterest
from ..builder import OperatorBuilder
from ..capability import Capability, CapabilityRef
from ..stream import S

if TYPE_CHECKING:
    from ..ports import InputPort

__all__ = ["delay", "delay_batch", "accumulate", "count", "reclock"]

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
    stash = _Stash()
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

    def run() -> None:
        for ref, batch in inp.drain():
            time = ref.time
            if per_record:
                for record in batch:
                    stash.slot(ref, later(record, time), list)[1].append(record)
            else:
                stash.slot(ref, later(None, time), list)[1].extend(batch)
        for time, cap, records in stash.ready([inp]):
            out.push(time, records)
            cap.drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def delay(stream: S, fn: Callable[[Any, Any], Any]) -> S:
    return _delaying(stream, "Delay", fn, per_record=True)


def delay_batch(stream: S, fn: Callable[[Any], Any]) -> S:
    return _delaying(stream, "DelayBatch", lambda _record, time: fn(time), per_record=False)


def accumulate(stream: S, init: Any, fn: Callable[[Any, list[Any]], Any], *, name: str = "Accumulate") -> S:
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
    stash = _Stash()
    held: list[tuple[Any, list[Any]]] = []
    ttype = stream.scope.ttype

    def run() -> None:
        for ref, batch in data.drain():
            held.append((ref.time, batch))
        for ref, _ in ticks.drain():
            if ref.time not in stash.entries:
                stash.entries[ref.time] = [ref.retain(), None]
        for tick, cap, _ in stash.ready([data, ticks]):
            due = [record for time, batch in held if ttype.less_equal(time, tick) for record in batch]
            held[:] = [(time, batch) for time, batch in held if not ttype.less_equal(time, tick)]
            if due:
                out.push(tick, due)
            cap.drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]
