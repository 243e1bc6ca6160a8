"""Windows over event-time columns, closed by the frontier: ``ColumnarStream.window(at.Tumbling(10),
pl.col("x").sum(), key="user", time="ts")`` (docs/columnar.md, "Windows over event-time columns").

The record path's rules (:mod:`aiotimely.dataflow.operators.windows`), on columns:

* a window ``[start, end)`` is complete once the input frontier has reached ``end + lateness`` (exact, no
  watermark), and its results go at that time, one batch per output time, with columns
  ``(key columns..., window_start, window_end, aggregates...)``;
* a row at dataflow time ``d`` is late if its window ends at or before ``d - lateness``: dropped, counted, or
  sent on a second stream;
* one capability per distinct output time (a :class:`~aiotimely.dataflow.operators.pool.CapabilityPool`);
* the open windows' rows are kept with ``keyed_state`` and times applied in order, so snapshots hold them and a
  resume, on any number of workers, gives the crash-free result (:mod:`.kept`).

:func:`window_operator` checks the arguments (:class:`WindowPlan`) and builds the operator from the parts:
:mod:`.fixed` or :mod:`.sessions` (the open windows), :mod:`.results` (what closed windows give), :mod:`.logic`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..dataflow.operators.pool import CapabilityPool
from ..dataflow.windowing import Sessions, Sliding, Tumbling, WindowSpec
from ..errors import GraphError
from ..progress import FrontierInterest
from .aggs import as_expressions
from .eventtime import check_time_column
from .exchange import KeyColumns, ToFirst
from .fixed import FixedShape, FixedWindows
from .kept import KeptRows
from .logic import LATE_POLICIES, LateRows, OpenWindows, RowTimes, WindowLogic, hashed, unhashed
from .places import where
from .results import WINDOW_SPANS, Results
from .sessions import SessionWindows

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import Logic

__all__ = ["WindowPlan", "window_operator", "key_columns", "Built"]

Built = tuple[Any, "pl.Schema | None", Any, "pl.Schema | None"]
"""What an operator gives its ColumnarStream method: the results' stream and schema, and the late stream and
schema (``None`` with ``late="drop"``)."""


def key_columns(key: str | Sequence[str] | None, schema: pl.Schema | None, place: str) -> list[str]:
    """``key=`` as a list of column names (none: ``[]``), each checked against a known schema."""
    if key is None:
        return []
    keys = [key] if isinstance(key, str) else list(key)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"{place}: key names the key columns (key=\"user\" or key=[\"user\", \"page\"]), not "
                        f"{key!r:.100}")
    missing = [k for k in keys if schema is not None and k not in schema]
    if missing:
        raise GraphError(f"{place}: there is no key column {missing[0]!r}: the columns are {list(schema or {})}")
    return keys


class WindowPlan:
    """What ``window(...)``'s arguments chose, checked as the dataflow is built (see the module)."""

    __slots__ = ("spec", "keys", "time", "lateness", "late", "results", "place")

    def __init__(self, scope: Any, schema: pl.Schema | None, spec: Any, aggs: Sequence[Any], *,
                 key: str | Sequence[str] | None, time: str | None, lateness: Any, late: Any, name: str,
                 spans: Sequence[tuple[str, str]] = WINDOW_SPANS) -> None:
        place = self.place = where(scope, name)
        if not isinstance(spec, WindowSpec):
            raise TypeError(f"{place}: the windows must be at.Tumbling(...), at.Sliding(...) or at.Sessions(...), "
                            f"not {spec!r:.100}")
        if type(lateness) is not int or lateness < 0:
            raise ValueError(f"{place}: lateness must be a non-negative int, not {lateness!r}")
        if late not in LATE_POLICIES:
            raise ValueError(f"{place}: late must be one of {', '.join(map(repr, LATE_POLICIES))}, not {late!r}")
        ttype = scope.ttype
        if not (ttype.totally_ordered and type(ttype.minimum) is int):
            raise GraphError(f"{place}: columnar windows need int dataflow times, not {ttype.name}")
        check_time_column(schema, time, place)
        self.spec, self.time, self.lateness, self.late = spec, time, lateness, late
        self.keys = key_columns(key, schema, place)
        self.results = Results(self.keys, as_expressions(aggs, place), spans, schema, place,
                               combine=not isinstance(spec, Sessions))

    def exchange(self) -> KeyColumns | ToFirst:
        """How the input is routed: by a hash of the key columns, or all to worker 0 without keys."""
        return KeyColumns(self.keys, self.place) if self.keys else ToFirst()

    @property
    def combined(self) -> bool:
        """Whether the open windows keep partial aggregates (every aggregation decomposable, fixed windows, the
        input's schema known: :mod:`.combine`) rather than raw rows."""
        return self.results.combiner is not None

    def windows(self, pool: CapabilityPool[Any], shift: int) -> OpenWindows:
        """The open windows of the kind asked for, their output times held in ``pool``."""
        spec = self.spec
        if isinstance(spec, Sessions):
            return SessionWindows(spec.gap, self.keys, self.lateness, pool)
        if isinstance(spec, Tumbling):
            return FixedWindows(FixedShape(spec.size, spec.size, spec.offset), self.lateness, shift, pool,
                                self.results.combiner)
        if isinstance(spec, Sliding):
            return FixedWindows(FixedShape(spec.size, spec.step, spec.offset), self.lateness, shift, pool,
                                self.results.combiner)
        raise TypeError(f"{self.place}: windows of kind {type(spec).__name__} are not known to columnar streams")


def window_operator(stream: Any, schema: pl.Schema | None, plan: WindowPlan, name: str, *, shift: int = 0) -> Built:
    """The window operator of ``plan`` on ``stream`` (of Arrow batches): its results and late streams."""
    builder = OperatorBuilder(stream.scope, name)
    inp = builder.new_input(stream, exchange=plan.exchange(), interest=FrontierInterest.IF_CAPABILITY)
    port, results = builder.new_output()
    late_port, late_stream = builder.new_output() if plan.late != "drop" else (None, None)
    op = builder.op

    def construct(capabilities: list[Capability]) -> Logic:
        initial = capabilities[0]
        for extra in capabilities[1:]:
            extra.drop()
        pool: CapabilityPool[Any] = CapabilityPool()
        windows = plan.windows(pool, shift)
        kept = inp.keyed_state("windows", KeptRows)
        kept.bind(lambda: hashed(windows.rows(), plan.keys))
        windows.restore(unhashed(kept.take(), plan.keys), initial, op.recovery.resume_time())
        initial.drop()
        return WindowLogic(op, inp, RowTimes(plan.keys, plan.time), windows, plan.results, port, pool,
                           LateRows(plan.late, late_port))

    builder.build(construct)
    late_schema = None if plan.late == "drop" else schema if plan.late == "stream" else pl.Schema({"late": pl.Int64})
    return results, plan.results.schema, late_stream, late_schema
