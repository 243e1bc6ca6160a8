"""Build functions for the three ways of running a query, shared by the tests and the benchmark."""

from __future__ import annotations

from typing import Any, Callable

import aiotimely as at

from . import columnar, records, reference
from .generator import Events
from .params import Params

APIS = ("reference", "records", "columnar")


def record_build(query: int, events: Events, params: Params) -> Callable[[Any], at.Stream[Any]]:
    """``build(scope)`` of query ``query`` on the record API: the stream of result rows."""
    def build(scope: Any) -> at.Stream[Any]:
        return records.QUERIES[query](records.Sources(scope, events), params)
    return build


def columnar_streams(query: int, scope: Any, events: Events, params: Params) -> list[Any]:
    """The columnar streams of query ``query``'s results (Q0: three, the others one)."""
    out = columnar.QUERIES[query](columnar.Sources(scope, events), params)
    return out if isinstance(out, list) else [out]


def columnar_build(query: int, events: Events, params: Params) -> Callable[[Any], at.Stream[Any]]:
    """``build(scope)`` of query ``query`` on the columnar API, its rows as records (tuples in column order)."""
    def build(scope: Any) -> at.Stream[Any]:
        streams = [s.records() for s in columnar_streams(query, scope, events, params)]
        return streams[0] if len(streams) == 1 else at.concatenate(scope, streams)
    return build


def expected(query: int, events: Events, params: Params) -> list[Any]:
    """The plain reference's rows, sorted."""
    return sorted(reference.QUERIES[query](events.record_batches(), params), key=_order)


def rows(outputs: Any) -> list[Any]:
    """Every row a test run's outputs carried, at any time, sorted."""
    return sorted((row for time in outputs for row in outputs[time]), key=_order)


def _order(row: tuple[Any, ...]) -> tuple[int, tuple[Any, ...]]:
    return len(row), row   # (Q0's rows are persons, auctions and bids: tuples of 7, 9 and 6 fields)
