"""Back-pressure: when producers wait and when reading from the network pauses, as one policy.

* Sending: while a link's write buffer is over its high-water mark the fabric is
  congested; the workers finish their round and wait until it drains
  (:meth:`BackPressure.wait_writable`), so a fast producer cannot outrun the network.
* Receiving: reading from a link pauses while a mailbox it fed holds more than
  ``mailbox_high`` batches (until half of that), and reading from every link pauses
  while an operator that awaits I/O has more than ``backlog_high`` batches waiting
  at an input (until ``backlog_low``). The sender's buffer then fills, and it waits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

if TYPE_CHECKING:
    from .link import Link
    from .local import Mailbox

__all__ = ["BackPressure", "Backlogged"]


class Backlogged(Protocol):
    """A consumer that may fall behind: how many batches wait at its fullest input."""

    def backlog(self) -> int:
        ...


class BackPressure:
    """The policy of one fabric; ``links()`` gives its live links to other processes (none in one process)."""

    def __init__(
        self,
        links: Callable[[], Iterable[Link]] = tuple,
        *,
        failed: Callable[[], bool] = lambda: False,
        mailbox_high: int = 256,
        backlog_high: int = 256,
        backlog_low: int = 64,
    ) -> None:
        self._links = links
        self._failed = failed
        self.mailbox_high = mailbox_high
        self.backlog_high = backlog_high
        self.backlog_low = backlog_low
        self._full: list[tuple[Mailbox, Link]] = []
        self._backlog: set[Backlogged] = set()
        self._paused = False

    # -- sending ----------------------------------------------------------------------

    def congested(self) -> bool:
        """True while some link's write buffer is full: producers should pause."""
        return any(link.congested() for link in self._links())

    async def wait_writable(self) -> None:
        """Wait until no link is congested (or the computation failed)."""
        while not self._failed():
            waiting = [link.writable for link in self._links() if not link.writable.done()]
            if not waiting:
                return
            await asyncio.wait(waiting)

    # -- receiving --------------------------------------------------------------------

    def delivered(self, mailbox: Mailbox, link: Link) -> None:
        """``link`` pushed into ``mailbox``: stop reading from it while the mailbox is too full."""
        if len(mailbox) > self.mailbox_high:
            link.pause_reading()
            self._full.append((mailbox, link))

    def parked(self, consumer: Backlogged) -> None:
        """``consumer`` awaits I/O: if it has a long queue, stop reading from the network meanwhile."""
        if consumer.backlog() > self.backlog_high:
            self._backlog.add(consumer)

    def after_round(self) -> None:
        """After a round: pause or resume reading as the queues now stand."""
        if self._backlog:
            self._backlog = {c for c in self._backlog if c.backlog() > self.backlog_low}
        if self._backlog:
            self._pause_all()
        else:
            self._resume()

    def _pause_all(self) -> None:
        if not self._paused:
            self._paused = True
            for link in self._links():
                link.pause_reading()

    def _resume(self) -> None:
        if self._full:
            still = []
            for box, link in self._full:
                if len(box) > self.mailbox_high // 2:
                    still.append((box, link))
                elif not self._paused:
                    link.resume_reading()
            self._full = still
        if self._paused:
            self._paused = False
            blocked = {id(link) for _, link in self._full}
            for link in self._links():
                if id(link) not in blocked:
                    link.resume_reading()
