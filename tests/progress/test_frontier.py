"""ChangeBatch, Antichain and MutableAntichain, including checks against brute force."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiotimely.progress import INT, Antichain, ChangeBatch, MutableAntichain, Product, ProductType
from aiotimely.testing.strategies import int_times, updates
from aiotimely.testing.strategies import products as product_times

PP = ProductType(INT, INT)
products = product_times(max_value=4)


def minimal(times, le):
    """The minimal elements of a finite set, by definition."""
    times = set(times)
    return {t for t in times if not any(u != t and le(u, t) for u in times)}


# -- ChangeBatch -----------------------------------------------------------------


def test_change_batch_compacts_and_drops_zeros():
    batch = ChangeBatch()
    assert batch.is_empty()
    batch.update("a", 2)
    batch.update("b", 1)
    batch.update("a", -2)
    assert not batch.is_empty()
    assert batch.drain() == [("b", 1)]
    assert batch.is_empty() and batch.drain() == []


def test_change_batch_extend_drain_into_and_zero_updates():
    batch = ChangeBatch([("x", 1), ("y", -3)])
    batch.update("z", 0)
    assert len(batch) == 2 and batch.get("z") == 0
    other = ChangeBatch([("x", -1)])
    batch.drain_into(other)
    assert batch.is_empty()
    assert sorted(other.drain()) == [("y", -3)]
    empty = ChangeBatch()
    ChangeBatch([("q", 4)]).drain_into(empty)
    assert empty.drain() == [("q", 4)]


@given(updates(int_times(5), max_diff=3, max_size=None))
def test_change_batch_equals_summing_by_hand(updates):
    batch = ChangeBatch()
    expected = Counter()
    for item, diff in updates:
        batch.update(item, diff)
        expected[item] += diff
    drained = dict(batch.drain())
    assert drained == {k: v for k, v in expected.items() if v}
    assert 0 not in drained.values()


# -- Antichain -----------------------------------------------------------------


def test_empty_antichain_is_complete():
    empty = Antichain()
    assert not empty and len(empty) == 0
    assert not empty.less_equal(0) and not empty.less_than(0)
    assert empty.dominates([]) and not empty.dominates([3])
    assert Antichain([1]).dominates(empty)
    assert empty == Antichain()


def test_antichain_keeps_minimal_elements_only():
    chain = Antichain()
    assert chain.insert(Product(2, 2))
    assert chain.insert(Product(1, 3))   # incomparable: kept
    assert not chain.insert(Product(2, 3))  # dominated
    assert chain.insert(Product(1, 1))   # evicts both
    assert list(chain) == [Product(1, 1)]
    chain = Antichain([Product(0, 5), Product(5, 0)])
    assert chain.less_equal(Product(5, 5)) and not chain.less_equal(Product(4, 4))
    assert chain.less_than(Product(0, 6)) and not chain.less_than(Product(0, 5))
    assert Antichain([Product(5, 0), Product(0, 5)]) == chain
    assert Antichain([Product(0, 0)]).dominates(chain)
    assert not chain.dominates(Antichain([Product(0, 0)]))


@given(st.lists(products, max_size=12))
def test_antichain_is_the_minimal_set(times):
    chain = Antichain(times, less_equal=PP.less_equal)
    assert set(chain) == minimal(times, PP.less_equal)
    for t in [Product(a, b) for a in range(6) for b in range(6)]:
        assert chain.less_equal(t) == any(PP.less_equal(u, t) for u in times)


# -- MutableAntichain -------------------------------------------------------------


def test_mutable_antichain_reports_exact_changes():
    ma = MutableAntichain()
    assert ma.update_iter([(3, 1)]) == [(3, 1)]
    assert ma.update_iter([(5, 1)]) == []          # above the frontier: no change
    assert ma.update_iter([(3, 1)]) == []          # more of a frontier element
    assert ma.update_iter([(3, -1)]) == []
    assert sorted(ma.update_iter([(3, -1)])) == [(3, -1), (5, 1)]
    assert ma.frontier == Antichain([5]) and ma.less_equal(7) and not ma.less_equal(4)
    assert ma.update_iter([(5, -1)]) == [(5, -1)]
    assert ma.is_empty() and ma.frontier == Antichain()


def test_negative_counts_are_invisible_until_cancelled():
    ma = MutableAntichain()
    assert ma.update_iter([(2, -1)]) == []         # a retraction that overtook its increment
    assert ma.count_for(2) == -1 and ma.is_empty()
    assert ma.update_iter([(4, 1)]) == [(4, 1)]
    assert ma.update_iter([(2, 1)]) == []          # the increment arrives: count 0, still invisible
    assert ma.frontier == Antichain([4])
    assert sorted(ma.update_iter([(2, 2)])) == [(2, 1), (4, -1)]
    assert ma.frontier == Antichain([2])


def test_partially_ordered_frontier_has_several_elements():
    ma = MutableAntichain()
    changes = ma.update_iter([(Product(1, 0), 1), (Product(0, 1), 1), (Product(1, 1), 1)])
    assert sorted(changes) == [(Product(0, 1), 1), (Product(1, 0), 1)]
    assert ma.update_iter([(Product(0, 1), -1)]) == [(Product(0, 1), -1)]
    assert ma.frontier == Antichain([Product(1, 0)])


@given(st.lists(updates(products, max_diff=2, max_size=6), max_size=12),
       st.booleans())
def test_mutable_antichain_matches_brute_force(batches, one_by_one):
    ma = MutableAntichain(less_equal=PP.less_equal)
    counts = Counter()
    frontier = set()
    for batch in batches:
        if one_by_one:
            changes = [c for t, d in batch for c in ma.update(t, d)]
        else:
            changes = ma.update_iter(batch)
        for t, d in batch:
            counts[t] += d
        expected = minimal([t for t, c in counts.items() if c > 0], PP.less_equal)
        assert set(ma.frontier) == expected
        # the reported changes turn the old frontier into the new one
        net = Counter()
        for t, d in changes:
            net[t] += d
        assert {t for t, d in net.items() if d} == frontier ^ expected
        assert all(net[t] == 1 for t in expected - frontier)
        assert all(net[t] == -1 for t in frontier - expected)
        frontier = expected
        for t in counts:
            assert ma.count_for(t) == counts[t]


@pytest.mark.parametrize("how", ["update_iter", "update", "update_total"])
@given(batches=st.lists(updates(int_times(6), max_diff=2, max_size=6), max_size=12))
def test_totally_ordered_specialisation_matches_brute_force(how, batches):
    ma = MutableAntichain(less_equal=INT.less_equal, totally_ordered=True)
    counts = Counter()
    frontier: list[int] = []
    for batch in batches:
        if how == "update_iter":
            changes = ma.update_iter(batch)
        elif how == "update":
            changes = [c for t, d in batch for c in ma.update(t, d)]
        else:
            moved = ma.update_total([(t, d) for t, d in batch if d])   # (it takes no zero diffs)
        for t, d in batch:
            counts[t] += d
        positive = [t for t, c in counts.items() if c > 0]
        expected = [min(positive)] if positive else []
        assert list(ma.frontier) == expected
        if how == "update_total":
            assert moved or expected == frontier   # (True if it may have moved: never False when it did)
        else:
            net = Counter()
            for t, d in changes:
                net[t] += d
            assert {t: d for t, d in net.items() if d} == {**{t: -1 for t in frontier if t not in expected},
                                                           **{t: 1 for t in expected if t not in frontier}}
        frontier = expected
