"""Fixed windows (tumbling, sliding): a record's windows depend on its event time alone, so a window id (its
start) is shared by every key that has it open, and waits, and holds its output time, once for all of them."""

from __future__ import annotations

import heapq
from typing import Any

from ...capability import Capability
from ...windowing import Aggregation
from ..pool import CapabilityPool
from .assign import Assigner
from .deadlines import Deadlines
from .state import Due, Windows

__all__ = ["FixedWindows", "GroupedWindows"]


class FixedWindows(Windows):
    """Tumbling or sliding windows of ``size`` (base class of :class:`GroupedWindows` and of the combined ones):
    a window id waits in a heap by end and holds one pool hold while any key has it open."""

    __slots__ = ("open_windows", "size", "_members", "_ends")

    def __init__(self, windows: dict[Any, dict[Any, list[Any]]], size: int, deadlines: Deadlines,
                 pool: CapabilityPool[Any], aggregation: Aggregation, *, keyed: bool, early: bool,
                 open_windows: dict[tuple[Any, Any], list[Any]] | None = None) -> None:
        super().__init__(windows, deadlines, pool, aggregation, keyed=keyed, early=early)
        self.open_windows: dict[tuple[Any, Any], list[Any]] = {} if open_windows is None else open_windows
        """(key, window id) -> [end, accumulator], the same lists as :attr:`windows` (given: shared with an
        assigner's fast path)."""
        self.size = size
        self._members: dict[Any, list[Any]] = {}        # window id -> the keys with it open
        self._ends: list[tuple[Any, Any]] = []          # (end, window id) of every open window id, by end

    def track(self, k: Any, wid: Any, w: list[Any], cap: Capability) -> None:
        self.open_windows[(k, wid)] = w
        keys = self._members.get(wid)
        if keys is None:
            self._members[wid] = [k]
            end = w[0]
            heapq.heappush(self._ends, (end, wid))
            self.pool.hold(self.deadlines.out_time(wid, end), cap)
        else:
            keys.append(k)

    def open(self, k: Any, wid: Any, end: int, cap: Capability) -> list[Any]:
        """A new, empty window ``wid`` of key ``k``, waiting (as :meth:`track`, inline: once per new window)."""
        w = [end, self.init()]
        per_key = self.windows.get(k)
        if per_key is None:
            self.windows[k] = {wid: w}
        else:
            per_key[wid] = w
        self.open_windows[(k, wid)] = w
        keys = self._members.get(wid)
        if keys is None:
            self._members[wid] = [k]
            heapq.heappush(self._ends, (end, wid))
            self.pool.hold(self.deadlines.out_time(wid, end), cap)
        else:
            keys.append(k)
        return w

    def close(self, frontier: list[Any]) -> Due:
        sending: dict[Any, list[Any]] = {}
        counts: dict[Any, int] = {}
        windows, open_windows, members, result, keyed = (self.windows, self.open_windows, self._members,
                                                         self.result, self.keyed)
        out_time, start_of = self.deadlines.out_time, self.deadlines.start_of
        for end, wid in self.deadlines.due(self._ends, frontier, 1):
            t = out_time(wid, end)
            span = (start_of(wid), end)
            batch = sending.setdefault(t, [])
            counts[t] = counts.get(t, 0) + 1
            for k in members.pop(wid):
                per_key = windows[k]
                w = per_key.pop(wid)
                if not per_key:
                    del windows[k]
                del open_windows[(k, wid)]
                batch.append((k, span, result(w[1])) if keyed else (span, result(w[1])))
        return sending, counts

    def next_end(self) -> Any:
        return self._ends[0][0] if self._ends else None


class GroupedWindows(FixedWindows):
    """Fixed windows of records: a batch grouped by ``(key, start)`` by the assigner, then one ``add`` per group
    (the late ones, for windows complete at the batch's time, to :attr:`late`)."""

    __slots__ = ("assigner",)

    def __init__(self, windows: dict[Any, dict[Any, list[Any]]], assigner: Assigner, size: int,
                 deadlines: Deadlines, pool: CapabilityPool[Any], aggregation: Aggregation, *, keyed: bool,
                 early: bool, open_windows: dict[tuple[Any, Any], list[Any]]) -> None:
        super().__init__(windows, size, deadlines, pool, aggregation, keyed=keyed, early=early,
                         open_windows=open_windows)
        self.assigner = assigner

    def apply(self, cap: Capability, records: list[Any]) -> None:
        d = cap.time
        deadlines = self.deadlines
        horizon = deadlines.horizon(d)  # windows ending at or before it are complete at d: their records are late
        late = self.late
        groups = self.assigner.assign(records, d, horizon, late)
        total, rest = deadlines.total, deadlines.rest(d)
        size, add, touched, window_get = self.size, self.add, self.touched, self.open_windows.get
        for gk, recs in groups.items():
            s = gk[1]
            if type(s) is not int:
                raise self.assigner.event_time.error(records, d)
            end = s + size
            if end <= horizon:
                late.extend(recs)
                continue
            if total:
                w = window_get(gk)
                if w is None:
                    w = self.open(gk[0], s, end, cap)
            else:
                w = window_get((gk[0], (s, rest)))
                if w is None:
                    w = self.open(gk[0], (s, rest), end, cap)
            w[1] = add(w[1], recs)
            if touched is not None:
                touched[(gk[0], s if total else (s, rest))] = w
