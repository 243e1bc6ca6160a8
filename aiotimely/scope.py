"""The scope users build in: :class:`~aiotimely.dataflow.scope.ScopeCore` and what is made of operators.

As :class:`aiotimely.Stream` adds the chainable operators to a
:class:`~aiotimely.dataflow.stream.StreamCore`, :class:`Scope` adds to the dataflow layer's scope the
builders that are operators (timely's ``Feedback`` and ``UnorderedInput`` traits on its scopes): loop
variables, unordered inputs, and the stream of dead letters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dataflow.operators.loops import LoopHandle, feedback
from .dataflow.operators.routing import concatenate
from .dataflow.scope import ScopeCore
from .dataflow.unordered import ActivateCapability, UnorderedHandle, new_unordered_input

if TYPE_CHECKING:
    # A default (PEP 696) for type checkers only, so that users may write a bare ``Scope``.
    from typing_extensions import TypeVar

    from .dataflow.stream import StreamCore
    from .stream import Stream

    S = TypeVar("S", bound=StreamCore, default="Stream[Any]")
else:
    from .dataflow.stream import S

__all__ = ["Scope"]


class Scope(ScopeCore[S]):
    """A scope of a dataflow on one worker (the root of a dataflow, a region, an iterative scope), where
    operators are built: what ``worker.dataflow(build)`` hands ``build``, and ``stream.scope``."""

    def feedback(self, summary: Any = 1) -> tuple[LoopHandle, S]:
        """A loop variable: records given to ``handle`` come back on ``stream``, advanced by ``summary``.

        In an iterative scope an ``int`` summary counts rounds: ``feedback(1)`` means
        "the next round"; in any scope of ``Product`` times, a summary of the inner
        coordinate alone stands for ``Product(outer identity, summary)``. Connect the
        loop's end with ``stream.connect_loop(handle)``.
        """
        return feedback(self, summary)

    def new_unordered_input(self, name: str = "UnorderedInput") -> tuple[
            tuple[UnorderedHandle[Any], ActivateCapability], S]:
        """Timely's ``new_unordered_input``: ``(handle, cap), stream``, where ``handle.session(cap).give(x)``
        sends ``x`` at ``cap.time``, and ``cap`` (at the minimum time) may be delayed, downgraded and dropped
        at will; the stream is complete once every capability is dropped (see :mod:`.dataflow.unordered`)."""
        return new_unordered_input(self, name)

    def dead_letters(self) -> S:
        """The records that failed in this scope's operators with ``errors="dead_letter"``, as
        :class:`~aiotimely.DeadLetter` records at the failed records' times: route them to a sink. Take them once,
        after building those operators; a scope whose dead letters nobody takes is refused when it is built."""
        return self.dead_letter_streams.take(self, concatenate)
