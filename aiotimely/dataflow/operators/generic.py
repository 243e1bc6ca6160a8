"""Operators from user logic: unary, binary (plain, frontier-aware, notify), sink.

The logic is an ``async def`` that the worker resumes at every activation::

    @stream.unary_frontier(exchange=lambda kv: kv[0], name="WordCount")
    async def word_count(input, output, cap):
        ...

Without ``logic`` the builders return a decorator, which returns the output stream.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...progress import FrontierInterest
from ..notificator import Notificator
from ..operator import OperatorRuntime
from ..ports import OperatorInput, OperatorOutput
from .common import output_stream

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["build", "unary", "binary", "unary_frontier", "binary_frontier", "unary_notify", "binary_notify", "sink"]

NEVER, ALWAYS = FrontierInterest.NEVER, FrontierInterest.ALWAYS


def build(
    streams: Sequence[Stream],
    logic: Callable[..., Any] | None,
    *,
    kind: str,
    outputs: int,
    notify: bool,
    exchange: Any,
    name: str | None,
    interest: Any,
) -> Any:
    """Build an operator from ``logic``; without ``logic``, return a decorator that does."""
    if logic is None:
        return lambda fn: build(streams, fn, kind=kind, outputs=outputs, notify=notify, exchange=exchange,
                                name=name, interest=interest)
    if not inspect.iscoroutinefunction(logic):
        raise TypeError(
            f"{kind}: the logic must be an 'async def' (the worker resumes it at each activation), "
            f"got {logic!r}"
        )
    name = name or getattr(logic, "__name__", kind)
    keys = list(exchange) if isinstance(exchange, (list, tuple)) else [exchange] * len(streams)
    if len(keys) != len(streams):
        raise ValueError(f"{kind} {name!r}: {len(keys)} exchange keys for {len(streams)} inputs")
    op = OperatorRuntime(streams[0].scope, name, len(streams), outputs, interest=interest)
    inputs: list[OperatorInput] = [
        op.connect(i, s, exchange=k) for i, (s, k) in enumerate(zip(streams, keys, strict=True))
    ]
    outs = [OperatorOutput(port) for port in op.outputs]
    if notify:
        for o in range(outputs):
            op.mint(o).drop()
        op.run_coroutine(logic(*inputs, *outs, Notificator(op)))
    elif outputs:
        op.run_coroutine(logic(*inputs, *outs, *(op.mint(o) for o in range(outputs))))
    else:
        op.run_coroutine(logic(*inputs))
    if outputs == 1:
        return output_stream(op)
    return [output_stream(op, o) for o in range(outputs)] if outputs else None


def unary(stream: Stream, logic=None, *, exchange=None, name=None, interest=NEVER):
    return build([stream], logic, kind="unary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_frontier(stream: Stream, logic=None, *, exchange=None, name=None, interest=ALWAYS):
    return build([stream], logic, kind="unary_frontier", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_notify(stream: Stream, logic=None, *, exchange=None, name=None, interest=ALWAYS):
    return build([stream], logic, kind="unary_notify", outputs=1, notify=True, exchange=exchange, name=name,
                 interest=interest)


def binary(stream: Stream, other: Stream, logic=None, *, exchange=None, name=None, interest=NEVER):
    return build([stream, other], logic, kind="binary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def binary_frontier(stream: Stream, other: Stream, logic=None, *, exchange=None, name=None, interest=ALWAYS):
    return build([stream, other], logic, kind="binary_frontier", outputs=1, notify=False, exchange=exchange,
                 name=name, interest=interest)


def binary_notify(stream: Stream, other: Stream, logic=None, *, exchange=None, name=None, interest=ALWAYS):
    return build([stream, other], logic, kind="binary_notify", outputs=1, notify=True, exchange=exchange,
                 name=name, interest=interest)


def sink(stream: Stream, logic=None, *, exchange=None, name=None, interest=ALWAYS):
    return build([stream], logic, kind="sink", outputs=0, notify=False, exchange=exchange, name=name,
                 interest=interest)
