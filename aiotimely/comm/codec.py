"""How records cross process boundaries: msgpack, with a few extension types.

Built-in: ``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``,
``dict``, tuples and lists (both arrive as **tuples**: msgpack has one array type,
and tuples are what records usually are), plus ``set``, ``frozenset`` and
:class:`~aiotimely.progress.Product` as extension types. Other classes cross once
registered with :func:`register_type` (every process must register them, under the
same qualified name); pickle is used only when a computation allows it
(``execute(..., pickle=True)``), because unpickling runs code chosen by the sender.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable

import msgpack

from ..progress import Product

__all__ = ["register_type", "RecordCodec", "CodecError"]

_EXT_REGISTERED = 1
_EXT_PRODUCT = 2
_EXT_SET = 3
_EXT_FROZENSET = 4
_EXT_PICKLE = 5
_EXT_BIGINT = 6

_by_class: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_by_name: dict[str, Callable[[Any], Any]] = {}


class CodecError(TypeError):
    """A record cannot be encoded or decoded; the message says which and how to fix it."""


def register_type(cls: type, to_tuple: Callable[[Any], Any], from_tuple: Callable[[Any], Any]) -> None:
    """Let records of class ``cls`` cross processes: ``to_tuple(obj)`` gives msgpack-able data,
    ``from_tuple(data)`` rebuilds the object. Register in every process (at import time)."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    _by_class[cls] = (name, to_tuple)
    _by_name[name] = from_tuple


class RecordCodec:
    """Encodes and decodes record batches (and other values) for the wire."""

    def __init__(self, *, allow_pickle: bool = False) -> None:
        self.allow_pickle = allow_pickle
        self._packer = msgpack.Packer(default=self._default, use_bin_type=True, autoreset=True)

    def _nested(self, value: Any) -> bytes:
        # A fresh packer: the shared one is in the middle of packing the enclosing value.
        return msgpack.packb(value, default=self._default, use_bin_type=True)

    def _default(self, obj: Any) -> msgpack.ExtType:
        kind = type(obj)
        registered = _by_class.get(kind)
        if registered is not None:
            name, to_tuple = registered
            return msgpack.ExtType(_EXT_REGISTERED, self._nested((name, to_tuple(obj))))
        if kind is Product:
            return msgpack.ExtType(_EXT_PRODUCT, self._nested(tuple(obj)))
        if kind is set:
            return msgpack.ExtType(_EXT_SET, self._nested(tuple(obj)))
        if kind is frozenset:
            return msgpack.ExtType(_EXT_FROZENSET, self._nested(tuple(obj)))
        if kind is int:  # beyond msgpack's 64 bits
            return msgpack.ExtType(_EXT_BIGINT, obj.to_bytes((obj.bit_length() + 8) // 8, "big", signed=True))
        if self.allow_pickle:
            return msgpack.ExtType(_EXT_PICKLE, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        raise CodecError(
            f"cannot send a {kind.__module__}.{kind.__qualname__} between processes: register it with "
            f"aiotimely.register_type({kind.__qualname__}, to_tuple, from_tuple), or allow pickle "
            "(execute(..., pickle=True))"
        )

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == _EXT_REGISTERED:
            name, value = self.unpack(data)
            from_tuple = _by_name.get(name)
            if from_tuple is None:
                raise CodecError(f"received a {name}, which this process has not registered with register_type")
            return from_tuple(value)
        if code == _EXT_PRODUCT:
            outer, inner = self.unpack(data)
            return Product(outer, inner)
        if code == _EXT_SET:
            return set(self.unpack(data))
        if code == _EXT_FROZENSET:
            return frozenset(self.unpack(data))
        if code == _EXT_BIGINT:
            return int.from_bytes(data, "big", signed=True)
        if code == _EXT_PICKLE:
            if not self.allow_pickle:
                raise CodecError("received a pickled record, but this computation does not allow pickle")
            return pickle.loads(data)
        raise CodecError(f"unknown extension type {code} in a record")

    def pack(self, value: Any) -> bytes:
        try:
            return self._packer.pack(value)
        except CodecError:
            raise
        except (TypeError, ValueError, OverflowError) as e:
            self._packer.reset()
            raise CodecError(f"cannot encode {value!r:.200}: {e}") from None

    def unpack(self, data: bytes) -> Any:
        try:
            return msgpack.unpackb(data, use_list=False, raw=False, ext_hook=self._ext_hook,
                                   strict_map_key=False)
        except CodecError:
            raise
        except Exception as e:  # msgpack raises several exception types on bad input
            raise CodecError(f"malformed record data: {e}") from None
