"""Which fixed windows (tumbling, sliding) the records of a batch fall in: a batch grouped by ``(key, window
start)``, so that each window adds its records in one ``add`` call.

One pass per batch, specialized when the operator is built (by window shape, event time, key and aggregation):
the loops call nothing per record but the user's key and time functions. Records for windows already complete
(late) are appended to ``late``; the window class checks the rest (see :class:`.fixed.FixedWindows`).
"""

from __future__ import annotations

from typing import Any, Callable, cast

from ...windowing import Sliding, Tumbling, WindowSpec
from .eventtime import EventTime

__all__ = ["Assigner", "BatchAssigner", "TumblingAssigner", "UnkeyedTumblingAssigner", "KeyedTumblingAssigner",
           "SteppingAssigner", "SlidingAssigner", "assigner_for"]

Groups = dict[tuple[Any, Any], list[Any]]


class Assigner:
    """Groups a batch by ``(key, window start)`` (base class); ``key=None`` puts every record under key 0."""

    __slots__ = ("event_time", "key")

    def __init__(self, event_time: EventTime, key: Callable[[Any], Any] | None) -> None:
        self.event_time = event_time
        self.key = key

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        """The batch at dataflow time ``d`` grouped by ``(key, start)``; late records (for windows ending at or
        before ``horizon``) are appended to ``late`` or left in their groups, for the caller to find."""
        raise NotImplementedError


class BatchAssigner(Assigner):
    """A batch whose records share one event time (the dataflow time, or the wall clock): its windows are found
    once, and the records grouped by key only."""

    __slots__ = ("starts",)

    def __init__(self, spec: Tumbling | Sliding, event_time: EventTime, key: Callable[[Any], Any] | None) -> None:
        super().__init__(event_time, key)
        self.starts = spec.starts

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        starts = self.starts(self.event_time.batch_time(d))
        key = self.key
        if key is None:
            return {(0, s): records for s in starts}
        by_key: dict[Any, list[Any]] = {}
        get = by_key.get
        for r in records:
            k = key(r)
            g = get(k)
            if g is None:
                by_key[k] = [r]
            else:
                g.append(r)
        return {(k, s): g for k, g in by_key.items() for s in starts}


class TumblingAssigner(Assigner):
    """Tumbling windows over each record's own event time (here: timed pairs): its window's start by
    arithmetic, ``t - (t - offset) % size``."""

    __slots__ = ("size", "offset")

    def __init__(self, spec: Tumbling, event_time: EventTime, key: Callable[[Any], Any] | None) -> None:
        super().__init__(event_time, key)
        self.size, self.offset = spec.size, spec.offset

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        key, size, offset = self.key, self.size, self.offset
        groups: Groups = {}
        get = groups.get
        for t, r in self.event_time.pairs(records, d):
            gk = (0 if key is None else key(r), t - (t - offset) % size)
            g = get(gk)
            if g is None:
                groups[gk] = [r]
            else:
                g.append(r)
        return groups


class UnkeyedTumblingAssigner(TumblingAssigner):
    """Tumbling windows, ``time=fn``, no key."""

    __slots__ = ()

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        time_of, size, offset = self.event_time.function, self.size, self.offset
        assert time_of is not None
        groups: Groups = {}
        get = groups.get
        for r in records:
            t = time_of(r)
            gk = (0, t - (t - offset) % size)
            g = get(gk)
            if g is None:
                groups[gk] = [r]
            else:
                g.append(r)
        return groups


class KeyedTumblingAssigner(TumblingAssigner):
    """Tumbling windows, ``time=fn`` and ``key=``."""

    __slots__ = ()

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        time_of, key, size, offset = self.event_time.function, self.key, self.size, self.offset
        assert time_of is not None and key is not None
        groups: Groups = {}
        get = groups.get
        for r in records:
            t = time_of(r)
            gk = (key(r), t - (t - offset) % size)
            g = get(gk)
            if g is None:
                groups[gk] = [r]
            else:
                g.append(r)
        return groups


class SteppingAssigner(TumblingAssigner):
    """The fast path of tumbling windows (``time=fn``, ``key=``, an aggregation that adds one record at a time,
    int times, no early results): a record of a window already open is added to it at once (``step``); only
    the others (new windows, late records, bad times) are grouped, for the window class."""

    __slots__ = ("step", "open_windows")

    def __init__(self, spec: Tumbling, event_time: EventTime, key: Callable[[Any], Any],
                 step: Callable[[Any, Any], Any], open_windows: dict[tuple[Any, Any], list[Any]]) -> None:
        super().__init__(spec, event_time, key)
        self.step = step
        self.open_windows = open_windows         # (key, start) -> [end, accumulator], the window class's

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        time_of, key, size, offset = self.event_time.function, self.key, self.size, self.offset
        assert time_of is not None and key is not None
        step, window_get = self.step, self.open_windows.get
        groups: Groups = {}
        get = groups.get
        for r in records:
            t = time_of(r)
            gk = (key(r), t - (t - offset) % size)
            w = window_get(gk)
            if w is not None and w[0] > horizon:
                w[1] = step(w[1], r)
            else:
                g = get(gk)
                if g is None:
                    groups[gk] = [r]
                else:
                    g.append(r)
        return groups


class SlidingAssigner(Assigner):
    """Sliding windows over each record's own event time: a record goes to each of its windows not complete at
    the batch's time; if it missed one, it is late (once, however many it missed)."""

    __slots__ = ("starts", "size")

    def __init__(self, spec: Tumbling | Sliding, event_time: EventTime, key: Callable[[Any], Any] | None) -> None:
        super().__init__(event_time, key)
        self.starts, self.size = spec.starts, spec.size

    def assign(self, records: list[Any], d: Any, horizon: int, late: list[Any]) -> Groups:
        starts_of, size, key = self.starts, self.size, self.key
        groups: Groups = {}
        get = groups.get
        for t, r in self.event_time.pairs(records, d):
            if type(t) is not int:
                raise self.event_time.error(records, d)
            k = 0 if key is None else key(r)
            missed = False
            for s in starts_of(t):
                if s + size <= horizon:    # a window of its that is complete at d: the record is late
                    missed = True
                    continue
                gk = (k, s)
                g = get(gk)
                if g is None:
                    groups[gk] = [r]
                else:
                    g.append(r)
            if missed:
                late.append(r)
        return groups


def assigner_for(spec: WindowSpec, event_time: EventTime, key: Callable[[Any], Any] | None,
                 step: Callable[[Any, Any], Any] | None, open_windows: dict[tuple[Any, Any], list[Any]]) -> Assigner:
    """The assigner for fixed windows ``spec``; ``step``, when given, allows the stepping fast path (it adds one
    record to an accumulator, and ``open_windows`` are the windows by ``(key, start)``)."""
    fixed = cast("Tumbling | Sliding", spec)        # (any spec with starts() and size: Tumbling's by arithmetic)
    if event_time.per_batch:
        return BatchAssigner(fixed, event_time, key)
    if type(spec) is Tumbling:
        if event_time.function is None:
            return TumblingAssigner(spec, event_time, key)
        if key is None:
            return UnkeyedTumblingAssigner(spec, event_time, key)
        if step is not None:
            return SteppingAssigner(spec, event_time, key, step, open_windows)
        return KeyedTumblingAssigner(spec, event_time, key)
    return SlidingAssigner(fixed, event_time, key)
