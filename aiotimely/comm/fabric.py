"""The interface every fabric offers the layers above: channels of items between workers.

A fabric moves items (record batches, progress batches: it does not look inside)
on numbered channels. Within a process an item is passed by reference; to a
worker in another process it is encoded with the channel's :class:`ChannelCodec`,
which the layer that opened the channel supplies, and decoded there with the same.
:class:`~.local.LocalFabric` is one process; :class:`~.cluster.ClusterFabric` adds
TCP links to the others; :class:`aiotimely.testing.ReorderingFabric`, a test fabric,
is a ``LocalFabric`` that delays and reorders batches between workers, deterministically,
where timely allows it (progress batches stay FIFO per sender, receiver and scope).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from .backpressure import BackPressure
    from .codec import RecordCodec
    from .local import Mailbox

__all__ = ["Channel", "ChannelCodec", "Endpoint", "Fabric"]

Channel = tuple[int, int]
"""A channel's id: ``(dataflow, number)``, allocated in the same order by every worker."""


class ChannelCodec(Protocol):
    """How one channel's items become bytes for another process, and back."""

    def encode(self, item: Any, limit: int) -> list[bytes]:
        """The item as one or more payloads of at most ``limit`` bytes, each decoding to an item of its own
        (a batch too big for one frame is split); raise if the item cannot be split to fit."""
        ...

    def decode(self, payload: bytes) -> Any:
        ...

    def weight(self, item: Any) -> int:
        """What a decoded item weighs in its mailbox, in bytes (0: only its count matters; see
        :mod:`.backpressure`)."""
        ...


class Endpoint(Protocol):
    """Where a sender pushes items for one worker: that worker's mailbox, or a link to its process.

    A full endpoint still takes what is pushed; a producer that finds it full waits to be woken.
    """

    def push(self, item: Any, nbytes: int = 0) -> None:
        """Take ``item``, which weighs ``nbytes`` bytes (0: only its count matters; see :mod:`.backpressure`)."""
        ...

    def full(self) -> bool:
        """True while producers should wait (see :mod:`.backpressure`)."""
        ...

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once the endpoint has room again."""
        ...


class Fabric(Protocol):
    """Channels between the workers of a computation."""

    peers: int
    codec: RecordCodec
    """The computation's codec for values (records): what channel codecs build on."""
    pressure: BackPressure
    """The back-pressure policy: when producers wait and when reading pauses."""

    def register(self, channel: Channel, codec: ChannelCodec) -> None:
        """Declare a channel and its codec (items from other processes wait until it is declared)."""
        ...

    def mailbox(self, channel: Channel, worker: int) -> Mailbox:
        """The mailbox of ``worker`` (one of this process's) for ``channel``, created by either side first."""
        ...

    def mailboxes(self, channel: Channel, source: int) -> list[Endpoint]:
        """Every worker's endpoint for ``channel``, in worker order, for sending worker ``source``."""
        ...

    def broadcast(self, channel: Channel, item: Any, skip: int | None = None) -> None:
        """Push ``item`` to every worker's mailbox for ``channel`` but ``skip``'s, in order."""
        ...

    def begin_dataflow(self, dataflow: int) -> None:
        """A worker of this process numbered a new dataflow (every worker numbers them alike, from 0 up)."""
        ...

    def end_dataflow(self, dataflow: int) -> None:
        """A worker of this process is done with ``dataflow`` (it is complete there). Once every worker of this
        process is, its channels' mailboxes, codecs and senders are forgotten, and what arrives for it later
        from another process (a progress batch that changes nothing, credit) is dropped."""
        ...
