"""Getting data in and watching it come out: ``InputHandle``, ``ProbeHandle``, ``to_stream``, ``source``."""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generator, Generic, Iterable

from ..errors import CapabilityError, DataflowError, GraphError
from ..progress import Antichain, FrontierInterest, MutableAntichain
from ..worker import wake_all
from ..worker.schedule import Awaited
from .builder import OperatorBuilder
from .capability import Capability
from .operator import Logic, OperatorRuntime
from .ports import BATCH_SIZE, Activator, OperatorOutput, OutputPort
from .stream import S, StreamCore

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from ..worker import WorkerHandle
    from .scope import ScopeCore

    R = TypeVar("R", default=Any)
else:  # the default (PEP 696) is for type checkers: a bare InputHandle is InputHandle[Any]
    from typing import TypeVar

    R = TypeVar("R")

__all__ = ["InputHandle", "ProbeHandle", "probe_with", "to_stream", "source", "BUFFERED", "SourceStopped"]

BUFFERED = 4 * BATCH_SIZE
"""Records an :class:`InputHandle` holds for the dataflow before ``asend`` waits."""


def refusal(failure: BaseException, action: str) -> DataflowError:
    """The error an ``action`` on an input of a failed computation raises (an :class:`InputHandle`'s ``send``, an
    unordered input's session, a sequencer's ``push``): it says so, located as ``failure`` is, caused by it."""
    located = {name: getattr(failure, name, None) for name in ("dataflow", "operator", "path", "worker", "time")}
    kind = "" if isinstance(failure, DataflowError) else f"{type(failure).__name__}: "
    error = DataflowError(f"cannot {action}: the computation failed: {kind}{failure}", **located)
    error.__cause__ = failure
    return error


class InputHandle(Generic[R]):
    """Feeds records into a dataflow at a current time that only moves forward.

    ``send(x)`` / ``send_batch(xs)`` introduce records at :attr:`time`;
    ``advance_to(t)`` promises nothing earlier than ``t`` will follow, which is
    what lets frontiers downstream advance; ``close()`` promises nothing more at
    all. Each worker has its own handles; a time is complete once every worker's
    handle has moved past it. Handles still open when a worker's build ends are
    closed then.

    ``send`` never waits: records wait in the handle while the dataflow is behind.
    An application that produces faster than the dataflow consumes uses
    ``await asend(x)`` / ``await asend_batch(xs)``, which wait while more than
    :data:`BUFFERED` records wait in the handle.

    Once the computation has failed, everything that would feed it (``send``,
    ``send_batch``, ``asend``, ``advance_to``, ``close``) raises a
    :class:`~aiotimely.DataflowError` saying so, whose ``__cause__`` is the failure.
    """

    def __init__(self) -> None:
        self._op: OperatorRuntime | None = None
        self._cap: Capability | None = None
        self._port: OutputPort | None = None
        self._activator: Activator | None = None
        self._buffer: list[Any] = []
        self._ready: deque[tuple[Any, list[Any]]] = deque()
        self._hold: Capability | None = None   # at the first ready batch's time, while batches wait
        self._buffered = 0
        self._room: list[asyncio.Future[None]] = []
        self._closed = False
        self._failure: BaseException | None = None  # (the computation's: then _closed too, so send checks one flag)

    def to_stream(self, scope: ScopeCore[Any]) -> StreamCore:
        """The stream of what this handle sends, in ``scope`` (of the scope's stream class: :class:`aiotimely.Stream`
        when built through a worker, typed ``Stream[R]`` by the front's :class:`aiotimely.InputHandle`)."""
        if self._op is not None:
            raise GraphError("this InputHandle already feeds a dataflow; create one InputHandle per input")
        builder = OperatorBuilder(scope, "Input")
        self._port, stream = builder.new_output()
        self._op = builder.build(self._attach)
        self._activator = self._op.activator()
        scope.worker.at_build_end(self._close_at_build_end, scope.dataflow.index)
        scope.dataflow.remedies[self._op.path] = "call advance_to() or close() on its InputHandle"
        scope.worker.watch_failure(self, InputHandle._computation_failed)
        made: StreamCore = stream
        return made

    def _attach(self, capabilities: list[Capability]) -> Logic:
        self._cap = capabilities[0]
        return self._flush

    @property
    def time(self) -> Any:
        """The time at which :meth:`send` introduces records."""
        return self._capability().time

    def _capability(self) -> Capability:
        if self._cap is None:
            raise GraphError("this InputHandle is not connected to a dataflow yet: call handle.to_stream(scope)")
        return self._cap

    def _check_open(self, action: str) -> Capability:
        cap = self._capability()
        if self._closed:
            if self._failure is not None:
                raise self._refusal(action)
            raise CapabilityError(f"cannot {action}: the InputHandle of {cap._op.describe()} is closed")
        return cap

    def _computation_failed(self, error: BaseException) -> None:
        """The computation failed: refuse everything from now on (the one flag ``send`` checks says so)."""
        self._failure = error
        self._closed = True
        wake_all(self._room)  # (an asend waiting for room: it hears the failure from the worker)

    def _refusal(self, action: str) -> DataflowError:
        assert self._failure is not None and self._op is not None
        return refusal(self._failure, f"{action} through the InputHandle of {self._op.describe()}")

    def _wake(self) -> None:
        assert self._activator is not None
        self._activator.activate()

    def send(self, record: R) -> None:
        """Introduce one record at the current time (it waits in the handle while the dataflow is behind)."""
        self._check_open("send")
        self._give(record)

    def _give(self, record: Any) -> None:
        buffer = self._buffer
        buffer.append(record)
        self._buffered += 1
        if len(buffer) == 1:
            self._wake()
        elif len(buffer) >= BATCH_SIZE:
            self._seal()

    def send_batch(self, records: Iterable[R]) -> None:
        """Introduce many records at the current time."""
        self._check_open("send")
        buffer = self._buffer
        before = len(buffer)
        buffer.extend(records)
        self._buffered += len(buffer) - before
        if len(buffer) >= BATCH_SIZE:
            self._seal()
        self._wake()

    def send_at(self, time: Any, record: R) -> None:
        """Introduce a timed record, ``(time, record)``, in a batch at the current time: it carries its own
        ``time``, not earlier than the current one (see :meth:`InputPort.timed_order`)."""
        cap = self._check_open("send")
        if not cap._op.ttype.less_equal(cap.time, time):
            raise CapabilityError(f"cannot send a record at time {time!r} through the InputHandle of "
                                  f"{cap._op.describe()}: its current time is {cap.time!r}, and a timed record's "
                                  "time must not be earlier")
        self._give((time, record))

    async def asend(self, record: R) -> None:
        """:meth:`send`, then wait while more than :data:`BUFFERED` records wait in the handle."""
        self.send(record)
        await self.wait_room()

    async def asend_batch(self, records: Iterable[R]) -> None:
        """:meth:`send_batch`, then wait while more than :data:`BUFFERED` records wait in the handle."""
        self.send_batch(records)
        await self.wait_room()

    async def wait_room(self) -> None:
        """Wait until at most :data:`BUFFERED` records wait in the handle for the dataflow to take them."""
        while self._buffered > BUFFERED:
            assert self._op is not None
            fut = self._op.worker.waiter()
            self._room.append(fut)
            await fut

    def advance_to(self, time: Any) -> None:
        """Move the current time to ``time`` (not earlier than it is)."""
        cap = self._check_open("advance")
        assert self._op is not None
        try:
            self._op.ttype.check_time(time)
        except TypeError as e:
            raise TypeError(f"InputHandle.advance_to({time!r}) in {self._op.describe()}: {e}; a dataflow's times are "
                            "of its timestamp type (int unless built with another): for wall-clock times give ints, "
                            "e.g. int(time.time() * 1000) for milliseconds") from None
        if time == cap.time:
            return
        self._seal()
        cap.downgrade(time)
        self._wake()

    def close(self) -> None:
        """Introduce nothing more: the dataflow may complete. Closing twice is harmless."""
        cap = self._capability()
        if self._closed:
            if self._failure is not None:
                raise self._refusal("close")
            return
        self._seal()
        self._closed = True
        cap.drop()
        self._wake()

    def _close_at_build_end(self) -> None:
        if not self._closed:
            self.close()

    def is_open(self) -> bool:
        return self._op is not None and not self._closed

    def _seal(self) -> None:
        if self._buffer:
            cap = self._capability()
            if self._hold is None:  # the batches waiting keep their time open, whatever the handle does next
                self._hold = cap.delayed(cap.time)
            self._ready.append((cap.time, self._buffer))
            self._buffer = []

    def _flush(self) -> None:
        """Hand what waits to the dataflow, batch by batch, as long as there is room downstream."""
        self._seal()
        ready, port, op = self._ready, self._port, self._op
        assert port is not None and op is not None
        while ready:
            time, batch = ready.popleft()
            port.push(time, batch)
            self._buffered -= len(batch)
            hold = self._hold
            assert hold is not None
            if not ready:
                hold.drop()
                self._hold = None
            elif ready[0][0] != hold.time:
                hold.downgrade(ready[0][0])
            if ready and op.wait_for_room():
                break  # the rest waits: the operator runs again when there is room
        if self._room and self._buffered <= BUFFERED:
            wake_all(self._room)

    def __repr__(self) -> str:
        state = "closed" if self._closed else (f"at {self._cap.time!r}" if self._cap else "unattached")
        return f"InputHandle({state})"


class ProbeHandle:
    """Watches the frontier of one or more streams: which times may still appear there.

    ``less_than(t)`` is true while records at times before ``t`` may still arrive;
    ``done()`` once nothing more can; ``await wait_beyond(t)`` until time ``t`` is
    complete (the frontier is no longer at or before ``t``); ``await wait_done()``
    until nothing more can arrive.
    """

    def __init__(self) -> None:
        self._frontier: MutableAntichain[Any] | None = None
        self._waiters: list[tuple[Any, asyncio.Future[None]]] = []
        self._worker: WorkerHandle | None = None
        self._op: OperatorRuntime | None = None  # (the first it watches: where a stalled wait says it is)

    def _attach(self, op: OperatorRuntime) -> None:
        ttype = op.ttype
        if self._frontier is None:
            self._frontier = MutableAntichain(less_equal=ttype.less_equal, totally_ordered=ttype.totally_ordered)
            self._worker = op.worker
            self._op = op
            op.worker.describe_waits(self, ProbeHandle._awaited)
        self._frontier.update_iter([(ttype.minimum, 1)])  # until the probe hears its first frontier

    def _update(self, changes: list[tuple[Any, int]]) -> None:
        frontier = self._view()
        frontier.update_iter(changes)
        if self._waiters:
            still = []
            for time, fut in self._waiters:
                if fut.done():
                    continue
                if time is _DONE:
                    if frontier.is_empty():
                        fut.set_result(None)
                    else:
                        still.append((time, fut))
                elif frontier.less_equal(time):
                    still.append((time, fut))
                else:
                    fut.set_result(None)
            self._waiters = still

    def _view(self) -> MutableAntichain[Any]:
        if self._frontier is None:
            raise GraphError("this ProbeHandle watches no stream yet: use stream.probe() or stream.probe_with(handle)")
        return self._frontier

    def less_than(self, time: Any) -> bool:
        """True if records at some time strictly before ``time`` may still arrive."""
        return self._view().less_than(time)

    def less_equal(self, time: Any) -> bool:
        """True if records at ``time`` or before may still arrive."""
        return self._view().less_equal(time)

    def done(self) -> bool:
        """True once nothing more can arrive."""
        return self._view().is_empty()

    @property
    def frontier(self) -> Antichain[Any]:
        """The times that may still arrive (empty when done)."""
        return self._view().frontier

    async def wait_beyond(self, time: Any) -> None:
        """Wait until ``time`` is complete at the probe (its frontier is no longer at or before ``time``)."""
        if self._view().less_equal(time):
            await self._wait(time)

    async def wait_done(self) -> None:
        """Wait until nothing more can arrive at the probe (its frontier is empty)."""
        if not self._view().is_empty():
            await self._wait(_DONE)

    async def _wait(self, time: Any) -> None:
        worker = self._worker
        assert worker is not None
        fut = worker.waiter()
        self._waiters.append((time, fut))
        await fut

    def _awaited(self) -> list[Awaited]:
        """What the waits on this probe wait for, in words (asked only for a stall report)."""
        op = self._op
        assert op is not None
        scope = op.scope
        said = []
        for time, fut in self._waiters:
            if fut.done():
                continue
            if time is _DONE:
                said.append(Awaited(f"a probe waits for {scope.describe()} to complete (wait_done)",
                                    scope.dataflow.index))
            else:
                said.append(Awaited(f"a probe in {scope.describe()} waits for time {time!r} to complete "
                                    "(wait_beyond)", scope.dataflow.index, scope.path, time))
        return said

    def __repr__(self) -> str:
        return f"ProbeHandle(frontier={self._frontier.frontier if self._frontier else 'unattached'})"


_DONE = object()


def probe_with(stream: S, handle: ProbeHandle) -> S:
    """Attach ``handle`` to ``stream``; returns a stream of the same records, to continue from."""
    builder = OperatorBuilder(stream.scope, "Probe")
    inp = builder.new_input(stream, interest=FrontierInterest.ALWAYS)
    out, result = builder.new_output()
    handle._attach(builder.op)
    take_changes = inp.watch_frontier()

    def run() -> None:
        changes = take_changes()
        if changes:
            handle._update(changes)
        for time, batch in inp.batches():
            out.push(time, batch)

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def to_stream(iterable: Iterable[Any], scope: ScopeCore[S]) -> S:
    """A stream of the records of ``iterable``, all at the minimum time; it closes itself.

    As in timely, every worker introduces the whole iterable: split it by
    ``scope.worker.index`` to introduce each record once.
    """
    builder = OperatorBuilder(scope, "ToStream")
    port, stream = builder.new_output()
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Logic:
        cap = capabilities[0]
        records = iter(iterable)

        def run() -> None:  # batch by batch, while there is room downstream (see InputHandle._flush)
            if cap.dropped:
                return
            while True:
                batch = list(islice(records, BATCH_SIZE))
                if batch:
                    port.push(cap.time, batch)
                if len(batch) < BATCH_SIZE:
                    cap.drop()
                    return
                if op.wait_for_room():
                    return

        return run

    builder.build(constructor)
    result: S = stream
    return result


def source(scope: ScopeCore[S], name: str,
           logic: Callable[[OperatorOutput, Capability], Coroutine[Any, Any, None]]) -> S:
    """A general source: ``async def logic(output, cap)`` sends with ``output.session(cap)`` and
    returns (or drops ``cap``) when done. It may await I/O; ``output.activator()`` wakes it.

    When the computation is asked to stop (Ctrl-C, SIGTERM), :class:`SourceStopped` is raised where the
    logic waits: let it through and the source ends, or catch it to send what it holds and end cleanly. (A
    recoverable computation is suspended at a final snapshot instead, and its sources are not stopped: see
    docs/cli.md.)"""
    if not inspect.iscoroutinefunction(logic):
        raise TypeError(f"source {name!r}: logic must be an 'async def' taking (output, cap)")
    builder = OperatorBuilder(scope, name)
    port, stream = builder.new_output()
    op = builder.op

    async def stoppable(capabilities: list[Capability]) -> None:
        driver = _Stoppable(logic(OperatorOutput(port), capabilities[0]), lambda: op.worker.activate(op.path))
        forget = op.worker.on_stop(driver.stop)
        try:
            await driver
        finally:
            forget()

    builder.build(stoppable)
    result: S = stream
    return result


class SourceStopped(asyncio.CancelledError):
    """Raised in a source's logic (:func:`source`, ``from_aiter``, the Kafka source) where it waits, once, when the
    computation is asked to stop gracefully: the source should end as if its input had ended, so that the
    dataflows drain what they hold and complete. It is a ``CancelledError``: a source that does not catch it
    just ends; one that does may still send what it read (and report its position) before it returns."""


class _Stoppable:
    """Runs a source's logic so that a stop request ends it: :meth:`stop` cancels the future the logic waits on
    (as cancelling a task would) and, when the logic is resumed next, throws :class:`SourceStopped` into it, once.
    The source then ends when its logic returns or lets that through; anything else it raises is its error."""

    __slots__ = ("_coro", "_activate", "_waiting", "_asked", "_thrown", "_closing")

    def __init__(self, coro: Coroutine[Any, Any, None], activate: Callable[[], None]) -> None:
        self._coro = coro
        self._activate = activate
        self._waiting: Any = None
        self._asked = self._thrown = self._closing = False

    def stop(self) -> None:
        if self._asked:
            return
        self._asked = True
        waiting = self._waiting
        if waiting is not None and not waiting.done():
            waiting.cancel()
        self._activate()  # (a logic waiting for its next activation, or on a future already done)

    def __await__(self) -> Generator[Any, Any, None]:
        coro = self._coro
        try:
            signal = self._step(None)
            while True:
                self._waiting = signal if getattr(signal, "_asyncio_future_blocking", None) is not None else None
                try:
                    sent = yield signal
                except BaseException as exc:  # noqa: BLE001 - the worker closing the operator: a hard stop
                    waiting, self._waiting = self._waiting, None
                    if waiting is not None and waiting.done() and not waiting.cancelled():
                        waiting.exception()  # (failed with the computation: that error is reported already)
                    self._closing = True
                    signal = coro.throw(exc)
                else:
                    self._waiting = None
                    signal = self._step(sent)
        except StopIteration:
            return
        except asyncio.CancelledError:
            if self._thrown and not self._closing:
                return  # the logic let the stop through (perhaps as asyncio's own CancelledError): it has ended
            raise

    def _step(self, sent: Any) -> Any:
        if self._asked and not self._thrown:
            self._thrown = True
            return self._coro.throw(SourceStopped())
        return self._coro.send(sent)
