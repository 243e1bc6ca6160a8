"""Joins of two keyed streams of ``(key, value)`` pairs: at the same time, or within an interval of times.

Both route their inputs by key (see :mod:`.keyed`). ``join`` pairs records of one time and keeps them only
while the other side may still send at that time; ``interval_join`` pairs records whose times are near each
other, keeping them (``keyed_state``, applied in time order) until no record they could match can come.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...errors import GraphError
from ...progress.timestamp import IntType
from ..builder import OperatorBuilder
from ..capability import Capability
from ..operator import Logic
from ..ports import TimeOrder
from ..stream import S
from .keyed import keyed_input, pair

__all__ = ["join", "interval_join"]


def join(left: S, right: S) -> S:
    """``(key, (l, r))`` for every left ``(key, l)`` and right ``(key, r)`` at the same time, sent as soon as
    both have arrived; a time's records are forgotten once the other input's frontier has passed it."""
    method = "join"
    builder = OperatorBuilder(left.scope, "Join")
    inputs = (keyed_input(builder, left, method), keyed_input(builder, right, method))
    out, result = builder.new_output()
    # time -> [capability (to be woken as frontiers pass it), left values by key, right values by key]
    pending: dict[Any, list[Any]] = {}

    def take(side: int) -> None:
        port, other = inputs[side], inputs[1 - side]
        for ref, batch in port.drain():
            time = ref.time
            entry = pending.get(time)
            if entry is None:
                entry = pending[time] = [ref.retain(), {}, {}]
            mine: dict[Any, list[Any]] = entry[1 + side]
            theirs: dict[Any, list[Any]] = entry[2 - side]
            keep = other.less_equal(time)   # the other side may still send at this time
            sent: list[Any] = []
            for record in batch:
                if type(record) is not tuple or len(record) != 2:
                    record = pair(record, method)
                key, value = record
                matches = theirs.get(key)
                if matches:
                    if side == 0:
                        sent.extend([(key, (value, match)) for match in matches])
                    else:
                        sent.extend([(key, (match, value)) for match in matches])
                if keep:
                    values = mine.get(key)
                    if values is None:
                        mine[key] = [value]
                    else:
                        values.append(value)
            if sent:
                out.push(time, sent)

    def run() -> None:
        take(0)
        take(1)
        if pending:
            a, b = inputs
            for time in [t for t in pending]:
                entry = pending[time]
                left_done, right_done = not a.less_equal(time), not b.less_equal(time)
                if right_done:
                    entry[1].clear()   # no right record at this time will come to meet these
                if left_done:
                    entry[2].clear()
                if left_done and right_done:
                    del pending[time]
                    entry[0].drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def interval_join(left: S, right: S, lower: int, upper: int) -> S:
    """``(key, (l, r))`` for every left ``(key, l)`` at ``tl`` and right ``(key, r)`` at ``tr`` with
    ``lower <= tr - tl <= upper`` (int times), at time ``max(tl, tr)`` once that time is complete."""
    method = "interval_join"
    scope = left.scope
    if not isinstance(scope.ttype, IntType):
        raise GraphError(f"{method} compares int times (tr - tl), and {scope.describe()} has {scope.ttype.name} "
                         "times: use it outside iterative scopes, or join records of the same time with join")
    for name, bound in (("lower", lower), ("upper", upper)):
        if type(bound) is not int:
            raise TypeError(f"{method}: {name} must be an int (a difference of times), got {bound!r}")
    if lower > upper:
        raise ValueError(f"{method}: lower ({lower}) must not be greater than upper ({upper})")
    builder = OperatorBuilder(scope, "IntervalJoin")
    a, b = keyed_input(builder, left, method), keyed_input(builder, right, method)
    out, result = builder.new_output()
    op = builder.op
    reach = (upper, -lower)
    """A record at ``t`` of side 0 (left) meets right records up to ``t + upper``; of side 1 (right), left
    records up to ``t - lower``: once every time up to there is applied, it can meet nothing more."""
    keeps = (upper > 0, lower < 0)
    """Whether a side's records may meet records of later times at all (same-time pairs need no keeping)."""

    def constructor(capabilities: list[Capability]) -> Logic:
        capabilities[0].drop()
        # key -> [left (time, value)s, right (time, value)s], each in time order
        kept: dict[Any, list[list[tuple[int, Any]]]] = a.keyed_state("records", dict)
        # per side, (time, keys with records kept at that time), in time order: which records expire when
        index: tuple[deque[tuple[int, set[Any]]], deque[tuple[int, set[Any]]]] = (deque(), deque())
        for side in (0, 1):
            times: dict[int, set[Any]] = {}
            for key, sides in kept.items():
                for t, _ in sides[side]:
                    times.setdefault(t, set()).add(key)
            index[side].extend(sorted(times.items(), key=lambda item: item[0]))
        order = TimeOrder.joint([a, b])

        def keep(side: int, key: Any, time: int, values: list[Any]) -> None:
            stored = kept.get(key)
            if stored is None:
                stored = kept[key] = [[], []]
            stored[side].extend([(time, value) for value in values])
            times = index[side]
            if times and times[-1][0] == time:
                times[-1][1].add(key)
            else:
                times.append((time, {key}))

        def apply(time: int, lefts: list[Any], rights: list[Any]) -> list[Any]:
            new: dict[Any, tuple[list[Any], list[Any]]] = {}
            for side, records in ((0, lefts), (1, rights)):
                for record in records:
                    if type(record) is not tuple or len(record) != 2:
                        record = pair(record, method)
                    entry = new.get(record[0])
                    if entry is None:
                        entry = new[record[0]] = ([], [])
                    entry[side].append(record[1])
            sent: list[Any] = []
            for key, (new_lefts, new_rights) in new.items():
                stored = kept.get(key)
                if stored is not None:   # every kept record is of an earlier time
                    if new_lefts:
                        for tr, r in stored[1]:
                            if lower <= tr - time <= upper:
                                sent.extend([(key, (left, r)) for left in new_lefts])
                    if new_rights:
                        for tl, left in stored[0]:
                            if lower <= time - tl <= upper:
                                sent.extend([(key, (left, r)) for r in new_rights])
                if new_lefts and new_rights and lower <= 0 <= upper:
                    sent.extend([(key, (left, r)) for left in new_lefts for r in new_rights])
                if new_lefts and keeps[0]:
                    keep(0, key, time, new_lefts)
                if new_rights and keeps[1]:
                    keep(1, key, time, new_rights)
            return sent

        def expire() -> None:
            """Forget the records that no record of a time still to be applied can meet: every such time is at
            or after an input's frontier (a time held in the order is one that an input has not completed)."""
            lows = [frontier[0] for frontier in (list(a.frontier), list(b.frontier)) if frontier]
            if not lows:
                kept.clear()
                index[0].clear()
                index[1].clear()
                return
            bound = min(lows)
            for side in (0, 1):
                times, far = index[side], reach[side]
                while times and times[0][0] + far < bound:
                    for key in times.popleft()[1]:
                        stored = kept.get(key)
                        if stored is None:
                            continue
                        records = stored[side]
                        n = 0
                        while n < len(records) and records[n][0] + far < bound:
                            n += 1
                        del records[:n]
                        if not stored[0] and not stored[1]:
                            del kept[key]

        def run() -> None:
            for cap, (lefts, rights) in order.ready_all():
                time = op.current_time = cap.time
                sent = apply(time, lefts, rights)
                if sent:
                    out.push(time, sent)
            if kept:
                expire()

        return run

    builder.build(constructor)
    return result  # type: ignore[no-any-return]

