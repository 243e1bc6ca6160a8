"""What an operator's logic holds: its inputs, its outputs, sessions to send in, and activators.

Records move in batches: ``(time, list)``. An output counts what it produces per
batch and hands each batch to every consumer (a copy to all but the last, so a
consumer may keep or change what it got). Pushers route batches: straight to a
consumer on this worker, or spread over every worker's mailbox by a key.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator

from ..comm.local import Mailbox
from ..comm.routing import route
from ..errors import CapabilityError
from ..progress import Antichain, ChangeBatch, MutableAntichain
from .capability import Capability, CapabilityRef

if TYPE_CHECKING:
    from ..worker.worker import Worker
    from .operator import OperatorRuntime

__all__ = [
    "BATCH_SIZE",
    "OutputPort",
    "Session",
    "OperatorInput",
    "OperatorOutput",
    "Activator",
    "ExchangePusher",
    "BroadcastPusher",
]

BATCH_SIZE = 1024
"""Records a session buffers before it hands them on as one batch."""

ACTIVATION = object()
"""What an operator's coroutine yields to wait for its next activation."""


class _NextActivation:
    __slots__ = ()

    def __await__(self):
        yield ACTIVATION


NEXT_ACTIVATION = _NextActivation()


def push_to_all(pushers: list[Callable[[Any, list], None]], time: Any, batch: list) -> None:
    """Hand ``batch`` to every pusher: a copy to all but the last, so each consumer may keep or change its own."""
    if len(pushers) == 1:
        pushers[0](time, batch)
    elif pushers:
        last = len(pushers) - 1
        for i, push in enumerate(pushers):
            push(time, batch if i == last else list(batch))


class OutputPort:
    """An operator output: counts records per time, hands batches to the consumers' pushers.

    Records given through sessions are buffered here, one buffer per output, so that
    what an operator sends leaves in the order it was given, whichever session gave it.
    """

    __slots__ = ("op", "index", "pushers", "produced", "_buffer", "_time", "_owner")

    def __init__(self, op: OperatorRuntime, index: int, produced: ChangeBatch) -> None:
        self.op = op
        self.index = index
        self.pushers: list[Callable[[Any, list], None]] = []
        self.produced = produced
        self._buffer: list = []
        self._time: Any = None
        self._owner: Session | None = None

    def push(self, time: Any, batch: list) -> None:
        """Send ``batch`` at ``time`` to every consumer."""
        self.produced.update(time, len(batch))
        push_to_all(self.pushers, time, batch)

    def _switch(self, session: Session) -> None:
        if self._buffer:
            self.flush()
        elif self._owner is None:
            self.op._dirty_ports.append(self)
        self._owner = session
        self._time = session._time

    def flush(self) -> None:
        """Hand the buffered records on now."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self.push(self._time, batch)

    def release(self) -> None:
        """The operator yielded: flush, and make the next session check its capability again."""
        self.flush()
        self._owner = None


class Session:
    """Sends records at one time on one output, in batches."""

    __slots__ = ("_port", "_time", "_cap")

    def __init__(self, port: OutputPort, time: Any, cap: Capability | CapabilityRef) -> None:
        self._port = port
        self._time = time
        self._cap = cap

    @property
    def time(self) -> Any:
        return self._time

    def _check(self) -> None:
        cap = self._cap
        if type(cap) is Capability:
            if not cap._live or cap._op.done:
                raise CapabilityError(
                    f"{self._port.op.describe()}: cannot send at time {self._time!r}: its capability was dropped"
                )
        else:
            cap._check_valid()

    def _buffer(self) -> list:
        """The output's buffer, once this session may write to it (its capability still valid)."""
        port = self._port
        if port._owner is not self:
            self._check()
            port._switch(self)
        elif type(self._cap) is Capability and not self._cap._live:
            self._check()
        return port._buffer

    def give(self, record: Any) -> None:
        """Send one record."""
        buffer = self._buffer()
        buffer.append(record)
        if len(buffer) >= BATCH_SIZE:
            self._port.flush()

    def give_many(self, records: Any) -> None:
        """Send every record of an iterable."""
        buffer = self._buffer()
        buffer.extend(records)
        if len(buffer) >= BATCH_SIZE:
            self._port.flush()

    def flush(self) -> None:
        """Hand buffered records on now (the worker does this when the operator yields)."""
        if self._port._owner is self:
            self._port.flush()


class OperatorInput:
    """An operator's input: the batches that arrived, and the input's frontier."""

    __slots__ = ("_op", "port", "_queue", "_frontier", "_consumed")

    def __init__(self, op: OperatorRuntime, port: int, mailbox: Mailbox, consumed: ChangeBatch) -> None:
        self._op = op
        self.port = port
        self._queue = mailbox.queue
        ttype = op.ttype
        self._frontier = MutableAntichain(less_equal=ttype.less_equal, totally_ordered=ttype.totally_ordered)
        self._consumed = consumed

    def drain(self) -> Iterator[tuple[CapabilityRef, list]]:
        """Take every batch waiting at this input, as ``(time, records)``; ``time`` is a :class:`CapabilityRef`."""
        queue, consumed, op, port = self._queue, self._consumed, self._op, self.port
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            op.current_time = time
            yield CapabilityRef(op, port, time), batch

    def next(self) -> tuple[CapabilityRef, list] | None:
        """The next waiting batch, or ``None``."""
        if not self._queue:
            return None
        time, batch = self._queue.popleft()
        self._consumed.update(time, len(batch))
        self._op.current_time = time
        return CapabilityRef(self._op, self.port, time), batch

    @property
    def frontier(self) -> Antichain:
        """The times that may still arrive here (as of this activation)."""
        return self._frontier.frontier

    def less_equal(self, time: Any) -> bool:
        """True if records at ``time`` may still arrive (``frontier.less_equal(time)``)."""
        return self._frontier.less_equal(time)

    def is_complete(self) -> bool:
        """True once nothing more can arrive and nothing waits: the input is done."""
        return self._frontier.is_empty() and not self._queue

    def pending(self) -> int:
        """How many batches wait to be drained."""
        return len(self._queue)

    def activations(self) -> AsyncIterator[None]:
        """Iterate once per activation of the operator; stops after the operator saw every input complete.

        The first iteration is the activation in progress. The loop ends when, at the
        end of an iteration, every input of the operator is complete and drained, so
        the last iteration sees the empty frontier and can flush what it holds.
        """
        return _Activations(self._op)

    def __repr__(self) -> str:
        return f"OperatorInput({self._op.name!r}, port={self.port}, frontier={self.frontier})"


class _Activations:
    __slots__ = ("_op", "_first")

    def __init__(self, op: OperatorRuntime) -> None:
        self._op = op
        self._first = True

    def __aiter__(self) -> _Activations:
        return self

    async def __anext__(self) -> None:
        if self._first:
            self._first = False
            return None
        if self._op.inputs_complete():
            raise StopAsyncIteration
        await NEXT_ACTIVATION
        return None


class OperatorOutput:
    """An operator's output, as its logic sees it: open sessions to send records."""

    __slots__ = ("_port",)

    def __init__(self, port: OutputPort) -> None:
        self._port = port

    def session(self, cap: Capability | CapabilityRef) -> Session:
        """A session sending at ``cap.time``; ``cap`` must be a held capability for this output."""
        op = self._port.op
        if type(cap) is Capability:
            if cap._op is not op or cap._output != self._port.index:
                raise CapabilityError(
                    f"{op.describe()}: a capability for output {cap._output} of {cap._op.name!r} cannot send on "
                    f"output {self._port.index} of {op.name!r}"
                )
            cap._check_live("send with")
        elif type(cap) is CapabilityRef:
            cap._check_valid()
            if not op.passes_unchanged(cap._input, self._port.index):
                raise CapabilityError(
                    f"{op.describe()}: input {cap._input} does not reach output {self._port.index} unchanged; "
                    "send with a capability from time.delayed(...) instead"
                )
        else:
            raise CapabilityError(f"{op.describe()}: session() needs a Capability or a received time, got {cap!r}")
        return Session(self._port, cap._time, cap)

    def activator(self) -> Activator:
        """An :class:`Activator` for this operator."""
        return self._port.op.activator()


class Activator:
    """Schedules an operator to run again; ``activate()`` is safe to call from any thread."""

    __slots__ = ("_worker", "_path", "_op")

    def __init__(self, worker: Worker, path: tuple[int, ...], op: OperatorRuntime | None = None) -> None:
        self._worker = worker
        self._path = path
        self._op = op

    def activate(self) -> None:
        worker = self._worker
        if threading.get_ident() == worker._thread_id:
            worker.activate(self._path)
        else:
            worker._call_soon_threadsafe(worker.activate, self._path)

    async def activated(self) -> None:
        """From inside the operator's logic: wait until the operator is next activated."""
        await NEXT_ACTIVATION

    def __repr__(self) -> str:
        return f"Activator(path={self._path})"


class ExchangePusher:
    """Spreads a batch over every worker's mailbox by a key of each record."""

    __slots__ = ("_key", "_boxes", "_peers")

    def __init__(self, key: Callable[[Any], Any], boxes: list[Mailbox]) -> None:
        self._key = key
        self._boxes = boxes
        self._peers = len(boxes)

    def __call__(self, time: Any, batch: list) -> None:
        key, peers = self._key, self._peers
        parts: list[list] = [[] for _ in range(peers)]
        for record in batch:
            k = key(record)
            parts[k % peers if type(k) is int and k >= 0 else route(k, peers)].append(record)
        for box, part in zip(self._boxes, parts, strict=True):
            if part:
                box.push((time, part))


class BroadcastPusher:
    """Sends every batch to every worker's mailbox."""

    __slots__ = ("_boxes",)

    def __init__(self, boxes: list[Mailbox]) -> None:
        self._boxes = boxes

    def __call__(self, time: Any, batch: list) -> None:
        last = len(self._boxes) - 1
        for i, box in enumerate(self._boxes):
            box.push((time, batch if i == last else list(batch)))
