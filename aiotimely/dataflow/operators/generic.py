"""Operators from user logic: unary, binary (plain, frontier-aware, notify), sink, and ``operator`` with any
number of inputs and outputs (timely's ``OperatorBuilder``).

The logic is an ``async def`` that the worker resumes at every activation::

    @stream.unary_frontier(exchange=lambda kv: kv[0], name="WordCount")
    async def word_count(input, output, cap):
        ...

Without ``logic`` the builders return a decorator, which returns the output stream(s).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable, Sequence, overload

from ...errors import CapabilityError, GraphError
from ...progress import FrontierInterest
from ..builder import OperatorBuilder
from ..capability import Capability
from ..notificator import Notificator
from ..operator import Logic
from ..ports import OperatorOutput
from ..stream import S

if TYPE_CHECKING:
    from ..scope import ScopeCore

__all__ = ["Interest", "OperatorLogic", "build", "unary", "binary", "unary_frontier", "binary_frontier",
           "unary_notify", "binary_notify", "sink", "operator"]

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
    init: Iterable[Any] = (),
    scope: ScopeCore[S] | None = None,
    connection: Sequence[dict[int, Any] | None] | None = None,
    grouped: bool = False,
) -> Any:
    """Build an operator from ``logic``; without ``logic``, return a decorator that does.

    The logic gets the inputs, then the outputs, then one capability per output (or, with ``notify``, a
    :class:`Notificator`, which has notifications requested at the ``init`` times); ``grouped`` passes them
    as three lists (or two lists and the notificator) and returns a list of the output streams."""
    if logic is None:
        return lambda fn: build(streams, fn, kind=kind, outputs=outputs, notify=notify, exchange=exchange,
                                name=name, interest=interest, init=init, scope=scope, connection=connection,
                                grouped=grouped)
    if not inspect.iscoroutinefunction(logic):
        raise TypeError(
            f"{kind}: the logic must be an 'async def' (the worker resumes it at each activation), "
            f"got {logic!r}"
        )
    name = name or str(getattr(logic, "__name__", kind))
    streams = list(streams)
    if scope is None:
        if not streams:
            raise GraphError(f"{kind} {name!r} has no input stream: say which scope it is in with scope=")
        scope = streams[0].scope
    keys = list(exchange) if isinstance(exchange, (list, tuple)) else [exchange] * len(streams)
    if len(keys) != len(streams):
        raise ValueError(f"{kind} {name!r}: {len(keys)} exchange keys for {len(streams)} inputs")
    interests = [interest] * len(streams) if isinstance(interest, FrontierInterest) else list(interest)
    if len(interests) != len(streams):
        raise ValueError(f"operator {name!r}: {len(interests)} frontier interests for {len(streams)} inputs")
    connections = [None] * len(streams) if connection is None else list(connection)
    if len(connections) != len(streams):
        raise ValueError(f"{kind} {name!r}: {len(connections)} connections for {len(streams)} inputs")
    init = _init_times(scope, kind, name, notify, outputs, init)
    builder = OperatorBuilder(scope, name)
    inputs = [builder.new_input(s, exchange=k, interest=i, connection=c)
              for s, k, i, c in zip(streams, keys, interests, connections, strict=True)]
    ports, results = [], []
    for _ in range(outputs):
        port, stream = builder.new_output()
        ports.append(OperatorOutput(port))
        results.append(stream)
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Logic:
        if notify:
            notificator = Notificator(op, capabilities, init=init)
            for cap in capabilities:
                cap.drop()
            if grouped:
                return logic(inputs, ports, notificator)
            return logic(*inputs, *ports, notificator)
        if grouped:
            return logic(inputs, ports, capabilities)
        return logic(*inputs, *ports, *capabilities)

    builder.build(constructor)
    if grouped:
        return results
    if outputs == 1:
        return results[0]
    return results if outputs else None


def _init_times(scope: ScopeCore[Any], kind: str, name: str, notify: bool, outputs: int,
                init: Iterable[Any]) -> list[Any]:
    """The notifications asked for up front, checked before anything is built: times of the scope."""
    try:
        times = list(init)
    except TypeError:
        raise TypeError(f"{kind} {name!r}: init= takes a list of times, got {init!r}") from None
    if not times:
        return times
    if not notify:
        raise GraphError(f"{kind} {name!r}: init= asks for notifications up front; only a notify operator "
                         "(unary_notify, binary_notify, operator(..., notify=True)) takes it")
    if not outputs:
        raise GraphError(f"{kind} {name!r}: init= needs an output: a notification holds a capability for it")
    ttype = scope.ttype
    for time in times:
        try:
            ttype.check_time(time)
        except (TypeError, ValueError) as e:
            raise CapabilityError(
                f"{kind} {name!r} in {scope.describe()}: cannot ask to be notified at the init time {time!r}: {e}",
                dataflow=scope.dataflow.name, operator=name, time=time,
            ) from None
    return times


def unary(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
          interest: Interest = NEVER) -> Any:
    return build([stream], logic, kind="unary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_frontier(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                   name: str | None = None, interest: Interest = ALWAYS) -> Any:
    return build([stream], logic, kind="unary_frontier", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def unary_notify(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
                 interest: Interest = ALWAYS, init: Iterable[Any] = ()) -> Any:
    return build([stream], logic, kind="unary_notify", outputs=1, notify=True, exchange=exchange, name=name,
                 interest=interest, init=init)


def binary(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
           name: str | None = None, interest: Interest = NEVER) -> Any:
    return build([stream, other], logic, kind="binary", outputs=1, notify=False, exchange=exchange, name=name,
                 interest=interest)


def binary_frontier(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                    name: str | None = None, interest: Interest = ALWAYS) -> Any:
    return build([stream, other], logic, kind="binary_frontier", outputs=1, notify=False, exchange=exchange,
                 name=name, interest=interest)


def binary_notify(stream: S, other: S, logic: OperatorLogic | None = None, *, exchange: Any = None,
                  name: str | None = None, interest: Interest = ALWAYS, init: Iterable[Any] = ()) -> Any:
    return build([stream, other], logic, kind="binary_notify", outputs=1, notify=True, exchange=exchange,
                 name=name, interest=interest, init=init)


def sink(stream: S, logic: OperatorLogic | None = None, *, exchange: Any = None, name: str | None = None,
         interest: Interest = ALWAYS) -> Any:
    return build([stream], logic, kind="sink", outputs=0, notify=False, exchange=exchange, name=name,
                 interest=interest)


@overload
def operator(streams: Sequence[S], logic: OperatorLogic, *, outputs: int = 1, exchange: Any = None,
             name: str | None = None, interest: Interest = ALWAYS, notify: bool = False, init: Iterable[Any] = (),
             connection: Sequence[dict[int, Any] | None] | None = None,
             scope: ScopeCore[S] | None = None) -> list[S]: ...


@overload
def operator(streams: Sequence[S], logic: None = None, *, outputs: int = 1, exchange: Any = None,
             name: str | None = None, interest: Interest = ALWAYS, notify: bool = False, init: Iterable[Any] = (),
             connection: Sequence[dict[int, Any] | None] | None = None,
             scope: ScopeCore[S] | None = None) -> Callable[[OperatorLogic], list[S]]: ...


def operator(
    streams: Sequence[S],
    logic: OperatorLogic | None = None,
    *,
    outputs: int = 1,
    exchange: Any = None,
    name: str | None = None,
    interest: Interest = ALWAYS,
    notify: bool = False,
    init: Iterable[Any] = (),
    connection: Sequence[dict[int, Any] | None] | None = None,
    scope: ScopeCore[S] | None = None,
) -> Any:
    """An operator with any number of inputs and outputs (timely's ``OperatorBuilder``):
    ``async def logic(inputs, outputs, caps)`` gets the lists of its inputs, its outputs and its initial
    capabilities (one per output, at the minimum time); with ``notify=True`` a :class:`Notificator` instead
    of ``caps`` (with notifications at the ``init`` times, held for output 0). ``exchange`` and ``interest``
    are one for all inputs or one per input; ``connection`` gives, per input, ``{output: summary}`` for the
    outputs it reaches (default: all, unchanged). With no input stream, ``scope`` says where it goes.
    Returns the list of output streams (a decorator that does, without ``logic``)."""
    if type(outputs) is not int or outputs < 0:
        raise ValueError(f"operator {name!r}: outputs must be a non-negative int, got {outputs!r}")
    if notify and not outputs:
        raise GraphError(f"operator {name!r}: notify=True needs an output (a notification holds a capability)")
    return build(streams, logic, kind="operator", outputs=outputs, notify=notify, exchange=exchange, name=name,
                 interest=interest, init=init, scope=scope, connection=connection, grouped=True)
