"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..operator import OperatorRuntime
from .common import output_stream

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["batch_operator", "map", "flat_map", "filter", "inspect", "inspect_batch", "inspect_time"]

_map = map
_filter = filter


def batch_operator(
    stream: Stream,
    name: str,
    transform: Callable[[Any, list], list | None],
    *,
    exchange: Callable[[Any], Any] | None = None,
    broadcast: bool = False,
) -> Stream:
    """One input, one output, same times: ``transform(time, batch)`` returns the batch to send on
    (``None`` or empty to send nothing)."""
    op = OperatorRuntime(stream.scope, name, 1, 1)
    op.connect(0, stream, exchange=exchange, broadcast=broadcast)
    queue = op.mailboxes[0].queue
    consumed = op.progress.shared.consumeds[0]
    out = op.outputs[0]

    def run() -> None:
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            op.current_time = time
            result = transform(time, batch)
            if result:
                out.push(time, result)

    op.run_function(run)
    return output_stream(op)


def map(stream: Stream, fn: Callable[[Any], Any]) -> Stream:
    return batch_operator(stream, "Map", lambda _t, batch: list(_map(fn, batch)))


def flat_map(stream: Stream, fn: Callable[[Any], Iterable[Any]]) -> Stream:
    def transform(_t: Any, batch: list) -> list:
        out: list = []
        extend = out.extend
        for record in batch:
            extend(fn(record))
        return out

    return batch_operator(stream, "FlatMap", transform)


def filter(stream: Stream, predicate: Callable[[Any], bool]) -> Stream:
    return batch_operator(stream, "Filter", lambda _t, batch: list(_filter(predicate, batch)))


def inspect(stream: Stream, fn: Callable[[Any], None]) -> Stream:
    def transform(_t: Any, batch: list) -> list:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "Inspect", transform)


def inspect_batch(stream: Stream, fn: Callable[[Any, list], None]) -> Stream:
    def transform(time: Any, batch: list) -> list:
        fn(time, batch)
        return batch

    return batch_operator(stream, "InspectBatch", transform)


def inspect_time(stream: Stream, fn: Callable[[Any, Any], None]) -> Stream:
    def transform(time: Any, batch: list) -> list:
        for record in batch:
            fn(time, record)
        return batch

    return batch_operator(stream, "InspectTime", transform)
