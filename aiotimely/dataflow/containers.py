"""Batches as containers: what a batch of records may be, besides a list.

Records travel in batches, and a batch is a *container* (as timely's streams are since
0.27): a ``list`` of records, the first container and the fast path everywhere, or
an object of a class registered with :func:`register_container` that follows
:class:`Container`. Sessions send one whole (``session.give_container(c)``), ports count
its length, channels hand it on, copy it for a second consumer, split it by route for
an exchange and in halves for a frame, and encode it for the wire as a registered
type; mailboxes weigh it by its ``nbytes`` (their bound in bytes holds producers back);
an operator's input hands it to the logic as it came. Operators that work a
record at a time (``map``, ``filter``, ...) iterate it and send lists. This is the
seam columnar batches (Arrow, Polars) plug into.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar, runtime_checkable

from ..comm.codec import register_type

__all__ = ["Container", "BulkKey", "register_container", "is_container", "copy_batch", "partition", "nbytes"]

C = TypeVar("C", bound="Container")


@runtime_checkable
class Container(Protocol):
    """A batch of records other than a list."""

    def __len__(self) -> int:
        """How many records it holds (what progress counts)."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """Its records, one at a time (for operators that work a record at a time)."""
        ...

    def __getitem__(self, part: slice) -> Container:
        """A run of its records, as a container of the same kind (halves of a batch too big for a frame)."""
        ...

    def copy(self) -> Container:
        """A batch another consumer may keep or change without this one seeing it (itself, if it is immutable)."""
        ...

    def partition(self, routes: Sequence[int], parts: int) -> list[Container]:
        """Its records in ``parts`` containers: record ``i`` in part ``routes[i]`` (an exchange's split)."""
        ...

    @property
    def nbytes(self) -> int:
        """About how many bytes it holds: what it weighs in a mailbox, whose bound in bytes holds its producers
        back (see :mod:`aiotimely.comm.backpressure`). A class without it weighs nothing: only batches count."""
        ...


class BulkKey(Protocol):
    """An exchange key that routes a whole container in one call (a hash of key columns, say), besides each
    record on its own (for list batches): ``exchange=key`` takes one."""

    def __call__(self, record: Any) -> Any:
        """The key of one record (routed as :func:`aiotimely.route` routes it)."""
        ...

    def routes(self, batch: Container, peers: int) -> Sequence[int]:
        """The worker of each record of ``batch``, in ``range(peers)``: the same in every process."""
        ...


_containers: dict[type, bool] = {}
"""The registered container classes, and whether each says its size (``nbytes``)."""


def register_container(cls: type[C], to_data: Callable[[C], Any], from_data: Callable[[Any], C]) -> type[C]:
    """Let batches of class ``cls`` travel as containers: through channels here, and across processes as
    ``to_data(batch)`` (msgpack-able data), rebuilt by ``from_data`` (register in every process, at import)."""
    _containers[cls] = hasattr(cls, "nbytes")
    register_type(cls, to_data, from_data)
    return cls


def is_container(batch: object) -> bool:
    """Whether ``batch`` is a registered container (not a list)."""
    return type(batch) in _containers


def nbytes(batch: Any) -> int:
    """What ``batch`` weighs in a mailbox: a container's ``nbytes``, 0 for a list (only its count matters) and
    for a container class without one."""
    if type(batch) is list or not _containers.get(type(batch)):
        return 0
    return int(batch.nbytes)


def copy_batch(batch: Any) -> Any:
    """A copy of ``batch`` for another consumer."""
    return list(batch) if type(batch) is list else batch.copy()


def partition(batch: Container, route_of: Callable[[Any], int], parts: int) -> list[Container]:
    """A container's records split into ``parts`` by ``route_of(record)``."""
    return batch.partition([route_of(record) for record in batch], parts)
