"""What a columnar window or reduce aggregates: Polars aggregation expressions, and the record path's built-ins
(``at.Agg.count()``, ``at.Agg.sum("x")``, ...) read as expressions over a column.

Every aggregation becomes one ``pl.Expr`` evaluated in a ``group_by(...).agg(...)`` over a group's rows, so any
Polars aggregation works, exactly (the state keeps the rows, see :mod:`.fixed`). The built-ins take a column
*name* where the record path takes a function of the record: ``Agg.count()`` is ``pl.len()`` named ``count``,
``Agg.sum("x")`` is ``pl.col("x").sum()`` named ``x_sum``, and likewise ``mean``, ``min``, ``max`` (of the
column's values: not the least *row*, as the record path's ``min(key)`` gives) and ``collect`` (a list).
``fold`` and ``reduce`` run Python per record, and are refused: write a Polars expression.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import polars as pl

from ..dataflow.windowing import Aggregation

__all__ = ["as_expressions", "BUILT_INS"]

BUILT_INS: dict[str, Callable[[str], pl.Expr]] = {
    "sum": lambda c: pl.col(c).sum().alias(f"{c}_sum"),
    "mean": lambda c: pl.col(c).mean().alias(f"{c}_mean"),
    "min": lambda c: pl.col(c).min().alias(f"{c}_min"),
    "max": lambda c: pl.col(c).max().alias(f"{c}_max"),
    "collect": lambda c: pl.col(c).alias(f"{c}_collect"),
}
"""The record path's built-ins over a column (``count`` takes none), by the aggregation's name."""


def as_expressions(aggs: Sequence[Any], where: str) -> list[pl.Expr]:
    """``aggs`` (Polars expressions, ``at.Agg`` built-ins, or tuples and lists of them) as expressions."""
    if not aggs:
        raise ValueError(f"{where}: give at least one aggregation, e.g. pl.col(\"x\").sum() or at.Agg.count()")
    out: list[pl.Expr] = []
    for agg in aggs:
        if isinstance(agg, (tuple, list)):
            out.extend(as_expressions(agg, where))
        elif isinstance(agg, pl.Expr):
            out.append(agg)
        elif isinstance(agg, Aggregation):
            out.append(_built_in(agg, where))
        else:
            raise TypeError(f"{where}: an aggregation is a Polars expression (pl.col(\"x\").sum()) or an at.Agg "
                            f"built-in (at.Agg.count(), at.Agg.sum(\"x\")), not {agg!r:.100}")
    return out


def _built_in(agg: Aggregation, where: str) -> pl.Expr:
    """A record-path built-in as an expression over the column it names."""
    if agg.name == "count":
        return pl.len().alias("count")
    make = BUILT_INS.get(agg.name)
    if make is None:
        raise TypeError(f"{where}: {agg!r} runs Python per record; on a columnar stream write it as a Polars "
                        "expression (pl.col(\"x\").sum(), ...)")
    column = agg.given
    if type(column) is not str:
        raise TypeError(f"{where}: on a columnar stream at.Agg.{agg.name} takes a column's name, e.g. "
                        f"at.Agg.{agg.name}(\"x\"), not {column!r:.100}")
    return make(column)
