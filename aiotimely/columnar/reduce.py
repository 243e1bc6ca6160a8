"""Keyed reduce on columns: per key, the aggregations of the rows of each complete time, once it is complete.

Two meanings of "time", as the record path has two:

* ``time=None`` is the record path's ``reduce`` / ``fold``: per key and *dataflow* time, emitted at that time
  once the input frontier has passed it; nothing is kept across times (what is held is for times not yet
  complete, which a resumed run computes again), so nothing is snapshotted;
* ``time="ts"`` groups by key and *event* time: the rows of event time ``t`` are a window ``[t, t + 1)`` of the
  window operator (:mod:`.windows`), complete once the frontier passes ``t + lateness`` and sent at
  ``t + lateness`` (with ``lateness=0`` and event times equal to dataflow times, exactly the first meaning);
  rows of an event time already complete at their dataflow time are late, as for windows, and the open times
  are kept and snapshotted as windows are.

Results have columns ``(key columns..., [the time column,] aggregates...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..dataflow.windowing import Tumbling
from ..progress import FrontierInterest
from .aggs import as_expressions
from .batch import ArrowBatch
from .exchange import KeyColumns, ToFirst
from .kept import HASH
from .order import ColumnarOrder
from .places import where
from .results import OUT, START, Results
from .windows import Built, WindowPlan, key_columns, window_operator

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import Logic, OperatorRuntime
    from ..dataflow.ports import InputPort, OutputPort

__all__ = ["reduce_operator"]


def reduce_operator(stream: Any, schema: pl.Schema | None, aggs: Sequence[Any], *,
                    key: str | Sequence[str] | None, time: str | None, lateness: int, late: str, name: str) -> Built:
    """The keyed reduce of the module: per dataflow time, or per event time in column ``time``."""
    if time is not None:
        plan = WindowPlan(stream.scope, schema, Tumbling(1), aggs, key=key, time=time, lateness=lateness, late=late,
                          name=name, spans=((time, START),))
        return window_operator(stream, schema, plan, name, shift=-1)
    place = where(stream.scope, name)
    if lateness != 0 or late != "drop":
        raise ValueError(f"{place}: lateness and late rows are for event times: give time=\"column\" (per "
                         "dataflow time, no row is ever late)")
    keys = key_columns(key, schema, place)
    results = Results(keys, as_expressions(aggs, place), (), schema, place)
    builder = OperatorBuilder(stream.scope, name)
    exchange = KeyColumns(keys, place) if keys else ToFirst()
    inp = builder.new_input(stream, exchange=exchange, interest=FrontierInterest.IF_CAPABILITY)
    port, out = builder.new_output()
    op = builder.op

    def construct(capabilities: list[Capability]) -> Logic:
        for cap in capabilities:
            cap.drop()
        return PerTime(op, inp, results, port)

    builder.build(construct)
    return out, results.schema, None, None


class PerTime:
    """The logic of a reduce per dataflow time: each complete time's rows grouped by key, sent at that time."""

    __slots__ = ("op", "order", "results", "output")

    def __init__(self, op: OperatorRuntime, inp: InputPort, results: Results, output: OutputPort) -> None:
        self.op = op
        self.order = ColumnarOrder(inp, op, op.name)
        self.results = results
        self.output = output

    def __call__(self) -> None:
        for cap, frame in self.order.ready():
            self.op.current_time = cap.time
            rows = frame.with_columns(pl.lit(0, dtype=pl.UInt64).alias(HASH), pl.lit(0, dtype=pl.Int64).alias(OUT))
            for _, result in self.results.by_output_time(rows):
                batch: Any = ArrowBatch(result)      # (a container, as ports move lists)
                self.output.push(cap.time, batch)
