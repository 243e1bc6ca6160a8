"""Progress batches: the atomic unit of progress a worker broadcasts, and their wire form.

A batch holds everything one worker's operators did in one scope since its last
batch: changes of capability counts at sources and of records in flight at
targets. Batches must travel whole and, per sender, in order: a receiver that
saw a retraction without the increments justifying it could let a frontier pass
a time that is still held (see the book's "A Safety Property").

Wire form (msgpack): ``[path, sender, seq, flat]`` where ``flat`` repeats
``node, port_code, time, diff`` per change, ``port_code`` being ``port`` for a
source and ``-1 - port`` for a target, and ``time`` the timestamp type's
encoding (an int, or nested pairs for ``Product``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack

from ..errors import ProgressError
from .location import Location, Source, Target
from .timestamp import INT, TimestampType

__all__ = ["ProgressBatch"]


class ProgressBatch(NamedTuple):
    """Changes of pointstamp counts made by one worker in one scope, to be applied atomically.

    ``path`` names the scope (dataflow index, then child indices), ``sender`` the
    worker, ``seq`` the batch's position in that worker's stream for the scope.
    """

    path: tuple[int, ...]
    sender: int
    seq: int
    changes: list[tuple[Location, Any, int]]

    def encode(self, ttype: TimestampType[Any, Any] = INT) -> bytes:
        """The compact msgpack encoding of this batch."""
        flat: list[Any] = []
        append = flat.append
        encode = None if ttype is INT else ttype.encode
        for loc, time, diff in self.changes:
            append(loc[0])
            append(loc[1] if type(loc) is Source else -1 - loc[1])
            append(time if encode is None else encode(time))
            append(diff)
        data: bytes = msgpack.packb((self.path, self.sender, self.seq, flat), use_bin_type=True)
        return data

    @classmethod
    def decode(cls, data: bytes, ttype: TimestampType[Any, Any] = INT) -> ProgressBatch:
        """Parse :meth:`encode`'s output; raise :class:`ProgressError` saying what is malformed."""
        try:
            path, sender, seq, flat = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=True)
        except Exception as e:  # msgpack raises several unrelated types for bad input
            raise ProgressError(f"malformed progress batch: not a 4-element msgpack array ({e})") from None
        if not (type(path) is tuple and all(type(p) is int and p >= 0 for p in path)):
            raise ProgressError(f"malformed progress batch: bad scope path {path!r}")
        if type(sender) is not int or sender < 0 or type(seq) is not int or seq < 0:
            raise ProgressError(f"malformed progress batch: bad sender {sender!r} or sequence number {seq!r}")
        if type(flat) is not tuple or len(flat) % 4:
            raise ProgressError("malformed progress batch: changes must be node, port, time, diff quadruples")
        changes: list[tuple[Location, Any, int]] = []
        decode = ttype.decode
        for i in range(0, len(flat), 4):
            node, port, time, diff = flat[i : i + 4]
            if type(node) is not int or node < 0 or type(port) is not int or type(diff) is not int or not diff:
                raise ProgressError(
                    f"malformed progress batch from worker {sender}: change {i // 4} is "
                    f"{flat[i:i + 4]!r}"
                )
            try:
                time = decode(time)
            except (TypeError, ValueError) as e:
                raise ProgressError(
                    f"malformed progress batch from worker {sender}: change {i // 4}: {e}"
                ) from None
            loc = Source(node, port) if port >= 0 else Target(node, -1 - port)
            changes.append((loc, time, diff))
        return cls(path, sender, seq, changes)


class Progcaster:
    """Numbers one worker's outgoing batches for one scope, and checks incoming streams are FIFO.

    Sans-IO: :meth:`send` returns the batch to transmit to every worker
    (this one included); :meth:`receive` checks a batch is the next one from its
    sender and returns its changes. A repeated, lost or reordered batch raises
    :class:`ProgressError` instead of silently corrupting the counts.
    """

    __slots__ = ("path", "worker", "peers", "_next_seq", "_expected")

    def __init__(self, path: tuple[int, ...], worker: int, peers: int) -> None:
        self.path = path
        self.worker = worker
        self.peers = peers
        self._next_seq = 0
        self._expected = [0] * peers

    def send(self, changes: list[tuple[Location, Any, int]]) -> ProgressBatch:
        batch = ProgressBatch(self.path, self.worker, self._next_seq, changes)
        self._next_seq += 1
        return batch

    def loop_back(self) -> None:
        """A batch this worker sent only to itself (it is the only worker): number it as sent and received."""
        self._next_seq += 1
        self._expected[self.worker] += 1

    def receive(self, batch: ProgressBatch) -> list[tuple[Location, Any, int]]:
        sender = batch.sender
        if not 0 <= sender < self.peers:
            raise ProgressError(
                f"progress batch for scope {self.path} names worker {sender}, but there are {self.peers} workers"
            )
        expected = self._expected[sender]
        if batch.seq != expected:
            what = "repeated" if batch.seq < expected else "a batch was lost or reordered"
            raise ProgressError(
                f"progress batch #{batch.seq} from worker {sender} for scope {self.path} arrived at "
                f"worker {self.worker} when #{expected} was due ({what})"
            )
        self._expected[sender] = expected + 1
        return batch.changes
