"""Batch sizes coalesced to a target: small batches of one time merged into one of about ``rows`` rows.

Columnar operators cost a fixed amount per batch (a Polars call, a frame, a frame on the
wire) besides their cost per row, so batches of a few rows — after a selective filter, or
after an exchange that split each batch over many workers — waste most of their time.
``ColumnarStream.coalesce(rows=...)`` merges the batches of each time until they hold at
least ``rows`` rows and sends them as one (a batch already that big passes as it is, not
copied). What it holds of a time it sends:

* ``until="frontier"`` (the default): once its input frontier has passed that time (no more
  rows can come for it), whatever activation that is. It holds a capability for the time
  while it holds rows of it, so the time stays incomplete downstream until they are sent:
  progress stays exact, and rows are never held past their time's completion.
* ``until="activation"``: at the end of each activation (what one activation drained is
  merged; nothing is held between activations, so no capability either): the least
  latency, the least merging.

It is stateless to the recovery layer: the rows it holds are of times not yet complete,
which no snapshot holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..progress import FrontierInterest
from .batch import ArrowBatch
from .places import frame_of, where

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.ports import InputPort, OutputPort

__all__ = ["COALESCE_ROWS", "UNTIL", "coalesce_operator"]

COALESCE_ROWS = 65_536
"""The default target of ``coalesce``: rows a merged batch holds at least (Polars' per-call cost is small
against a batch's work from some tens of thousands of rows on)."""
UNTIL = ("frontier", "activation")


def coalesce_operator(stream: Any, rows: int, until: str, name: str) -> Any:
    """The operator that merges ``stream``'s batches (see the module); its output stream."""
    place = where(stream.scope, name)
    if type(rows) is not int or rows < 1:
        raise ValueError(f"{place}: rows must be a positive int, not {rows!r}")
    if until not in UNTIL:
        raise ValueError(f"{place}: until must be one of {', '.join(map(repr, UNTIL))}, not {until!r}")
    builder = OperatorBuilder(stream.scope, name)
    port = builder.new_input(stream, interest=FrontierInterest.IF_CAPABILITY)
    output, merged = builder.new_output()

    def construct(capabilities: list[Capability]) -> Callable[[], None]:
        for cap in capabilities:
            cap.drop()
        return Coalescer(port, output, rows, until == "frontier", name)

    builder.build(construct)
    return merged


class Coalescer:
    """Called at each activation: take what arrived, send each time's rows once there are ``rows`` of them, and
    the rest once the frontier has passed their time (or at the end of the activation)."""

    __slots__ = ("input", "output", "rows", "hold", "name", "pending")

    def __init__(self, inp: InputPort, output: OutputPort, rows: int, hold: bool, name: str) -> None:
        self.input = inp
        self.output = output
        self.rows = rows
        self.hold = hold
        self.name = name
        self.pending: dict[Any, tuple[Capability, list[pl.DataFrame], list[int]]] = {}
        """Per time: a capability for it, the frames held, and their rows (in a one-item list)."""

    def __call__(self) -> None:
        pending, target, name = self.pending, self.rows, self.name
        for ref, batch in self.input.drain():
            time = ref.time
            entry = pending.get(time)
            if entry is None:
                if len(batch) >= target:          # big enough alone: on as it is
                    self._send(time, batch)
                    continue
                entry = pending[time] = (ref.retain(), [], [0])
            frames, count = entry[1], entry[2]
            frames.append(frame_of(batch, name))
            count[0] += len(batch)
            if count[0] >= target:
                self._flush(time, frames)
                del pending[time]
                entry[0].drop()
        if not pending:
            return
        port = self.input
        done = list(pending) if not self.hold else [t for t in pending if not port.less_equal(t)]
        for time in done:
            cap, frames, _ = pending.pop(time)
            if frames:
                self._flush(time, frames)
            cap.drop()

    def _flush(self, time: Any, frames: list[pl.DataFrame]) -> None:
        frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
        frames.clear()
        self._send(time, ArrowBatch(frame))

    def _send(self, time: Any, batch: Any) -> None:
        self.output.push(time, batch)
