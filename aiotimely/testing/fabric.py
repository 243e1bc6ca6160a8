"""A fabric that delays and reorders what workers send each other, deterministically: a test seam.

The workers of one process hand each other items through two methods of
:class:`~aiotimely.comm.LocalFabric` (its docstring names them as the seam):
:meth:`~aiotimely.comm.LocalFabric.mailboxes` gives an exchange or broadcast pusher
the endpoints it pushes record batches into, and
:meth:`~aiotimely.comm.LocalFabric.broadcast` sends a scope's progress batches.
:class:`ReorderingFabric` overrides both: every batch (an exchange's batches for the
sending worker itself too) is put in a *lane* and reaches the receiver's mailbox
later, in an order a seeded :class:`random.Random` chooses, within what timely allows.

What stays in order, and why (PROGRESS.md §7):

* **progress batches**: FIFO per ``(sender, receiver, scope)``. The safety property
  holds for any *prefix* of each worker's sequence of batches, and only for
  prefixes: a worker's "release at ``(l, t)``" overtaking its "acquire at ``(l, t)``"
  could cancel another worker's hold on the same pointstamp, and a frontier would
  pass ``t`` while records at ``t`` are still to come.
* **data batches**: FIFO per ``(sender, receiver, channel)`` by default, as timely's
  channels are queues. ``data_fifo=False`` lets them overtake each other too: the
  progress protocol needs only at-most-once delivery for records.

Everything else may be reordered: a progress batch may arrive before the records it
counts or long after them, one channel's batches before another's, one sender's
before another's. Delays are counted in *ticks*, turns of the event loop (every
worker runs at most one round per turn): a batch waits ``0..max_delay`` ticks (0:
delivered as it is sent, as :class:`~aiotimely.comm.LocalFabric` does, when its lane
is empty), and each tick delivers the due batches lane by lane, the lanes in a random
order. Every batch is therefore delivered within ``max_delay`` ticks of being sent,
and a run always finishes. The same seed and the same build give the same run.

::

    from aiotimely.testing import run_reordered

    out = run_reordered(build, workers=3, seed=7)        # an Outputs, as run_dataflow returns
    assert out == run_dataflow(build, workers=3)

:func:`execute_reordered` runs a build function of workers (``build(worker)``, as
:func:`aiotimely.execute` takes: inputs, probes, ``step_while``) the same way; both
take a ready ``fabric=ReorderingFabric(...)`` (a subclass that plants a bug, for
instance), and ``fabric.statistics()`` says how much was delayed and overtaken.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import random
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Hashable, Literal, NamedTuple

from ..comm.codec import RecordCodec
from ..comm.fabric import Channel, Endpoint
from ..comm.local import LocalFabric, Mailbox
from ..dataflow.failures import ErrorPolicy
from ..execution import Worker
from ..worker import Computation
from ..worker.computation import Halted
from ..worker.loop import run
from .running import TIMEOUT, Build, Capturing, DataflowTimeout

if TYPE_CHECKING:
    pass

__all__ = ["ReorderingFabric", "FabricStatistics", "Kind", "MAX_DELAY", "run_reordered", "run_reordered_async",
           "execute_reordered", "execute_reordered_async"]

MAX_DELAY = 8
"""Ticks (turns of the event loop) a batch may wait in the fabric by default."""

Kind = Literal["data", "progress"]
"""What a batch is: records of a data channel, or a scope's progress batch."""


class FabricStatistics(NamedTuple):
    """What a :class:`ReorderingFabric` did so far."""

    sent: int
    """Batches sent through it (each receiver's copy of a progress batch counts once)."""
    delayed: int
    """Of those, the batches that waited at least one tick."""
    overtaken: int
    """Batches delivered after a batch sent later to the same worker: how much was reordered."""
    in_flight: int
    """Batches sent and not yet delivered."""
    ticks: int
    """Turns of the event loop the fabric spent delivering."""
    longest_wait: int
    """The most ticks a batch waited (never more than ``max_delay``)."""


class _SendEnd(Mailbox):
    """Where worker ``sender`` pushes record batches for ``box`` (a mailbox of another worker, or its own): into
    the fabric, which delivers them later. It is a :class:`Mailbox` because the records stay in this process
    (an exchange into it routes keys as into any mailbox here); it holds nothing itself, and its back-pressure is
    the receiving mailbox's."""

    __slots__ = ("_fabric", "_box", "_key")

    def __init__(self, fabric: ReorderingFabric, box: Mailbox, key: tuple[int, int, Channel]) -> None:
        super().__init__(box.high)
        self._fabric = fabric
        self._box = box
        self._key = key

    def push(self, item: Any, nbytes: int = 0) -> None:
        if nbytes:  # (in flight, it weighs on the receiving mailbox already)
            self._box.weigh(nbytes)
        sender, receiver, channel = self._key
        self._fabric._send(sender, receiver, channel, "data", item, self._box)

    def listen(self, listener: Callable[[], None]) -> None:
        raise RuntimeError("this is a sending end into the reordering fabric: listen on the receiving mailbox")

    def full(self) -> bool:
        return self._box.full()

    def wait(self, wake: Callable[[], None]) -> None:
        self._box.wait(wake)

    def room(self) -> None:
        self._box.room()

    def __repr__(self) -> str:
        sender, receiver, channel = self._key
        return f"_SendEnd({sender} -> {receiver}, channel {channel})"


class _Batch(NamedTuple):
    sent: int
    """The tick it was sent at."""
    due: int
    """The tick it is delivered at (or after, behind an earlier batch of its lane)."""
    seq: int
    """Its place among every batch sent, to tell when it overtook another."""
    receiver: int
    box: Mailbox
    item: Any


class ReorderingFabric(LocalFabric):
    """The mailboxes of ``peers`` workers of one process, with every batch between them delayed and reordered
    by a seeded random generator (``seed``: an ``int`` or a :class:`random.Random`), within what timely allows:
    see the module's docstring.

    ``max_delay`` bounds the ticks a batch waits; ``data_fifo=False`` lets record batches of one channel from
    one worker to another overtake each other. :meth:`lane` says which batches keep their order and
    :meth:`deliver` hands each to its mailbox: a test may override them to plant a bug.
    """

    def __init__(self, peers: int, *, seed: int | random.Random = 0, max_delay: int = MAX_DELAY,
                 data_fifo: bool = True, codec: RecordCodec | None = None) -> None:
        if max_delay < 0:
            raise ValueError(f"max_delay must be at least 0, not {max_delay}")
        super().__init__(peers, codec=codec)
        self.rng = seed if isinstance(seed, random.Random) else random.Random(seed)
        self.max_delay = max_delay
        self.data_fifo = data_fifo
        self._lanes: dict[Hashable, deque[_Batch]] = {}
        """The batches in flight, by lane, oldest first; a lane is here only while it holds some."""
        self._now = 0
        self._seq = itertools.count()
        self._newest: dict[int, int] = {}
        """Per receiver, the ``seq`` of the latest-sent batch delivered to it so far."""
        self._unordered = itertools.count()
        self._claimed = False
        self._tick_handle: asyncio.Handle | None = None
        self._sent = self._delayed = self._overtaken = self._in_flight = self._longest = 0

    # -- the seam: what LocalFabric's senders go through ----------------------------------------------

    def mailboxes(self, channel: Channel, source: int = 0) -> list[Endpoint]:
        """Every worker's endpoint for ``channel``, for sending worker ``source``: a sending end into the fabric."""
        return [_SendEnd(self, self.mailbox(channel, w), (source, w, channel)) for w in range(self.peers)]

    def broadcast(self, channel: Channel, item: Any, skip: int | None = None) -> None:
        """Send a progress batch to every worker but ``skip`` (the sender), each copy on its own lane."""
        sender = -1 if skip is None else skip
        for w in range(self.peers):
            if w != skip:
                self._send(sender, w, channel, "progress", item, self.mailbox(channel, w))

    def lane(self, sender: int, receiver: int, channel: Channel, kind: Kind) -> Hashable:
        """The lane a batch joins: batches of one lane reach the receiver in the order they were sent.

        ``(sender, receiver, channel)`` for progress batches, and for data batches when ``data_fifo``; otherwise
        a lane of the batch's own. A test may override this to break an order timely relies on.
        """
        if kind == "data" and not self.data_fifo:
            return ("data", sender, receiver, channel, next(self._unordered))
        return (kind, sender, receiver, channel)

    # -- delivery ---------------------------------------------------------------------------------------

    def _send(self, sender: int, receiver: int, channel: Channel, kind: Kind, item: Any, box: Mailbox) -> None:
        self._sent += 1
        seq = next(self._seq)
        key = self.lane(sender, receiver, channel, kind)
        lane = self._lanes.get(key)
        delay = self.rng.randint(0, self.max_delay)
        if delay == 0 and lane is None:
            self._deliver(_Batch(self._now, self._now, seq, receiver, box, item))
            return
        self._delayed += 1
        self._in_flight += 1
        due = self._now + delay
        if lane is None:
            lane = self._lanes[key] = deque()
        elif lane[-1].due > due:
            due = lane[-1].due  # (behind the batch before it: never later than max_delay ticks from now)
        lane.append(_Batch(self._now, due, seq, receiver, box, item))
        if self._tick_handle is None:
            self._tick_handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        """One turn of the event loop: deliver every batch due, lane by lane, the lanes in a random order."""
        self._tick_handle = None
        self._now += 1
        now = self._now
        lanes = self._lanes
        due = [key for key, lane in lanes.items() if lane[0].due <= now]
        self.rng.shuffle(due)
        for key in due:
            lane = lanes[key]
            while lane and lane[0].due <= now:
                self._in_flight -= 1
                self._deliver(lane.popleft())
            if not lane:
                del lanes[key]
        if lanes:
            self._tick_handle = asyncio.get_running_loop().call_soon(self._tick)

    def deliver(self, receiver: int, box: Mailbox, item: Any) -> None:
        """Hand ``item`` to ``box``, worker ``receiver``'s mailbox: the last step of every delivery. A test may
        override it to plant a bug (change what arrives)."""
        box.push(item)

    def _deliver(self, batch: _Batch) -> None:
        waited = self._now - batch.sent
        if waited > self._longest:
            self._longest = waited
        newest = self._newest.get(batch.receiver, -1)
        if batch.seq < newest:
            self._overtaken += 1
        else:
            self._newest[batch.receiver] = batch.seq
        self.deliver(batch.receiver, batch.box, batch.item)

    # -- looking at it ----------------------------------------------------------------------------------

    def in_flight(self) -> int:
        """How many batches were sent and are not delivered yet."""
        return self._in_flight

    def statistics(self) -> FabricStatistics:
        """What the fabric did so far: batches sent, delayed, overtaken, in flight; ticks, the longest wait."""
        return FabricStatistics(self._sent, self._delayed, self._overtaken, self._in_flight, self._now,
                                self._longest)

    def _claim(self) -> None:
        """Take the fabric for a computation: it serves one (its mailboxes and dataflow numbers are that one's)."""
        if self._claimed:
            raise ValueError("this ReorderingFabric served a computation already: make a new one for each run")
        self._claimed = True

    def close(self) -> None:
        """Stop delivering: what is still in flight stays undelivered (the computation is over)."""
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    def __repr__(self) -> str:
        return (f"ReorderingFabric(peers={self.peers}, max_delay={self.max_delay}, data_fifo={self.data_fifo}, "
                f"in_flight={self._in_flight})")


class _ReorderedComputation(Computation):
    """The workers on a :class:`ReorderingFabric`: while it holds batches, workers that all wait are not stuck
    (the fabric delivers them at its next tick); once it holds none, stuck detection is the usual one."""

    def check_stuck(self) -> None:
        fabric = self.fabric
        if isinstance(fabric, ReorderingFabric) and fabric.in_flight():
            return
        super().check_stuck()


def _no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{name} runs an event loop of its own, and cannot from inside a running one (an async test): "
                       f"use 'await {name}_async(...)' there")


def _fabric_for(workers: int, fabric: ReorderingFabric | None, seed: int | random.Random, max_delay: int,
                data_fifo: bool) -> ReorderingFabric:
    if fabric is None:
        return ReorderingFabric(workers, seed=seed, max_delay=max_delay, data_fifo=data_fifo)
    if fabric.peers != workers:
        raise ValueError(f"the fabric connects {fabric.peers} workers, not {workers}")
    return fabric


async def execute_reordered_async(build: Callable[[Worker], Any], workers: int = 3, *, seed: int | random.Random = 0,
                                  max_delay: int = MAX_DELAY, data_fifo: bool = True,
                                  fabric: ReorderingFabric | None = None, timeout: float = TIMEOUT) -> list[Any]:
    """:func:`execute_reordered` on the running event loop."""
    fabric = _fabric_for(workers, fabric, seed, max_delay, data_fifo)
    fabric._claim()
    computation = _ReorderedComputation(workers, fabric=fabric)
    members = [Worker(i, workers, computation=computation) for i in range(workers)]

    async def run_worker(worker: Worker) -> Any:
        try:
            async with worker:
                result = build(worker)
                if inspect.isawaitable(result):
                    result = await result
            return result
        except BaseException as exc:
            computation.fail(exc)  # (the other workers stop too, rather than wait for this one)
            raise

    tasks = [asyncio.ensure_future(run_worker(w)) for w in members]
    try:
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            timed_out = DataflowTimeout(f"the computation on {workers} workers of a reordering fabric did not "
                                        f"complete within {timeout} s ({fabric.statistics()})")
            computation.fail(timed_out)  # (the workers stop at once, rather than drain as a cancellation asks)
            raise timed_out
        error = computation.error
        if error is not None and not isinstance(error, Halted):
            raise error
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # (retrieved: what is raised is the computation's error)
        fabric.close()


def execute_reordered(build: Callable[[Worker], Any], workers: int = 3, *, seed: int | random.Random = 0,
                      max_delay: int = MAX_DELAY, data_fifo: bool = True, fabric: ReorderingFabric | None = None,
                      timeout: float = TIMEOUT) -> list[Any]:
    """Run ``build(worker)`` on ``workers`` workers of this process, as :func:`aiotimely.execute` does, with every
    batch between them going through a :class:`ReorderingFabric` (``fabric``, or one made of ``seed``,
    ``max_delay`` and ``data_fifo``); return the build's results in worker order.

    It runs on a plain asyncio loop, so that a seed gives the same run every time. Raises what the computation
    failed with, or :class:`~aiotimely.testing.DataflowTimeout` after ``timeout`` seconds."""
    _no_running_loop("execute_reordered")
    results: list[Any] = run(execute_reordered_async(build, workers, seed=seed, max_delay=max_delay,
                                                     data_fifo=data_fifo, fabric=fabric, timeout=timeout), "asyncio")
    return results


async def run_reordered_async(build: Build, workers: int = 3, *, seed: int | random.Random = 0,
                              max_delay: int = MAX_DELAY, data_fifo: bool = True,
                              fabric: ReorderingFabric | None = None, timestamp: Any = int, timeout: float = TIMEOUT,
                              errors: ErrorPolicy = "raise") -> Any:
    """:func:`run_reordered` on the running event loop."""
    capturing = Capturing(build, timestamp, errors)
    await execute_reordered_async(capturing.on_worker, workers, seed=seed, max_delay=max_delay,
                                  data_fifo=data_fifo, fabric=fabric, timeout=timeout)
    return capturing.outputs()


def run_reordered(build: Build, workers: int = 3, *, seed: int | random.Random = 0, max_delay: int = MAX_DELAY,
                  data_fifo: bool = True, fabric: ReorderingFabric | None = None, timestamp: Any = int,
                  timeout: float = TIMEOUT, errors: ErrorPolicy = "raise") -> Any:
    """:func:`~aiotimely.testing.run_dataflow` on a :class:`ReorderingFabric`: build the dataflow with
    ``build(scope)`` on ``workers`` workers, run it to completion with every batch between them delayed and
    reordered (by ``seed``, or through ``fabric``), and return what the returned stream carried (an
    :class:`~aiotimely.testing.Outputs`, or a dict of them for a dict of streams)."""
    _no_running_loop("run_reordered")
    return run(run_reordered_async(build, workers, seed=seed, max_delay=max_delay, data_fifo=data_fifo,
                                   fabric=fabric, timestamp=timestamp, timeout=timeout, errors=errors), "asyncio")
