"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ...errors import CapabilityError
from ..builder import OperatorBuilder, check_function
from ..fusion import FusedChain, can_fuse, chain_end
from ..stream import S

__all__ = ["batch_operator", "map", "map_in_place", "flat_map", "filter", "inspect", "inspect_batch", "inspect_time",
           "timed"]

_map = map
_filter = filter


INSPECT_INSTEAD = ("use aiotimely.connectors.to_async(stream, {fn}, per=\"record\") instead: it awaits {fn}(record) "
                   "for each record, without blocking the worker, and passes the records on once it completed")
"""Where an async function goes instead of ``inspect``."""
INSPECT_BATCH_INSTEAD = ("use aiotimely.connectors.to_async(stream, {fn}) instead: it awaits {fn}(time, records) for "
                         "each batch, without blocking the worker, and passes the records on once it completed")
"""Where an async function goes instead of ``inspect_batch``."""
INSPECT_TIME_INSTEAD = ("use aiotimely.connectors.to_async(stream, fn) instead, with an async fn(time, records) that "
                        "awaits {fn}(time, record) for each record: it passes the records on once it completed")
"""Where an async function goes instead of ``inspect_time``."""


def _nothing() -> None:
    pass


def batch_operator(
    stream: S,
    name: str,
    transform: Callable[[Any, list[Any]], list[Any] | None],
    *,
    exchange: Callable[[Any], Any] | None = None,
    broadcast: bool = False,
    passes: bool = False,
) -> S:
    """One input, one output, same times: ``transform(time, batch)`` returns the batch to send on
    (``None`` or empty to send nothing); ``passes``: only records it got, unchanged (a filter, an inspect).

    Without an exchange, it becomes the next stage of the fused chain that makes ``stream``, if one does, or
    the first of a new chain (see :mod:`..fusion`)."""
    local = exchange is None and not broadcast
    scope = stream.scope
    if local:
        chain = chain_end(stream)
        if chain is not None:
            scope._check_building()
            stage = chain.add(name, transform, passes)
            return scope.new_stream(stage.claim_source, stage)  # type: ignore[no-any-return]
    builder = OperatorBuilder(scope, name)
    fuse = local and can_fuse(stream)
    inp = builder.new_input(stream, exchange=exchange, broadcast=broadcast, attach=not fuse)
    out, _ = builder.new_output()
    op = builder.build_function(_nothing)
    chain = op.chain = FusedChain(op, inp, scope.stages_ran)
    op.set_logic(chain.run_mailbox)
    out.pushers.append(chain)  # (never pushed to: back-pressure looks through it for the chain's consumers)
    first = chain.add(name, transform, passes)
    if fuse:  # the producer's pushes run the chain
        stream.attach(chain)
        assert op.progress is not None
        op.progress.transparent = True  # it never watches its frontier: progress may hop over it
    return scope.new_stream(first.claim_source, first)  # type: ignore[no-any-return]


def map(stream: S, fn: Callable[[Any], Any]) -> S:
    check_function(fn, stream.scope, "Map", "the function", "map(lambda r: r * 2)")
    return batch_operator(stream, "Map", lambda _t, batch: list(_map(fn, batch)))


def map_in_place(stream: S, fn: Callable[[Any], object]) -> S:
    """Timely's ``map_in_place``: ``fn(x)`` changes each record ``x`` itself (what it returns is ignored), and
    the same objects go on, with no new record made. A record is the object its producer sent: any other
    consumer of it on this worker (the stream consumed twice, an upstream operator that kept it) sees the
    change; where one might, use :func:`map` with a copy."""
    check_function(fn, stream.scope, "MapInPlace", "the function", "map_in_place(lambda r: r.update(seen=True))")

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "MapInPlace", transform)


def flat_map(stream: S, fn: Callable[[Any], Iterable[Any]]) -> S:
    check_function(fn, stream.scope, "FlatMap", "the function", "flat_map(str.split)")

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        for record in batch:
            extend(fn(record))
        return out

    return batch_operator(stream, "FlatMap", transform)


def filter(stream: S, predicate: Callable[[Any], object]) -> S:
    check_function(predicate, stream.scope, "Filter", "the predicate", "filter(lambda r: r > 0)")
    return batch_operator(stream, "Filter", lambda _t, batch: list(_filter(predicate, batch)), passes=True)


def inspect(stream: S, fn: Callable[[Any], object]) -> S:
    check_function(fn, stream.scope, "Inspect", "the function", "inspect(print)", instead=INSPECT_INSTEAD)

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, "Inspect", transform, passes=True)


def inspect_batch(stream: S, fn: Callable[[Any, list[Any]], object]) -> S:
    check_function(fn, stream.scope, "InspectBatch", "the function", "inspect_batch(lambda t, rs: print(t, rs))",
                   instead=INSPECT_BATCH_INSTEAD)

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        fn(time, batch)
        return batch

    return batch_operator(stream, "InspectBatch", transform, passes=True)


def inspect_time(stream: S, fn: Callable[[Any, Any], object]) -> S:
    check_function(fn, stream.scope, "InspectTime", "the function", "inspect_time(lambda t, r: print(t, r))",
                   instead=INSPECT_TIME_INSTEAD)

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(time, record)
        return batch

    return batch_operator(stream, "InspectTime", transform, passes=True)


def timed(stream: S, time_of: Callable[[Any], Any] | None) -> S:
    check_function(time_of, stream.scope, "Timed", "the record's time", "timed(lambda r: r['ts'])", optional=True)
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
