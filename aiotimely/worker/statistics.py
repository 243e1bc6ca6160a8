"""What a worker and its operators have done so far, as plain frozen records: ``worker.statistics()``.

The counts behind them are kept as the runtime goes (an integer add per batch or
activation, a clock read per activation); these records are made only when asked
for, by :meth:`~aiotimely.worker.scheduler.Scheduler.statistics` and by the metrics
exporter (:mod:`aiotimely.observe.metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["InputStatistics", "OperatorStatistics", "Counted", "WorkerStatistics"]


@dataclass(frozen=True, slots=True)
class InputStatistics:
    """One input of an operator: the channel that feeds it (``(dataflow, number)``), the records and batches
    taken from it so far, what waits in its queue now (``queued_bytes``: what the containers waiting weigh, see
    :mod:`aiotimely.comm.backpressure`), and its frontier now (the times that may still arrive; empty once the
    input is complete)."""

    port: int
    channel: tuple[int, int] | None
    records: int
    batches: int
    queued_batches: int
    queued_records: int
    frontier: tuple[Any, ...]
    queued_bytes: int = 0


@dataclass(frozen=True, slots=True)
class OperatorStatistics:
    """One operator on one worker: where it is, how often its logic ran and for how long, and the records it took
    and sent.

    ``id`` is its path joined with dots (``"0.3"``: dataflow 0, child 3), the same on every worker.
    ``busy_seconds`` includes the fused chains it feeds directly (they run inside its pushes, see
    :mod:`aiotimely.dataflow.fusion`); such a chain counts the records it takes and sends, but no activations.
    A fused chain is named after its first stage; ``stages`` names them all (empty for other operators).
    """

    dataflow: str
    id: str
    path: tuple[int, ...]
    name: str
    activations: int
    busy_seconds: float
    inputs: tuple[InputStatistics, ...]
    outputs: tuple[int, ...]
    """Records sent on each output."""
    done: bool
    stages: tuple[str, ...] = ()
    skipped: int = 0
    """Records its function raised on that it dropped (``errors="skip"``)."""
    dead_letters: int = 0
    """Records its function raised on that it sent to dead letters (``errors="dead_letter"``)."""

    @property
    def records_in(self) -> int:
        """Records taken from every input."""
        return sum(i.records for i in self.inputs)

    @property
    def records_out(self) -> int:
        """Records sent on every output (each record once per output, whatever the number of consumers)."""
        return sum(self.outputs)

    @property
    def queued_records(self) -> int:
        """Records waiting at the inputs now."""
        return sum(i.queued_records for i in self.inputs)


class Counted(Protocol):
    """What the worker asks of an operator (through its dataflow) for :class:`WorkerStatistics`."""

    def statistics(self) -> OperatorStatistics:
        """The operator's counts as of now."""
        ...


@dataclass(frozen=True, slots=True)
class WorkerStatistics:
    """A snapshot of what a worker has done: rounds of scheduling, dataflows still running, operator runs, the
    seconds spent running rounds, and per operator (of the dataflows running and of the last few complete ones,
    see :data:`~aiotimely.worker.scheduler.KEEP_FINISHED`) its :class:`OperatorStatistics`."""

    index: int
    peers: int
    rounds: int
    dataflows: int
    operators_run: int
    busy_seconds: float = 0.0
    operators: tuple[OperatorStatistics, ...] = ()

    def operator(self, name: str) -> OperatorStatistics:
        """The operator called ``name`` (the first, in the order built, if several are); ``KeyError`` if none is."""
        for op in self.operators:
            if op.name == name:
                return op
        for op in self.operators:
            if name in op.stages:
                raise KeyError(f"{name!r} runs fused in operator {op.name!r} ({op.id}) on worker {self.index}, "
                               f"with the stages {' -> '.join(op.stages)}: its counts are that operator's")
        raise KeyError(f"worker {self.index} has no operator named {name!r} "
                       f"(it has: {sorted({op.name for op in self.operators})})")
