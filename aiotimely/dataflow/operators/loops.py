"""Crossing scope boundaries and closing loops: enter, leave, feedback, connect_loop.

Entering and leaving are not operators: they are pushers on the edge. Entering
converts each batch's time to the inner scope's (adding an iteration coordinate
for an iterative scope), counts the records into the scope's progress, and hands
them to the consumers inside. Leaving converts back and hands them to the
consumers outside; the inner producer already counted them.

A feedback loop is an operator whose input is connected last: ``feedback`` makes
its output (the loop's stream), ``connect_loop`` its input, and then builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import GraphError
from ...progress import Product, ProductType, Source, Target
from ..builder import OperatorBuilder, routed_by_key
from ..channels import push_to_all
from ..stream import Pusher, S, StreamCore

if TYPE_CHECKING:
    from ..scope import ScopeCore

__all__ = ["enter", "leave", "feedback", "connect_loop", "LoopHandle"]


class _EnterPort:
    """Where a stream enters a scope: converts times, counts, and feeds the inner consumers."""

    __slots__ = ("pushers", "_scope", "_input", "_to_inner", "routed")

    def __init__(self, scope: ScopeCore[Any], input: int) -> None:
        self.pushers: list[Pusher] = []
        self._scope = scope
        self._input = input
        self._to_inner = scope.refinement.to_inner
        self.routed = False
        """Whether the records are on the worker their key routes to (see :func:`..builder.routed_by_key`)."""

    def __call__(self, time: Any, batch: list[Any]) -> None:
        inner = self._to_inner(time)
        self._scope.count_entered(self._input, inner, len(batch))
        push_to_all(self.pushers, inner, batch)


class _LeavePort:
    """Where a stream leaves a scope: converts times back and feeds the outer consumers."""

    __slots__ = ("pushers", "_to_outer", "routed")

    def __init__(self, scope: ScopeCore[Any]) -> None:
        self.pushers: list[Pusher] = []
        self._to_outer = scope.refinement.to_outer
        self.routed = False
        """Whether the records are on the worker their key routes to (see :func:`..builder.routed_by_key`)."""

    def __call__(self, time: Any, batch: list[Any]) -> None:
        outer = self._to_outer(time)
        push_to_all(self.pushers, outer, batch)


def enter(stream: S, inner: ScopeCore[Any]) -> S:
    if inner.parent is not stream.scope:
        raise GraphError(
            f"cannot enter {inner.describe()} from {stream.scope.describe()}: "
            "a stream enters a scope directly nested in its own"
        )
    port = inner.add_input()
    stream.scope.add_edge(stream.source, Target(inner.index, port))
    enter_port = _EnterPort(inner, port)
    enter_port.routed = routed_by_key(stream)
    stream.attach(enter_port)
    result: S = inner.new_stream(Source(0, port), enter_port)
    return result


def leave(stream: S) -> S:
    inner = stream.scope
    outer = inner.parent
    if outer is None:
        raise GraphError(f"a stream of {inner.describe()} cannot leave: it is the dataflow's outermost scope")
    port = inner.add_output()
    inner.add_edge(stream.source, Target(0, port))
    leave_port = _LeavePort(inner)
    leave_port.routed = routed_by_key(stream)
    stream.attach(leave_port)
    result: S = outer.new_stream(Source(inner.index, port), leave_port)
    return result


class LoopHandle:
    """The far end of a feedback loop, to be closed with ``stream.connect_loop(handle)``."""

    def __init__(self, builder: OperatorBuilder, summary: Any) -> None:
        self._builder = builder
        self._summary = summary
        self.connected = False


def feedback(scope: ScopeCore[S], summary: Any = 1) -> tuple[LoopHandle, S]:
    """A loop variable in ``scope``: the handle to connect later, and the stream coming round, advanced by
    ``summary``. In a scope of ``Product`` times, a summary of the inner coordinate alone stands for
    ``Product(outer identity, summary)`` (in an iterative scope, ``1`` is "the next round"). The scope refuses
    to finish while the loop is not connected."""
    if isinstance(scope.ttype, ProductType) and type(summary) is not Product:  # the inner coordinate's
        summary = Product(scope.ttype.outer.identity, summary)
    try:
        scope.ttype.check_summary(summary)
    except (TypeError, ValueError) as e:
        raise GraphError(f"{scope.describe()}: feedback({summary!r}): {e}") from None
    if not scope.ttype.advances(summary):
        raise GraphError(
            f"{scope.describe()}: feedback({summary!r}) does not advance time, so records could go round "
            "the loop forever at one time; use a summary that moves time forward, such as 1"
        )
    builder = OperatorBuilder(scope, "Feedback")
    _, stream = builder.new_output()
    handle = LoopHandle(builder, summary)

    def check_connected() -> None:
        if not handle.connected:
            raise GraphError(f"{scope.describe()}: a feedback loop was created but never closed with connect_loop()")

    scope.on_finish(check_connected)
    return handle, stream


def connect_loop(stream: StreamCore, handle: LoopHandle) -> None:
    """Send ``stream`` round the loop of ``handle``: build the feedback operator."""
    if handle.connected:
        raise GraphError("this feedback loop is already connected")
    builder, summary = handle._builder, handle._summary
    inp = builder.new_input(stream, connection={0: summary})
    out = builder.op.outputs[0]
    results_in = builder.op.ttype.results_in

    def run() -> None:
        for time, batch in inp.batches():
            later = results_in(summary, time)
            if later is not None:  # beyond the last representable time the loop drops records
                out.push(later, batch)

    builder.op.bounded = False  # every cycle has a feedback operator: it never waits, so a cycle cannot jam
    builder.build_function(run)
    handle.connected = True
