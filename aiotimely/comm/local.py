"""In-process communication: mailboxes that workers of one process share, without serialization.

A :class:`Mailbox` is a FIFO queue with a listener: whoever pushes appends and
calls the listener (the receiving worker's activation of the consumer). Either
side may create a mailbox first: a sender can push before the receiving worker
has built its end, and the receiver is notified when it starts listening.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator

from .backpressure import BackPressure
from .codec import RecordCodec
from .fabric import Channel, ChannelCodec, Endpoint

__all__ = ["Mailbox", "LocalFabric"]


class Mailbox:
    """A FIFO queue of items for one receiver, and the callback that wakes it.

    With a bound (``high``), the mailbox is :meth:`full` at ``high`` items, or at ``high_bytes`` bytes of the
    items that say what they weigh (containers: see :mod:`aiotimely.dataflow.containers`): producers that meet
    that :meth:`wait`, and the receiver wakes them (:meth:`room`) once it has taken the queue down to half of
    both. Pushing itself never refuses an item.
    """

    __slots__ = ("queue", "_listener", "high", "high_bytes", "bytes", "_waiters")

    def __init__(self, high: int | None = None, high_bytes: int | None = None) -> None:
        self.queue: deque[Any] = deque()
        self._listener: Callable[[], None] | None = None
        self.high = high
        self.high_bytes: float = float("inf") if high_bytes is None else high_bytes
        self.bytes = 0
        """What the items waiting weigh, in bytes, as their pushers said (:meth:`push`, :meth:`weigh`)."""
        self._waiters: set[Callable[[], None]] | None = None

    def push(self, item: Any, nbytes: int = 0) -> None:
        """Append ``item``, which weighs ``nbytes`` bytes (0: only its count matters), and wake the receiver."""
        self.queue.append(item)
        if nbytes:
            self.bytes += nbytes
        listener = self._listener
        if listener is not None:
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every push from now on (and now, if items are waiting)."""
        self._listener = listener
        if self.queue:
            listener()

    def weigh(self, nbytes: int) -> None:
        """Count ``nbytes`` more bytes waiting (fewer, negative: the receiver took an item that weighed them)."""
        self.bytes += nbytes

    def full(self) -> bool:
        """True when the mailbox holds its bound: producers should wait."""
        return (self.high is not None and len(self.queue) >= self.high) or self.bytes >= self.high_bytes

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once there is room again (the producer's activation)."""
        if self._waiters is None:
            self._waiters = set()
        self._waiters.add(wake)

    def room(self) -> None:
        """The receiver took items: wake the producers waiting, if the queue is down to half its bound."""
        waiters = self._waiters
        if waiters and (self.high is None or len(self.queue) <= self.high // 2) and self.bytes <= self.high_bytes / 2:
            self._waiters = None
            for wake in waiters:
                wake()

    def drain(self) -> Iterator[Any]:
        """Take every item waiting, oldest first."""
        queue = self.queue
        while queue:
            yield queue.popleft()

    def __len__(self) -> int:
        return len(self.queue)

    def __repr__(self) -> str:
        return f"Mailbox({len(self.queue)} waiting)"



class Unfed(Mailbox):
    """The mailbox of an input that is fed another way (a fused stage, run inside its producer's pushes): always
    empty, and shared by every such input, so that thousands of fused operators cost no queue each."""

    __slots__ = ()

    def push(self, item: Any, nbytes: int = 0) -> None:
        raise RuntimeError("this input is fed by its producer's pushes, not through a mailbox")

    def listen(self, listener: Callable[[], None]) -> None:
        """Nothing arrives here: no listener is kept (it would keep its operator alive)."""


UNFED = Unfed()
"""The one mailbox of every input fed by its producer's pushes."""

class LocalFabric:
    """The mailboxes of one process's workers, keyed by ``(channel, worker)``: a :class:`~.fabric.Fabric`
    with no other process to talk to.

    A dataflow's mailboxes go once every worker of the process is done with it (:meth:`end_dataflow`): a program
    that builds dataflow after dataflow holds only the live ones'.

    The test seam: everything one worker sends another goes through two methods, :meth:`mailboxes` (the endpoints
    an exchange or broadcast pusher pushes record batches into) and :meth:`broadcast` (a scope's progress
    batches); a worker's own pipelines and its own progress never leave it. A subclass that overrides those two
    sees every batch between workers, and may hold and reorder them: :class:`aiotimely.testing.ReorderingFabric`
    does, to test that progress stays exact when batches arrive late and out of order. Nothing here changes for
    that (no indirection on the default path).
    """

    def __init__(self, peers: int, *, codec: RecordCodec | None = None, workers: int | None = None) -> None:
        self.peers = peers
        self.codec = codec or RecordCodec()
        self.pressure = BackPressure()
        self._boxes: dict[tuple[Channel, int], Mailbox] = {}
        self._boxes_of: dict[int, list[tuple[Channel, int]]] = {}
        """The keys in ``_boxes`` of each dataflow's mailboxes, to forget them together."""
        self._workers = peers if workers is None else workers
        """How many workers this process has: each must be done with a dataflow before it is forgotten."""
        self._live: dict[int, int] = {}
        """Each dataflow numbered here and not released yet: how many of this process's workers are not done."""
        self._numbered = 0
        """One more than the highest dataflow a worker of this process numbered."""

    def _new_mailbox(self) -> Mailbox:
        return Mailbox(self.pressure.mailbox_high, self.pressure.mailbox_high_bytes)

    # -- dataflows ------------------------------------------------------------------

    def begin_dataflow(self, dataflow: int) -> None:
        """A worker of this process numbered ``dataflow``: the first to number it makes it live."""
        while self._numbered <= dataflow:
            self._live[self._numbered] = self._workers
            self._numbered += 1

    def end_dataflow(self, dataflow: int) -> None:
        """A worker of this process is done with ``dataflow``: the last one releases it."""
        left = self._live.get(dataflow)
        if left is None:
            return
        if left > 1:
            self._live[dataflow] = left - 1
            return
        del self._live[dataflow]
        self._release(dataflow)

    def released(self, dataflow: int) -> bool:
        """True once every worker of this process is done with ``dataflow``: nothing of it is kept, and what
        still arrives for it is late (to drop)."""
        return dataflow < self._numbered and dataflow not in self._live

    def _release(self, dataflow: int) -> None:
        """Forget what ``dataflow`` held."""
        boxes = self._boxes
        for key in self._boxes_of.pop(dataflow, ()):
            boxes.pop(key, None)

    def register(self, channel: Channel, codec: ChannelCodec) -> None:
        """Nothing to do: items stay in this process."""

    def mailbox(self, channel: Channel, worker: int) -> Mailbox:
        """The mailbox of ``worker`` for ``channel``, created on first use by either side."""
        key = (channel, worker)
        box = self._boxes.get(key)
        if box is None:
            box = self._boxes[key] = self._new_mailbox()
            self._boxes_of.setdefault(channel[0], []).append(key)
        return box

    def mailboxes(self, channel: Channel, source: int = 0) -> list[Endpoint]:
        """Every worker's mailbox for ``channel``, in worker order (``source`` is the sending worker)."""
        return [self.mailbox(channel, w) for w in range(self.peers)]

    def broadcast(self, channel: Channel, item: Any, skip: int | None = None) -> None:
        """Push ``item`` to every worker's mailbox for ``channel`` but ``skip``'s, in order."""
        for w in range(self.peers):
            if w != skip:
                self.mailbox(channel, w).push(item)
