"""Exchange by key columns: each row's worker from a hash of its key columns, computed once per batch — the
record path's :func:`aiotimely.route` of the same key, vectorized.

A row's key is the value of its one key column, or the tuple of its key columns' values (as the record path
would key it: ``exchange("user")`` meets ``exchange(lambda r: r.user)``, ``exchange("user", "day")`` meets
``exchange(lambda r: (r.user, r.day))``). :func:`key_hash` is :func:`aiotimely.comm.routing.stable_hash` of that
key, for a whole batch in one call, and a row's worker is ``key_hash % peers``: exactly ``route(key, peers)``, in
every process (no process's own salt goes into it). For each column type:

* integers (``Int8`` .. ``Int64``, ``UInt8`` .. ``UInt64``) and ``Boolean``: the absolute value, as ``route``
  takes an ``int`` (or a ``bool``) — vectorized in Polars;
* ``String``, ``Categorical`` and ``Enum`` (their values are ``str`` on the record path): the CRC-32 of the
  UTF-8 bytes; ``Binary``: the CRC-32 of the bytes. Neither Polars nor PyArrow has a CRC-32 kernel, so the
  batch's column is dictionary-encoded (PyArrow, vectorized) and each *distinct* value's CRC-32 is taken with
  :func:`zlib.crc32` (remembered, up to :data:`CRCS_KEPT` values), then gathered back to the rows: Python runs
  once per distinct key of a batch, not per row;
* ``Date`` and ``Datetime`` (any unit, naive or in UTC; nanoseconds floored to microseconds, as Python's
  ``datetime`` holds them): as ``route`` takes ``datetime.date`` and ``datetime.datetime``. (Not a ``Datetime``
  in another time zone: ``route`` takes an ambiguous wall time at its first occurrence, as Python's ``hash``
  does, which a column of instants cannot follow);
* a null, in any of these columns (and a ``Null`` column): as ``route(None)``;
* several key columns: the tuple's combination of its parts' hashes (``route`` of a ``tuple``), on ``UInt64``
  columns with no overflow.

Other column types (floats, decimals, durations, times, lists, structs, ...) do not route as the record path
does: their keys route by Polars' ``hash_rows`` with a fixed seed (the same in every process that runs the same
Polars version; not across versions), and a :class:`RouteWarning` says so once per process and set of column
types — a record stream keyed by the same values does not meet those rows on the same worker.

The key is a :class:`KeyColumns`, a bulk key (:class:`~aiotimely.dataflow.containers.BulkKey`):
the exchange asks it for the routes of a whole batch in one call and the batch splits
itself into plain :class:`~.batch.ArrowBatch` es, which are what cross the wire.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence
from zlib import crc32

import polars as pl

from ..dataflow.containers import Container
from .batch import Whole, as_arrow

__all__ = ["SEED", "CRCS_KEPT", "RouteWarning", "key_hash", "key_routes", "routes_alike", "KeyColumns", "ToFirst"]

SEED = 0x7A1E
"""The seed of ``hash_rows`` for key columns of types ``route`` does not share: the same in every process."""
CRCS_KEPT = 1 << 16
"""How many distinct strings (and byte strings) the CRC-32 of is remembered (then it starts over)."""

_M48 = 0xFFFFFFFFFFFF
_M24 = 0xFFFFFF
_TUPLE = 0x345678
_NONE = 0x4E6F6E65            # (aiotimely.comm.routing's hash of None)
_P = (1 << 61) - 1
_TAG_DATE = (0xDA * 1000003) & _M48
_TAG_DATETIME = (0xD7 * 1000003) & _M48
_ORDINAL_1970 = 719163        # date(1970, 1, 1).toordinal()
_MICROS_1970 = _ORDINAL_1970 * 86_400_000_000

_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.Boolean)
_SIGNED = (pl.Int8, pl.Int16, pl.Int32, pl.Int64)


class RouteWarning(UserWarning):
    """Key columns of a type that does not route as the record path's :func:`aiotimely.route` (see the module)."""


def routes_alike(dtype: Any) -> bool:
    """Whether a key column of Polars type ``dtype`` routes as ``aiotimely.route`` routes its values."""
    return (dtype in _INTEGERS or dtype in (pl.String, pl.Binary, pl.Null, pl.Date)
            or isinstance(dtype, (pl.Categorical, pl.Enum))
            or isinstance(dtype, pl.Datetime) and dtype.time_zone in (None, "UTC"))


def key_hash(frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
    """Each row's hash of its ``keys`` columns (``UInt64``), in one call: ``stable_hash`` of the row's key (the
    value of its one key column, or the tuple of them), so ``key_hash % peers`` is ``route(key, peers)``. It is
    what routes the row, and what keyed columnar state is kept by (``route(h, peers)`` of a non-negative int
    ``h`` is ``h % peers``: the same worker)."""
    columns = [frame.get_column(k) for k in keys]
    if not all(routes_alike(c.dtype) for c in columns):
        _warn_unlike(columns)
        return frame.select(keys).hash_rows(seed=SEED)
    if len(columns) == 1:
        return _part_hash(columns[0]).rename("hash")
    h = (_part_hash(columns[0]) & _M48) ^ ((_TUPLE * 1000003) & _M48)
    for column in columns[1:]:
        h = _times_1000003(h) ^ (_part_hash(column) & _M48)
    return h.rename("hash")


def key_routes(frame: pl.DataFrame, keys: Sequence[str], peers: int) -> pl.Series:
    """Each row's worker in ``range(peers)`` (``UInt32``): ``route(key, peers)`` of its key, in one call."""
    return (key_hash(frame, keys) % peers).cast(pl.UInt32)


def _times_1000003(h: pl.Series) -> pl.Series:
    """``(h * 1000003) & (2**48 - 1)`` of 48-bit ``h``, without overflowing 64 bits (in two 24-bit halves)."""
    high = ((h // (1 << 24)) * 1000003) & _M24
    return (high * (1 << 24) + (h & _M24) * 1000003) & _M48


def _part_hash(column: pl.Series) -> pl.Series:
    """``stable_hash`` of each value of one key column (a type :func:`routes_alike` accepts), as ``UInt64``."""
    dtype = column.dtype
    if dtype == pl.Null:
        return pl.Series(column.name, [_NONE] * len(column), dtype=pl.UInt64)
    if dtype in _SIGNED:
        signed = column.cast(pl.Int64)
        # |x| with no overflow at Int64's least value: -(x + 1), plus 1, for a negative x
        negative = signed < 0
        below = pl.select(pl.when(negative).then(-(signed + 1)).otherwise(signed)).to_series()
        hashed = below.cast(pl.UInt64) + negative.cast(pl.UInt64)
    elif dtype in _INTEGERS:
        hashed = column.cast(pl.UInt64)
    elif dtype == pl.Date:
        ordinal = column.to_physical().cast(pl.Int64) + _ORDINAL_1970
        hashed = (ordinal.cast(pl.UInt64) ^ _TAG_DATE) & _M48
    elif isinstance(dtype, pl.Datetime):
        micros = column.dt.cast_time_unit("us").to_physical() + _MICROS_1970    # (ordinal-based, > 0)
        hashed = ((micros % _P).cast(pl.UInt64) ^ _TAG_DATETIME) & _M48
    else:
        hashed = _crc32(column)
    if column.null_count():
        hashed = hashed.fill_null(_NONE)
    return hashed


_crcs: dict[Any, int] = {}
"""The CRC-32 of strings (and byte strings) met so far."""


def _crc32(column: pl.Series) -> pl.Series:
    """The CRC-32 of each string (UTF-8) or byte string of a column: its distinct values found in one
    vectorized pass (a dictionary encoding), each one's CRC-32 taken once, gathered back to the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column.dtype, (pl.Categorical, pl.Enum)):
        column = column.cast(pl.String)
    encoded = pc.dictionary_encode(column.to_arrow())
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    distinct = encoded.dictionary.to_pylist()
    if len(_crcs) > CRCS_KEPT:
        _crcs.clear()
    known = _crcs.get
    crcs = [known(value) for value in distinct]
    for i, crc in enumerate(crcs):
        if crc is None:
            value = distinct[i]
            crc = _crcs[value] = crc32(value.encode("utf-8", "surrogatepass") if type(value) is str else value)
            crcs[i] = crc
    hashed = pc.take(pa.array(crcs, pa.uint64()), encoded.indices)
    series = pl.Series(column.name, hashed)
    return series


_warned: set[tuple[Any, ...]] = set()


def _warn_unlike(columns: list[pl.Series]) -> None:
    kinds = tuple((c.name, c.dtype) for c in columns)
    if kinds in _warned:
        return
    _warned.add(kinds)
    unlike = ", ".join(f"{c.name!r} ({c.dtype})" for c in columns if not routes_alike(c.dtype))
    warnings.warn(RouteWarning(
        f"key columns {unlike} do not route as aiotimely.route routes their values: these rows route by a hash "
        "of Polars' (the same in every process of one Polars version), and a record stream keyed by the same "
        "values does not meet them on the same worker. Integer, boolean, string, categorical, binary, date and "
        "datetime columns route alike on both paths (docs/columnar.md, \"Exchange and batch sizes\")"),
        stacklevel=3)


class KeyColumns:
    """The exchange key of a columnar exchange: the routes of a batch's rows from its ``keys`` columns."""

    __slots__ = ("keys", "operator")

    def __init__(self, keys: Sequence[str], operator: str) -> None:
        self.keys = list(keys)
        self.operator = operator

    def routes(self, batch: Container, peers: int) -> Sequence[int]:
        """The worker of each row (a ``UInt32`` Series, which :meth:`~.batch.ArrowBatch.partition` takes as
        it is: no list of Python ints is made)."""
        if peers == 1:
            return Whole(len(batch), 0)
        return key_routes(as_arrow(batch, self.operator).frame, self.keys, peers)  # type: ignore[return-value]

    def __call__(self, record: Any) -> Any:
        raise TypeError(f"{self.operator} routes whole batches of Arrow rows by columns {self.keys}, and got a "
                        f"record {record!r:.100} of a list batch: make a columnar stream with "
                        "stream.columnar(schema) or aiotimely.from_arrow(...)")


class ToFirst:
    """The exchange key of an operator without key columns: every row to worker 0 (as the record path's unkeyed
    windows do), so that one worker sees all of them; its kept state is under key 0, which routes there too."""

    __slots__ = ()

    def routes(self, batch: Container, peers: int) -> Sequence[int]:
        return Whole(len(batch), 0)

    def __call__(self, record: Any) -> Any:
        return 0
