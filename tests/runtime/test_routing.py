"""``route``: equal keys go to the same worker, whatever their type, in every process; a key whose only hash is
the process's own is refused where records leave the process."""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import math
import uuid
from decimal import Decimal
from fractions import Fraction
from pathlib import PurePosixPath, PureWindowsPath
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.comm.routing import route, stable_hash

PEERS = st.integers(1, 64)


def alike(a, b, peers) -> bool:
    assert a == b and hash(a) == hash(b), (a, b)   # (the premise: the two would be one dict key)
    return route(a, peers) == route(b, peers) and stable_hash(a) == stable_hash(b)


class Color(enum.Enum):
    RED = 1
    GREEN = (2, "g")


class Perm(enum.Flag):
    R = 1
    W = 2


class Level(enum.IntEnum):
    LOW = 1


class Pair(NamedTuple):
    a: object
    b: object


# -- numbers: every type of one value routes as that value ------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.integers(-2**80, 2**80), PEERS)
def test_an_int_routes_like_the_equal_bool_float_decimal_fraction_and_complex(n, peers):
    for same in (Decimal(n), Fraction(n), Decimal(n).scaleb(2).scaleb(-2), Pair(n, 1)[0]):
        assert alike(n, same, peers)
    if abs(n) < 2**53:
        assert alike(n, float(n), peers) and alike(n, complex(float(n)), peers)
    if n in (0, 1):
        assert alike(n, bool(n), peers)
    if n == 1:
        assert alike(n, Level.LOW, peers)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False), PEERS)
def test_a_float_routes_like_the_equal_fraction_and_decimal(x, peers):
    for same in (Decimal(x), complex(x, 0), float(repr(x))):
        assert alike(x, same, peers)
    if math.isfinite(x):
        assert alike(x, Fraction(x), peers)
        if x == int(x):
            assert alike(x, int(x), peers)


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**30, 10**30), st.integers(0, 60), st.integers(0, 60), PEERS)
def test_a_decimal_fraction_routes_like_the_equal_decimal(n, twos, fives, peers):
    q = Fraction(n, 2**twos * 5**fives)
    k = max(twos, fives)
    digits = Decimal(f"{n * 2**(k - twos) * 5**(k - fives)}e-{k}")     # (exact: a string is not rounded)
    assert alike(q, digits, peers)
    if q.denominator < 2**53 and float(q) == q:
        assert alike(q, float(q), peers) and alike(digits, float(q), peers)


def test_non_finite_numbers_route_alike_and_nan_at_all():
    assert alike(math.inf, Decimal("Infinity"), 7) and alike(-math.inf, Decimal("-Infinity"), 7)
    assert alike(math.inf, complex(math.inf, 0), 7)
    assert route(math.nan, 7) in range(7) and route(Decimal("NaN"), 7) in range(7)
    assert alike(Decimal("1.10"), Decimal("1.1"), 7) and alike(Decimal("-0"), 0, 7) and alike(Decimal("5.00"), 5, 7)
    assert alike(Decimal("0E-1000000"), 0, 7) and route(Decimal("1E-999999999"), 7) in range(7)


# -- dates and times: equal instants route alike across timezones ----------------------------------------------

ZONES = st.builds(lambda minutes: dt.timezone(dt.timedelta(minutes=minutes)), st.integers(-23 * 60, 23 * 60))


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 1, 1), timezones=ZONES), ZONES,
       PEERS)
def test_an_aware_datetime_routes_like_the_same_instant_in_another_zone(moment, zone, peers):
    assert alike(moment, moment.astimezone(zone), peers)
    assert alike(moment, moment.astimezone(dt.timezone.utc).replace(fold=1), peers)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(), st.timedeltas(), PEERS)
def test_naive_dates_times_and_timedeltas_route_as_their_values(moment, span, peers):
    assert alike(moment, dt.datetime.fromisoformat(moment.isoformat()), peers)
    assert alike(moment, moment.replace(fold=1), peers)
    assert alike(moment.date(), dt.date.fromordinal(moment.toordinal()), peers)
    assert alike(moment.time(), dt.time.fromisoformat(moment.time().isoformat()), peers)
    assert alike(span, dt.timedelta(microseconds=span // dt.timedelta(microseconds=1)), peers)


def test_aware_times_route_as_the_instant_they_are():
    one = dt.time(1, 30, tzinfo=dt.timezone.utc)
    assert alike(one, dt.time(3, 0, tzinfo=dt.timezone(dt.timedelta(hours=1, minutes=30))), 5)
    assert alike(dt.timezone(dt.timedelta(hours=2)), dt.timezone(dt.timedelta(hours=2), "two"), 5)


# -- sets, tuples, and the rest of the standard library ---------------------------------------------------------

ATOMS = st.one_of(st.text(max_size=3), st.integers(-5, 5), st.none(), st.booleans(), st.binary(max_size=3),
                  st.dates(), st.sampled_from(list(Color) + [Perm.R | Perm.W, Level.LOW]))
NESTED = st.recursive(ATOMS, lambda inner: st.one_of(st.lists(inner, max_size=4).map(tuple),
                                                     st.frozensets(inner, max_size=4)), max_leaves=12)


def rebuilt(key):
    """An equal copy of ``key``, built another way: frozensets in another order, ints as floats."""
    if type(key) is tuple:
        return tuple(rebuilt(part) for part in key)
    if type(key) is frozenset:
        return frozenset(reversed([rebuilt(part) for part in key]))
    if type(key) is int:
        return float(key)
    if type(key) is bool:
        return int(key)
    return key


@settings(max_examples=300, deadline=None)
@given(NESTED, PEERS)
def test_nested_tuples_and_frozensets_route_as_their_values_in_any_order(key, peers):
    assert alike(key, rebuilt(key), peers)


@settings(max_examples=100, deadline=None)
@given(st.uuids(), st.ip_addresses(), PEERS)
def test_uuids_and_ip_addresses_route_as_their_values(u, ip, peers):
    assert alike(u, uuid.UUID(str(u)), peers)
    assert alike(ip, ipaddress.ip_address(str(ip)), peers)
    net = ipaddress.ip_network(f"{ip}/{ip.max_prefixlen}")
    assert alike(net, ipaddress.ip_network(str(net)), peers)
    face = ipaddress.ip_interface(f"{ip}/{ip.max_prefixlen - 1}")
    assert alike(face, ipaddress.ip_interface(str(face)), peers)


def test_paths_ranges_enum_members_and_classes_route_as_their_values():
    assert alike(PurePosixPath("a//b/"), PurePosixPath("a/b"), 11)
    assert alike(PureWindowsPath("C:/Data/X"), PureWindowsPath("c:\\data\\x"), 11)
    assert alike(range(0), range(4, 4), 11) and alike(range(1, 2, 5), range(1, 3, 7), 11)
    assert alike(Color.GREEN, Color((2, "g")), 11) and alike(Perm.R | Perm.W, Perm(3), 11)
    assert alike(Level.LOW, 1, 11) and alike(int, int, 11)


# -- keys that cannot route alike in every process --------------------------------------------------------------

class Opaque:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)      # salted per process


class Routed(Opaque):
    def __aiotimely_route__(self) -> object:
        return ("routed", self.name)


def test_a_key_with_the_process_own_hash_is_refused_where_it_must_route_alike_in_every_process():
    for key in (Opaque("x"), object(), (1, Opaque("x")), frozenset([Opaque("x")])):
        assert route(key, 4) == route(key, 4)           # within one process its own hash will do
        with pytest.raises(TypeError, match=r"Opaque|object") as caught:
            route(key, 4, strict=True)
        assert "cannot route alike in every process" in str(caught.value)
        assert "__aiotimely_route__" in str(caught.value) and "str, int" in str(caught.value)


def test_a_class_routes_by_its_aiotimely_route_where_it_defines_one():
    assert route(Routed("x"), 1009, strict=True) == route(("routed", "x"), 1009)
    assert route((Routed("x"), 2), 1009, strict=True) == route((("routed", "x"), 2), 1009)

    class Loop(Opaque):
        def __aiotimely_route__(self) -> object:
            return self

    with pytest.raises(TypeError, match="__aiotimely_route__ returned"):
        route(Loop("x"), 4)


def test_an_exchange_between_processes_refuses_such_a_key_and_one_within_a_process_routes_it(run):
    from aiotimely.dataflow.channels import ExchangePusher

    class Remote:             # (an endpoint in another process: not a local Mailbox)
        def push(self, item):
            pass

    class Worker:
        logging = None
        index = 0

    pusher = ExchangePusher(lambda r: r, [Remote(), Remote()], Worker(), (0, 0))
    pusher(0, ["a", 1, (dt.date(2024, 1, 1), Color.RED)])
    with pytest.raises(TypeError, match="type tests.runtime.test_routing.Opaque cannot route"):
        pusher(0, ["a", Opaque("b")])

    def build(worker):
        seen = []
        worker.dataflow(lambda s: at.to_stream([Opaque(w) for w in "abcabc"] if worker.index == 0 else [], s)
                        .exchange(lambda x: x).inspect(lambda x: seen.append(x.name)))
        return seen

    seen = run(build, workers=3)
    assert sorted(x for xs in seen for x in xs) == sorted("abcabc")
    assert all(len(set(xs)) == len(xs) // 2 for xs in seen)     # each key on one worker
