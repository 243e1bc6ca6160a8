"""Timely's synchronization primitives: a :class:`Sequencer` (every worker sees every worker's commands in one
order) and a :class:`Barrier` (no worker passes until every worker has reached it). Each is a small dataflow.

The sequencer is built as timely builds it: a source on each worker broadcasts the
commands pushed there, stamped ``(time, worker, seq)``; a sink on each worker
collects them and hands them out in that order once its input frontier has passed
their time, when no command at that time or before can arrive any more, so every
worker hands out the same sequence. Timely stamps commands with the time elapsed
on a clock and keeps its source busy to move that clock on; here the time is a
Lamport clock instead: a worker sends at its source's time ``t`` and then moves to
``t + 1``, and a worker that receives a command at ``t`` moves its own source past
``t``. A sequencer nobody pushes to costs nothing, and a command is handed out
as soon as every worker has seen it.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Generic, Iterator, Protocol, TypeVar

from ..progress import FrontierInterest
from ..worker import wake_all
from .builder import OperatorBuilder
from .capability import Capability
from .input import InputHandle, ProbeHandle, probe_with, refusal
from .operator import Logic
from .ports import BATCH_SIZE, NEXT_ACTIVATION, Activator

if TYPE_CHECKING:
    from ..worker import WorkerHandle
    from .scope import ScopeCore

__all__ = ["Barrier", "BuildsDataflows", "Sequencer", "SEQUENCER_CAPACITY"]

T = TypeVar("T")

SEQUENCER_CAPACITY = 1 << 16
"""Commands a :class:`Sequencer` holds, by default, on either side: pushed but not yet sent, and ordered but not
yet taken."""


class BuildsDataflows(Protocol):
    """What a sequencer or a barrier needs of a worker (an :class:`aiotimely.Worker`): to build a dataflow."""

    @property
    def index(self) -> int: ...

    @property
    def peers(self) -> int: ...

    def dataflow(self, fn: Callable[[ScopeCore[Any]], Any], *, name: str | None = None,
                 timestamp: Any = int) -> Any: ...


class Sequencer(Generic[T]):
    """Every worker may ``push(command)``; every worker takes all workers' commands in the same order.

    ``for command in sequencer`` takes the commands ordered so far (timely's iterator), ``sequencer.next()``
    one of them or ``None``, and ``async for command in sequencer`` waits for each, until every worker has
    closed its sequencer and every command has been taken. Commands are ordered by the time they were sent
    (a logical clock every command moves on), then by the worker that pushed them, then in the order pushed.

    Every worker creates its sequencers in the same order (each is a dataflow). ``close()`` says this worker
    pushes no more; a sequencer still open when the worker's build ends is closed then, and what it would
    still hand out is dropped (nobody is left to take it). Commands cross processes as records do
    (see :func:`aiotimely.register_type`).
    """

    def __init__(self, worker: BuildsDataflows, *, capacity: int = SEQUENCER_CAPACITY,
                 name: str = "Sequencer") -> None:
        if type(capacity) is not int or capacity < 1:
            raise ValueError(f"a Sequencer's capacity is a positive int, not {capacity!r}")
        self._capacity = capacity
        self._index = worker.index
        self._outbox: deque[T] = deque()
        self._inbox: deque[T] = deque()
        self._pending: list[tuple[int, int, int, T]] = []  # a heap of (time, worker, seq, command)
        self._seen = -1  # the latest time at which a command arrived here
        self._seq = 0
        self._closed = False  # this worker pushes no more
        self._dropping = False  # nobody takes commands here any more (the build ended)
        self._finished = False  # every worker closed, and every command was handed out
        self._readers: list[asyncio.Future[None]] = []
        self._room: list[asyncio.Future[None]] = []
        self._worker: WorkerHandle | None = None
        self._source: Activator | None = None
        self._sink: Activator | None = None
        self._source_time: Capability | None = None
        self._failure: BaseException | None = None  # the computation's: nothing is pushed from then on
        worker.dataflow(self._build, name=name)

    # -- the dataflow ----------------------------------------------------------------------

    def _build(self, scope: ScopeCore[Any]) -> None:
        self._worker = scope.worker
        scope.worker.watch_failure(self, Sequencer._computation_failed)
        source = OperatorBuilder(scope, "SequenceInput")
        out, stream = source.new_output()
        self._source = source.op.activator()
        op = source.op

        def constructor(capabilities: list[Capability]) -> Logic:
            cap = self._source_time = capabilities[0]
            outbox, index = self._outbox, self._index

            def send() -> None:
                if cap.dropped:
                    return
                sent = False
                while outbox:  # batch by batch, while there is room downstream
                    batch = []
                    for _ in range(min(len(outbox), BATCH_SIZE)):
                        batch.append((index, self._seq, outbox.popleft()))
                        self._seq += 1
                    out.push(cap.time, batch)
                    sent = True
                    if outbox and op.wait_for_room():
                        break
                wake_all(self._room)
                if outbox:
                    return  # the rest follows at this time, once there is room
                if self._closed:
                    cap.drop()
                    return
                later = max(cap.time + 1 if sent else cap.time, self._seen + 1)
                if later != cap.time:
                    cap.downgrade(later)

            return send

        source.build(constructor)

        sink = OperatorBuilder(scope, "SequenceOutput")
        inp = sink.new_input(stream, broadcast=True, interest=FrontierInterest.ALWAYS)
        self._sink = sink.op.activator()
        pending, inbox, capacity = self._pending, self._inbox, self._capacity

        def receive() -> None:
            # With the inbox full, commands stay in the mailbox (its producers wait): nobody takes them here.
            batches = inp.batches() if len(inbox) < capacity or self._dropping else iter(())
            for time, batch in batches:
                if time > self._seen:
                    self._seen = time
                    held = self._source_time
                    if held is not None and not held.dropped and held.time <= time and self._source is not None:
                        self._source.activate()  # move this worker's clock past ``time``
                if not self._dropping:
                    for worker, seq, command in batch:
                        heapq.heappush(pending, (time, worker, seq, command))
            handed = False
            while pending and len(inbox) < capacity and not inp.less_equal(pending[0][0]):
                inbox.append(heapq.heappop(pending)[3])
                handed = True
            if not pending and inp.is_complete():
                self._finished = True
                handed = True
            if handed:
                wake_all(self._readers)

        async def receiving() -> None:  # (a coroutine: the sink is done when the sequence is, not when its input is)
            while True:
                receive()
                if self._finished:
                    return
                await NEXT_ACTIVATION

        sink.build(lambda _: receiving())
        scope.worker.at_build_end(self._build_ended, scope.dataflow.index)

    def _build_ended(self) -> None:
        self._dropping = True
        self._pending.clear()
        self._inbox.clear()
        self.close()
        assert self._sink is not None
        self._sink.activate()

    def _computation_failed(self, error: BaseException) -> None:
        self._failure = error
        wake_all(self._room)

    # -- pushing ----------------------------------------------------------------------------

    def push(self, command: T) -> None:
        """Send ``command`` to every worker (never waits; raises if :data:`SEQUENCER_CAPACITY` commands wait
        to be sent: ``await send(command)`` waits for room instead)."""
        if self._failure is not None:
            raise refusal(self._failure, f"push through the Sequencer of worker {self._index}")
        if self._closed:
            raise RuntimeError(f"the Sequencer of worker {self._index} is closed: it cannot push more commands")
        if len(self._outbox) >= self._capacity:
            raise RuntimeError(f"the Sequencer of worker {self._index} has {self._capacity} commands waiting to be "
                               "sent; 'await sequencer.send(command)' waits for room")
        self._outbox.append(command)
        if len(self._outbox) == 1 and self._source is not None:
            self._source.activate()

    async def send(self, command: T) -> None:
        """Push ``command``, waiting while the sequencer holds its capacity of commands not yet sent."""
        while len(self._outbox) >= self._capacity and not self._closed and self._failure is None:
            fut = self._handle().waiter()
            self._room.append(fut)
            await fut
        self.push(command)

    def close(self) -> None:
        """This worker pushes no more (what it pushed is still sent): once every worker has closed, the
        sequence ends. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            if self._source is not None:
                self._source.activate()

    # -- taking ----------------------------------------------------------------------------

    def next(self) -> T | None:
        """The next command in the common order, or ``None`` if none is ready yet (timely's ``next``)."""
        return self._take() if self._inbox else None

    def _take(self) -> T:
        inbox = self._inbox
        if len(inbox) >= self._capacity and self._sink is not None:
            self._sink.activate()  # it stopped taking input while the inbox was full
        return inbox.popleft()

    def __iter__(self) -> Iterator[T]:
        """The commands ready now, in order (the loop ends when none is ready; later ones come later)."""
        while self._inbox:
            yield self._take()

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        """Wait for the next command; stop once every worker has closed and every command was taken."""
        while not self._inbox:
            if self._finished:
                raise StopAsyncIteration
            fut = self._handle().waiter()
            self._readers.append(fut)
            await fut
        return self._take()

    def done(self) -> bool:
        """True once every worker has closed its sequencer and every command was taken here."""
        return self._finished and not self._inbox

    def _handle(self) -> WorkerHandle:
        assert self._worker is not None
        return self._worker

    def __repr__(self) -> str:
        state = "done" if self.done() else "closed" if self._closed else "open"
        return f"Sequencer(worker={self._index}, {state}, {len(self._inbox)} ready)"


class Barrier:
    """``await barrier.wait()`` returns on each worker once every worker has called it; reusable, round after
    round (timely's ``Barrier``: an input each worker advances, and a probe that sees when all have).

    Every worker creates its barriers in the same order (each is a dataflow). A barrier is closed when its
    worker's build ends (or by ``close()``): a closed barrier no longer holds the other workers back.
    """

    def __init__(self, worker: BuildsDataflows, *, name: str = "Barrier") -> None:
        self._index = worker.index
        self._input: InputHandle[None] = InputHandle()
        self._probe = ProbeHandle()
        worker.dataflow(self._build, name=name)

    def _build(self, scope: ScopeCore[Any]) -> None:
        probe_with(self._input.to_stream(scope), self._probe)

    @property
    def round(self) -> int:
        """How many times this worker has passed the barrier."""
        time: int = self._input.time
        return time

    async def wait(self) -> None:
        """Return once every worker has reached this round of the barrier (at once with one worker)."""
        if not self._input.is_open():
            raise RuntimeError(f"the Barrier of worker {self._index} is closed (its build ended, or close() was "
                               "called): it cannot be waited on any more")
        reached = self._input.time
        self._input.advance_to(reached + 1)
        await self._probe.wait_beyond(reached)

    def close(self) -> None:
        """Wait no more: the other workers are not held back by this one from now on."""
        self._input.close()

    def __repr__(self) -> str:
        return f"Barrier(worker={self._index}, round={self._input.time})"
