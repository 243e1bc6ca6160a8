"""Which worker a record goes to: a stable hash of its key, the same in every process.

Python's ``hash`` of ``str`` and ``bytes`` is salted per process (``PYTHONHASHSEED``), and so is the hash of
everything that hashes one (a ``date`` hashes its bytes, an enum member its name, an IP address a string), so
it cannot route records between processes. Here:

* a non-negative ``int`` routes as ``key % peers`` (any ``int`` by its absolute value); ``bool``, ``float``,
  ``complex``, ``Decimal``, ``Fraction`` (and other :mod:`numbers`) route as the ``int`` they equal, and
  non-integral ones by their exact value (``2.5``, ``Decimal('2.50')``, ``Fraction(5, 2)`` alike; a
  ``Decimal`` of more than 4,300 digits is refused);
* ``str`` and ``bytes`` by CRC-32; ``tuple`` by combining its parts; ``frozenset`` by combining its elements'
  hashes with a sum (any order); ``None`` and ``range`` by their values;
* ``date``, ``datetime``, ``time``, ``timedelta``, ``timezone`` by their values (an aware ``datetime`` or
  ``time`` by the instant it is in UTC, so that equal ones in two timezones route alike);
* an :class:`enum.Enum` member by its class's ``__qualname__`` and its name (it is the same object in every
  process, and equal only to itself); ``UUID`` by its 128 bits; :mod:`ipaddress` addresses, networks and
  interfaces, :mod:`pathlib` pure paths and classes by their values;
* a subclass of ``int``, ``float``, ``str``, ``bytes`` or ``tuple`` (an ``IntEnum`` or ``StrEnum`` member, a
  ``NamedTuple``), or of any type above, as the plain value it equals;
* any other class by its ``__aiotimely_route__(self)`` method, when it has one: a value of the types above,
  equal for equal keys.

Equal keys route alike (``1``, ``1.0`` and ``True``; the same frozenset built in any order). Any other key has
only Python's ``hash``, which may be the process's own: :func:`route` uses it by default (one process agrees
with itself), and refuses it with ``strict=True`` — as an exchange between processes does.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import operator
import sys
from typing import Any, Callable
from zlib import crc32

__all__ = ["route", "stable_hash"]

_MASK = 0x7FFFFFFFFFFFFFFF
_P = (1 << 61) - 1
"""A prime: a non-integral number's hash is its exact value modulo ``_P`` (as Python's own numeric hash is)."""
_INF, _NEG_INF, _NAN, _NONE = 314159, 271828, 0, 0x4E6F6E65
_DIGITS = 4300
"""A ``Decimal`` with more digits than this (``int``'s own limit for decimal strings) is not routed."""

Router = Callable[[Any, bool], int]
"""How keys of one type are hashed: ``router(key, strict)``."""


def stable_hash(key: Any, strict: bool = False) -> int:
    """A non-negative hash of ``key`` that does not depend on the process; equal keys hash alike.

    With ``strict``, a key that has only Python's ``hash`` to go on (which may be the process's own) is refused
    with a ``TypeError``; without, that hash is used.
    """
    kind = type(key)
    if kind is int:
        number: int = key
        return number if number >= 0 else -number
    if kind is str:
        return crc32(key.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return crc32(key)
    if kind is tuple:
        h = 0x345678
        for part in key:
            h = (h * 1000003) ^ stable_hash(part, strict)
            h &= 0xFFFFFFFFFFFF
        return h
    router = _ROUTERS.get(kind)
    if router is None:
        router = _router_of(kind)
    return router(key, strict)


def route(key: Any, peers: int, *, strict: bool = False) -> int:
    """The worker index in ``range(peers)`` that records with ``key`` go to, the same in every process.

    A key of a type this module does not know routes by its ``__hash__``, which only one process is sure to
    agree with: ``strict=True`` refuses it instead (``TypeError``), as an exchange between processes does.
    """
    if type(key) is int and key >= 0:
        return key % peers
    return stable_hash(key, strict) % peers


# -- the routers of each type ----------------------------------------------------------------------------------

def _combine(tag: int, *parts: int) -> int:
    h = tag
    for part in parts:
        h = ((h * 1000003) ^ (part % _P)) & 0xFFFFFFFFFFFF
    return h


def _none(key: Any, strict: bool) -> int:
    return _NONE


def _integer(key: Any, strict: bool) -> int:
    number = operator.index(key)
    return number if number >= 0 else -number


def _ratio(numerator: int, denominator: int) -> int:
    """The hash of ``numerator / denominator`` (in lowest terms or not): the ``int`` it equals, if any."""
    if numerator % denominator == 0:
        return abs(numerator // denominator)
    if denominator % _P == 0:
        return _INF
    return abs(numerator) % _P * pow(denominator, -1, _P) % _P


def _float(key: Any, strict: bool) -> int:
    if math.isfinite(key):
        numerator, denominator = float.as_integer_ratio(key)
        if numerator < 0:
            numerator = -numerator
        if denominator == 1:
            return numerator
        # _ratio's, quicker: the denominator is 2 ** k, and 2 ** 61 is 1 modulo _P
        return numerator % _P * (1 << (1 - denominator.bit_length()) % 61) % _P
    return _NAN if key != key else _INF if key > 0 else _NEG_INF


def _complex(key: Any, strict: bool) -> int:
    if key.imag == 0:
        return stable_hash(key.real, strict)
    return _combine(0xC0, stable_hash(key.real, strict), stable_hash(key.imag, strict))


def _rational(key: Any, strict: bool) -> int:
    return _ratio(int(key.numerator), int(key.denominator))


def _real(key: Any, strict: bool) -> int:
    ratio = getattr(key, "as_integer_ratio", None)
    if ratio is None or not math.isfinite(key):
        return _float(float(key), strict)
    return _ratio(*ratio())


def _decimal(key: Any, strict: bool) -> int:
    if not key.is_finite():
        if key.is_snan():
            raise TypeError("cannot route a signaling NaN Decimal")
        return _NAN if key.is_nan() else _INF if key > 0 else _NEG_INF
    _, digits, exponent_ = key.as_tuple()
    exponent: int = exponent_
    if len(digits) + max(exponent, 0) > _DIGITS:
        raise ValueError(f"cannot route a Decimal key of more than {_DIGITS} digits: {key!s:.50}")
    coefficient = int("".join(map(str, digits)))
    if exponent >= 0:
        return abs(int(key))
    if coefficient == 0:
        return 0
    if -exponent < len(digits):        # (then 10 ** -exponent has no more digits than the key)
        return _ratio(coefficient, 10 ** -exponent)
    return coefficient % _P * pow(10, exponent, _P) % _P      # (not integral: 0 < coefficient < 10 ** -exponent)


def _str(key: Any, strict: bool) -> int:
    return crc32(str.__str__(key).encode("utf-8", "surrogatepass"))


def _bytes(key: Any, strict: bool) -> int:
    return crc32(key)


def _tuple(key: Any, strict: bool) -> int:
    return stable_hash(tuple(key), strict)


def _frozenset(key: Any, strict: bool) -> int:
    total = 0
    for item in key:
        h = stable_hash(item, strict)
        total += ((h ^ (h << 16) ^ 89869747) * 3644798167) & _MASK
    return _combine(0xF5, len(key), total)


def _range(key: Any, strict: bool) -> int:
    length = len(key)
    return _combine(0x5A, length, key.start if length else 0, key.step if length > 1 else 0)


def _microseconds(span: dt.timedelta) -> int:
    return (span.days * 86400 + span.seconds) * 1_000_000 + span.microseconds


def _date(key: Any, strict: bool) -> int:
    return _combine(0xDA, key.toordinal())


def _datetime(key: Any, strict: bool) -> int:
    # As Python's own hash: the wall time, less the UTC offset (at fold 0) if it has one.
    if key.fold:
        key = key.replace(fold=0)
    moment = ((key.toordinal() * 86400 + key.hour * 3600 + key.minute * 60 + key.second) * 1_000_000
              + key.microsecond)
    offset = key.utcoffset()
    if offset is not None:
        moment -= _microseconds(offset)
    return _combine(0xD7, moment)


def _time(key: Any, strict: bool) -> int:
    # As ``time``'s comparison: minutes less the UTC offset's whole minutes, if it has one.
    if key.fold:
        key = key.replace(fold=0)
    minutes = key.hour * 60 + key.minute
    offset = key.utcoffset()
    if offset is not None:
        minutes -= offset // dt.timedelta(minutes=1)
    return _combine(0x71, minutes, key.second, key.microsecond)


def _timedelta(key: Any, strict: bool) -> int:
    return _combine(0x7D, _microseconds(key))


def _timezone(key: Any, strict: bool) -> int:
    return _combine(0x72, _microseconds(key.utcoffset(None)))


def _enum(key: Any, strict: bool) -> int:
    name = key._name_
    return _combine(0xE0, stable_hash(type(key).__qualname__), stable_hash(key._value_ if name is None else name,
                                                                          strict))


def _uuid(key: Any, strict: bool) -> int:
    return _combine(0x00, key.int)


def _class(key: Any, strict: bool) -> int:
    return _combine(0xC1, stable_hash(f"{key.__module__}.{key.__qualname__}"))


def _own_route(method: Callable[[Any], Any]) -> Router:
    def routed(key: Any, strict: bool) -> int:
        value = method(key)
        if type(value) is type(key):
            raise TypeError(f"{_name(type(key))}.__aiotimely_route__ returned a {_name(type(key))} again: return "
                            "a str, int, tuple or other plain value")
        return stable_hash(value, strict)
    return routed


def _salted(key: Any, strict: bool) -> int:
    if strict:
        kind = type(key)
        raise TypeError(
            f"a key of type {_name(kind)} cannot route alike in every process: it has no hash but Python's, which "
            "may differ in each one (str and bytes hashes are salted, object's default hash is an address). Key "
            "by a str, int, tuple or another plain value instead (e.g. key=lambda r: (r.name, r.n)), or give "
            f"{kind.__qualname__} a method __aiotimely_route__(self) returning one (equal for equal keys)")
    return hash(key) & _MASK


def _name(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


# The routers of exact types, and of the types met so far (looked up by _router_of).
_BUILTIN: dict[type, Router] = {
    type(None): _none, bool: _integer, float: _float, complex: _complex, frozenset: _frozenset,
    range: _range, dt.date: _date, dt.datetime: _datetime, dt.time: _time, dt.timedelta: _timedelta,
    dt.timezone: _timezone,
}
_ROUTERS: dict[type, Router] = dict(_BUILTIN)
_TYPES_KEPT = 1024


def _router_of(kind: type) -> Router:
    """The router of ``kind``'s keys, remembered for next time."""
    router = _find_router(kind)
    if len(_ROUTERS) > _TYPES_KEPT:
        _ROUTERS.clear()
        _ROUTERS.update(_BUILTIN)
    _ROUTERS[kind] = router
    return router


def _loaded(module: str, *names: str) -> tuple[type, ...]:
    """Types of a module, if it is loaded (if not, no key can be one of them)."""
    found = sys.modules.get(module)
    return () if found is None else tuple(getattr(found, name) for name in names)


def _find_router(kind: type) -> Router:
    # A subclass of a value type routes as the value it equals; datetime before date, which it subclasses.
    for base, router in ((int, _integer), (float, _float), (complex, _complex), (str, _str), (bytes, _bytes),
                         (tuple, _tuple), (frozenset, _frozenset), (dt.datetime, _datetime), (dt.date, _date),
                         (dt.time, _time), (dt.timedelta, _timedelta)):
        if issubclass(kind, base):
            return router
    for types, router in ((_loaded("decimal", "Decimal"), _decimal), (_loaded("fractions", "Fraction"), _rational),
                          (_loaded("uuid", "UUID"), _uuid)):
        if issubclass(kind, types):
            return router
    ip = _loaded("ipaddress", "IPv4Interface", "IPv6Interface", "IPv4Network", "IPv6Network", "IPv4Address",
                 "IPv6Address")
    if issubclass(kind, ip[:2]):         # (an interface is an address too)
        return lambda key, strict: _combine(0x1F, key.version, int(key), key.network.prefixlen)
    if issubclass(kind, ip[2:4]):
        return lambda key, strict: _combine(0x11, key.version, int(key.network_address), key.prefixlen)
    if issubclass(kind, ip[4:]):
        return lambda key, strict: _combine(0x1A, key.version, int(key))
    paths = _loaded("pathlib", "PurePosixPath", "PureWindowsPath")
    if issubclass(kind, paths[:1]):
        return lambda key, strict: _combine(0x9A, _str(str(key), strict))
    if issubclass(kind, paths[1:]):     # (compared case-insensitively)
        return lambda key, strict: _combine(0x9B, _str(str(key).lower(), strict))
    if issubclass(kind, type):
        return _class
    method = getattr(kind, "__aiotimely_route__", None)
    if method is not None:
        return _own_route(method)
    if issubclass(kind, enum.Enum):
        return _enum
    numbers = sys.modules.get("numbers")
    if numbers is not None:
        for abc, router in ((numbers.Integral, _integer), (numbers.Rational, _rational), (numbers.Real, _real),
                            (numbers.Complex, _complex)):
            if issubclass(kind, abc):
                return router
    return _salted
