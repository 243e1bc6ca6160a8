"""Channels: how a batch gets from an output to the mailboxes of its consumers.

A channel is a numbered edge of a dataflow. Its pusher runs on the producing
worker: straight into one mailbox on this worker (timely's Pipeline), spread over
every worker's mailbox by a key of each record (Exchange), or to every worker
(Broadcast). Mailboxes of workers in other processes encode what they are given
with the channel's codec, which this module supplies: the communication layer
moves bytes and knows nothing of records or times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..comm.codec import CodecError, RecordCodec, register_extension
from ..comm.fabric import Endpoint
from ..comm.local import Mailbox
from ..comm.routing import route
from ..errors import ProgressError
from ..progress import Product, ProgressBatch, TimestampType
from ..worker.logging import MessagesEvent
from .containers import copy_batch, is_container, nbytes, partition

if TYPE_CHECKING:
    from ..comm.fabric import Channel
    from ..worker import WorkerHandle

__all__ = ["Pusher", "Tee", "push_to_all", "MailboxPusher", "ExchangePusher", "BroadcastPusher", "DataCodec",
           "ProgressCodec"]

Pusher = Callable[[Any, list[Any]], None]
"""Takes a batch of records at a time: ``pusher(time, records)``."""


class Tee(Protocol):
    """Where a stream's batches come out: every pusher attached gets each batch."""

    pushers: list[Pusher]

PRODUCT_EXTENSION = 2
"""The value codec's extension code for :class:`~aiotimely.progress.Product`."""


def _product(data: Any) -> Product:
    outer, inner = data
    return Product(outer, inner)


register_extension(PRODUCT_EXTENSION, Product, tuple, _product)


class DataCodec:
    """A data channel's items, ``(time, records)``, as bytes: the time in its type's wire form, the records
    by the computation's value codec."""

    __slots__ = ("_ttype", "_values")

    def __init__(self, ttype: TimestampType[Any, Any], values: RecordCodec) -> None:
        self._ttype = ttype
        self._values = values

    def encode(self, item: tuple[Any, list[Any]], limit: int) -> list[bytes]:
        time, batch = item
        wire_time = self._ttype.encode(time)
        payload = self._values.pack_records((wire_time, batch))
        if len(payload) <= limit:
            return [payload]
        if len(batch) == 1:
            raise CodecError(f"a record of {len(payload):,} bytes at time {time!r} cannot cross processes: a frame "
                             f"carries at most {limit:,} bytes; send it in smaller records")
        half = len(batch) // 2  # too big for one frame: two batches, and so on, each counted where consumed
        return self.encode((time, batch[:half]), limit) + self.encode((time, batch[half:]), limit)

    def decode(self, payload: bytes) -> tuple[Any, list[Any]]:
        time, records = self._values.unpack(payload)
        if type(records) is not list and not is_container(records):
            records = list(records)
        return self._ttype.decode(time), records

    def weight(self, item: tuple[Any, Any]) -> int:
        return nbytes(item[1])


class ProgressCodec:
    """A scope's progress channel: :class:`~aiotimely.progress.ProgressBatch` es in their compact form; a batch
    for another scope is refused as it arrives (the peer that sent it is at fault)."""

    __slots__ = ("_ttype", "_path")

    def __init__(self, ttype: TimestampType[Any, Any], path: tuple[int, ...]) -> None:
        self._ttype = ttype
        self._path = path

    def encode(self, batch: ProgressBatch, limit: int) -> list[bytes]:
        payload = batch.encode(self._ttype)
        if len(payload) > limit:  # a progress batch is never split
            raise ProgressError(f"a progress batch of {len(payload):,} bytes does not fit in a frame ({limit:,})")
        return [payload]

    def decode(self, payload: bytes) -> ProgressBatch:
        batch = ProgressBatch.decode(payload, self._ttype)
        if batch.path != self._path:
            raise ProgressError(f"a progress batch of scope {batch.path} on the channel of scope {self._path}")
        return batch

    def weight(self, batch: ProgressBatch) -> int:
        return 0


def endpoints(pushers: list[Pusher]) -> list[Endpoint]:
    """Every mailbox (here or in another process) that ``pushers`` feed, through scope boundaries too:
    where a producer's batches end up, and so what may make it wait."""
    found: list[Endpoint] = []
    stack = list(reversed(pushers))   # not recursive: a chain of a thousand fused stages is fine
    while stack:
        pusher = stack.pop()
        reach = getattr(pusher, "endpoints", None)
        if reach is not None:
            found.extend(reach())
        else:  # a scope's enter or leave port, or a fused stage: a pusher with pushers of its own
            stack.extend(reversed(getattr(pusher, "pushers", [])))
    return found


def push_to_all(pushers: list[Pusher], time: Any, batch: list[Any]) -> None:
    """Hand ``batch`` to every pusher: a copy to all but the last, so each consumer may keep or change its own."""
    if len(pushers) == 1:
        pushers[0](time, batch)
    elif pushers:
        last = len(pushers) - 1
        for i, push in enumerate(pushers):
            push(time, batch if i == last else copy_batch(batch))


class MailboxPusher:
    """Pushes batches into one mailbox on this worker."""

    __slots__ = ("_box", "_worker", "_channel")

    def __init__(self, box: Mailbox, worker: WorkerHandle, channel: Channel) -> None:
        self._box = box
        self._worker = worker
        self._channel = channel

    def __call__(self, time: Any, batch: list[Any]) -> None:
        if type(batch) is list:
            self._box.push((time, batch))
        else:
            self._box.push((time, batch), nbytes(batch))
        log = self._worker.logging
        if log is not None:
            index = self._worker.index
            log.log(MessagesEvent(True, self._channel, index, index, time, len(batch)))

    def endpoints(self) -> list[Endpoint]:
        return [self._box]


Blame = Callable[[Exception, str, Any], BaseException]
"""Makes the error of a consumer's channel: ``blame(exception, what failed, time)``."""


ROUTES_KEPT = 1 << 16
"""How many keys (not ``int`` ones) an exchange remembers the route of (then it starts over)."""


class ExchangePusher:
    """Spreads a batch over every worker's mailbox by a key of each record.

    The key function is the consumer's: if it fails, ``blame`` names the consumer (not the operator whose
    activation happened to send the batch).
    """

    __slots__ = ("_key", "_boxes", "_peers", "_blame", "_routes", "_worker", "_channel", "_int_keys", "_strict",
                 "_bulk")

    def __init__(self, key: Callable[[Any], Any], boxes: list[Any], worker: WorkerHandle, channel: Channel,
                 blame: Blame | None = None) -> None:
        self._key = key
        self._worker = worker
        self._channel = channel
        self._boxes = boxes
        self._peers = len(boxes)
        self._blame = blame
        self._routes: dict[Any, int] = {}
        """Where keys other than ``int`` went: a string's route costs a CRC-32 (a date's, a tuple's, more), and
        keys repeat. Equal keys route alike, so a key found here goes where an equal one went."""
        self._int_keys = False
        """Whether the last batch's keys were ``int``: this batch's are taken to be of the same kind."""
        self._strict = not all(isinstance(box, Mailbox) for box in boxes)
        """Whether records leave this process: then a key must route alike in every process, or is refused."""
        self._bulk: Callable[[Any, int], Any] | None = getattr(key, "routes", None)
        """A bulk key's routes of a whole container (see :class:`~.containers.BulkKey`), if the key has them."""

    def __call__(self, time: Any, batch: list[Any]) -> None:
        if type(batch) is not list:
            self._push_parts(time, self._split_container(time, batch))
            return
        key, peers, routes = self._key, self._peers, self._routes
        parts: list[list[Any]] = [[] for _ in range(peers)]
        if len(routes) > ROUTES_KEPT:
            routes.clear()
        remembered = routes.get
        k: Any = None
        try:
            # Two copies of one loop, each with the cheapest test first for its kind of key (both route any key).
            if self._int_keys:
                for record in batch:
                    k = key(record)
                    if type(k) is int and k >= 0:
                        parts[k % peers].append(record)
                    else:
                        to = remembered(k)
                        parts[self._route(k) if to is None else to].append(record)
            else:
                for record in batch:
                    k = key(record)
                    to = remembered(k)   # (ints are not remembered, but a key equal to one is found)
                    parts[self._route(k) if to is None else to].append(record)
        except Exception as exc:
            if self._blame is None:
                raise
            raise self._blame(exc, f"the exchange key of record {record!r:.200}", time) from exc
        self._int_keys = type(k) is int
        self._push_parts(time, parts)

    def _split_container(self, time: Any, batch: Any) -> list[Any]:
        """A container's records split by route (the container splits itself); a key with a ``routes`` method
        (see :class:`~.containers.BulkKey`) gives the routes of the whole batch in one call."""
        bulk = self._bulk
        if bulk is not None:
            try:
                return batch.partition(bulk(batch, self._peers), self._peers)  # type: ignore[no-any-return]
            except Exception as exc:
                if self._blame is None:
                    raise
                raise self._blame(exc, f"the exchange key of a batch of {len(batch)} records", time) from exc
        key, remembered = self._key, self._routes.get
        record: Any = None

        def route_of(r: Any) -> int:
            nonlocal record
            record = r
            k = key(r)
            to = remembered(k)
            return self._route(k) if to is None else to

        try:
            return partition(batch, route_of, self._peers)
        except Exception as exc:
            if self._blame is None:
                raise
            raise self._blame(exc, f"the exchange key of record {record!r:.200}", time) from exc

    def _push_parts(self, time: Any, parts: list[Any]) -> None:
        for box, part in zip(self._boxes, parts, strict=True):
            if type(part) is list:
                if part:
                    box.push((time, part))
            elif len(part):
                box.push((time, part), nbytes(part))
        log = self._worker.logging
        if log is not None:
            index, channel = self._worker.index, self._channel
            for target, part in enumerate(parts):
                if len(part):
                    log.log(MessagesEvent(True, channel, index, target, time, len(part)))

    def _route(self, key: Any) -> int:
        """The route of a key not remembered; remembered unless the key is an ``int``."""
        to = route(key, self._peers, strict=self._strict)
        if type(key) is not int:
            self._routes[key] = to
        return to

    def endpoints(self) -> list[Endpoint]:
        return self._boxes


class BroadcastPusher:
    """Sends every batch to every worker's mailbox."""

    __slots__ = ("_boxes", "_worker", "_channel")

    def __init__(self, boxes: list[Any], worker: WorkerHandle, channel: Channel) -> None:
        self._boxes = boxes
        self._worker = worker
        self._channel = channel

    def __call__(self, time: Any, batch: list[Any]) -> None:
        last = len(self._boxes) - 1
        weight = 0 if type(batch) is list else nbytes(batch)
        for i, box in enumerate(self._boxes):
            item = (time, batch if i == last else copy_batch(batch))
            if weight:
                box.push(item, weight)
            else:
                box.push(item)
        log = self._worker.logging
        if log is not None:
            index, channel, length = self._worker.index, self._channel, len(batch)
            for target in range(last + 1):
                log.log(MessagesEvent(True, channel, index, target, time, length))

    def endpoints(self) -> list[Endpoint]:
        return self._boxes
