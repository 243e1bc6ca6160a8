"""A combiner for decomposable aggregations: fixed windows keep partial aggregates, not raw rows.

When every aggregation of a window is one this module recognises — ``pl.len()`` (``at.Agg.count()``) and, over
one column ``c``, ``pl.col(c).count()``, ``.sum()``, ``.min()``, ``.max()``, ``.mean()`` (the ``at.Agg``
built-ins are these), bare or with an ``.alias(...)`` — and the input's schema is known, each complete time's
rows are grouped once per ``(key columns, window start)`` into partials; the windows keep those, and at close
the partials of a window are merged and finished. One ``group_by`` of a batch replaces keeping its rows, and the
closing ``group_by`` runs over a few partial rows per key and window instead of every raw row.

Recognition is structural (``Expr.meta.eq`` against the canonical expression), never by a name, so anything
else — a median, ``pl.col(c).sum() * 2``, a filter — is not recognised and the window keeps raw rows
(:mod:`.fixed`), as before. The results are those of the raw-row path, dtype for dtype (they are cast to the
schema planned for raw rows), because only merges that are exact are used:

* ``len`` and ``count`` (non-null values): a sum of the partial counts;
* ``sum`` of an integer or boolean column: a sum of partial sums (a sum wraps as the raw sum does, whatever the
  order); float sums are not combined (their rounding depends on the order of the additions);
* ``min`` / ``max`` of an integer, temporal or string column (not floats: NaN);
* ``mean`` of an integer column: an exact ``Int128`` sum and a non-null count, finished as ``sum / count``
  (``null`` for no value), which is the raw mean as long as a window's sum is within 2**53 (beyond, the raw
  mean's own float sum rounds where this rounds once).
"""

from __future__ import annotations

from typing import Callable, Sequence

import polars as pl

__all__ = ["Combiner", "recognise"]

_OPS: dict[str, Callable[[pl.Expr], pl.Expr]] = {
    "sum": lambda c: c.sum(), "min": lambda c: c.min(), "max": lambda c: c.max(),
    "count": lambda c: c.count(), "mean": lambda c: c.mean(),
}
"""The one-column aggregations recognised, by name, as the canonical expressions compared against."""

_MERGES: dict[str, Callable[[pl.Expr], pl.Expr]] = {
    "len": lambda p: p.sum(), "count": lambda p: p.sum(), "sum": lambda p: p.sum(),
    "min": lambda p: p.min(), "max": lambda p: p.max(),
}
"""How the partials of one kind merge (``mean`` merges its sum and count as ``sum``)."""


def _combinable(op: str, dtype: pl.DataType) -> bool:
    """Whether ``op`` over a column of ``dtype`` merges exactly (see the module)."""
    if op == "count":
        return True
    if op == "sum":
        return dtype.is_integer() or dtype == pl.Boolean
    if op in ("min", "max"):
        return dtype.is_integer() or dtype.is_temporal() or dtype == pl.String
    return op == "mean" and dtype.is_integer()


def _is(expr: pl.Expr, canonical: pl.Expr, name: str) -> bool:
    """``expr`` is ``canonical``, bare or aliased to its own output name."""
    return bool(expr.meta.eq(canonical) or expr.meta.eq(canonical.alias(name)))


def recognise(expr: pl.Expr, schema: pl.Schema) -> tuple[str, str | None, str] | None:
    """``(op, column, output name)`` if ``expr`` is a decomposable aggregation over ``schema``'s rows that
    merges exactly, else ``None``."""
    try:
        name = expr.meta.output_name()
        roots = expr.meta.root_names()
    except Exception:          # (no single output name: not one of ours)
        return None
    if not roots:
        return ("len", None, name) if _is(expr, pl.len(), name) else None
    if len(roots) != 1 or roots[0] not in schema:
        return None
    column = roots[0]
    for op, make in _OPS.items():
        if _is(expr, make(pl.col(column)), name):
            return (op, column, name) if _combinable(op, schema[column]) else None
    return None


class Combiner:
    """The partial, merge and finish expressions of a window's aggregations, all decomposable (see the module):
    partial columns are ``__aiotimely_part_<i>_<j>__``; ``group`` is what rows are grouped by besides the window
    start (the key columns, or the key hash without keys)."""

    __slots__ = ("group", "parts", "merges", "finishes", "casts")

    def __init__(self, found: Sequence[tuple[str, str | None, str]], group: Sequence[str],
                 result: pl.Schema) -> None:
        self.group = list(group)
        self.parts: list[pl.Expr] = []
        self.merges: list[pl.Expr] = []
        self.finishes: list[pl.Expr] = []
        for i, (op, column, name) in enumerate(found):
            self._add(i, op, column, name)
        self.casts = {name: result[name] for _, _, name in found}
        """The raw-row path's dtype of each aggregate (what the finished results are cast to)."""

    @classmethod
    def plan(cls, exprs: Sequence[pl.Expr], group: Sequence[str], rows: pl.Schema | None,
             result: pl.Schema | None) -> Combiner | None:
        """A combiner for ``exprs`` over rows of schema ``rows`` (results of schema ``result``), or ``None``
        if a schema is unknown or an aggregation is not decomposable."""
        if rows is None or result is None:
            return None
        found = [recognise(expr, rows) for expr in exprs]
        if not all(found):
            return None
        return cls([f for f in found if f is not None], group, result)

    def _add(self, i: int, op: str, column: str | None, name: str) -> None:
        a, b = f"__aiotimely_part_{i}_0__", f"__aiotimely_part_{i}_1__"
        if op == "mean":
            values = pl.col(column or "")
            self.parts += [values.cast(pl.Int128).sum().alias(a), values.count().alias(b)]
            self.merges += [pl.col(a).sum(), pl.col(b).sum()]
            self.finishes.append(pl.when(pl.col(b) > 0).then(pl.col(a).cast(pl.Float64) / pl.col(b)).alias(name))
            return
        source = pl.len() if column is None else _OPS[op](pl.col(column))
        self.parts.append(source.alias(a))
        self.merges.append(_MERGES[op](pl.col(a)))
        self.finishes.append(pl.col(a).alias(name))

    def partials(self, rows: pl.LazyFrame, start: str) -> pl.DataFrame:
        """``rows`` (with the window start column ``start``) as partials: one row per group and window start,
        in the order each first appears (so results come in the raw-row path's order)."""
        return rows.group_by([*self.group, start], maintain_order=True).agg(self.parts).collect()

    def merged(self, partials: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
        """The partials merged per ``by`` (group, window span, output time) and finished: ``by`` then each
        aggregate, with the raw-row path's dtypes."""
        merged = partials.group_by(list(by), maintain_order=True).agg(self.merges)
        return merged.select(*by, *self.finishes).cast(self.casts)  # type: ignore[arg-type]
