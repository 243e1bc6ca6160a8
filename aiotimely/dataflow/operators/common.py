"""Helpers shared by the operator library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ...progress import Source

if TYPE_CHECKING:
    from ..operator import OperatorRuntime
    from ..stream import Stream

__all__ = ["output_stream", "watch_frontier"]


def output_stream(op: OperatorRuntime, output: int = 0) -> Stream:
    """The stream of ``op``'s output ``output``."""
    from ..stream import Stream

    return Stream(op.scope, Source(op.index, output), op.outputs[output])


def watch_frontier(op: OperatorRuntime) -> Callable[[], list[tuple[Any, int]]]:
    """Record how the frontier of ``op``'s input 0 changes; the function returned takes the changes
    since its last call, starting from ``{minimum}`` (its first call retracts that initial element)."""
    op.frontier_changes = [[(op.ttype.minimum, -1)]]

    def take() -> list[tuple[Any, int]]:
        changes = op.frontier_changes[0]
        if changes:
            op.frontier_changes[0] = []
        return changes

    return take
