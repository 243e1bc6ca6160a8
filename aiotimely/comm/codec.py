"""How records cross process boundaries: marshal for plain data, else msgpack with a few extension types.

A value made only of Python's plain types (``None``, ``bool``, ``int``, ``float``,
``complex``, ``str``, ``bytes``, ``tuple``, ``list``, ``dict``, ``set``,
``frozenset``; exact types, not subclasses) travels in the standard library's
``marshal`` format, version 4 (stable across Python 3 versions for such data): it
packs about 2.5x faster than msgpack, and arrives exactly as it was. (Like every
frame, it is read only from a peer that proved it knows the cluster's secret: a
garbled list length can make ``marshal`` allocate for a while before it fails.) Anything else
(a registered class, a :class:`~aiotimely.progress.Product`, a subclass of a plain
type) makes the whole value travel as msgpack, where ``None``, ``bool``, ``int``
(any size), ``float``, ``str``, ``bytes``, ``dict``, tuples and lists (both arrive
as **tuples**: msgpack has one array type, and tuples are what records usually
are), plus ``set`` and ``frozenset`` as extension types, are built in; the layers
above add their own (the dataflow layer adds :class:`~aiotimely.progress.Product`)
with :func:`register_extension`. Other classes cross once
registered with :func:`register_type` (every process must register them, under the
same qualified name); pickle is used only when a computation allows it
(``execute(..., pickle=True)``), because unpickling runs code chosen by the sender.

Registering a subclass of a type msgpack packs natively (a ``NamedTuple``, a ``str``
or ``dict`` subclass) makes every codec of the process strict: each value is then
packed by its exact type, so those records arrive as what they were, at about
twice the packing cost of the default. Until then, subclasses of native types (an
unregistered ``NamedTuple``, :class:`~aiotimely.progress.Product` inside a record)
travel as their base type, as msgpack packs them.
"""

from __future__ import annotations

import marshal
import os
import pickle
from typing import Any, Callable

import msgpack

__all__ = ["register_type", "register_extension", "RecordCodec", "CodecError"]

_EXT_REGISTERED = 1
# 2: the dataflow layer's Product (aiotimely.dataflow.channels)
_EXT_SET = 3
_EXT_FROZENSET = 4
_EXT_PICKLE = 5
_EXT_BIGINT = 6

_by_class: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_by_name: dict[str, Callable[[Any], Any]] = {}
_ext_by_class: dict[type, tuple[int, Callable[[Any], Any]]] = {}
_ext_by_code: dict[int, Callable[[Any], Any]] = {}

_MARSHALLED = b"\xc1"
"""The first byte of a marshalled value: one that msgpack never writes."""

_NATIVE: tuple[type, ...] = (bool, int, float, str, bytes, tuple, list, dict)
"""What msgpack packs natively, in the order a subclass is converted back to its base."""
_strict = False
"""True once a subclass of a native type is registered: every value is then packed by its exact type."""


class CodecError(TypeError):
    """A record cannot be encoded or decoded; the message says which and how to fix it."""


def register_type(cls: type, to_tuple: Callable[[Any], Any], from_tuple: Callable[[Any], Any]) -> None:
    """Let records of class ``cls`` cross processes: ``to_tuple(obj)`` gives msgpack-able data,
    ``from_tuple(data)`` rebuilds the object. Register in every process (at import time)."""
    global _strict
    name = f"{cls.__module__}.{cls.__qualname__}"
    _by_class[cls] = (name, to_tuple)
    _by_name[name] = from_tuple
    if issubclass(cls, _NATIVE):
        _strict = True


def register_extension(code: int, cls: type, to_data: Callable[[Any], Any], from_data: Callable[[Any], Any]) -> None:
    """aiotimely's own compact encodings (codes below 16): ``cls`` crosses as extension ``code``,
    ``to_data(obj)`` packed inside it, rebuilt with ``from_data(data)``."""
    if (not 0 < code < 16 or code in (_EXT_REGISTERED, _EXT_PICKLE, _EXT_BIGINT)
            or _ext_by_code.get(code, from_data) is not from_data):
        raise ValueError(f"extension code {code} is taken or out of range")
    _ext_by_class[cls] = (code, to_data)
    _ext_by_code[code] = from_data


register_extension(_EXT_SET, set, tuple, set)
register_extension(_EXT_FROZENSET, frozenset, tuple, frozenset)


class RecordCodec:
    """Encodes and decodes record batches (and other values) for the wire."""

    def __init__(self, *, allow_pickle: bool = False) -> None:
        self.allow_pickle = allow_pickle
        self.marshal = os.environ.get("AIOTIMELY_MARSHAL", "1") != "0"
        """Whether plain values travel as marshal (``AIOTIMELY_MARSHAL=0``: always msgpack)."""
        self._fast = msgpack.Packer(default=self._default, use_bin_type=True, autoreset=True)
        self._strict = msgpack.Packer(default=self._default, use_bin_type=True, autoreset=True, strict_types=True)

    def _nested(self, value: Any) -> bytes:
        # A fresh packer: the shared one is in the middle of packing the enclosing value.
        packed: bytes = msgpack.packb(value, default=self._default, use_bin_type=True, strict_types=_strict)
        return packed

    def _default(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is tuple:  # strict packing hands tuples here: they travel as arrays
            return list(obj)
        registered = _by_class.get(kind)
        if registered is not None:
            name, to_tuple = registered
            return msgpack.ExtType(_EXT_REGISTERED, self._nested((name, to_tuple(obj))))
        extension = _ext_by_class.get(kind)
        if extension is not None:
            code, to_data = extension
            return msgpack.ExtType(code, self._nested(to_data(obj)))
        if kind is int:  # beyond msgpack's 64 bits
            return msgpack.ExtType(_EXT_BIGINT, obj.to_bytes((obj.bit_length() + 8) // 8, "big", signed=True))
        for native in _NATIVE:  # an unregistered subclass of a native type travels as its base type
            if isinstance(obj, native):
                base: Any = list if native is tuple else native
                return base(obj)
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
        from_data = _ext_by_code.get(code)
        if from_data is not None:
            return from_data(self.unpack(data))
        if code == _EXT_BIGINT:
            return int.from_bytes(data, "big", signed=True)
        if code == _EXT_PICKLE:
            if not self.allow_pickle:
                raise CodecError("received a pickled record, but this computation does not allow pickle")
            return pickle.loads(data)
        raise CodecError(f"unknown extension type {code} in a record")

    def pack_records(self, value: Any) -> bytes:
        """Pack a batch of records: as marshal if it is plain data (see the module's docstring), else as
        :meth:`pack` does. :meth:`unpack` reads both."""
        if self.marshal:
            try:
                return _MARSHALLED + marshal.dumps(value, 4)
            except ValueError:  # something not plain inside: msgpack, with its extensions
                pass
        return self.pack(value)

    def pack(self, value: Any) -> bytes:
        packer = self._strict if _strict else self._fast
        try:
            packed: bytes = packer.pack(value)
            return packed
        except CodecError:
            packer.reset()
            raise
        except (TypeError, ValueError, OverflowError) as e:
            packer.reset()
            raise CodecError(f"cannot encode {value!r:.200}: {e}") from None

    def unpack(self, data: bytes) -> Any:
        if data[:1] == _MARSHALLED:
            try:
                return marshal.loads(memoryview(data)[1:])
            except Exception as e:  # marshal raises several exception types on bad input
                raise CodecError(f"malformed record data: {e}") from None
        try:
            return msgpack.unpackb(data, use_list=False, raw=False, ext_hook=self._ext_hook,
                                   strict_map_key=False)
        except CodecError:
            raise
        except Exception as e:  # msgpack raises several exception types on bad input
            raise CodecError(f"malformed record data: {e}") from None
