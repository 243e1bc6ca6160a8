"""Combining before the exchange (a map-side aggregation): each worker folds its records into one accumulator per
key and window of each batch (:class:`Combiner`), and the window operator merges those partial accumulators into
its windows (:class:`CombinedWindows`): fewer, smaller messages, and without ``key=`` the work is no longer all
on one worker."""

from __future__ import annotations

from typing import Any, Callable

from ...capability import Capability
from ...windowing import Aggregation, Sliding, Tumbling
from ..pool import CapabilityPool
from .deadlines import Deadlines
from .eventtime import EventTime
from .fixed import FixedWindows

__all__ = ["Combiner", "CombinedWindows"]


class Combiner:
    """The combiner (a batch transform, before the exchange): a batch at dataflow time ``d`` as ``(key, window
    start, accumulator)`` per key and window, leaving out windows complete at ``d`` (their records are late,
    and dropped)."""

    __slots__ = ("starts", "size", "init", "add", "key", "event_time", "lateness")

    def __init__(self, spec: Tumbling | Sliding, aggregation: Aggregation, key: Callable[[Any], Any] | None,
                 event_time: EventTime, lateness: int) -> None:
        self.starts, self.size = spec.starts, spec.size
        self.init, self.add = aggregation.init, aggregation.add
        self.key = key
        self.event_time = event_time
        self.lateness = lateness

    def __call__(self, d: int, records: list[Any]) -> list[Any]:
        starts_of, size, key = self.starts, self.size, self.key
        horizon = d - self.lateness
        groups: dict[tuple[Any, int], list[Any]] = {}
        get = groups.get
        for t, r in self.event_time.pairs(records, d):
            if type(t) is not int:
                raise TypeError(f"the event time of record {r!r:.200} is {t!r}: event times must be ints")
            k = 0 if key is None else key(r)
            for s in starts_of(t):
                if s + size > horizon:
                    g = get((k, s))
                    if g is None:
                        groups[(k, s)] = [r]
                    else:
                        g.append(r)
        init, add = self.init, self.add
        return [(k, s, add(init(), recs)) for (k, s), recs in groups.items()]


class CombinedWindows(FixedWindows):
    """Fixed windows fed by a combiner: each ``(key, start, accumulator)`` merged into its window (the combiner
    sends none for a window complete at the time applied: it drops late records, as ``late="drop"`` says)."""

    __slots__ = ()

    def __init__(self, windows: dict[Any, dict[Any, list[Any]]], size: int, deadlines: Deadlines,
                 pool: CapabilityPool[Any], aggregation: Aggregation, *, keyed: bool, early: bool) -> None:
        super().__init__(windows, size, deadlines, pool, aggregation, keyed=keyed, early=early)

    def apply(self, cap: Capability, partials: list[Any]) -> None:
        size, merge, touched, window_get = self.size, self.merge, self.touched, self.open_windows.get
        assert merge is not None
        for k, s, acc in partials:
            w = window_get((k, s))
            if w is None:
                w = self.open(k, s, s + size, cap)
            w[1] = merge(w[1], acc)
            if touched is not None:
                touched[(k, s)] = w
