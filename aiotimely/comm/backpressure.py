"""Back-pressure: every queue between workers has a bound, and a producer that meets it waits.

* In a process: a mailbox holds at most ``mailbox_high`` batches, or
  ``mailbox_high_bytes`` bytes of containers (a list of records says nothing of its
  size; a container says its ``nbytes``), before it is *full*. An operator whose
  output reaches a full mailbox is not run (a source is not pulled) until the
  consumer has taken the mailbox down to half; it is woken then. So a slow consumer
  holds back what feeds it, stage by stage up to the sources, and memory stays
  bounded whatever the consumer's speed.
* Between processes: credits, in batches and in bytes. A worker may send ``window``
  batches, and ``window_bytes`` bytes of frames, on a channel to a worker of another
  process before that worker's process returns credit for them, which it does as
  its consumer takes them. Without credit of either kind the remote endpoint is
  full, as above. The bytes are those of the frames' payloads (what both ends
  see alike: a columnar batch's Arrow IPC bytes, a list's packed records), so a
  channel of big columnar batches holds at most about ``window_bytes`` in flight
  and in the receiving mailbox, whatever its batch count; lists of small records
  meet the batch window first. Reading from the network never pauses, so progress
  (and heartbeats, and errors) are never held behind data.
* Under both: while a link's write buffer is over its high-water mark the fabric
  is congested, and the workers finish their round and wait until it drains.

A producer runs a whole activation once it runs, so a bound may be passed by one
activation's output: a mailbox holds at most ``mailbox_high`` batches plus what one
activation of each producer sends.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from .link import Link

__all__ = ["BackPressure", "MAILBOX_HIGH", "MAILBOX_HIGH_BYTES", "CREDIT_WINDOW", "CREDIT_WINDOW_BYTES"]

MAILBOX_HIGH = 64
"""Batches a mailbox holds before its producers wait."""
MAILBOX_HIGH_BYTES = 32 << 20
"""Bytes of containers (columnar batches) a mailbox holds before its producers wait."""
CREDIT_WINDOW = 64
"""Batches a worker sends on a channel to a worker of another process before it waits for credit."""
CREDIT_WINDOW_BYTES = 32 << 20
"""Bytes of frames a worker sends on a channel to a worker of another process before it waits for credit
(``AIOTIMELY_CREDIT_WINDOW_BYTES`` sets another, for every fabric made after)."""


class BackPressure:
    """The policy of one fabric; ``links()`` gives its live links to other processes (none in one process),
    ``after_round`` what the fabric does after each round of a worker (return credit)."""

    def __init__(
        self,
        links: Callable[[], Iterable[Link]] = tuple,
        *,
        failed: Callable[[], bool] = lambda: False,
        after_round: Callable[[], None] = lambda: None,
        mailbox_high: int = MAILBOX_HIGH,
        mailbox_high_bytes: int = MAILBOX_HIGH_BYTES,
        window: int = CREDIT_WINDOW,
        window_bytes: int | None = None,
    ) -> None:
        self._links = links
        self._failed = failed
        self.after_round = after_round
        self.mailbox_high = mailbox_high
        self.mailbox_high_bytes = mailbox_high_bytes
        self.window = window
        if window_bytes is None:
            window_bytes = int(os.environ.get("AIOTIMELY_CREDIT_WINDOW_BYTES") or CREDIT_WINDOW_BYTES)
        self.window_bytes = window_bytes

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
