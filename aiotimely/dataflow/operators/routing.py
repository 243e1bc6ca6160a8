"""Operators that move records between workers or streams: exchange, broadcast, concat, partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...errors import GraphError
from ..builder import OperatorBuilder, check_function
from ..stream import S
from ..failures import ErrorPolicy
from .maplike import batch_operator, policy_of

if TYPE_CHECKING:
    from ..scope import ScopeCore

__all__ = ["exchange", "broadcast", "concatenate", "split", "partition", "branch", "branch_when", "ok_err"]


def exchange(stream: S, key: Callable[[Any], Any], *, errors: ErrorPolicy | None = None,
             name: str = "Exchange") -> S:
    """Records to the workers their keys route them to. Under an error policy other than ``"raise"``, a fused
    stage first takes out the records whose key raises (so the exchange computes each key twice)."""
    check_function(key, stream.scope, name, "the key", "exchange(lambda r: r[0])")

    def apply(_t: Any, record: Any, out: list[Any]) -> None:
        key(record)
        out.append(record)

    if policy_of(stream.scope, name, errors) != "raise":
        stream = batch_operator(stream, name, _same, passes=True, apply=apply, errors=errors)
    return batch_operator(stream, name, _same, exchange=key, passes=True)


def _same(_time: Any, batch: list[Any]) -> list[Any]:
    return batch


def broadcast(stream: S) -> S:
    return batch_operator(stream, "Broadcast", lambda _t, batch: batch, broadcast=True, passes=True)


def concatenate(scope: ScopeCore[S], streams: Sequence[S]) -> S:
    """One stream of everything in ``streams`` (all of ``scope``)."""
    streams = list(streams)
    if not streams:
        raise GraphError("concatenate needs at least one stream")
    builder = OperatorBuilder(scope, "Concatenate")
    builder.op.keeps_routing = True
    inputs = [builder.new_input(stream) for stream in streams]
    out, result = builder.new_output()

    def run() -> None:
        for inp in inputs:
            for time, batch in inp.batches():
                out.push(time, batch)

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def split(stream: S, name: str, outputs: int, choose: Callable[[list[Any]], list[list[Any]]]) -> list[S]:
    """One input, ``outputs`` outputs, same times: ``choose(batch)`` returns one list per output."""
    builder = OperatorBuilder(stream.scope, name)
    builder.op.keeps_routing = True
    inp = builder.new_input(stream)
    ports, streams = zip(*(builder.new_output() for _ in range(outputs)), strict=True)

    def run() -> None:
        for time, batch in inp.batches():
            for port, part in zip(ports, choose(batch), strict=True):
                if part:
                    port.push(time, part)

    builder.build_function(run)
    return list(streams)


def partition(stream: S, parts: int, fn: Callable[[Any], int]) -> list[S]:
    check_function(fn, stream.scope, "Partition", "the function choosing a record's part",
                   f"partition({parts}, lambda r: r[0] % {parts})")

    def choose(batch: list[Any]) -> list[list[Any]]:
        out: list[list[Any]] = [[] for _ in range(parts)]
        for record in batch:
            k = fn(record)
            if type(k) is not int or not 0 <= k < parts:
                raise ValueError(f"partition function returned {k!r} for {record!r}; expected an int in 0..{parts - 1}")
            out[k].append(record)
        return out

    return split(stream, "Partition", parts, choose)


def branch(stream: S, predicate: Callable[[Any], object]) -> tuple[S, S]:
    check_function(predicate, stream.scope, "Branch", "the predicate", "branch(lambda r: r > 0)")

    def choose(batch: list[Any]) -> list[list[Any]]:
        no: list[Any] = []
        yes: list[Any] = []
        for record in batch:
            (yes if predicate(record) else no).append(record)
        return [no, yes]

    false_stream, true_stream = split(stream, "Branch", 2, choose)
    return false_stream, true_stream


def branch_when(stream: S, predicate: Callable[[Any], object]) -> tuple[S, S]:
    """Timely's ``branch_when``: each batch goes whole by its time, to the second stream if
    ``predicate(time)`` is true, else to the first. The predicate runs once per batch, not per record."""
    check_function(predicate, stream.scope, "BranchWhen", "the predicate of the time", "branch_when(lambda t: t > 9)")
    builder = OperatorBuilder(stream.scope, "BranchWhen")
    builder.op.keeps_routing = True
    inp = builder.new_input(stream)
    (no, false_stream), (yes, true_stream) = builder.new_output(), builder.new_output()

    def run() -> None:
        for time, batch in inp.batches():
            (yes if predicate(time) else no).push(time, batch)

    builder.build_function(run)
    return false_stream, true_stream


def ok_err(stream: S, fn: Callable[[Any], tuple[bool, Any]]) -> tuple[S, S]:
    check_function(fn, stream.scope, "OkErr", "the function", "ok_err(lambda r: (True, r) if r else (False, r))")

    def choose(batch: list[Any]) -> list[list[Any]]:
        oks: list[Any] = []
        errs: list[Any] = []
        for record in batch:
            ok, value = fn(record)
            (oks if ok else errs).append(value)
        return [oks, errs]

    oks, errs = split(stream, "OkErr", 2, choose)
    return oks, errs
