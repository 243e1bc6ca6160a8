"""Stateless record-at-a-time operators, run as plain functions over whole batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from ...errors import CapabilityError
from ..builder import check_function, fused_stage
from ..failures import Apply, ErrorPolicy, RecordFailures, check_policy, guard
from ..stream import S

if TYPE_CHECKING:
    from ..scope import ScopeCore

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


def batch_operator(
    stream: S,
    name: str,
    transform: Callable[[Any, list[Any]], list[Any] | None],
    *,
    exchange: Callable[[Any], Any] | None = None,
    broadcast: bool = False,
    passes: bool = False,
    apply: Apply | None = None,
    errors: ErrorPolicy | None = None,
) -> S:
    """One input, one output, same times: ``transform(time, batch)`` returns the batch to send on
    (``None`` or empty to send nothing); ``passes``: only records it got, unchanged (a filter, an inspect).

    ``apply(time, record, out)`` is the same work on one record, for an error policy (:mod:`..failures`) other
    than ``"raise"``: ``errors``, or the dataflow's. Without an exchange, it becomes the next stage of the fused
    chain that makes ``stream``, if one does, or the first of a new chain (see :mod:`..fusion`)."""
    scope = stream.scope
    failures = _failures(scope, name, apply, errors)
    if failures is not None:
        assert apply is not None
        transform = guard(apply, failures)
    stage = fused_stage(stream, name, transform, passes=passes, exchange=exchange, broadcast=broadcast,
                        failures=failures)
    return scope.new_stream(stage.claim_source, stage)  # type: ignore[no-any-return]


def policy_of(scope: ScopeCore[Any], name: str, errors: object) -> ErrorPolicy:
    """The error policy of a new operator ``name`` given ``errors``: it, or the dataflow's."""
    return check_policy(errors, f"operator {name!r} in {scope.describe()}") or scope.dataflow.errors


def _failures(scope: ScopeCore[Any], name: str, apply: Apply | None,
              errors: ErrorPolicy | None) -> RecordFailures | None:
    """What keeps the failing records of a new operator ``name``: ``None`` under ``"raise"`` (or for an operator
    without a per-record ``apply``, which the dataflow's policy does not reach)."""
    policy = policy_of(scope, name, errors)
    if apply is None or policy == "raise":
        return None
    return RecordFailures(policy, name, lambda: name)


def map(stream: S, fn: Callable[[Any], Any], *, errors: ErrorPolicy | None = None, name: str = "Map") -> S:
    check_function(fn, stream.scope, name, "the function", "map(lambda r: r * 2)")

    def apply(_t: Any, record: Any, out: list[Any]) -> None:
        out.append(fn(record))

    return batch_operator(stream, name, lambda _t, batch: list(_map(fn, batch)), apply=apply, errors=errors)


def map_in_place(stream: S, fn: Callable[[Any], object], *, errors: ErrorPolicy | None = None,
                 name: str = "MapInPlace") -> S:
    """Timely's ``map_in_place``: ``fn(x)`` changes each record ``x`` itself (what it returns is ignored), and
    the same objects go on, with no new record made. A record is the object its producer sent: any other
    consumer of it on this worker (the stream consumed twice, an upstream operator that kept it) sees the
    change; where one might, use :func:`map` with a copy."""
    check_function(fn, stream.scope, name, "the function", "map_in_place(lambda r: r.update(seen=True))")

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, name, transform, apply=_calling(fn), errors=errors)


def flat_map(stream: S, fn: Callable[[Any], Iterable[Any]], *, errors: ErrorPolicy | None = None,
             name: str = "FlatMap") -> S:
    check_function(fn, stream.scope, name, "the function", "flat_map(str.split)")

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        for record in batch:
            extend(fn(record))
        return out

    def apply(_t: Any, record: Any, out: list[Any]) -> None:
        out.extend(list(fn(record)))  # (all of the record's results, or none)

    return batch_operator(stream, name, transform, apply=apply, errors=errors)


def filter(stream: S, predicate: Callable[[Any], object], *, errors: ErrorPolicy | None = None,
           name: str = "Filter") -> S:
    check_function(predicate, stream.scope, name, "the predicate", "filter(lambda r: r > 0)")

    def apply(_t: Any, record: Any, out: list[Any]) -> None:
        if predicate(record):
            out.append(record)

    return batch_operator(stream, name, lambda _t, batch: list(_filter(predicate, batch)), passes=True,
                          apply=apply, errors=errors)


def inspect(stream: S, fn: Callable[[Any], object], *, errors: ErrorPolicy | None = None,
            name: str = "Inspect") -> S:
    check_function(fn, stream.scope, name, "the function", "inspect(print)", instead=INSPECT_INSTEAD)

    def transform(_t: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(record)
        return batch

    return batch_operator(stream, name, transform, passes=True, apply=_calling(fn), errors=errors)


def _calling(fn: Callable[[Any], object]) -> Apply:
    """The work on one record of an operator that calls ``fn(record)`` and passes the record on."""

    def apply(_t: Any, record: Any, out: list[Any]) -> None:
        fn(record)
        out.append(record)

    return apply


def inspect_batch(stream: S, fn: Callable[[Any, list[Any]], object]) -> S:
    check_function(fn, stream.scope, "InspectBatch", "the function", "inspect_batch(lambda t, rs: print(t, rs))",
                   instead=INSPECT_BATCH_INSTEAD)

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        fn(time, batch)
        return batch

    return batch_operator(stream, "InspectBatch", transform, passes=True)


def inspect_time(stream: S, fn: Callable[[Any, Any], object], *, errors: ErrorPolicy | None = None,
                 name: str = "InspectTime") -> S:
    check_function(fn, stream.scope, name, "the function", "inspect_time(lambda t, r: print(t, r))",
                   instead=INSPECT_TIME_INSTEAD)

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        for record in batch:
            fn(time, record)
        return batch

    def apply(time: Any, record: Any, out: list[Any]) -> None:
        fn(time, record)
        out.append(record)

    return batch_operator(stream, name, transform, passes=True, apply=apply, errors=errors)


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
