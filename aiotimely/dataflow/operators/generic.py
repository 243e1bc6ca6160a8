"""Operators from user logic: unary, binary (plain, frontier-aware, notify), sink.

The logic is an ``async def`` that the worker resumes at every activation::

    @stream.unary_frontier(exchange=lambda kv: kv[0], name="WordCount")
    async def word_count(input, output, cap):
        ...

Without ``logic`` the builders return a decorator, which returns the output stream.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Coroutine, Sequence

from ...progress import FrontierInterest
from ..builder import OperatorBuilder
from ..capability import Capability
from ..notificator import Notificator
from ..operator import Logic
from ..ports import OperatorOutput
from ..stream import S

__all__ = ["Interest", "OperatorLogic", "build", "unary", "binary", "unary_frontier", "binary_frontier",
           "unary_notify", "binary_notify", "sink"]

NEVER, ALWAYS = FrontierInterest.NEVER, FrontierInterest.ALWAYS

Interest = FrontierInterest | Sequence[FrontierInterest]
"""One frontier interest for every input, or one per input."""
OperatorLogic = Callable[..., Coroutine[Any, Any, None]]
"""``async def logic(input..., output..., cap...)``, resumed at each activation."""


def build(
    streams: Sequence[S],
    logic: OperatorLogic | None,
    *,
    kind: str,
    outputs: int,
    notify: bool,
    exchange: Any,
    name: str | None,
    interest: Interest,
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
    name = name or str(getattr(logic, "__name__", kind))
    keys = list(exchange) if isinstance(exchange, (list, tuple)) else [exchange] * len(streams)
    if len(keys) != len(streams):
        raise ValueError(f"{kind} {name!r}: {len(keys)} exchange keys for {len(streams)} inputs")
    interests = [interest] * len(streams) if isinstance(interest, FrontierInterest) else list(interest)
    if len(interests) != len(streams):
        raise ValueError(f"operator {name!r}: {len(interests)} frontier interests for {len(streams)} inputs")
    builder = OperatorBuilder(streams[0].scope, name)
    inputs = [builder.new_input(s, exchange=k, interest=i)
              for s, k, i in zip(streams, keys, interests, strict=True)]
    ports, results = [], []
    for _ in range(outputs):
        port, stream = builder.new_output()
        ports.append(OperatorOutput(port))
        results.append(stream)
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Logic:
        if notify:
            notificator = Notificator(op, capabilities)
            for cap in capabilities:
                cap.drop()
            return logic(*inputs, *ports, notificator)
        return logic(*inputs, *ports, *capabilities)

    builder.build(constructor)
    if outputs == 1:
        return results[0]
    return results if outputs else None


def unary(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
          interest: Interest = NEVER) -> Any:
    return build([stream], logic, kind="unary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_frontier(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                   name: str | None = None, interest: Interest = ALWAYS) -> Any:
    return build([stream], logic, kind="unary_frontier", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_notify(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
                 interest: Interest = ALWAYS) -> Any:
    return build([stream], logic, kind="unary_notify", outputs=1, notify=True, exchange=exchange, name=name,
                 interest=interest)


def binary(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
           name: str | None = None, interest: Interest = NEVER) -> Any:
    return build([stream, other], logic, kind="binary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def binary_frontier(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                    name: str | None = None, interest: Interest = ALWAYS) -> Any:
    return build([stream, other], logic, kind="binary_frontier", outputs=1, notify=False, exchange=exchange,
                 name=name, interest=interest)


def binary_notify(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                  name: str | None = None, interest: Interest = ALWAYS) -> Any:
    return build([stream, other], logic, kind="binary_notify", outputs=1, notify=True, exchange=exchange,
                 name=name, interest=interest)


def sink(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
         interest: Interest = ALWAYS) -> Any:
    return build([stream], logic, kind="sink", outputs=0, notify=False, exchange=exchange, name=name,
                 interest=interest)
