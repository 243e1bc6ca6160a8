"""Operator fusion: a chain of stateless pipelined operators runs as plain function calls.

A stateless batch operator (map, filter, flat_map, inspect, ...) whose input is fed,
on the same worker, by an operator of the same scope, does not get its batches
through a mailbox and an activation of its own: the producer's push calls it
directly (a :class:`FusedStage`), and it pushes its result on at once. A chain of
them runs as one loop over one batch, whatever its length.

The progress graph does not change: every operator keeps its location. What a
chain's first stage consumed and its last stage produced are counted at their ports,
as if they had run, and the scope collects those counts right after it runs the
producer (so the producer's "produced" and the first stage's "consumed" cancel
before they reach the tracker). What passes between two stages of a chain is not
counted: it would be produced and consumed at the same place in the same
collection. The tracker lets frontier changes hop over fused operators (they are
*transparent*, see :class:`~aiotimely.progress.reachability.Tracker`).
``AIOTIMELY_FUSE=0`` turns fusion off (to compare, or to rule it out).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from ..errors import CapabilityError, DataflowError
from .channels import push_to_all

if TYPE_CHECKING:
    from .operator import OperatorRuntime
    from .ports import InputPort, OutputPort
    from .stream import Pusher, StreamCore

__all__ = ["FusedStage", "fusion_enabled", "can_fuse"]

Transform = Callable[[Any, list[Any]], "list[Any] | None"]


def fusion_enabled() -> bool:
    """Whether stateless operators fuse (``AIOTIMELY_FUSE=0`` says no)."""
    return os.environ.get("AIOTIMELY_FUSE", "1") != "0"


def can_fuse(stream: StreamCore) -> bool:
    """A stage can run inside the pushes of ``stream``'s producer: an operator (or nested scope) of the
    same scope, whose pushes all happen while the scope runs it."""
    return fusion_enabled() and stream.source.node != 0


class FusedStage:
    """The pusher that runs a fused operator: ``transform(time, batch)``, counted at its ports, then pushed on.

    Several stages in a row run as a loop, not as nested calls."""

    __slots__ = ("op", "_input", "_transform", "_output", "_ran", "pushers")

    def __init__(
        self, op: OperatorRuntime, input: InputPort, transform: Transform, output: OutputPort, ran: list[int]
    ) -> None:
        self.op = op
        self._input = input
        self._transform = transform
        self._output = output
        self._ran = ran
        """Where the stage notes that it ran: the scope collects the progress of those stages only."""
        self.pushers: list[Pusher] = output.pushers
        """Where the stage's output goes (what back-pressure looks through)."""

    def __call__(self, time: Any, batch: list[Any]) -> None:
        stage: FusedStage = self
        # Counted: what the first stage consumes and what the last one produces. What passes from one stage
        # to the next is not: it would be produced and consumed at the same place in the same collection.
        stage._input._consumed.update(time, len(batch))
        stage._ran.append(stage.op.index)
        while True:
            op = stage.op
            stage._input.taken += 1
            op.current_time = time
            try:
                out = stage._transform(time, batch)
            except Exception as exc:
                if isinstance(exc, (DataflowError, CapabilityError)) and exc.operator is not None:
                    raise  # already located (by the operator that raised it)
                raise op._failure(exc) from exc
            if not out:
                return
            port = stage._output
            pushers = port.pushers
            if len(pushers) == 1 and type(pushers[0]) is FusedStage:
                stage, batch = pushers[0], out
                continue
            port.produced.update(time, len(out))
            if stage is not self:
                stage._ran.append(op.index)
            push_to_all(pushers, time, out)
            return
