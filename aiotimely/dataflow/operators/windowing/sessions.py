"""Session windows: per key, a record at ``t`` opens ``[t, t + gap)``, and sessions that overlap merge (their
accumulators merged). Each session waits for its own deadline; one that grew or merged leaves a stale entry in
the heap, skipped when it comes due."""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable

from ...capability import Capability
from ...windowing import Aggregation
from ..pool import CapabilityPool
from .deadlines import Deadlines
from .eventtime import EventTime
from .state import Due, Windows

__all__ = ["SessionWindows"]


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


class SessionWindows(Windows):
    """Sessions of ``gap``: per key, a batch's records in runs (sorted by time), each merged with the open
    sessions it overlaps; records whose own session is complete at the batch's time are late."""

    __slots__ = ("event_time", "key", "gap", "_index", "_seq")

    def __init__(self, windows: dict[Any, dict[Any, list[Any]]], event_time: EventTime,
                 key: Callable[[Any], Any] | None, gap: int, deadlines: Deadlines, pool: CapabilityPool[Any],
                 aggregation: Aggregation, *, early: bool) -> None:
        super().__init__(windows, deadlines, pool, aggregation, keyed=key is not None, early=early)
        self.event_time = event_time
        self.key = key
        self.gap = gap
        self._index: list[tuple[Any, int, Any, Any]] = []   # (end, n, key, window id), by end
        self._seq = itertools.count()

    def track(self, k: Any, wid: Any, w: list[Any], cap: Capability) -> None:
        end = w[0]
        heapq.heappush(self._index, (end, next(self._seq), k, wid))
        self.pool.hold(self.deadlines.out_time(wid, end), cap)

    def by_key(self, records: list[Any], d: Any) -> dict[Any, list[tuple[int, Any]]]:
        """The batch's ``(event time, record)`` pairs, per key."""
        key, event_time = self.key, self.event_time
        by_key: dict[Any, list[tuple[int, Any]]] = {}
        for t, r in event_time.pairs(records, d):
            if type(t) is not int:
                raise event_time.error(records, d)
            k = 0 if key is None else key(r)
            pairs = by_key.get(k)
            if pairs is None:
                by_key[k] = [(t, r)]
            else:
                pairs.append((t, r))
        return by_key

    def apply(self, cap: Capability, records: list[Any]) -> None:
        d = cap.time
        deadlines, windows, pool = self.deadlines, self.windows, self.pool
        horizon, total, rest = deadlines.horizon(d), deadlines.total, deadlines.rest(d)
        start_of, out_time = deadlines.start_of, deadlines.out_time
        init, add, merge, touched, gap, late = self.init, self.add, self.merge, self.touched, self.gap, self.late
        assert merge is not None
        for k, pairs in self.by_key(records, d).items():
            pairs.sort(key=_first)
            runs: list[list[Any]] = []                 # [start, end, records] of overlapping sessions, in order
            for t, r in pairs:
                if t + gap <= horizon:                 # its own session [t, t + gap) is complete at d: late
                    late.append(r)
                elif runs and t < runs[-1][1]:
                    run = runs[-1]
                    run[1] = max(run[1], t + gap)
                    run[2].append(r)
                else:
                    runs.append([t, t + gap, [r]])
            if not runs:
                continue
            per_key = windows.get(k)
            if per_key is None:
                per_key = windows[k] = {}
            for s, e, recs in runs:
                olds = sorted((start_of(wid), wid) for wid, w in per_key.items()
                              if (total or wid[1] == rest) and start_of(wid) < e and s < w[0] and w[0] > horizon)
                acc: Any = None
                for ws, wid in olds:                   # the open sessions it overlaps, earliest first
                    we, wacc = per_key.pop(wid)
                    s, e = min(s, ws), max(e, we)
                    acc = wacc if acc is None else merge(acc, wacc)
                    pool.release(out_time(wid, we))
                acc = add(init() if acc is None else acc, recs)
                wid = s if total else (s, rest)
                w = per_key[wid] = [e, acc]
                if touched is not None:
                    touched[(k, wid)] = w
                heapq.heappush(self._index, (e, next(self._seq), k, wid))
                pool.hold(out_time(wid, e), cap)

    def close(self, frontier: list[Any]) -> Due:
        sending: dict[Any, list[Any]] = {}
        counts: dict[Any, int] = {}
        windows, result, keyed = self.windows, self.result, self.keyed
        out_time, start_of = self.deadlines.out_time, self.deadlines.start_of
        for end, _, k, wid in self.deadlines.due(self._index, frontier, 3):
            per_key = windows.get(k)
            w = per_key.get(wid) if per_key is not None else None
            if w is None or w[0] != end:
                continue                              # merged into another session, or grown
            del per_key[wid]                          # type: ignore[union-attr]
            if not per_key:
                del windows[k]
            t = out_time(wid, end)
            span = (start_of(wid), end)
            sending.setdefault(t, []).append((k, span, result(w[1])) if keyed else (span, result(w[1])))
            counts[t] = counts.get(t, 0) + 1
        return sending, counts

    def next_end(self) -> Any:
        return self._index[0][0] if self._index else None
