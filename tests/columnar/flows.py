"""Dataflows the columnar tests share: rows at times from worker 0, and what an operator's logic gets."""

from __future__ import annotations

from typing import Any

import polars as pl

import aiotimely as at
from aiotimely.columnar import ArrowBatch, ColumnarStream

SCHEMA = {"k": pl.Int64, "w": pl.String, "x": pl.Int64, "l": pl.List(pl.Int64)}
"""Rows ``(k, w, x, l)``: a small key, a word, a number, a list of numbers."""


def rows_at_times(scope: at.Scope, timed: list[tuple[int, list[tuple[Any, ...]]]]) -> ColumnarStream:
    """Worker 0 introduces each ``(time, rows)`` as one Polars frame at that time (times not decreasing)."""
    mine = timed if scope.worker.index == 0 else []
    frames = [pl.DataFrame(rows, schema=SCHEMA, orient="row") for _, rows in mine]
    return at.from_arrow(scope, frames, times=[t for t, _ in mine], schema=SCHEMA)


def seen_as(stream: ColumnarStream, name: str) -> at.Stream:
    """The batches as an operator's logic gets them: ``(kind, worker, row)`` for each row."""

    @stream.stream.unary(name=name)
    async def logic(input: Any, output: Any, cap: Any) -> None:
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                kind = type(batch).__name__
                assert kind != "ArrowBatch" or len(batch) > 0       # empty batches are never sent
                output.session(time).give_many((kind, stream.scope.worker.index, r) for r in batch)

    return logic


def by_time(timed: list[tuple[int, list[Any]]]) -> dict[int, list[Any]]:
    """Records by time, as a run's outputs compare."""
    out: dict[int, list[Any]] = {}
    for t, rs in timed:
        out.setdefault(t, []).extend(rs)
    return {t: rs for t, rs in out.items() if rs}


__all__ = ["SCHEMA", "ArrowBatch", "rows_at_times", "seen_as", "by_time"]
