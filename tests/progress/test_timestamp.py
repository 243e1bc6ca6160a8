"""Timestamps and path summaries: partial orders, total orders, composition, overflow."""

from __future__ import annotations

import pytest
from hypothesis import given

from aiotimely.progress import INT, INT_MAX, Product, ProductType, ProtocolType, Refinement, timestamp_type
from aiotimely.progress.timestamp import followed_by, less_equal, less_than, results_in
from aiotimely.testing.strategies import products as product_times

products = product_times(max_value=6)
PP = ProductType(INT, INT)
PPP = ProductType(PP, INT)
nested = product_times(depth=2, max_value=6)


def test_int_summary_adds_a_constant_and_stops_at_the_bound():
    assert INT.results_in(3, 4) == 7
    assert INT.results_in(0, INT_MAX) == INT_MAX
    assert INT.results_in(1, INT_MAX) is None
    assert INT.followed_by(INT_MAX, 1) is None
    assert results_in(2, 5) == 7 and results_in(1, INT_MAX) is None
    assert followed_by(2, 3) == 5


def test_int_time_and_summary_validation_names_the_value():
    INT.check_time(0)
    with pytest.raises(ValueError, match="-1"):
        INT.check_time(-1)
    with pytest.raises(TypeError, match="str"):
        INT.check_time("3")
    with pytest.raises(TypeError):
        INT.check_time(True)  # bool is not an int timestamp
    with pytest.raises(ValueError, match="-2"):
        INT.check_summary(-2)


def test_product_partial_order_has_incomparable_pairs():
    a, b = Product(1, 2), Product(2, 1)
    assert not a.less_equal(b) and not b.less_equal(a)
    assert not less_than(a, b) and not less_than(b, a)
    assert a < b  # the lexicographic total order still sorts them
    assert Product(1, 1).less_than(Product(1, 2))
    assert not Product(1, 1).less_than(Product(1, 1))
    assert Product(1, 1).less_equal(Product(1, 1))
    assert PP.less_equal(Product(0, 3), Product(1, 3))
    assert not PP.less_equal(Product(0, 4), Product(1, 3))


@given(products, products)
def test_lexicographic_order_extends_the_product_order(a, b):
    if PP.less_equal(a, b):
        assert a <= b
    assert PP.less_equal(a, b) == less_equal(a, b) == a.less_equal(b)
    assert (a == b) == (PP.less_equal(a, b) and PP.less_equal(b, a))


@given(nested, nested)
def test_nested_products_are_ordered_componentwise(a, b):
    expected = a.outer.outer <= b.outer.outer and a.outer.inner <= b.outer.inner and a.inner <= b.inner
    assert PPP.less_equal(a, b) == expected == less_equal(a, b)
    if expected:
        assert a <= b


@given(products, products, products)
def test_product_summaries_compose_like_applying_twice(s1, s2, t):
    composed = PP.followed_by(s1, s2)
    assert composed == s1.followed_by(s2)
    assert PP.results_in(composed, t) == PP.results_in(s2, PP.results_in(s1, t)) == s2.results_in(s1.results_in(t))
    # summaries only advance time
    assert PP.less_equal(t, PP.results_in(s1, t))


def test_product_summary_is_none_if_either_coordinate_overflows():
    assert PP.results_in(Product(1, 0), Product(INT_MAX, 0)) is None
    assert PP.results_in(Product(0, 1), Product(0, INT_MAX)) is None
    assert Product(0, 1).results_in(Product(0, INT_MAX)) is None
    assert PPP.results_in(Product(Product(0, 1), 0), Product(Product(0, INT_MAX), 0)) is None


def test_minimum_identity_and_advancing_summaries():
    assert PP.minimum == Product(0, 0) and PPP.minimum == Product(Product(0, 0), 0)
    assert PP.identity == Product(0, 0)
    assert not PP.advances(Product(0, 0))
    assert PP.advances(Product(0, 1)) and PP.advances(Product(1, 0))
    assert not INT.advances(0) and INT.advances(1)


def test_products_are_hashable_and_cheap_tuples():
    assert len({Product(1, 2), Product(1, 2), Product(2, 1)}) == 2
    assert sorted([Product(2, 0), Product(1, 5), Product(1, 2)]) == [Product(1, 2), Product(1, 5), Product(2, 0)]
    assert repr(Product(1, Product(2, 3))) == "Product(1, Product(2, 3))"


def test_product_type_checks_and_wire_encoding_round_trip():
    PPP.check_time(Product(Product(1, 2), 3))
    with pytest.raises(TypeError):
        PPP.check_time(Product(1, 3))
    t = Product(Product(1, 2), 3)
    assert PPP.decode(PPP.encode(t)) == t
    assert type(PPP.decode(PPP.encode(t)).outer) is Product
    with pytest.raises(TypeError):
        PP.decode([1, 2, 3])
    with pytest.raises(ValueError):
        PP.decode([1, -2])


class Lamport:
    """A user timestamp: a totally ordered counter with a 'max with' summary."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def less_equal(self, other: Lamport) -> bool:
        return self.n <= other.n

    def __lt__(self, other: Lamport) -> bool:
        return self.n < other.n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lamport) and self.n == other.n

    def __hash__(self) -> int:
        return hash(self.n)

    def __repr__(self) -> str:
        return f"L{self.n}"

    @classmethod
    def minimum(cls) -> Lamport:
        return cls(0)

    def to_tuple(self):
        return (self.n,)

    @classmethod
    def from_tuple(cls, data):
        return cls(data[0])

    class Summary:
        def __init__(self, add: int = 0) -> None:
            self.add = add

        def results_in(self, t: Lamport) -> Lamport:
            return Lamport(t.n + self.add)

        def followed_by(self, other):
            return Lamport.Summary(self.add + other.add)

        def less_equal(self, other) -> bool:
            return self.add <= other.add


def test_protocol_timestamps_are_supported():
    ttype = timestamp_type(Lamport)
    assert isinstance(ttype, ProtocolType)
    assert ttype.minimum == Lamport(0)
    assert ttype.results_in(Lamport.Summary(2), Lamport(3)) == Lamport(5)
    assert not ttype.advances(ttype.identity) and ttype.advances(Lamport.Summary(1))
    assert less_equal(Lamport(1), Lamport(2))
    assert ttype.decode(ttype.encode(Lamport(7))) == Lamport(7)
    product = ProductType(ttype, INT)
    assert product.less_equal(Product(Lamport(1), 0), Product(Lamport(1), 2))


def test_classes_missing_the_protocol_are_refused_with_what_is_missing():
    class NotATime:
        pass

    with pytest.raises(TypeError, match="less_equal.*minimum.*Summary.*__lt__"):
        timestamp_type(NotATime)
    with pytest.raises(TypeError, match="component types"):
        timestamp_type(Product)


def test_refinements_enter_and_leave():
    it = Refinement.iterative(INT)
    assert it.inner == PP
    assert it.to_inner(5) == Product(5, 0)
    assert it.to_outer(Product(5, 9)) == 5
    assert it.summarize(Product(2, 7)) == 2
    region = Refinement.region(PP)
    assert region.to_inner(Product(1, 2)) == Product(1, 2) == region.to_outer(Product(1, 2))
    deeper = Refinement.iterative(PP)
    assert deeper.to_inner(Product(1, 2)) == Product(Product(1, 2), 0)
