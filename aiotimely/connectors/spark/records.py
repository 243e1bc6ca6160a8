"""What the publisher and Spark's reader say to each other over the wire: records, and Spark's offsets.

Records cross as msgpack, with ``datetime``, ``date`` and ``Decimal`` values as
extension types (and sets as arrays): a record is a tuple (the schema's fields in
order) or a dict (by field name). A read's records come in DATA frames on channel
:data:`ROWS`, each ``[time, [record, ...]]``, one chunk of one time. An offset is
``{"time": t}``: every time before ``t``; the last one says ``"final": true``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import io
import struct
from typing import Any, Mapping

import msgpack

__all__ = ["ROWS", "ARROW", "ARROW_CHUNK", "pack", "unpack", "parse_offset", "as_offset", "arrow_chunks",
           "arrow_chunk"]

ROWS = 1
"""A DATA frame's ``channel`` for ``[time, [record, ...]]`` (one chunk of one time); messages are on ``CONTROL``."""
ARROW = 2
"""A DATA frame's ``channel`` for one chunk of one time of a columnar stream: the time (8 bytes, little-endian,
signed), then the rows as Arrow IPC stream bytes."""
ARROW_CHUNK = 65_536
"""Rows per chunk of a columnar stream (the unit the publisher keeps, sends in one frame and deals to Spark's
partitions)."""
_TIME = struct.Struct("<q")

_DATETIME, _DATE, _DECIMAL = 1, 2, 3


def _default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return msgpack.ExtType(_DATETIME, value.isoformat().encode())
    if isinstance(value, _dt.date):
        return msgpack.ExtType(_DATE, value.isoformat().encode())
    if isinstance(value, decimal.Decimal):
        return msgpack.ExtType(_DECIMAL, str(value).encode())
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"a {type(value).__name__} cannot be sent to Spark: {value!r:.100}")


def _ext_hook(code: int, data: bytes) -> Any:
    text = data.decode()
    if code == _DATETIME:
        return _dt.datetime.fromisoformat(text)
    if code == _DATE:
        return _dt.date.fromisoformat(text)
    if code == _DECIMAL:
        return decimal.Decimal(text)
    return msgpack.ExtType(code, data)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, ext_hook=_ext_hook)


def parse_offset(offset: Mapping[str, Any]) -> tuple[int, bool]:
    try:
        return int(offset["time"]), bool(offset.get("final", False))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{offset!r} is not an offset of the aiotimely reader") from None


def as_offset(time: int, final: bool) -> dict[str, Any]:
    return {"time": time, "final": True} if final else {"time": time}


def arrow_chunks(time: int, batch: Any, rows: int) -> list[tuple[int, bytes]]:
    """A columnar batch (an :class:`~aiotimely.columnar.ArrowBatch`) at ``time`` as chunks of at most ``rows`` rows:
    ``(rows, payload)``, each payload an :data:`ARROW` frame's (Arrow IPC, types Spark's Arrow reads)."""
    import polars as pl

    head = _TIME.pack(time)
    frame = batch.frame
    chunks = []
    for start in range(0, frame.height, rows):
        part = frame.slice(start, rows)
        out = io.BytesIO()
        out.write(head)
        part.write_ipc_stream(out, compat_level=pl.CompatLevel.oldest())
        chunks.append((part.height, out.getvalue()))
    return chunks


def arrow_chunk(payload: bytes) -> tuple[int, Any]:
    """An :data:`ARROW` frame's payload: its time, and its rows as a pyarrow ``Table``."""
    import pyarrow as pa

    (time,) = _TIME.unpack_from(payload)
    with pa.ipc.open_stream(pa.py_buffer(payload)[_TIME.size:]) as reader:
        return time, reader.read_all()
