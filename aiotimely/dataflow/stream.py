"""Streams as data: which output of a scope records come from, and where their consumers attach.

A :class:`StreamCore` is all the dataflow layer knows of a stream. The chainable
methods users call (``map``, ``exchange``, ``unary_frontier``, ...) belong to its
subclass :class:`aiotimely.Stream`, in the front module ``aiotimely/stream.py``;
the operators here take a stream and return new ones of the same class, made by
the scope (:meth:`~aiotimely.dataflow.scope.Scope.new_stream`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..progress import Source
from .channels import Pusher, Tee

if TYPE_CHECKING:
    from .scope import ScopeCore

__all__ = ["StreamCore", "Pusher", "Tee", "S"]

class StreamCore:
    """A stream of timestamped records in a scope: an output (``source``) and the pushers fed from it.

    ``source`` may be given as a function that picks the output when the stream is first consumed (a stage of
    a fused chain: only stages that have consumers get an output of the chain's)."""

    __slots__ = ("scope", "_source", "_claim", "_tee")

    def __init__(self, scope: ScopeCore[Any], source: Source | Callable[[], Source], tee: Tee) -> None:
        self.scope = scope
        self._tee = tee
        if isinstance(source, Source):
            self._source: Source | None = source
            self._claim: Callable[[], Source] | None = None
        else:
            self._source = None
            self._claim = source

    @property
    def source(self) -> Source:
        """The output the records come from."""
        source = self._source
        if source is None:
            assert self._claim is not None
            source = self._source = self._claim()
        return source

    @property
    def tee(self) -> Tee:
        """Where the stream's batches go: the pushers of its consumers (a fused chain's stage, when it is one)."""
        return self._tee

    def attach(self, pusher: Pusher) -> None:
        """Feed ``pusher`` every batch of this stream (the channel to a consumer)."""
        if self._source is None:
            self.source  # noqa: B018 (a consumer: the stream takes its output now)
        self._tee.pushers.append(pusher)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._source or 'a fused stage'!r} in scope {self.scope.name!r})"


S = TypeVar("S", bound=StreamCore)
"""The stream class of a dataflow: :class:`aiotimely.Stream` when built through a worker."""
