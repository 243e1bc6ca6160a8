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
from typing import Any, Mapping

import msgpack

__all__ = ["ROWS", "pack", "unpack", "parse_offset", "as_offset"]

ROWS = 1
"""A DATA frame's ``channel`` for ``[time, [record, ...]]`` (one chunk of one time); messages are on ``CONTROL``."""

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
