"""Exchange by key columns: each row's worker from a hash of its key columns, computed once per batch.

The hash is Polars' ``hash_rows`` with a fixed seed: no process's own salt goes into it
(Python's ``hash`` of a ``str`` has one), so a key routes to the same worker in every
process that runs the same Polars version (``hash_rows`` is stable within a version, not
across versions). It is not the record path's :func:`aiotimely.route`: a columnar stream
and a record stream exchanged by the same key do not meet on the same worker yet.

The key is a :class:`KeyColumns`, a bulk key (:class:`~aiotimely.dataflow.containers.BulkKey`):
the exchange asks it for the routes of a whole batch in one call and the batch splits
itself into plain :class:`~.batch.ArrowBatch` es, which are what cross the wire.
"""

from __future__ import annotations

from typing import Any, Sequence

import polars as pl

from ..dataflow.containers import Container
from .batch import as_arrow

__all__ = ["SEED", "key_hash", "key_routes", "KeyColumns", "ToFirst"]

SEED = 0x7A1E
"""The seed of the key hash: the same in every process."""


def key_hash(frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
    """Each row's hash of its ``keys`` columns (``UInt64``), in one call: what routes it, and what keyed columnar
    state is kept by (``route(h, peers)`` of a non-negative int ``h`` is ``h % peers``: the same worker)."""
    return frame.select(keys).hash_rows(seed=SEED)


def key_routes(frame: pl.DataFrame, keys: Sequence[str], peers: int) -> pl.Series:
    """Each row's worker in ``range(peers)``: a hash of its ``keys`` columns, in one call."""
    return key_hash(frame, keys) % peers


class KeyColumns:
    """The exchange key of a columnar exchange: the routes of a batch's rows from its ``keys`` columns."""

    __slots__ = ("keys", "operator")

    def __init__(self, keys: Sequence[str], operator: str) -> None:
        self.keys = list(keys)
        self.operator = operator

    def routes(self, batch: Container, peers: int) -> Sequence[int]:
        return key_routes(as_arrow(batch, self.operator).frame, self.keys, peers).to_list()

    def __call__(self, record: Any) -> Any:
        raise TypeError(f"{self.operator} routes whole batches of Arrow rows by columns {self.keys}, and got a "
                        f"record {record!r:.100} of a list batch: make a columnar stream with "
                        "stream.columnar(schema) or aiotimely.from_arrow(...)")


class ToFirst:
    """The exchange key of an operator without key columns: every row to worker 0 (as the record path's unkeyed
    windows do), so that one worker sees all of them; its kept state is under key 0, which routes there too."""

    __slots__ = ()

    def routes(self, batch: Container, peers: int) -> Sequence[int]:
        return [0] * len(batch)

    def __call__(self, record: Any) -> Any:
        return 0
