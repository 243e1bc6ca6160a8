"""The input users feed: :class:`~aiotimely.dataflow.input.InputHandle`, whose stream is typed as the front's.

The dataflow layer's handle makes a stream of the scope's stream class; this one says, to a type checker, that
the stream is an :class:`aiotimely.Stream` of the records it sends (as :class:`aiotimely.Scope` adds to the
dataflow layer's scope), so that ``inp.to_stream(scope).map(...)`` is typed end to end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .dataflow.input import InputHandle as _InputHandle

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from .dataflow.scope import ScopeCore
    from .stream import Stream

    R = TypeVar("R", default=Any)
else:  # the default (PEP 696) is for type checkers: a bare InputHandle is InputHandle[Any]
    from typing import TypeVar

    R = TypeVar("R")

__all__ = ["InputHandle"]


class InputHandle(_InputHandle[R]):
    """Feeds records into a dataflow at a current time that only moves forward (see
    :class:`aiotimely.dataflow.input.InputHandle`)."""

    def to_stream(self, scope: ScopeCore[Any]) -> Stream[R]:
        """The stream of what this handle sends, in ``scope``."""
        return cast("Stream[R]", super().to_stream(scope))
