"""Equi-joins of two columnar streams at the same dataflow time: ``left.join(right, on="user")``
(docs/columnar.md, "Joins").

The record path's ``join`` (:mod:`aiotimely.dataflow.operators.join`), on columns: each input is exchanged by a
hash of its key columns (:class:`~.exchange.KeyColumns`, the same hash on both sides, so equal keys meet on one
worker); a batch that comes is joined at once, in one Polars join, with the other side's rows of its time, and
the result sent at that time; its rows are kept while the other input may still send at that time, and a
time's rows are forgotten once both frontiers have passed it (a :class:`~aiotimely.dataflow.operators.pool.
CapabilityPool` holds one capability per such time, so that frontier changes wake the operator). Nothing is kept
across times, so nothing is snapshotted (as on the record path: a resumed run joins the open times again).

:class:`JoinPlan` checks the arguments (shared with ``interval_join``, :mod:`.interval`) and knows how two frames
join: the result columns are those of Polars' ``DataFrame.join`` of the two frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..dataflow.operators.join import PendingTimes, SameTimeDriver
from ..errors import GraphError
from ..progress import FrontierInterest
from .batch import ArrowBatch
from .exchange import KeyColumns
from .places import frame_of, where
from .windows import key_columns

if TYPE_CHECKING:
    from ..dataflow.ports import InputPort, OutputPort
    from .stream import ColumnarStream

__all__ = ["JoinPlan", "join_operator", "JOINS"]

JOINS = ("inner",)
"""The kinds of join (``how=``) a columnar stream has."""

Keys = str | Sequence[str] | None
"""Key columns as given: a column's name, a list of names, or none."""


class JoinPlan:
    """What a columnar join's arguments chose, checked as the dataflow is built: each side's key columns (as many
    on both, of the same types where the schemas are known), the suffix of clashing right columns, and the
    result's schema (``None`` unless both inputs' schemas are known)."""

    __slots__ = ("left_keys", "right_keys", "suffix", "place", "schema")

    def __init__(self, left: ColumnarStream, right: ColumnarStream, *, on: Keys, left_on: Keys, right_on: Keys,
                 how: str, suffix: str, name: str) -> None:
        place = self.place = where(left.scope, name)
        if right.scope is not left.scope:
            raise GraphError(f"{place}: the two streams are in different scopes ({left.scope.describe()} and "
                             f"{right.scope.describe()})")
        if how not in JOINS:
            raise ValueError(f"{place}: how must be one of {', '.join(map(repr, JOINS))}, not {how!r} (outer, left, "
                             "semi and anti joins of columnar streams are not there yet)")
        if type(suffix) is not str:
            raise TypeError(f"{place}: suffix must be a str, not {suffix!r:.100}")
        given_on = on is not None
        if given_on == (left_on is not None or right_on is not None) or (not given_on and None in (left_on, right_on)):
            raise TypeError(f"{place}: give the key columns as on=\"k\" (the same names on both sides), or as both "
                            "left_on= and right_on=")
        self.left_keys = key_columns(on if given_on else left_on, left.schema, f"{place} (left)")
        self.right_keys = key_columns(on if given_on else right_on, right.schema, f"{place} (right)")
        if not self.left_keys or len(self.left_keys) != len(self.right_keys):
            raise TypeError(f"{place}: as many left key columns as right ones, at least one: got "
                            f"{self.left_keys} and {self.right_keys}")
        self.suffix = suffix
        _same_key_types(left.schema, right.schema, self.left_keys, self.right_keys, place)
        self.schema = self._planned(left.schema, right.schema)

    def exchange(self, side: int) -> KeyColumns:
        """How input ``side`` (0: left, 1: right) is routed: by the hash of its key columns."""
        return KeyColumns(self.right_keys if side else self.left_keys, self.place)

    def match(self, left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``left`` and ``right`` with equal keys, side by side, in one Polars join (null keys never
        match, as in Polars)."""
        return left.join(right, left_on=self.left_keys, right_on=self.right_keys, how="inner", suffix=self.suffix)

    def _planned(self, left: pl.Schema | None, right: pl.Schema | None) -> pl.Schema | None:
        """The result's columns, found by planning the join on no rows."""
        if left is None or right is None:
            return None
        try:
            return pl.LazyFrame(schema=left).join(pl.LazyFrame(schema=right), left_on=self.left_keys,
                                                  right_on=self.right_keys, how="inner",
                                                  suffix=self.suffix).collect_schema()
        except Exception as exc:
            raise GraphError(f"{self.place}: {type(exc).__name__}: {exc}") from exc


def _same_key_types(left: pl.Schema | None, right: pl.Schema | None, left_keys: list[str], right_keys: list[str],
                    place: str) -> None:
    """Refuse key columns of different types: rows are routed by a hash of the keys' values, and equal values of
    two types need not hash alike, so they could miss each other on several workers."""
    if left is None or right is None:
        return
    for lk, rk in zip(left_keys, right_keys, strict=True):
        if left[lk] != right[rk]:
            raise GraphError(f"{place}: key column {lk!r} is {left[lk]} on the left and {rk!r} is {right[rk]} on "
                             f"the right: cast one (with_columns(pl.col({rk!r}).cast(...))) so that equal keys "
                             "route to the same worker")


# -- join: rows of the same time ---------------------------------------------------------------------------------


def join_operator(left: ColumnarStream, right: ColumnarStream, plan: JoinPlan, name: str) -> Any:
    """The same-time join of ``plan`` on the two streams (of Arrow batches): the stream of its results."""
    builder = OperatorBuilder(left.scope, name)
    inputs = tuple(builder.new_input(s.stream, exchange=plan.exchange(side), interest=FrontierInterest.IF_CAPABILITY)
                   for side, s in enumerate((left, right)))
    out, result = builder.new_output()
    builder.build_function(SameTimeJoin((inputs[0], inputs[1]), out, plan))
    return result


class TimeRows:
    """The rows one time got so far, per side, as frames: joined once into one when asked for."""

    __slots__ = ("frames",)

    def __init__(self) -> None:
        self.frames: tuple[list[pl.DataFrame], list[pl.DataFrame]] = ([], [])

    def add(self, side: int, frame: pl.DataFrame) -> None:
        self.frames[side].append(frame)

    def rows(self, side: int) -> pl.DataFrame | None:
        """Side ``side``'s rows as one frame (``None``: none yet); the frames are concatenated once and kept so."""
        frames = self.frames[side]
        if not frames:
            return None
        if len(frames) > 1:
            frames[:] = [pl.concat(frames, how="vertical")]
        return frames[0]

    def forget(self, side: int) -> None:
        self.frames[side].clear()


class SameTimeJoin(SameTimeDriver[TimeRows]):
    """The same-time join's logic: join each batch with the other side's rows of its time in one call and send
    the result at once (the pending times are the record path's, see
    :class:`~aiotimely.dataflow.operators.join.SameTimeDriver`)."""

    __slots__ = ("plan",)

    def __init__(self, inputs: tuple[InputPort, InputPort], output: OutputPort, plan: JoinPlan) -> None:
        super().__init__(inputs, output, PendingTimes(TimeRows, TimeRows.forget))
        self.plan = plan

    def take(self, side: int) -> None:
        """Join what came on input ``side`` (0: left, 1: right), batch by batch."""
        port, other = self.inputs[side], self.inputs[1 - side]
        for ref, batch in port.drain():
            frame = frame_of(batch, self.plan.place)
            if frame.height == 0:
                continue
            rows = self.pending.at(ref)
            theirs = rows.rows(1 - side)
            if theirs is not None:
                joined = self.plan.match(frame, theirs) if side == 0 else self.plan.match(theirs, frame)
                if joined.height:
                    sent: Any = ArrowBatch(joined)     # (a container: ports move them as they move lists)
                    self.output.push(ref.time, sent)
            if other.less_equal(ref.time):             # the other side may still send at this time
                rows.add(side, frame)
