"""Streams, as users chain them: ``stream.map(f).exchange(key).unary_frontier(logic)``.

:class:`Stream` is the dataflow layer's :class:`~aiotimely.dataflow.stream.StreamCore`
(a scope, an output, its consumers) with one method per operator of the library.
Each method builds its operator with the functions of ``aiotimely/dataflow/operators/``
and returns the operator's output stream(s), of this class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Literal, Sequence, cast, overload

from .dataflow import capture as _capture
from .dataflow import input as _input
from .dataflow.operators import generic, loops, maplike, routing, temporal
from .dataflow.operators import join as _join
from .dataflow.operators import keyed
from .dataflow.operators import windows as _windows
from .dataflow.operators.generic import Interest, OperatorLogic
from .dataflow.failures import ErrorPolicy
from .dataflow.stream import StreamCore
from .dataflow.windowing import Aggregation, WindowSpec
from .progress import FrontierInterest

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from .columnar import ColumnarStream
    from .dataflow import Captured, LoopHandle, ProbeHandle
    from .scope import Scope
else:
    from typing import TypeVar

__all__ = ["Stream", "concatenate"]

NEVER, ALWAYS = FrontierInterest.NEVER, FrontierInterest.ALWAYS

if TYPE_CHECKING:
    T = TypeVar("T", default=Any)
else:  # a default (PEP 696) is for type checkers; 3.11's TypeVar has none
    T = TypeVar("T")
"""The type of a stream's records; a bare ``Stream`` is ``Stream[Any]``."""
U = TypeVar("U")
A = TypeVar("A")
K = TypeVar("K")
V = TypeVar("V")
W = TypeVar("W")

Decorator = Callable[[OperatorLogic], "Stream[Any]"]
"""What a generic builder returns without logic: it builds the operator from the function it decorates."""
SinkDecorator = Callable[[OperatorLogic], None]


class Stream(StreamCore, Generic[T]):
    """A stream of timestamped records of type ``T`` in a scope, with a method for each operator of the
    library. ``map(f)`` of a ``Stream[int]`` is a ``Stream`` of what ``f`` returns, to a type checker."""

    __slots__ = ()

    if TYPE_CHECKING:
        scope: Scope[Stream[Any]]
        """The scope the stream is in (one of :class:`aiotimely.Scope`'s, when built through a worker)."""

    # -- record at a time --------------------------------------------------------------

    def map(self, fn: Callable[[T], U], *, errors: ErrorPolicy | None = None, name: str = "Map") -> Stream[U]:
        """Each record ``x`` becomes ``fn(x)``. ``errors``: what a record on which ``fn`` raises does ("raise",
        "skip" or "dead_letter"; by default the dataflow's, see :meth:`Scope.dead_letters`); ``name``: what logs,
        statistics and dead letters call the operator."""
        return cast("Stream[U]", maplike.map(self, fn, errors=errors, name=name))

    def flat_map(self, fn: Callable[[T], Iterable[U]], *, errors: ErrorPolicy | None = None,
                 name: str = "FlatMap") -> Stream[U]:
        """Each record ``x`` becomes the records of ``fn(x)`` (``errors``, ``name``: as for :meth:`map`)."""
        return cast("Stream[U]", maplike.flat_map(self, fn, errors=errors, name=name))

    def filter(self, predicate: Callable[[T], object], *, errors: ErrorPolicy | None = None,
               name: str = "Filter") -> Stream[T]:
        """Only the records for which ``predicate(x)`` is true (``errors``, ``name``: as for :meth:`map`)."""
        return maplike.filter(self, predicate, errors=errors, name=name)

    def inspect(self, fn: Callable[[T], object], *, errors: ErrorPolicy | None = None,
                name: str = "Inspect") -> Stream[T]:
        """Call ``fn(x)`` on each record, passing records on unchanged (``errors``, ``name``: as for :meth:`map`;
        a record on which ``fn`` raises is not passed on)."""
        return maplike.inspect(self, fn, errors=errors, name=name)

    def inspect_batch(self, fn: Callable[[Any, list[T]], object]) -> Stream[T]:
        """Call ``fn(time, records)`` on each batch, passing records on unchanged."""
        return maplike.inspect_batch(self, fn)

    def inspect_time(self, fn: Callable[[Any, T], object], *, errors: ErrorPolicy | None = None,
                     name: str = "InspectTime") -> Stream[T]:
        """Call ``fn(time, x)`` on each record, passing records on unchanged (``errors``, ``name``: as for
        :meth:`inspect`)."""
        return maplike.inspect_time(self, fn, errors=errors, name=name)

    def timed(self, time_of: Callable[[T], Any] | None = None) -> Stream[tuple[Any, T]]:
        """Each record ``x`` as a timed record ``(t, x)``: ``t = time_of(x)`` (not earlier than its batch's
        time), or the batch's time. Timed records travel in batches at coarser times and are read by time
        with ``input.timed_order()``; :meth:`settle` turns them back into records at their own times."""
        return cast("Stream[tuple[Any, T]]", maplike.timed(self, time_of))

    # -- routing ----------------------------------------------------------------------

    def exchange(self, key: Callable[[T], Any], *, errors: ErrorPolicy | None = None,
                 name: str = "Exchange") -> Stream[T]:
        """Send each record to worker ``route(key(x))``: equal keys meet on one worker (``errors``, ``name``: as
        for :meth:`map`, for records whose key raises)."""
        return routing.exchange(self, key, errors=errors, name=name)

    def broadcast(self) -> Stream[T]:
        """Send every record to every worker."""
        return routing.broadcast(self)

    def concat(self, other: Stream[T]) -> Stream[T]:
        """The records of both streams."""
        both: Stream[T] = routing.concatenate(self.scope, [self, other])
        return both

    def partition(self, parts: int, fn: Callable[[T], int]) -> list[Stream[T]]:
        """``parts`` streams; record ``x`` goes to stream ``fn(x)``."""
        return routing.partition(self, parts, fn)

    def branch(self, predicate: Callable[[T], object]) -> tuple[Stream[T], Stream[T]]:
        """``(records where predicate is false, records where it is true)``."""
        return routing.branch(self, predicate)

    def ok_err(self, fn: Callable[[T], tuple[bool, Any]]) -> tuple[Stream[Any], Stream[Any]]:
        """``fn(x)`` returns ``(True, ok)`` or ``(False, err)``: gives ``(oks, errs)``."""
        return routing.ok_err(self, fn)

    # -- time ---------------------------------------------------------------------------

    def delay(self, fn: Callable[[T, Any], Any]) -> Stream[T]:
        """Move each record to ``fn(x, time)`` (not earlier), released once that time is complete."""
        return temporal.delay(self, fn)

    def delay_batch(self, fn: Callable[[Any], Any]) -> Stream[T]:
        """Move each batch at ``time`` to ``fn(time)`` (not earlier), released once complete."""
        return temporal.delay_batch(self, fn)

    def settle(self: Stream[tuple[Any, U]]) -> Stream[U]:
        """A timed stream's records ``(t, x)`` as ``x`` at time ``t``, each once ``t`` is complete."""
        return cast("Stream[U]", temporal.settle(self))

    def accumulate(self, init: A, fn: Callable[[A, list[T]], A]) -> Stream[A]:
        """Per time, fold batches with ``acc = fn(acc, records)`` from ``init``; emit ``acc`` once the
        time is complete (one result per worker and time)."""
        return cast("Stream[A]", temporal.accumulate(self, init, fn))

    def count(self) -> Stream[int]:
        """Per time, the number of records (one count per worker and time)."""
        return cast("Stream[int]", temporal.count(self))

    def reclock(self, clock: Stream[Any]) -> Stream[T]:
        """Hold records until a time of ``clock`` at or after theirs is complete; emit them at it."""
        return temporal.reclock(self, clock)

    # -- keyed state and joins ----------------------------------------------------------
    # On keyed streams, of ``(key, value)`` pairs: each operator routes its input by key itself.

    def stateful_map(self: Stream[tuple[K, V]], fn: Callable[[Any, V], tuple[Any, U]]) -> Stream[tuple[K, U]]:
        """Per key, in time order: ``state, out = fn(state, value)`` (``state`` is ``None`` for a new key;
        returning ``None`` forgets the key); emits ``(key, out)`` at the record's time. The state is kept by
        key (snapshots, rescaling)."""
        return cast("Stream[tuple[K, U]]", keyed.stateful_map(self, fn))

    def state_machine(self: Stream[tuple[K, V]], fn: Callable[[K, V, Any], tuple[Any, Iterable[U]]],
                      init: Callable[[], Any] | None = None) -> Stream[U]:
        """Timely's ``state_machine``: per key, in time order, ``state, outputs = fn(key, value, state)``
        (``state`` starts as ``init()``, or ``None``; returning ``None`` forgets the key); emits each of
        ``outputs`` at the record's time."""
        return cast("Stream[U]", keyed.state_machine(self, fn, init))

    def distinct(self: Stream[tuple[K, V]], by: Callable[[V], Any] | None = None) -> Stream[tuple[K, V]]:
        """Each ``(key, value)`` only the first time it is seen, in time order; with ``by``, the first record of
        each ``(key, by(value))`` (``by=lambda v: None``: the first record of each key)."""
        return keyed.distinct(self, by)

    def reduce(self: Stream[tuple[K, V]], fn: Callable[[V, V], V]) -> Stream[tuple[K, V]]:
        """Per key and time, the values combined with ``fn(a, b)``; emits ``(key, result)`` once the time
        is complete."""
        return keyed.reduce(self, fn)

    def fold(self: Stream[tuple[K, V]], init: Callable[[], A], fn: Callable[[A, V], A]) -> Stream[tuple[K, A]]:
        """Per key and time, ``acc = fn(acc, value)`` from ``init()``; emits ``(key, acc)`` once the time is
        complete."""
        return cast("Stream[tuple[K, A]]", keyed.fold(self, init, fn))

    def aggregate(self: Stream[tuple[K, V]], fold: Callable[[K, V, A], A], emit: Callable[[K, A], U],
                  init: Callable[[], A] | None = None) -> Stream[U]:
        """Timely's ``aggregate``: per key and time, ``agg = fold(key, value, agg)`` from ``init()`` (or
        ``None``); emits ``emit(key, agg)`` once the time is complete."""
        return cast("Stream[U]", keyed.aggregate(self, fold, emit, init))

    def join(self: Stream[tuple[K, V]], other: Stream[tuple[K, W]]) -> Stream[tuple[K, tuple[V, W]]]:
        """``(key, (v, w))`` for every ``(key, v)`` here and ``(key, w)`` of ``other`` at the same time, sent as
        soon as both are there; a time's records are forgotten once both frontiers have passed it."""
        return cast("Stream[tuple[K, tuple[V, W]]]", _join.join(self, other))

    def interval_join(self: Stream[tuple[K, V]], other: Stream[tuple[K, W]], lower: int,
                      upper: int) -> Stream[tuple[K, tuple[V, W]]]:
        """``(key, (v, w))`` for ``(key, v)`` here at ``t`` and ``(key, w)`` of ``other`` at ``u`` with
        ``lower <= u - t <= upper`` (int times), at time ``max(t, u)`` once complete; records are kept (by key)
        until the frontiers pass every time they could still meet."""
        return cast("Stream[tuple[K, tuple[V, W]]]", _join.interval_join(self, other, lower, upper))

    # -- windows ----------------------------------------------------------------------
    # Per key and window of event time, closed exactly when the frontier passes the window's end (+ lateness).

    @overload
    def window(self, windows: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
               key: Callable[[T], Any] | None = None, time: Callable[[T], int] | str | None = None,
               timed: bool = False, lateness: int = 0, late: Literal["drop"] = "drop", early: bool | int = False,
               combine: bool | None = None, name: str = "Window") -> Stream[Any]: ...

    @overload
    def window(self, windows: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
               key: Callable[[T], Any] | None = None, time: Callable[[T], int] | str | None = None,
               timed: bool = False, lateness: int = 0, late: Literal["count", "stream"], early: bool | int = False,
               combine: bool | None = None, name: str = "Window") -> tuple[Stream[Any], Stream[Any]]: ...

    def window(self, windows: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
               key: Callable[[T], Any] | None = None, time: Callable[[T], int] | str | None = None,
               timed: bool = False, lateness: int = 0, late: str = "drop", early: bool | int = False,
               combine: bool | None = None, name: str = "Window") -> Stream[Any] | tuple[Stream[Any], Stream[Any]]:
        """Aggregate records per key and window (``at.Tumbling``, ``at.Sliding``, ``at.Sessions``) with
        ``at.Agg`` aggregations (a tuple of them gives a tuple): ``(key, (start, end), value)`` per window, sent at
        time ``end + lateness`` once the frontier passes it (without ``key``: ``((start, end), value)``, on one
        worker). Event time is the dataflow time, or ``time(x)`` (an int), or a timed record's (``timed=True``),
        or the wall clock in ms (``time="processing"``). A record at dataflow time ``d`` is late if its window
        ends at or before ``d - lateness``: ``late="drop"``, or ``"count"``/``"stream"`` to also get a stream of
        late counts / late records (at their dataflow times) as a second result. ``early=True`` also sends each
        window's partial result at every time that changes it (the one at ``end + lateness`` is final);
        ``early=N`` does so periodically: at the first time applied in each period of ``N`` time units.
        ``combine``: each worker first folds its records into one accumulator per key and window of each batch
        (a map-side combiner: by default without ``key=`` and with built-in aggregations; ``True`` asks for it
        with a key, ``False`` never)."""
        return _windows.window(self, windows, aggregation, key=key, time=time, timed=timed, lateness=lateness,
                               late=late, early=early, combine=combine, name=name)

    # -- scopes -------------------------------------------------------------------------

    def enter(self, scope: Scope[Stream[Any]]) -> Stream[T]:
        """This stream inside ``scope``, a scope nested directly in this stream's scope."""
        return loops.enter(self, scope)

    def leave(self) -> Stream[T]:
        """This stream in the enclosing scope."""
        return loops.leave(self)

    def connect_loop(self, handle: LoopHandle) -> None:
        """Send this stream round the feedback loop of ``handle`` (from ``scope.feedback``)."""
        loops.connect_loop(self, handle)

    # -- observing --------------------------------------------------------------------

    def probe(self) -> ProbeHandle:
        """A new :class:`ProbeHandle` watching this stream's frontier."""
        handle = _input.ProbeHandle()
        _input.probe_with(self, handle)
        return handle

    def probe_with(self, handle: ProbeHandle) -> Stream[T]:
        """Let ``handle`` also watch this stream; returns a stream of the same records."""
        return _input.probe_with(self, handle)

    def capture(self) -> Captured:
        """Record this stream's records and frontier changes (on this worker), for ``replay``."""
        return _capture.capture(self)

    def capture_into(self, sink: Any) -> None:
        """Push this stream's events to ``sink`` as they happen (an ``EventWriter``, a ``Captured``, ...)."""
        _capture.capture_into(self, sink)

    # -- timely's library: branch by time, change in place --------------------------------

    def branch_when(self, predicate: Callable[[Any], object]) -> tuple[Stream[T], Stream[T]]:
        """``(records at times where predicate(time) is false, records at times where it is true)``: timely's
        ``branch_when``, deciding once per batch by its time."""
        return routing.branch_when(self, predicate)

    def map_in_place(self, fn: Callable[[T], object], *, errors: ErrorPolicy | None = None,
                     name: str = "MapInPlace") -> Stream[T]:
        """Call ``fn(x)`` to change each record ``x`` itself, passing the same records on (timely's
        ``map_in_place``; it fuses as ``map`` does). Another consumer of the same records on this worker
        sees the change: where the stream is consumed twice, ``map`` a copy instead. ``errors``, ``name``: as
        for :meth:`inspect`."""
        return maplike.map_in_place(self, fn, errors=errors, name=name)

    # -- user logic ---------------------------------------------------------------------
    # Each builder takes the logic, or returns a decorator that does: ``@stream.unary(name="X")``.

    @overload
    def unary(self, logic: OperatorLogic,
              *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Stream[Any]: ...

    @overload
    def unary(self, logic: None = None,
              *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Decorator: ...

    def unary(self, logic: OperatorLogic | None = None,
              *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Any:
        """An operator with one input and one output: ``async def logic(input, output, cap)``."""
        return generic.unary(self, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def unary_frontier(self, logic: OperatorLogic,
                       *, exchange: Any = None, name: str | None = None,
                       interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def unary_frontier(self, logic: None = None,
                       *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def unary_frontier(self, logic: OperatorLogic | None = None,
                       *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """As :meth:`unary`, woken whenever its input frontier changes."""
        return generic.unary_frontier(self, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def unary_notify(self, logic: OperatorLogic,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                     init: Iterable[Any] = ()) -> Stream[Any]: ...

    @overload
    def unary_notify(self, logic: None = None,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                     init: Iterable[Any] = ()) -> Decorator: ...

    def unary_notify(self, logic: OperatorLogic | None = None,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                     init: Iterable[Any] = ()) -> Any:
        """``async def logic(input, output, notificator)``: request and receive notifications; ``init``
        times are requested up front (delivered once the frontier passes each, as any other)."""
        return generic.unary_notify(self, logic, exchange=exchange, name=name, interest=interest, init=init)

    @overload
    def binary(self, other: Stream[Any], logic: OperatorLogic,
               *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Stream[Any]: ...

    @overload
    def binary(self, other: Stream[Any], logic: None = None,
               *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Decorator: ...

    def binary(self, other: Stream[Any], logic: OperatorLogic | None = None,
               *, exchange: Any = None, name: str | None = None, interest: Interest = NEVER) -> Any:
        """Two inputs, one output: ``async def logic(input1, input2, output, cap)``."""
        return generic.binary(self, other, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def binary_frontier(self, other: Stream[Any], logic: OperatorLogic,
                        *, exchange: Any = None, name: str | None = None,
                       interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def binary_frontier(self, other: Stream[Any], logic: None = None,
                        *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def binary_frontier(self, other: Stream[Any], logic: OperatorLogic | None = None,
                        *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """As :meth:`binary`, woken whenever an input frontier changes."""
        return generic.binary_frontier(self, other, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def binary_notify(self, other: Stream[Any], logic: OperatorLogic,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                      init: Iterable[Any] = ()) -> Stream[Any]: ...

    @overload
    def binary_notify(self, other: Stream[Any], logic: None = None,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                      init: Iterable[Any] = ()) -> Decorator: ...

    def binary_notify(self, other: Stream[Any], logic: OperatorLogic | None = None,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS,
                      init: Iterable[Any] = ()) -> Any:
        """``async def logic(input1, input2, output, notificator)``; ``init`` as for :meth:`unary_notify`."""
        return generic.binary_notify(self, other, logic, exchange=exchange, name=name, interest=interest,
                                     init=init)

    @overload
    def sink(self, logic: OperatorLogic,
             *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> None: ...

    @overload
    def sink(self, logic: None = None,
             *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> SinkDecorator: ...

    def sink(self, logic: OperatorLogic | None = None,
             *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """An operator with no output: ``async def logic(input)``."""
        return generic.sink(self, logic, exchange=exchange, name=name, interest=interest)

    # -- columns -------------------------------------------------------------------------

    def columnar(self, schema: Any, *, name: str = "Columnar") -> ColumnarStream:
        """The records (tuples in ``schema``'s column order, or dicts by column name) as a columnar stream of Arrow
        batches, one per batch, with Polars operators (docs/columnar.md; needs the ``columnar`` extra)."""
        from .columnar import columnar

        return columnar(self, schema, name=name)


def concatenate(scope: Scope[Stream[Any]], streams: Sequence[Stream[T]]) -> Stream[T]:
    """One stream of the records of every stream in ``streams``."""
    return cast("Stream[T]", routing.concatenate(scope, streams))
