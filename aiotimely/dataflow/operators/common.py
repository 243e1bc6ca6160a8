"""Helpers shared by the operator library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...progress import Source

if TYPE_CHECKING:
    from ..operator import OperatorRuntime
    from ..stream import Stream

__all__ = ["output_stream"]


def output_stream(op: OperatorRuntime, output: int = 0) -> Stream:
    """The stream of ``op``'s output ``output``."""
    from ..stream import Stream

    return Stream(op.scope, Source(op.index, output), op.outputs[output])
