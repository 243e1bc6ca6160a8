"""Getting data in and watching it come out: ``InputHandle``, ``ProbeHandle``, ``to_stream``, ``source``."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable

from ..errors import CapabilityError, GraphError
from ..progress import Antichain, FrontierInterest, MutableAntichain
from .operator import OperatorRuntime
from .operators.common import output_stream, watch_frontier
from .ports import BATCH_SIZE, OperatorOutput

if TYPE_CHECKING:
    from .scope import Scope
    from .stream import Stream

__all__ = ["InputHandle", "ProbeHandle", "to_stream", "source"]


class InputHandle:
    """Feeds records into a dataflow at a current time that only moves forward.

    ``send(x)`` / ``send_batch(xs)`` introduce records at :attr:`time`;
    ``advance_to(t)`` promises nothing earlier than ``t`` will follow, which is
    what lets frontiers downstream advance; ``close()`` promises nothing more at
    all. Each worker has its own handles; a time is complete once every worker's
    handle has moved past it. Handles still open when a worker's build ends are
    closed then.
    """

    def __init__(self) -> None:
        self._op: OperatorRuntime | None = None
        self._cap = None
        self._buffer: list = []
        self._ready: list[tuple[Any, list]] = []
        self._closed = False

    def to_stream(self, scope: Scope) -> Stream:
        """The stream of what this handle sends, in ``scope``."""
        if self._op is not None:
            raise GraphError("this InputHandle already feeds a dataflow; create one InputHandle per input")
        op = OperatorRuntime(scope, "Input", 0, 1)
        self._op = op
        self._cap = op.mint(0)
        op.run_function(self._flush, keep_capabilities=True)
        op.externally_driven = True
        scope.worker._inputs.append(self)
        return output_stream(op)

    @property
    def time(self) -> Any:
        """The time at which :meth:`send` introduces records."""
        self._check_attached()
        return self._cap.time

    def _check_attached(self) -> None:
        if self._op is None:
            raise GraphError("this InputHandle is not connected to a dataflow yet: call handle.to_stream(scope)")

    def _check_open(self, action: str) -> None:
        self._check_attached()
        if self._closed:
            raise CapabilityError(f"cannot {action}: the InputHandle of {self._op.describe()} is closed")

    def send(self, record: Any) -> None:
        """Introduce one record at the current time."""
        self._check_open("send")
        buffer = self._buffer
        buffer.append(record)
        if len(buffer) == 1:
            self._op.worker.activate(self._op.path)
        elif len(buffer) >= BATCH_SIZE:
            self._seal()

    def send_batch(self, records: Iterable[Any]) -> None:
        """Introduce many records at the current time."""
        self._check_open("send")
        self._buffer.extend(records)
        if len(self._buffer) >= BATCH_SIZE:
            self._seal()
        self._op.worker.activate(self._op.path)

    def advance_to(self, time: Any) -> None:
        """Move the current time to ``time`` (not earlier than it is)."""
        self._check_open("advance")
        if time == self._cap.time:
            return
        self._seal()
        self._cap.downgrade(time)
        self._op.worker.activate(self._op.path)

    def close(self) -> None:
        """Introduce nothing more: the dataflow may complete. Closing twice is harmless."""
        self._check_attached()
        if self._closed:
            return
        self._seal()
        self._closed = True
        self._cap.drop()
        self._op.worker.activate(self._op.path)

    def is_open(self) -> bool:
        return self._op is not None and not self._closed

    def _seal(self) -> None:
        if self._buffer:
            self._ready.append((self._cap.time, self._buffer))
            self._buffer = []

    def _flush(self) -> None:
        self._seal()
        if self._ready:
            ready, self._ready = self._ready, []
            port = self._op.outputs[0]
            for time, batch in ready:
                port.push(time, batch)

    def __repr__(self) -> str:
        state = "closed" if self._closed else (f"at {self._cap.time!r}" if self._cap else "unattached")
        return f"InputHandle({state})"


class ProbeHandle:
    """Watches the frontier of one or more streams: which times may still appear there.

    ``less_than(t)`` is true while records at times before ``t`` may still arrive;
    ``done()`` once nothing more can; ``await wait_beyond(t)`` until time ``t`` is
    complete (the frontier is no longer at or before ``t``).
    """

    def __init__(self) -> None:
        self._frontier: MutableAntichain | None = None
        self._waiters: list[tuple[Any, asyncio.Future]] = []
        self._worker = None

    def _attach(self, op: OperatorRuntime) -> None:
        ttype = op.ttype
        if self._frontier is None:
            self._frontier = MutableAntichain(less_equal=ttype.less_equal, totally_ordered=ttype.totally_ordered)
            self._worker = op.worker
            op.worker._probes.append(self)
        self._frontier.update_iter([(ttype.minimum, 1)])  # until the probe hears its first frontier

    def _update(self, changes: list[tuple[Any, int]]) -> None:
        self._frontier.update_iter(changes)
        if self._waiters:
            still = []
            for time, fut in self._waiters:
                if fut.done():
                    continue
                if self._frontier.less_equal(time):
                    still.append((time, fut))
                else:
                    fut.set_result(None)
            self._waiters = still

    def _fail(self, error: BaseException) -> None:
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(error)
        self._waiters = []

    def _view(self) -> MutableAntichain:
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
    def frontier(self) -> Antichain:
        """The times that may still arrive (empty when done)."""
        return self._view().frontier

    async def wait_beyond(self, time: Any) -> None:
        """Wait until ``time`` is complete at the probe (its frontier is no longer at or before ``time``)."""
        frontier = self._view()
        if not frontier.less_equal(time):
            return
        worker = self._worker
        worker._check_running()
        fut = worker._loop.create_future()
        self._waiters.append((time, fut))
        await fut

    def __repr__(self) -> str:
        return f"ProbeHandle(frontier={self._frontier.frontier if self._frontier else 'unattached'})"


def probe_with(stream: Stream, handle: ProbeHandle) -> Stream:
    """Attach ``handle`` to ``stream``; returns the stream, unchanged, to continue from."""
    op = OperatorRuntime(stream.scope, "Probe", 1, 1, interest=FrontierInterest.ALWAYS)
    inp = op.connect(0, stream)
    handle._attach(op)
    take_changes = watch_frontier(op)
    out = op.outputs[0]
    queue = op.mailboxes[0].queue
    consumed = op.progress.shared.consumeds[0]

    def run() -> None:
        changes = take_changes()
        if changes:
            handle._update(changes)
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            out.push(time, batch)

    op.run_function(run)
    del inp
    return output_stream(op)


def to_stream(iterable: Iterable[Any], scope: Scope) -> Stream:
    """A stream of the records of ``iterable``, all at the minimum time; it closes itself.

    As in timely, every worker introduces the whole iterable: split it by
    ``scope.worker.index`` to introduce each record once.
    """
    op = OperatorRuntime(scope, "ToStream", 0, 1)
    cap = op.mint(0)
    records = iterable

    def run() -> None:
        nonlocal records
        if records is not None:
            port = op.outputs[0]
            batch: list = []
            for record in records:
                batch.append(record)
                if len(batch) >= BATCH_SIZE:
                    port.push(cap.time, batch)
                    batch = []
            if batch:
                port.push(cap.time, batch)
            records = None
            cap.drop()

    op.run_function(run, keep_capabilities=True)
    return output_stream(op)


def source(scope: Scope, name: str, logic: Callable[[OperatorOutput, Any], Coroutine]) -> Stream:
    """A general source: ``async def logic(output, cap)`` sends with ``output.session(cap)`` and
    returns (or drops ``cap``) when done. It may await I/O; ``output.activator()`` wakes it."""
    if not inspect.iscoroutinefunction(logic):
        raise TypeError(f"source {name!r}: logic must be an 'async def' taking (output, cap)")
    op = OperatorRuntime(scope, name, 0, 1)
    op.run_coroutine(logic(OperatorOutput(op.outputs[0]), op.mint(0)))
    return output_stream(op)
