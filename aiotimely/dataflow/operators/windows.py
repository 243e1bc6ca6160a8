"""Windows over event time, closed by the frontier: ``window(stream, Tumbling(10), Agg.count(), key=...)``.

A window ``[start, end)`` is complete once no record that belongs in it can still come: the input frontier has
passed ``end + lateness``. That is exact, not a watermark guess, and it works for partially ordered times.

* **Event time.** By default a record's event time is its dataflow time (inside an iterative scope, the
  outermost ``int`` coordinate of its ``Product`` time; windows are then per round). With ``time=fn`` it is
  ``fn(record)``, an ``int``; with ``timed=True`` the records are timed pairs ``(t, record)`` (see
  ``Stream.timed``), whose ``t`` is never earlier than their batch's time. With ``time="processing"`` it is the
  wall clock (ms) when the operator applies the record; such windows close by the wall clock (a timer task of
  the operator wakes it), and their results go at the dataflow time the input frontier has reached then.
* **Lateness.** A record at dataflow time ``d`` whose window has ``end + lateness <= d`` is *late*: its window
  is (or may already have been) closed. Late records are dropped, counted or sent on a second stream. The rule
  depends on the record and ``d`` only, so results do not depend on how records and frontiers happen to arrive.
* **Output.** A window's result is sent at time ``end + lateness`` (inside an iterative scope: at the record's
  time with its outer coordinate moved there), the first time it is complete: one capability per distinct
  such time, held only while a window waits for it (frontier interest ``IF_CAPABILITY``). With ``early=True``
  each time applied also sends the partial result of every window it changed, at that time; with ``early=N``
  (an int), only at the first time applied in each period of ``N`` units of dataflow time, for every window
  changed since.
* **State.** Open windows are kept with ``keyed_state`` (by the key the input is exchanged by) and applied by
  complete times in order (``time_order``), so snapshots hold them and a resume, on any number of workers,
  gives the crash-free result.

:func:`window` checks its arguments and composes the operator from the small parts of :mod:`.windowing` (an
event-time strategy, deadlines, the open windows of one kind, the logic) and a
:class:`~aiotimely.dataflow.operators.pool.CapabilityPool` for the output times; processing time reads the clock
given (:mod:`aiotimely.worker.clock`), the wall clock by default.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, cast

from ...progress import FrontierInterest
from ...worker.clock import WALL_CLOCK, Clock
from ..builder import OperatorBuilder, check_function
from ..capability import Capability
from ..operator import Logic, OperatorRuntime
from ..ports import InputPort, OperatorOutput
from ..stream import S
from ..windowing import Aggregation, Sessions, Sliding, Tumbling, WindowSpec, combine
from .maplike import batch_operator
from .pool import CapabilityPool
from .windowing.assign import assigner_for
from .windowing.combined import CombinedWindows, Combiner
from .windowing.deadlines import ClockDeadlines, Deadlines, IntDeadlines, ProductDeadlines, outermost
from .windowing.eventtime import DataflowTime, EventTime, FieldTime, ProcessingTime, TimedRecords
from .windowing.fixed import GroupedWindows
from .windowing.logic import ClockTimer, EarlyResults, LateRecords, WindowLogic
from .windowing.sessions import SessionWindows
from .windowing.state import Windows

__all__ = ["window", "LATE_POLICIES"]

IF_CAPABILITY = FrontierInterest.IF_CAPABILITY

LATE_POLICIES = ("drop", "count", "stream")
"""What ``window(late=...)`` does with late records: drop them, send their count per time, or send them."""

PROCESSING = "processing"
"""``window(time=PROCESSING)``: event time is the wall clock (ms) when the operator applies the record."""


def window(stream: S, spec: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
           key: Callable[[Any], Any] | None = None, time: Callable[[Any], int] | str | None = None,
           timed: bool = False, lateness: int = 0, late: str = "drop", early: bool | int = False,
           combine: bool | None = None, name: str = "Window", clock: Clock | None = None) -> S | tuple[S, S]:
    """Records aggregated per key and window; see the module docstring. Results are ``(key, (start, end),
    value)`` (without ``key=``: ``((start, end), value)``, all on one worker); with ``late="count"`` or
    ``"stream"``, also a stream of late-record counts or of the late records, at their dataflow times. With
    ``early=True``, also each window's partial result whenever a time changes it, at that time (before
    ``end + lateness``: the result at ``end + lateness`` is the final one). ``combine``: see :func:`_combining`.
    ``clock`` (not offered by ``Stream.window``): what processing time reads, the wall clock by default."""
    plan = _Plan(stream, spec, aggregation, key=key, time=time, timed=timed, lateness=lateness, late=late,
                 early=early, combine=combine, name=name, clock=clock)
    if plan.combined:
        stream = batch_operator(stream, f"{name}.combine", plan.combiner())
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, exchange=plan.route(), interest=IF_CAPABILITY)
    port, results = builder.new_output()
    if late == "drop":
        builder.build(plan.constructor(builder.op, inp, OperatorOutput(port), None))
        return results  # type: ignore[no-any-return]
    late_port, late_stream = builder.new_output()
    builder.build(plan.constructor(builder.op, inp, OperatorOutput(port), OperatorOutput(late_port)))
    return results, late_stream


class _Plan:
    """What the operator's arguments chose, checked: the event time, the kind of windows and their deadlines,
    early results, what happens to late records, the clock; it picks the parts and builds the logic from them."""

    __slots__ = ("spec", "agg", "key", "lateness", "late", "period", "processing", "total", "clock", "event_time",
                 "combined")

    def __init__(self, stream: Any, spec: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
                 key: Callable[[Any], Any] | None, time: Any, timed: bool, lateness: int, late: str,
                 early: bool | int, combine: bool | None, name: str, clock: Clock | None) -> None:
        self.agg = _check(spec, aggregation, lateness, late, time, name)
        _check_functions(stream.scope, key, time, name)
        self.period = _check_early(early, name)
        self.total = _check_times(stream.scope.ttype, time, timed, lateness, name)
        self.spec, self.key, self.lateness, self.late = spec, key, lateness, late
        self.processing = time == PROCESSING
        self.clock: Clock = WALL_CLOCK if clock is None else clock
        self.event_time = _event_time(time, timed, self.clock)
        self.combined = _combining(combine, stream, spec, self.agg, key, self.processing, self.total, late, name)

    def combiner(self) -> Combiner:
        """The transform folding each batch before the exchange (when :attr:`combined`)."""
        spec = cast("Tumbling | Sliding", self.spec)
        return Combiner(spec, self.agg, self.key, self.event_time, self.lateness)

    def route(self) -> Callable[[Any], Any]:
        """The input's exchange function: by the key of a combined partial, or of the record."""
        return _first if self.combined else self.event_time.route(self.key)

    def deadlines(self, inp: InputPort) -> Deadlines:
        """When windows are complete: by the wall clock, or by the input frontier over int or ``Product`` times."""
        if self.processing:
            return ClockDeadlines(self.clock)
        return IntDeadlines(self.lateness) if self.total else ProductDeadlines(self.lateness, inp.less_equal)

    def windows(self, kept: dict[Any, dict[Any, list[Any]]], deadlines: Deadlines,
                pool: CapabilityPool[Any]) -> Windows:
        """The open windows of the kind asked for, over the kept state ``kept``."""
        agg, key, early = self.agg, self.key, self.period is not None
        keyed = key is not None
        if self.spec.merging:
            gap = cast(Sessions, self.spec).gap
            return SessionWindows(kept, self.event_time, key, gap, deadlines, pool, agg, early=early)
        spec = cast("Tumbling | Sliding", self.spec)
        if self.combined:
            return CombinedWindows(kept, spec.size, deadlines, pool, agg, keyed=keyed, early=early)
        open_windows: dict[tuple[Any, Any], list[Any]] = {}
        step = agg.step if self.total and not early else None     # (the fast path adds record by record)
        assigner = assigner_for(spec, self.event_time, key, step, open_windows)
        return GroupedWindows(kept, assigner, spec.size, deadlines, pool, agg, keyed=keyed, early=early,
                              open_windows=open_windows)

    def constructor(self, op: OperatorRuntime, inp: InputPort, out: OperatorOutput,
                    late_out: OperatorOutput | None) -> Callable[[list[Capability]], Logic]:
        """The operator's constructor: the open windows (restored from a snapshot, when resumed) with the
        capability pool their output times are held in, and the logic that drives them."""
        deadlines = self.deadlines(inp)
        late = LateRecords(self.late, late_out)
        early = None if self.period is None else EarlyResults(self.period)

        def construct(capabilities: list[Capability]) -> Logic:
            initial = capabilities[0]
            for extra in capabilities[1:]:
                extra.drop()
            pool: CapabilityPool[Any] = CapabilityPool(retime=not self.processing)
            windows = self.windows(inp.keyed_state("windows", dict), deadlines, pool)
            windows.restore(initial, op.recovery.resume_time())
            initial.drop()
            timer = ClockTimer(op, self.clock, pool) if self.processing else None
            return WindowLogic(op, inp, windows, out, pool, early, late, timer)

        return construct


def _check(spec: Any, aggregation: Any, lateness: Any, late: Any, time: Any, name: str) -> Aggregation:
    if not isinstance(spec, WindowSpec):
        raise TypeError(f"{name}: the windows must be Tumbling(...), Sliding(...) or Sessions(...), not {spec!r}")
    agg = combine(aggregation, name)
    if spec.merging and agg.merge is None:
        raise ValueError(f"{name}: {agg!r} cannot merge two accumulators, and session windows merge: give "
                         "Agg.fold(init, fn, merge=...)")
    if type(lateness) is not int or lateness < 0:
        raise ValueError(f"{name}: lateness must be a non-negative int, not {lateness!r}")
    if late not in LATE_POLICIES:
        raise ValueError(f"{name}: late must be one of {', '.join(map(repr, LATE_POLICIES))}, not {late!r}")
    if not (time is None or callable(time) or time == PROCESSING):
        raise TypeError(f"{name}: time must be a function of the record, {PROCESSING!r} or None, not {time!r}")
    return agg


def _check_functions(scope: Any, key: Any, time: Any, name: str) -> None:
    """The key and event-time functions, as the operator calls them: plain functions of the record."""
    check_function(key, scope, name, "the key", "window(..., key=lambda r: r[0])", optional=True)
    if callable(time):
        check_function(time, scope, name, "the event time", "window(..., time=lambda r: r['ts'])")


def _check_early(early: Any, name: str) -> int | None:
    """The period of early results (``early=True``: 1, at every time), or ``None`` without early results."""
    if type(early) is not bool and (type(early) is not int or early < 1):
        raise ValueError(f"{name}: early must be True, False or a period (a positive int), not {early!r}")
    return None if early is False else 1 if early is True else int(early)


def _check_times(ttype: Any, time: Any, timed: bool, lateness: int, name: str) -> bool:
    """Refuse event times the dataflow's times cannot close; whether those are ints (rather than ``Product``s)."""
    processing = time == PROCESSING
    if processing and (timed or lateness):
        raise ValueError(f"{name}: processing-time windows take neither timed=True nor lateness (no record is "
                         "ever late by the wall clock)")
    if timed and time is not None:
        raise ValueError(f"{name}: timed records carry their event time: give timed=True or time=..., not both")
    total = bool(ttype.totally_ordered and type(ttype.minimum) is int)
    if type(outermost(ttype.minimum)) is not int:
        raise ValueError(f"{name}: windows need int dataflow times (or Product times whose outer coordinate is "
                         f"an int), not {ttype.name}")
    if processing and not total:
        raise ValueError(f"{name}: processing-time windows need int dataflow times, not {ttype.name}")
    return total


def _event_time(time: Any, timed: bool, clock: Clock) -> EventTime:
    """How the operator finds a record's event time, from the arguments ``time=`` and ``timed=``."""
    if time == PROCESSING:
        return ProcessingTime(clock)
    if timed:
        return TimedRecords()
    if callable(time):
        return FieldTime(time)
    return DataflowTime()


def _combining(combine: bool | None, stream: Any, spec: WindowSpec, agg: Aggregation, key: Any, processing: bool,
               total: bool, late: str, name: str) -> bool:
    """Whether each worker folds its records into one accumulator per key and window of each batch before the
    exchange (a combiner, as a map-side aggregation: fewer, smaller messages, and without ``key=`` the work is no
    longer all on one worker). It needs fixed windows (not sessions), int times, event times that are not the wall
    clock, late records dropped (a combined record cannot be reported late), and an aggregation that merges.
    ``combine=None`` (the default) does it where it can without ``key=`` and with a built-in aggregation other
    than ``fold`` (whose accumulators are the user's, and may not cross processes); ``True`` asks for it with any
    key and aggregation that merges (an error where it cannot be done); ``False`` never. One worker never does."""
    if combine is not None and type(combine) is not bool:
        raise TypeError(f"{name}: combine must be True, False or None, not {combine!r}")
    why = ("session windows merge as records come" if spec.merging else
           "processing-time windows take the wall clock where the window is" if processing else
           "it needs int dataflow times" if not total else
           f"a combined record cannot be reported late (late={late!r})" if late != "drop" else
           f"{agg!r} cannot merge two accumulators (give Agg.fold(..., merge=...))" if agg.merge is None else None)
    if combine is True and why is not None:
        raise ValueError(f"{name}: cannot combine before the exchange: {why}")
    if why is not None or combine is False or stream.scope.worker.peers == 1:
        return False
    return combine is True or (key is None and agg.portable)


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]
