"""In-process communication: mailboxes that workers of one process share, without serialization.

A :class:`Mailbox` is a FIFO queue with a listener: whoever pushes appends and
calls the listener (the receiving worker's activation of the consumer). Either
side may create a mailbox first: a sender can push before the receiving worker
has built its end, and the receiver is notified when it starts listening.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Hashable

__all__ = ["Mailbox", "LocalFabric"]


class Mailbox:
    """A FIFO queue of items for one receiver, and the callback that wakes it."""

    __slots__ = ("queue", "_listener")

    def __init__(self) -> None:
        self.queue: deque = deque()
        self._listener: Callable[[], None] | None = None

    def push(self, item: Any) -> None:
        self.queue.append(item)
        listener = self._listener
        if listener is not None:
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every push from now on (and now, if items are waiting)."""
        self._listener = listener
        if self.queue:
            listener()

    def __len__(self) -> int:
        return len(self.queue)

    def __repr__(self) -> str:
        return f"Mailbox({len(self.queue)} waiting)"


class LocalFabric:
    """The mailboxes of one process's workers, keyed by ``(channel, worker)``.

    The runtime talks to every fabric through these methods; the TCP cluster's
    fabric adds mailboxes that send to other processes.
    """

    def __init__(self, peers: int) -> None:
        self.peers = peers
        self._boxes: dict[tuple[Hashable, int], Mailbox] = {}

    def mailbox(self, channel: Hashable, worker: int) -> Mailbox:
        """The mailbox of ``worker`` for ``channel``, created on first use by either side."""
        key = (channel, worker)
        box = self._boxes.get(key)
        if box is None:
            box = self._boxes[key] = Mailbox()
        return box

    def mailboxes(self, channel: Hashable, source: int = 0) -> list[Mailbox]:
        """Every worker's mailbox for ``channel``, in worker order (``source`` is the sending worker)."""
        return [self.mailbox(channel, w) for w in range(self.peers)]

    def broadcast(self, channel: Hashable, item: Any, skip: int | None = None) -> None:
        """Push ``item`` to every worker's mailbox for ``channel`` but ``skip``'s, in order."""
        for w in range(self.peers):
            if w != skip:
                self.mailbox(channel, w).push(item)

    def register(self, channel: Hashable, ttype: Any) -> None:
        """Declare a channel and its timestamp type (needed to decode what other processes send)."""

    def congested(self) -> bool:
        """True while sends to other processes wait for the network: producers should pause."""
        return False

    async def wait_writable(self) -> None:
        """Wait until :meth:`congested` is false."""

    def pause_reading(self) -> None:
        """The workers are behind: stop reading records from the network for now."""

    def resume_reading(self) -> None:
        """The workers caught up: read more from the network."""

    def discard(self, channel: Hashable) -> None:
        """Forget a channel's mailboxes (its dataflow completed)."""
        for w in range(self.peers):
            self._boxes.pop((channel, w), None)
