"""What an operator and its scope tell each other about progress.

An operator never talks to the tracker. It writes counts into its
:class:`SharedProgress` (records consumed per input, capability changes and
records produced per output) and reads its input frontiers' changes from it; the
enclosing :class:`~aiotimely.progress.subgraph.Subgraph` drains those counts into
progress batches and writes the frontier changes back.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Mapping, Protocol, Sequence

from .frontier import ChangeBatch
from .reachability import Connectivity

__all__ = ["FrontierInterest", "SharedProgress", "Operate", "OperatorProgress"]


class FrontierInterest(IntEnum):
    """When a change of an input frontier should wake the operator.

    ``NEVER``: only data or explicit activations wake it (map, filter).
    ``IF_CAPABILITY``: frontier changes wake it only while it holds a capability
    (a window holding open windows): idle ones cost nothing.
    ``ALWAYS``: every frontier change wakes it (sinks, probes, capture).
    """

    NEVER = 0
    IF_CAPABILITY = 1
    ALWAYS = 2


class SharedProgress:
    """Per-port change batches between an operator (or nested scope) and its scope.

    ``frontiers[i]``: scope -> operator, ±1 changes of input ``i``'s frontier.
    ``consumeds[i]``: operator -> scope, records consumed at input ``i`` per time.
    ``internals[o]``: operator -> scope, changes of capabilities held for output ``o``.
    ``produceds[o]``: operator -> scope, records produced at output ``o`` per time.
    """

    __slots__ = ("frontiers", "consumeds", "internals", "produceds")

    def __init__(self, inputs: int, outputs: int) -> None:
        self.frontiers: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(inputs)]
        self.consumeds: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(inputs)]
        self.internals: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(outputs)]
        self.produceds: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(outputs)]

    def has_reports(self) -> bool:
        """True if the operator reported anything not yet collected by its scope."""
        return any(self.consumeds) or any(self.internals) or any(self.produceds)

    def __repr__(self) -> str:
        return (
            f"SharedProgress(frontiers={self.frontiers}, consumeds={self.consumeds}, "
            f"internals={self.internals}, produceds={self.produceds})"
        )


class Operate(Protocol):
    """A child of a scope as progress tracking sees it: shape, summaries, interest, shared counts.

    ``local`` is true for an ordinary operator, whose reports describe this
    worker's actions only and so must be broadcast to every worker; it is false
    for a nested scope, whose reports are derived from already-exchanged
    information and are applied directly.

    Members are read-only properties so that implementations may narrow them
    (``interest`` as a ``list``, ``connectivity`` as a :data:`Connectivity`).
    """

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> int: ...

    @property
    def outputs(self) -> int: ...

    @property
    def local(self) -> bool: ...

    @property
    def interest(self) -> Sequence[FrontierInterest]: ...

    @property
    def connectivity(self) -> Connectivity | Sequence[Mapping[int, Any]] | None: ...

    @property
    def shared(self) -> SharedProgress: ...

    @property
    def transparent(self) -> bool:
        """True for an operator that passes its one input to its one output unchanged and does not watch
        its input frontier: the tracker may skip it (see :class:`~aiotimely.progress.reachability.Tracker`)."""
        ...


class OperatorProgress:
    """The progress side of an ordinary operator (a leaf of the scope tree).

    ``connectivity=None`` means every input reaches every output unchanged. At
    creation the operator holds, on every output, one capability at the minimum
    time for each worker (see :class:`~aiotimely.progress.subgraph.Subgraph`).
    """

    local = True
    transparent = False
    """Set by operators fused into their producer's pushes (see :mod:`aiotimely.dataflow.fusion`)."""

    def __init__(
        self,
        name: str,
        inputs: int,
        outputs: int,
        *,
        connectivity: Connectivity | Sequence[dict[int, Any]] | None = None,
        interest: FrontierInterest | Sequence[FrontierInterest] = FrontierInterest.ALWAYS,
    ) -> None:
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.connectivity = connectivity
        if isinstance(interest, FrontierInterest):
            interest = [interest] * inputs
        if len(interest) != inputs:
            raise ValueError(f"operator {name!r}: {len(interest)} frontier interests for {inputs} inputs")
        self.interest = [FrontierInterest(i) for i in interest]
        self.shared = SharedProgress(inputs, outputs)

    def add_output(self) -> tuple[ChangeBatch[Any], ChangeBatch[Any]]:
        """One more output, reached from every input unchanged (``connectivity=None`` only), before the scope is
        built; its ``(produced, internal)`` change batches."""
        if self.connectivity is not None:
            raise ValueError(f"operator {self.name!r}: an output can be added only with the default connectivity")
        self.outputs += 1
        shared = self.shared
        shared.produceds.append(ChangeBatch())
        shared.internals.append(ChangeBatch())
        return shared.produceds[-1], shared.internals[-1]

    def __repr__(self) -> str:
        return f"OperatorProgress({self.name!r}, inputs={self.inputs}, outputs={self.outputs})"
