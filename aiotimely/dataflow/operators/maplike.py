"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..builder import OperatorBuilder
from ..stream import S

__all__ = ["batch_operator", "map", "flat_map", "filter", "inspect", "inspect_batch", "inspect_time"]

_map = map
_filter = filter


def batch_operator(
    stream: S,
    name: str,
    transform: Callable[[Any, list[Any]], list[Any] | None],
    *,
    exchange: Callable[[Any], Any] | None = None,
    broadcast: bool = False,
) -> S:
    """One input, one output, same times: ``transform(time, batch)`` returns the batch to send on
    (``None`` or empty to send nothing)."""
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, exchange=exchange, broadcast=broadcast)
    out, result = builder.new_output()

    def run() -> None:
        for time, batch in inp.batches():
            sent = transform(time, batch)
            if sent:
                out.push(time, sent)

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def map(stream: S, fn: Callable[[Any], Any]) -> S:
    return batch_operator(stream, "Map", lambda _t, batch: list(_map(fn, batch)))


def flat_map(stream: S, fn: Callable[[Any], Iterable[Any]]) -> S:
    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        for record in batch:
            extend(fn(record))
        return out

    return batch_operator(stream, "FlatMap", transform)


def filter(stream: S, predicate: Callable[[Any], bool]) -> S:
    return batch_operator(stream, "Filter", lambda _t, batch: list(_filter(predicate, batch)))


def inspect(stream: S, fn: Callable[[Any], None]) -> S:
    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "Inspect", transform)


def inspect_batch(stream: S, fn: Callable[[Any, list[Any]], None]) -> S:
    def transform(time: Any, batch: list[Any]) -> list[Any]:
        fn(time, batch)
        return batch

    return batch_operator(stream, "InspectBatch", transform)


def inspect_time(stream: S, fn: Callable[[Any, Any], None]) -> S:
    def transform(time: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(time, record)
        return batch

    return batch_operator(stream, "InspectTime", transform)
