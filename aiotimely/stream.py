"""Streams, as users chain them: ``stream.map(f).exchange(key).unary_frontier(logic)``.

:class:`Stream` is the dataflow layer's :class:`~aiotimely.dataflow.stream.StreamCore`
(a scope, an output, its consumers) with one method per operator of the library.
Each method builds its operator with the functions of ``aiotimely/dataflow/operators/``
and returns the operator's output stream(s), of this class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Sequence, cast, overload

from .dataflow import capture as _capture
from .dataflow import input as _input
from .dataflow.operators import generic, loops, maplike, routing, temporal
from .dataflow.operators.generic import Interest, OperatorLogic
from .dataflow.stream import StreamCore
from .progress import FrontierInterest

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from .dataflow import Captured, LoopHandle, ProbeHandle, Scope
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

Decorator = Callable[[OperatorLogic], "Stream[Any]"]
"""What a generic builder returns without logic: it builds the operator from the function it decorates."""
SinkDecorator = Callable[[OperatorLogic], None]


class Stream(StreamCore, Generic[T]):
    """A stream of timestamped records of type ``T`` in a scope, with a method for each operator of the
    library. ``map(f)`` of a ``Stream[int]`` is a ``Stream`` of what ``f`` returns, to a type checker."""

    __slots__ = ()

    # -- record at a time --------------------------------------------------------------

    def map(self, fn: Callable[[T], U]) -> Stream[U]:
        """Each record ``x`` becomes ``fn(x)``."""
        return cast("Stream[U]", maplike.map(self, fn))

    def flat_map(self, fn: Callable[[T], Iterable[U]]) -> Stream[U]:
        """Each record ``x`` becomes the records of ``fn(x)``."""
        return cast("Stream[U]", maplike.flat_map(self, fn))

    def filter(self, predicate: Callable[[T], object]) -> Stream[T]:
        """Only the records for which ``predicate(x)`` is true."""
        return maplike.filter(self, predicate)

    def inspect(self, fn: Callable[[T], object]) -> Stream[T]:
        """Call ``fn(x)`` on each record, passing records on unchanged."""
        return maplike.inspect(self, fn)

    def inspect_batch(self, fn: Callable[[Any, list[T]], object]) -> Stream[T]:
        """Call ``fn(time, records)`` on each batch, passing records on unchanged."""
        return maplike.inspect_batch(self, fn)

    def inspect_time(self, fn: Callable[[Any, T], object]) -> Stream[T]:
        """Call ``fn(time, x)`` on each record, passing records on unchanged."""
        return maplike.inspect_time(self, fn)

    def timed(self, time_of: Callable[[T], Any] | None = None) -> Stream[tuple[Any, T]]:
        """Each record ``x`` as a timed record ``(t, x)``: ``t = time_of(x)`` (not earlier than its batch's
        time), or the batch's time. Timed records travel in batches at coarser times and are read by time
        with ``input.timed_order()``; :meth:`settle` turns them back into records at their own times."""
        return cast("Stream[tuple[Any, T]]", maplike.timed(self, time_of))

    # -- routing ----------------------------------------------------------------------

    def exchange(self, key: Callable[[T], Any]) -> Stream[T]:
        """Send each record to worker ``route(key(x))``: equal keys meet on one worker."""
        return routing.exchange(self, key)

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
                       *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def unary_frontier(self, logic: None = None,
                       *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def unary_frontier(self, logic: OperatorLogic | None = None,
                       *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """As :meth:`unary`, woken whenever its input frontier changes."""
        return generic.unary_frontier(self, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def unary_notify(self, logic: OperatorLogic,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def unary_notify(self, logic: None = None,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def unary_notify(self, logic: OperatorLogic | None = None,
                     *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """``async def logic(input, output, notificator)``: request and receive notifications."""
        return generic.unary_notify(self, logic, exchange=exchange, name=name, interest=interest)

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
                        *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def binary_frontier(self, other: Stream[Any], logic: None = None,
                        *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def binary_frontier(self, other: Stream[Any], logic: OperatorLogic | None = None,
                        *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """As :meth:`binary`, woken whenever an input frontier changes."""
        return generic.binary_frontier(self, other, logic, exchange=exchange, name=name, interest=interest)

    @overload
    def binary_notify(self, other: Stream[Any], logic: OperatorLogic,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Stream[Any]: ...

    @overload
    def binary_notify(self, other: Stream[Any], logic: None = None,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Decorator: ...

    def binary_notify(self, other: Stream[Any], logic: OperatorLogic | None = None,
                      *, exchange: Any = None, name: str | None = None, interest: Interest = ALWAYS) -> Any:
        """``async def logic(input1, input2, output, notificator)``."""
        return generic.binary_notify(self, other, logic, exchange=exchange, name=name, interest=interest)

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


def concatenate(scope: Scope[Stream[Any]], streams: Sequence[Stream[T]]) -> Stream[T]:
    """One stream of the records of every stream in ``streams``."""
    return cast("Stream[T]", routing.concatenate(scope, streams))
