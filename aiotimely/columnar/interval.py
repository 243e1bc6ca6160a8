"""Interval joins of two columnar streams on event-time columns: ``left.interval_join(right, on="user",
time=("ts", "ts"), lower=0, upper=5)`` (docs/columnar.md, "Joins").

The record path's ``interval_join`` (:mod:`aiotimely.dataflow.operators.join`), on columns and event time:

* a left row at event time ``t`` and a right row at ``u`` with equal keys match when ``lower <= u - t <= upper``;
  their pair goes at time ``max(t, u) + lateness``, once both input frontiers have passed it (held under a
  :class:`~aiotimely.dataflow.operators.pool.CapabilityPool`, one capability per pending output time);
* event time is a row's integer column, or its batch's dataflow time (``None``), and a row at dataflow time
  ``d`` with ``t < d - lateness`` is late and dropped, as for columnar windows (:mod:`.eventtime`): so every
  row still to come has ``t >= F - lateness``, ``F`` the least time of the input frontiers, and a kept left row
  goes once ``t + upper < F - lateness``, a right one once ``u - lower < F - lateness``;
* both inputs are exchanged by the hash of their key columns, complete times are applied in order (both inputs
  in one :class:`~.joint.JointOrder`), each time's new rows joined in one Polars join with the kept rows of the
  other side and with each other; the kept rows and the pairs waiting for their output time are the
  operator's ``keyed_state`` (by key hash, :class:`~.kept.KeptRows`), so snapshots hold them and a resume, on
  any number of workers, gives the crash-free result.

With ``time=None`` and ``lateness=0`` it is exactly the record path's ``interval_join`` on dataflow times.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..dataflow.operators.pool import CapabilityPool
from ..errors import GraphError
from ..progress import FrontierInterest
from .batch import ArrowBatch
from .eventtime import TIME, check_time_column, with_event_time
from .exchange import key_hash
from .join import JoinPlan
from .joint import JointOrder, least_time
from .kept import HASH, KeptRows
from .results import OUT

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import Logic, OperatorRuntime
    from ..dataflow.ports import InputPort, OutputPort
    from .stream import ColumnarStream

__all__ = ["IntervalPlan", "IntervalRows", "KeptCounts", "interval_join_operator", "kept_rows"]

LEFT_TIME = "__aiotimely_left_time__"
RIGHT_TIME = "__aiotimely_right_time__"
SIDE_TIMES = (LEFT_TIME, RIGHT_TIME)
"""The columns of each side's event time (``Int64``) while the operator keeps and matches rows."""

TimeColumns = str | tuple[str | None, str | None] | None
"""``time=`` as given: one column for both sides, a column per side, or ``None`` (the dataflow time)."""


class IntervalPlan:
    """What ``interval_join(...)``'s arguments chose, checked as the dataflow is built: the keys and result
    columns (a :class:`~.join.JoinPlan`), each side's event-time column, the bounds and the lateness."""

    __slots__ = ("join", "times", "lower", "upper", "lateness", "place")

    def __init__(self, join: JoinPlan, left: ColumnarStream, right: ColumnarStream, *, time: TimeColumns,
                 lower: Any, upper: Any, lateness: Any) -> None:
        place = self.place = join.place
        self.join = join
        ttype = left.scope.ttype
        if not (ttype.totally_ordered and type(ttype.minimum) is int):
            raise GraphError(f"{place}: interval_join compares int times, and {left.scope.describe()} has "
                             f"{ttype.name} times: use it outside iterative scopes, or join rows of the same time "
                             "with join")
        for what, bound in (("lower", lower), ("upper", upper)):
            if type(bound) is not int:
                raise TypeError(f"{place}: {what} must be an int (a difference of event times), got {bound!r}")
        if lower > upper:
            raise ValueError(f"{place}: lower ({lower}) must not be greater than upper ({upper})")
        if type(lateness) is not int or lateness < 0:
            raise ValueError(f"{place}: lateness must be a non-negative int, not {lateness!r}")
        self.lower, self.upper, self.lateness = lower, upper, lateness
        self.times = _time_columns(time, place)
        check_time_column(left.schema, self.times[0], f"{place} (left)")
        check_time_column(right.schema, self.times[1], f"{place} (right)")


def _time_columns(time: TimeColumns, place: str) -> tuple[str | None, str | None]:
    """``time=`` as a column (or ``None``) per side."""
    if time is None or isinstance(time, str):
        return time, time
    if isinstance(time, tuple) and len(time) == 2:
        return time[0], time[1]
    raise TypeError(f"{place}: time names the event-time columns: time=\"ts\" for both sides, time=(\"ts\", "
                    f"\"at\") for each, or None for the dataflow time; not {time!r:.100}")


@dataclass(frozen=True, slots=True)
class KeptCounts:
    """What an interval join keeps on one worker now: left and right rows that may still meet rows to come,
    pairs waiting for their output time, and how many late rows it has dropped so far."""

    left: int
    right: int
    pairs: int
    late: int


_STATES: weakref.WeakKeyDictionary[Any, dict[str, IntervalRows]] = weakref.WeakKeyDictionary()
"""The interval joins of each scope (on this worker), by operator name: for :func:`kept_rows`."""


def kept_rows(scope: Any, name: str = "IntervalJoin") -> KeptCounts:
    """What the interval join called ``name`` (the last one built so, in ``scope`` on this worker) keeps now: a
    view to watch its state shrink as the frontiers move (``KeyError`` if there is none)."""
    return _STATES[scope][name].counts()


class IntervalRows:
    """One worker's kept state: each side's rows (user columns, its event time, the key hash), and the pairs
    waiting for their output time (result columns, the key hash, :data:`~.results.OUT`), with one pool
    capability per pending output time."""

    __slots__ = ("plan", "pool", "kept", "pending", "late")

    def __init__(self, plan: IntervalPlan, pool: CapabilityPool[Any]) -> None:
        self.plan = plan
        self.pool = pool
        self.kept: list[pl.DataFrame | None] = [None, None]
        """Left rows, right rows (``None``: none)."""
        self.pending: pl.DataFrame | None = None
        self.late = 0

    # -- what snapshots hold ------------------------------------------------------------

    def side(self, side: int) -> pl.DataFrame | None:
        """The rows side ``side`` keeps (what a snapshot holds, by their key hash)."""
        return self.kept[side]

    def waiting(self) -> pl.DataFrame | None:
        """The pairs waiting for their output time (what a snapshot holds, by their key hash)."""
        return self.pending

    def restore(self, left: pl.DataFrame | None, right: pl.DataFrame | None, pairs: pl.DataFrame | None,
                initial: Capability, resume: int) -> None:
        """Keep again what a snapshot held (resumed at ``resume``): the pairs whose output time is before it were
        sent, and delivered, before the snapshot, and are forgotten; the others wait again, held from
        ``initial``."""
        self.kept = [left, right]
        if pairs is not None:
            self._wait(pairs.filter(pl.col(OUT) >= resume), initial)

    def counts(self) -> KeptCounts:
        """How many rows are kept now (see :class:`KeptCounts`)."""
        left, right, pending = self.kept[0], self.kept[1], self.pending
        return KeptCounts(0 if left is None else left.height, 0 if right is None else right.height,
                          0 if pending is None else pending.height, self.late)

    # -- applying a complete time -------------------------------------------------------

    def prepared(self, side: int, frame: pl.DataFrame | None, d: int) -> pl.DataFrame | None:
        """Side ``side``'s rows of dataflow time ``d``, with their event time and key hash; the late ones
        (``t < d - lateness``) dropped and counted; ``None`` if none is left."""
        if frame is None or frame.height == 0:
            return None
        plan = self.plan
        timed = with_event_time(frame, plan.times[side], d).rename({TIME: SIDE_TIMES[side]})
        on_time = timed.filter(pl.col(SIDE_TIMES[side]) >= d - plan.lateness)
        self.late += timed.height - on_time.height
        if on_time.height == 0:
            return None
        keys = plan.join.right_keys if side else plan.join.left_keys
        return on_time.with_columns(key_hash(on_time, keys).alias(HASH))

    def apply(self, cap: Capability, left: pl.DataFrame | None, right: pl.DataFrame | None) -> None:
        """Apply the new rows of the complete time ``cap.time`` (prepared): the pairs they make with the kept rows
        and with each other wait for their output times; then they are kept too."""
        pairs = self._pairs(left, right)
        if pairs is not None:
            self._wait(pairs, cap)
        for side, new in ((0, left), (1, right)):
            if new is not None:
                old = self.kept[side]
                self.kept[side] = new if old is None else _appended(old, new)

    def _pairs(self, left: pl.DataFrame | None, right: pl.DataFrame | None) -> pl.DataFrame | None:
        """The matching pairs of the new rows with the kept ones of the other side and with each other (each pair
        once: new left rows meet every right row, kept right rows meet the new ones), with their output time."""
        match = self.plan.join.match
        rights = _both(self.kept[1], right)
        parts = []
        if left is not None and rights is not None:
            parts.append(match(left, rights.drop(HASH)))
        kept_left = self.kept[0]
        if kept_left is not None and right is not None:
            parts.append(match(kept_left, right.drop(HASH)))
        if not parts:
            return None
        plan = self.plan
        t, u = pl.col(LEFT_TIME), pl.col(RIGHT_TIME)
        joined = pl.concat(parts, how="vertical").filter((u - t >= plan.lower) & (u - t <= plan.upper))
        if joined.height == 0:
            return None
        return joined.with_columns((pl.max_horizontal(t, u) + plan.lateness).alias(OUT)).drop(SIDE_TIMES)

    def _wait(self, pairs: pl.DataFrame, cap: Capability) -> None:
        """Add ``pairs`` (with :data:`OUT`) to those waiting; each new output time is held, once, from ``cap``."""
        if pairs.height == 0:
            return
        pool = self.pool
        for out in pairs.get_column(OUT).unique().to_list():
            if out not in pool:
                pool.hold(out, cap)
        self.pending = pairs if self.pending is None else _appended(self.pending, pairs)

    # -- what the frontiers complete ----------------------------------------------------

    def due(self, low: int | None) -> list[tuple[int, pl.DataFrame]]:
        """Take the pairs whose output time the frontiers have passed (every one once both inputs are complete:
        ``low`` is ``None``), a frame per output time, earliest first, without the internal columns."""
        pending = self.pending
        if pending is None:
            return []
        if low is None:
            due, self.pending = pending, None
        else:
            passed = pl.col(OUT) < low
            due = pending.filter(passed)
            if due.height == 0:
                return []
            rest = pending.filter(~passed)
            self.pending = rest if rest.height else None
        parts = due.partition_by(OUT, as_dict=True, maintain_order=True)
        return sorted(((int(out), part.drop(OUT, HASH)) for (out,), part in parts.items()), key=lambda p: p[0])

    def evict(self, low: int | None) -> None:
        """Forget the kept rows that no row still to come can meet (all of them once both inputs are complete:
        ``low`` is ``None``); every row to come has an event time at or after ``low - lateness``."""
        if low is None:
            self.kept = [None, None]
            return
        plan = self.plan
        horizon = low - plan.lateness
        for side, reach in ((0, plan.upper), (1, -plan.lower)):
            rows = self.kept[side]
            if rows is None:
                continue
            times = rows.get_column(SIDE_TIMES[side])
            earliest = times.min()
            assert isinstance(earliest, int)
            if earliest + reach >= horizon:      # (a read, no copy: most activations forget nothing)
                continue
            alive = rows.filter(times + reach >= horizon)
            self.kept[side] = alive if alive.height else None


def _both(kept: pl.DataFrame | None, new: pl.DataFrame | None) -> pl.DataFrame | None:
    """Kept and new rows of one side together (``None`` if neither has any)."""
    if kept is None:
        return new
    return kept if new is None else pl.concat([kept, new], how="vertical")


def _appended(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """``new`` after ``old``: chunks appended, and gathered into one once they are many."""
    both = pl.concat([old, new], how="vertical", rechunk=False)
    return both.rechunk() if both.n_chunks() > 32 else both


class IntervalJoinLogic:
    """The interval join's logic, called at each activation (and at every frontier change): apply the complete
    times in order, send the pairs whose output time the frontiers have passed, then forget the kept rows
    nothing to come can meet."""

    __slots__ = ("op", "inputs", "order", "rows", "output", "pool")

    def __init__(self, op: OperatorRuntime, inputs: tuple[InputPort, InputPort], rows: IntervalRows,
                 output: OutputPort, pool: CapabilityPool[Any]) -> None:
        self.op = op
        self.inputs = inputs
        self.order = JointOrder(inputs, op, op.name)
        self.rows = rows
        self.output = output
        self.pool = pool

    def __call__(self) -> None:
        rows = self.rows
        for cap, left, right in self.order.ready():
            d = self.op.current_time = cap.time          # (an error names the time being applied)
            rows.apply(cap, rows.prepared(0, left, d), rows.prepared(1, right, d))
        low = least_time(self.inputs)
        for out, frame in rows.due(low):
            batch: Any = ArrowBatch(frame)      # (a container: ports move them as they move lists)
            self.output.push(out, batch)
            self.pool.release(out)
        rows.evict(low)


def interval_join_operator(left: ColumnarStream, right: ColumnarStream, plan: IntervalPlan, name: str) -> Any:
    """The interval join of ``plan`` on the two streams (of Arrow batches): the stream of its results."""
    builder = OperatorBuilder(left.scope, name)
    join = plan.join
    a, b = (builder.new_input(s.stream, exchange=join.exchange(side), interest=FrontierInterest.ALWAYS)
            for side, s in enumerate((left, right)))
    out, result = builder.new_output()
    op = builder.op

    def construct(capabilities: list[Capability]) -> Logic:
        initial = capabilities[0]
        pool: CapabilityPool[Any] = CapabilityPool()
        rows = IntervalRows(plan, pool)
        kept = (a.keyed_state("left", KeptRows), b.keyed_state("right", KeptRows), a.keyed_state("pairs", KeptRows))
        kept[0].bind(lambda: rows.side(0))
        kept[1].bind(lambda: rows.side(1))
        kept[2].bind(rows.waiting)
        rows.restore(kept[0].take(), kept[1].take(), kept[2].take(), initial, op.recovery.resume_time())
        initial.drop()
        _STATES.setdefault(left.scope, {})[name] = rows
        return IntervalJoinLogic(op, (a, b), rows, out, pool)

    builder.build(construct)
    return result
