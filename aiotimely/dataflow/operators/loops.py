"""Crossing scope boundaries and closing loops: enter, leave, feedback, connect_loop.

Entering and leaving are not operators: they are pushers on the edge. Entering
converts each batch's time to the inner scope's (adding an iteration coordinate
for an iterative scope), counts the records into the scope's progress, and hands
them to the consumers inside. Leaving converts back and hands them to the
consumers outside; the inner producer already counted them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ...errors import GraphError
from ...progress import FrontierInterest, Source, Target
from ..operator import OperatorRuntime
from ..ports import push_to_all
from .common import output_stream

if TYPE_CHECKING:
    from ..scope import LoopHandle, Scope
    from ..stream import Stream

__all__ = ["enter", "leave", "feedback", "connect_loop"]


class _EnterPort:
    """Where a stream enters a scope: converts times, counts, and feeds the inner consumers."""

    __slots__ = ("pushers", "_scope", "_input", "_to_inner")

    def __init__(self, scope: Scope, input: int) -> None:
        self.pushers: list[Callable[[Any, list], None]] = []
        self._scope = scope
        self._input = input
        self._to_inner = scope.refinement.to_inner

    def __call__(self, time: Any, batch: list) -> None:
        inner = self._to_inner(time)
        scope = self._scope
        scope.progress.entered(self._input, inner, len(batch))
        scope.worker.activate(scope.path)
        push_to_all(self.pushers, inner, batch)


class _LeavePort:
    """Where a stream leaves a scope: converts times back and feeds the outer consumers."""

    __slots__ = ("pushers", "_to_outer")

    def __init__(self, scope: Scope) -> None:
        self.pushers: list[Callable[[Any, list], None]] = []
        self._to_outer = scope.refinement.to_outer

    def __call__(self, time: Any, batch: list) -> None:
        outer = self._to_outer(time)
        push_to_all(self.pushers, outer, batch)


def enter(stream: Stream, inner: Scope) -> Stream:
    from ..stream import Stream

    if inner.parent is not stream.scope:
        raise GraphError(
            f"cannot enter scope {inner.name!r} from scope {stream.scope.name!r}: "
            "a stream enters a scope directly nested in its own"
        )
    inner._check_building()
    port = inner._builder.add_input()
    stream.scope._builder.add_edge(stream.source, Target(inner.index, port))
    enter_port = _EnterPort(inner, port)
    stream._port.pushers.append(enter_port)
    return Stream(inner, Source(0, port), enter_port)


def leave(stream: Stream) -> Stream:
    from ..stream import Stream

    inner = stream.scope
    outer = inner.parent
    if outer is None:
        raise GraphError(f"stream of scope {inner.name!r} cannot leave: it is a dataflow's outermost scope")
    inner._check_building()
    port = inner._builder.add_output()
    inner._builder.add_edge(stream.source, Target(0, port))
    leave_port = _LeavePort(inner)
    stream._port.pushers.append(leave_port)
    return Stream(outer, Source(inner.index, port), leave_port)


def feedback(scope: Scope, summary: Any) -> tuple[LoopHandle, Stream]:
    from ..scope import LoopHandle

    try:
        scope.ttype.check_summary(summary)
    except (TypeError, ValueError) as e:
        raise GraphError(f"scope {scope.name!r}: feedback({summary!r}): {e}") from None
    if not scope.ttype.advances(summary):
        raise GraphError(
            f"scope {scope.name!r}: feedback({summary!r}) does not advance time, so records could go round "
            "the loop forever at one time; use a summary that moves time forward, such as 1"
        )
    op = OperatorRuntime(scope, "Feedback", 1, 1, connectivity=[{0: summary}], interest=FrontierInterest.NEVER)
    results_in = scope.ttype.results_in
    out = op.outputs[0]

    def run() -> None:
        queue = op.mailboxes[0].queue
        consumed = op.progress.shared.consumeds[0]
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            later = results_in(summary, time)
            if later is not None:  # beyond the last representable time the loop drops records
                out.push(later, batch)

    op.run_function(run)
    return LoopHandle(op), output_stream(op)


def connect_loop(stream: Stream, handle: LoopHandle) -> None:
    if handle.connected:
        raise GraphError("this feedback loop is already connected")
    handle.op.connect(0, stream)
    handle.connected = True
