"""Operators that move records between workers or streams: exchange, broadcast, concat, partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...errors import GraphError
from ..operator import OperatorRuntime
from .common import output_stream
from .maplike import batch_operator

if TYPE_CHECKING:
    from ..scope import Scope
    from ..stream import Stream

__all__ = ["exchange", "broadcast", "concatenate", "split", "partition", "branch", "ok_err"]


def exchange(stream: Stream, key: Callable[[Any], Any]) -> Stream:
    return batch_operator(stream, "Exchange", lambda _t, batch: batch, exchange=key)


def broadcast(stream: Stream) -> Stream:
    return batch_operator(stream, "Broadcast", lambda _t, batch: batch, broadcast=True)


def concatenate(scope: Scope, streams: Sequence[Stream]) -> Stream:
    """One stream of everything in ``streams`` (all of ``scope``)."""
    streams = list(streams)
    if not streams:
        raise GraphError("concatenate needs at least one stream")
    op = OperatorRuntime(scope, "Concatenate", len(streams), 1)
    for port, stream in enumerate(streams):
        op.connect(port, stream)
    queues = [box.queue for box in op.mailboxes]
    consumeds = op.progress.shared.consumeds
    out = op.outputs[0]

    def run() -> None:
        for queue, consumed in zip(queues, consumeds, strict=True):
            while queue:
                time, batch = queue.popleft()
                consumed.update(time, len(batch))
                out.push(time, batch)

    op.run_function(run)
    return output_stream(op)


def split(stream: Stream, name: str, outputs: int, choose: Callable[[list], list[list]]) -> list[Stream]:
    """One input, ``outputs`` outputs, same times: ``choose(batch)`` returns one list per output."""
    op = OperatorRuntime(stream.scope, name, 1, outputs)
    op.connect(0, stream)
    queue = op.mailboxes[0].queue
    consumed = op.progress.shared.consumeds[0]
    ports = op.outputs

    def run() -> None:
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            op.current_time = time
            for port, part in zip(ports, choose(batch), strict=True):
                if part:
                    port.push(time, part)

    op.run_function(run)
    return [output_stream(op, o) for o in range(outputs)]


def partition(stream: Stream, parts: int, fn: Callable[[Any], int]) -> list[Stream]:
    def choose(batch: list) -> list[list]:
        out: list[list] = [[] for _ in range(parts)]
        for record in batch:
            k = fn(record)
            if type(k) is not int or not 0 <= k < parts:
                raise ValueError(f"partition function returned {k!r} for {record!r}; expected an int in 0..{parts - 1}")
            out[k].append(record)
        return out

    return split(stream, "Partition", parts, choose)


def branch(stream: Stream, predicate: Callable[[Any], bool]) -> tuple[Stream, Stream]:
    def choose(batch: list) -> list[list]:
        no: list = []
        yes: list = []
        for record in batch:
            (yes if predicate(record) else no).append(record)
        return [no, yes]

    false_stream, true_stream = split(stream, "Branch", 2, choose)
    return false_stream, true_stream


def ok_err(stream: Stream, fn: Callable[[Any], tuple[bool, Any]]) -> tuple[Stream, Stream]:
    def choose(batch: list) -> list[list]:
        oks: list = []
        errs: list = []
        for record in batch:
            ok, value = fn(record)
            (oks if ok else errs).append(value)
        return [oks, errs]

    oks, errs = split(stream, "OkErr", 2, choose)
    return oks, errs
