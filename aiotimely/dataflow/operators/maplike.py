"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ...errors import CapabilityError
from ..builder import OperatorBuilder
from ..fusion import FusedChain, can_fuse, chain_end
from ..stream import S

__all__ = ["batch_operator", "map", "map_in_place", "flat_map", "filter", "inspect", "inspect_batch", "inspect_time",
           "timed"]

_map = map
_filter = filter


def _nothing() -> None:
    pass


def batch_operator(
    stream: S,
    name: str,
    transform: Callable[[Any, list[Any]], list[Any] | None],
    *,
    exchange: Callable[[Any], Any] | None = None,
    broadcast: bool = False,
) -> S:
    """One input, one output, same times: ``transform(time, batch)`` returns the batch to send on
    (``None`` or empty to send nothing).

    Without an exchange, it becomes the next stage of the fused chain that makes ``stream``, if one does, or
    the first of a new chain (see :mod:`..fusion`)."""
    local = exchange is None and not broadcast
    scope = stream.scope
    if local:
        chain = chain_end(stream)
        if chain is not None:
            scope._check_building()
            stage = chain.add(name, transform)
            return scope.new_stream(stage.claim_source, stage)  # type: ignore[no-any-return]
    builder = OperatorBuilder(scope, name)
    fuse = local and can_fuse(stream)
    inp = builder.new_input(stream, exchange=exchange, broadcast=broadcast, attach=not fuse)
    out, _ = builder.new_output()
    op = builder.build_function(_nothing)
    chain = op.chain = FusedChain(op, inp, scope.stages_ran)
    op.set_logic(chain.run_mailbox)
    out.pushers.append(chain)  # (never pushed to: back-pressure looks through it for the chain's consumers)
    first = chain.add(name, transform)
    if fuse:  # the producer's pushes run the chain
        stream.attach(chain)
        assert op.progress is not None
        op.progress.transparent = True  # it never watches its frontier: progress may hop over it
    return scope.new_stream(first.claim_source, first)  # type: ignore[no-any-return]


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
