"""Joins of two keyed streams of ``(key, value)`` pairs: at the same time, or within an interval of times.

Both route their inputs by key (see :mod:`.keyed`). ``join`` pairs records of one time and keeps them only
while the other side may still send at that time; ``interval_join`` pairs records whose times are near each
other, keeping them (``keyed_state``, applied in time order) until no record they could match can come.

Each is a thin function that checks its arguments and composes small parts: for ``join``, the records of the
pending times (:class:`PendingTimes`, with a :class:`~.pool.CapabilityPool` holding one capability per time) and
the logic that matches each batch as it comes (:class:`SameTimeJoin`); for ``interval_join``, the kept records
with their expiry (:class:`KeptRecords`, :class:`ExpiryIndex`), the matching of a complete time
(:class:`IntervalMatcher`) and the logic that drives them (:class:`IntervalJoinLogic`).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, TypeVar

from ...errors import GraphError
from ...progress.timestamp import IntType
from ..builder import OperatorBuilder
from ..capability import Capability, CapabilityRef
from ..operator import Logic
from ..ports import TimeOrder
from ..stream import S
from .keyed import keyed_input, pair
from .pool import CapabilityPool

if TYPE_CHECKING:
    from ..operator import OperatorRuntime
    from ..ports import InputPort, OutputPort

__all__ = ["join", "interval_join", "PendingTimes", "SameTimeDriver"]

Sides = tuple[dict[Any, list[Any]], dict[Any, list[Any]]]
"""The records of one time: left values by key, right values by key."""


# -- join: records of the same time ------------------------------------------------------------------------------


def join(left: S, right: S) -> S:
    """``(key, (l, r))`` for every left ``(key, l)`` and right ``(key, r)`` at the same time, sent as soon as
    both have arrived; a time's records are forgotten once the other input's frontier has passed it."""
    method = "join"
    builder = OperatorBuilder(left.scope, "Join")
    inputs = (keyed_input(builder, left, method), keyed_input(builder, right, method))
    out, result = builder.new_output()
    builder.build_function(SameTimeJoin(inputs, out, method))
    return result  # type: ignore[no-any-return]


H = TypeVar("H")


def _new_sides() -> Sides:
    return ({}, {})


def _forget_side(sides: Sides, side: int) -> None:
    sides[side].clear()


class PendingTimes(Generic[H]):
    """A same-time join's rows of each time that an input may still send at (a holder ``H`` per time, made by
    ``new``; ``forget(holder, side)`` drops one side's), and a capability per such time (from a
    :class:`~.pool.CapabilityPool`), held only so that frontier changes wake the operator until it may forget
    the time. ``join`` keeps :data:`Sides` (the default); a columnar join keeps frames."""

    __slots__ = ("pool", "_times", "_new", "_forget")

    def __init__(self, new: Callable[[], H] = _new_sides,  # type: ignore[assignment]
                 forget: Callable[[H, int], None] = _forget_side) -> None:  # type: ignore[assignment]
        self.pool: CapabilityPool[Any] = CapabilityPool()
        self._times: dict[Any, H] = {}
        self._new = new
        self._forget = forget

    def at(self, ref: CapabilityRef) -> H:
        """What is kept at ``ref.time`` (nothing yet, and the time held, if it is new)."""
        time = ref.time
        held = self._times.get(time)
        if held is None:
            held = self._times[time] = self._new()
            self.pool.hold(time, ref)
        return held

    def forget_passed(self, left_open: Callable[[Any], bool], right_open: Callable[[Any], bool]) -> None:
        """Forget each side's rows of the times the other input has passed (nothing will come to meet them), and
        the times both have passed (``left_open``, ``right_open``: the inputs' ``less_equal``)."""
        times, forget = self._times, self._forget
        for time in list(times):
            held = times[time]
            left_done, right_done = not left_open(time), not right_open(time)
            if right_done:
                forget(held, 0)   # no right row at this time will come to meet these
            if left_done:
                forget(held, 1)
            if left_done and right_done:
                del times[time]
                self.pool.release(time)

    def __bool__(self) -> bool:
        return bool(self._times)


class SameTimeDriver(Generic[H]):
    """A same-time join's logic, called at each activation: take what came on each input (:meth:`take`: match
    each batch as it comes and keep it while the other side may still send at its time), then forget what the
    frontiers have passed. ``join`` and the columnar join differ only in :meth:`take`."""

    __slots__ = ("inputs", "output", "pending")

    def __init__(self, inputs: tuple[InputPort, InputPort], output: OutputPort, pending: PendingTimes[H]) -> None:
        self.inputs = inputs
        self.output = output
        self.pending = pending

    def __call__(self) -> None:
        self.take(0)
        self.take(1)
        if self.pending:
            left, right = self.inputs
            self.pending.forget_passed(left.less_equal, right.less_equal)

    def take(self, side: int) -> None:
        """Match what came on input ``side`` (0: left, 1: right), batch by batch."""
        raise NotImplementedError


class SameTimeJoin(SameTimeDriver[Sides]):
    """``join``'s logic: pair each record with the other side's values of its key at its time."""

    __slots__ = ("method",)

    def __init__(self, inputs: tuple[InputPort, InputPort], output: OutputPort, method: str) -> None:
        super().__init__(inputs, output, PendingTimes())
        self.method = method

    def take(self, side: int) -> None:
        port, other = self.inputs[side], self.inputs[1 - side]
        pending, output, method = self.pending, self.output, self.method
        for ref, batch in port.drain():
            time = ref.time
            sides = pending.at(ref)
            keep = other.less_equal(time)   # the other side may still send at this time
            sent = _match_batch(side, batch, sides[side], sides[1 - side], keep, method)
            if sent:
                output.push(time, sent)


def _match_batch(side: int, batch: list[Any], mine: dict[Any, list[Any]], theirs: dict[Any, list[Any]],
                 keep: bool, method: str) -> list[Any]:
    """The pairs that ``batch`` (of input ``side``) makes with ``theirs`` (the other side's values by key, at the
    same time); with ``keep``, the batch's values are added to ``mine``."""
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
    return sent


# -- interval_join: records of times near each other -------------------------------------------------------------


def interval_join(left: S, right: S, lower: int, upper: int) -> S:
    """``(key, (l, r))`` for every left ``(key, l)`` at ``tl`` and right ``(key, r)`` at ``tr`` with
    ``lower <= tr - tl <= upper`` (int times), at time ``max(tl, tr)`` once that time is complete."""
    method = "interval_join"
    scope = left.scope
    _check_interval(scope, lower, upper, method)
    builder = OperatorBuilder(scope, "IntervalJoin")
    a, b = keyed_input(builder, left, method), keyed_input(builder, right, method)
    out, result = builder.new_output()
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Logic:
        capabilities[0].drop()
        kept = KeptRecords(a.keyed_state("records", dict), lower, upper)
        matcher = IntervalMatcher(kept, lower, upper, method)
        return IntervalJoinLogic(op, (a, b), matcher, kept, out)

    builder.build(constructor)
    return result  # type: ignore[no-any-return]


def _check_interval(scope: Any, lower: Any, upper: Any, method: str) -> None:
    """Refuse an interval join where times are not ints, or bounds that are not ints or are out of order."""
    if not isinstance(scope.ttype, IntType):
        raise GraphError(f"{method} compares int times (tr - tl), and {scope.describe()} has {scope.ttype.name} "
                         "times: use it outside iterative scopes, or join records of the same time with join")
    for name, bound in (("lower", lower), ("upper", upper)):
        if type(bound) is not int:
            raise TypeError(f"{method}: {name} must be an int (a difference of times), got {bound!r}")
    if lower > upper:
        raise ValueError(f"{method}: lower ({lower}) must not be greater than upper ({upper})")


class ExpiryIndex:
    """One side's kept times, earliest first, each with the keys that keep records at it: which keys to visit
    when the frontier passes a time (rather than every key)."""

    __slots__ = ("_times",)

    def __init__(self) -> None:
        self._times: deque[tuple[int, set[Any]]] = deque()

    def add(self, time: int, key: Any) -> None:
        """``key`` keeps records at ``time``, which is no earlier than any time added before."""
        times = self._times
        if times and times[-1][0] == time:
            times[-1][1].add(key)
        else:
            times.append((time, {key}))

    def extend(self, keys_by_time: dict[int, set[Any]]) -> None:
        """Add many times at once, in any order (restoring): each with the keys that keep records at it."""
        self._times.extend(sorted(keys_by_time.items(), key=lambda item: item[0]))

    def pop_before(self, limit: int) -> Iterator[set[Any]]:
        """Remove the times earlier than ``limit``, earliest first: the keys of each."""
        times = self._times
        while times and times[0][0] < limit:
            yield times.popleft()[1]

    def clear(self) -> None:
        self._times.clear()


class KeptRecords:
    """``interval_join``'s kept records: ``key -> [left (time, value)s, right (time, value)s]``, each in time
    order (the operator's keyed state: saved in snapshots, moved by key), with an :class:`ExpiryIndex` per side
    to forget them once nothing they could meet can come."""

    __slots__ = ("by_key", "reach", "_index")

    def __init__(self, by_key: dict[Any, list[list[tuple[int, Any]]]], lower: int, upper: int) -> None:
        self.by_key = by_key
        """key -> [left (time, value)s, right (time, value)s] (read by the matcher; changed only here)."""
        self.reach = (upper, -lower)
        """A record at ``t`` of side 0 (left) meets right records up to ``t + upper``; of side 1 (right), left
        records up to ``t - lower``: once every time up to there is applied, it can meet nothing more."""
        self._index = (ExpiryIndex(), ExpiryIndex())
        for side in (0, 1):     # (restored from a snapshot: index what was kept)
            times: dict[int, set[Any]] = {}
            for key, sides in by_key.items():
                for t, _ in sides[side]:
                    times.setdefault(t, set()).add(key)
            self._index[side].extend(times)

    def keep(self, side: int, key: Any, time: int, values: list[Any]) -> None:
        """Keep ``values`` of input ``side`` at ``time`` (no earlier than any kept before) under ``key``."""
        stored = self.by_key.get(key)
        if stored is None:
            stored = self.by_key[key] = [[], []]
        stored[side].extend([(time, value) for value in values])
        self._index[side].add(time, key)

    def expire(self, bound: int | None) -> None:
        """Forget the records that no record of a time still to be applied can meet: every such time is at or
        after ``bound``, the least time of the inputs' frontiers (``None``: both are empty; forget everything)."""
        by_key = self.by_key
        if bound is None:
            by_key.clear()
            for index in self._index:
                index.clear()
            return
        for side in (0, 1):
            limit = bound - self.reach[side]     # records at times before it can meet nothing more
            for keys in self._index[side].pop_before(limit):
                for key in keys:
                    stored = by_key.get(key)
                    if stored is None:
                        continue
                    records = stored[side]
                    n = 0
                    while n < len(records) and records[n][0] < limit:
                        n += 1
                    del records[:n]
                    if not stored[0] and not stored[1]:
                        del by_key[key]

    def __bool__(self) -> bool:
        return bool(self.by_key)


class IntervalMatcher:
    """The pairs that a complete time's new records make, with the kept records of earlier times and with each
    other; it keeps the new records that records of later times may still meet."""

    __slots__ = ("kept", "lower", "upper", "same_time", "keeps", "method")

    def __init__(self, kept: KeptRecords, lower: int, upper: int, method: str) -> None:
        self.kept = kept
        self.lower, self.upper = lower, upper
        self.same_time = lower <= 0 <= upper
        """Records of the same time meet."""
        self.keeps = (upper > 0, lower < 0)
        """Whether a side's records may meet records of later times at all (same-time pairs need no keeping)."""
        self.method = method

    def pairs(self, time: int, lefts: list[Any], rights: list[Any]) -> list[Any]:
        """Apply the records of ``time`` (every kept record is of an earlier time): the pairs they make."""
        lower, upper, kept, keeps = self.lower, self.upper, self.kept, self.keeps
        stored_by_key = kept.by_key
        sent: list[Any] = []
        for key, (new_lefts, new_rights) in _by_key(lefts, rights, self.method).items():
            stored = stored_by_key.get(key)
            if stored is not None:
                if new_lefts:
                    for tr, r in stored[1]:
                        if lower <= tr - time <= upper:
                            sent.extend([(key, (left, r)) for left in new_lefts])
                if new_rights:
                    for tl, left in stored[0]:
                        if lower <= time - tl <= upper:
                            sent.extend([(key, (left, r)) for r in new_rights])
            if new_lefts and new_rights and self.same_time:
                sent.extend([(key, (left, r)) for left in new_lefts for r in new_rights])
            if new_lefts and keeps[0]:
                kept.keep(0, key, time, new_lefts)
            if new_rights and keeps[1]:
                kept.keep(1, key, time, new_rights)
        return sent


def _by_key(lefts: list[Any], rights: list[Any], method: str) -> dict[Any, tuple[list[Any], list[Any]]]:
    """The values of one time's records, by key (in the order keys first appear, lefts first): left, right."""
    new: dict[Any, tuple[list[Any], list[Any]]] = {}
    for side, records in ((0, lefts), (1, rights)):
        for record in records:
            if type(record) is not tuple or len(record) != 2:
                record = pair(record, method)
            entry = new.get(record[0])
            if entry is None:
                entry = new[record[0]] = ([], [])
            entry[side].append(record[1])
    return new


class IntervalJoinLogic:
    """``interval_join``'s logic, called at each activation: match the complete times in order (both inputs in
    one :class:`TimeOrder`, so the kept records are a snapshot-able cut between times) and send each time's
    pairs at it; then forget the records that the frontiers leave nothing to meet."""

    __slots__ = ("op", "inputs", "order", "matcher", "kept", "output")

    def __init__(self, op: OperatorRuntime, inputs: tuple[InputPort, InputPort], matcher: IntervalMatcher,
                 kept: KeptRecords, output: OutputPort) -> None:
        self.op = op
        self.inputs = inputs
        self.order = TimeOrder.joint(list(inputs))
        self.matcher = matcher
        self.kept = kept
        self.output = output

    def __call__(self) -> None:
        op, matcher, output = self.op, self.matcher, self.output
        for cap, (lefts, rights) in self.order.ready_all():
            time = op.current_time = cap.time     # (an error names the time being applied)
            sent = matcher.pairs(time, lefts, rights)
            if sent:
                output.push(time, sent)
        if self.kept:
            self.kept.expire(self.least_time())

    def least_time(self) -> int | None:
        """The least time of the inputs' frontiers (a time held in the order is one an input has not
        completed): ``None`` once both are empty."""
        lows = [frontier[0] for frontier in (list(port.frontier) for port in self.inputs) if frontier]
        return min(lows) if lows else None
