"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ...errors import CapabilityError
from ..builder import OperatorBuilder
from ..fusion import FusedStage, can_fuse
from ..stream import S

__all__ = ["batch_operator", "map", "map_in_place", "flat_map", "filter", "inspect", "inspect_batch", "inspect_time",
           "timed"]

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
    fuse = exchange is None and not broadcast and can_fuse(stream)
    inp = builder.new_input(stream, exchange=exchange, broadcast=broadcast, attach=not fuse)
    out, result = builder.new_output()

    def run() -> None:
        for time, batch in inp.batches():
            sent = transform(time, batch)
            if sent:
                out.push(time, sent)

    op = builder.build_function(run)
    if fuse:  # the producer's pushes run this operator (see ..fusion)
        stream.attach(FusedStage(op, inp, transform, out, stream.scope.stages_ran))
        assert op.progress is not None
        op.progress.transparent = True  # it never watches its frontier: progress may hop over it
    return result  # type: ignore[no-any-return]


def map(stream: S, fn: Callable[[Any], Any]) -> S:
    return batch_operator(stream, "Map", lambda _t, batch: list(_map(fn, batch)))


def map_in_place(stream: S, fn: Callable[[Any], object]) -> S:
    """Timely's ``map_in_place``: ``fn(x)`` changes each record ``x`` itself (what it returns is ignored), and
    the same objects go on, with no new record made. A record is the object its producer sent: any other
    consumer of it on this worker (the stream consumed twice, an upstream operator that kept it) sees the
    change; where one might, use :func:`map` with a copy."""
    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "MapInPlace", transform)


def flat_map(stream: S, fn: Callable[[Any], Iterable[Any]]) -> S:
    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        for record in batch:
            extend(fn(record))
        return out

    return batch_operator(stream, "FlatMap", transform)


def filter(stream: S, predicate: Callable[[Any], object]) -> S:
    return batch_operator(stream, "Filter", lambda _t, batch: list(_filter(predicate, batch)))


def inspect(stream: S, fn: Callable[[Any], object]) -> S:
    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "Inspect", transform)


def inspect_batch(stream: S, fn: Callable[[Any, list[Any]], object]) -> S:
    def transform(time: Any, batch: list[Any]) -> list[Any]:
        fn(time, batch)
        return batch

    return batch_operator(stream, "InspectBatch", transform)


def inspect_time(stream: S, fn: Callable[[Any, Any], object]) -> S:
    def transform(time: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(time, record)
        return batch

    return batch_operator(stream, "InspectTime", transform)


def timed(stream: S, time_of: Callable[[Any], Any] | None) -> S:
    if time_of is None:
        return batch_operator(stream, "Timed", lambda time, batch: [(time, record) for record in batch])
    less_equal = stream.scope.ttype.less_equal

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        out = []
        for record in batch:
            t = time_of(record)
            if not less_equal(time, t):
                raise CapabilityError(f"the time {t!r} of record {record!r} is earlier than its batch's, {time!r}")
            out.append((t, record))
        return out

    return batch_operator(stream, "Timed", transform)
