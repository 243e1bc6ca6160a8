"""Progress batches: the msgpack wire form, its round trip, and refusal of malformed input."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiotimely.errors import ProgressError
from aiotimely.progress import INT, Product, ProductType, Progcaster, ProgressBatch, Source, Target
from aiotimely.testing.strategies import int_times, products

PP = ProductType(INT, INT)
PPP = ProductType(PP, INT)
ints = int_times(2**64 - 1)
locations = st.one_of(st.builds(Source, st.integers(0, 1000), st.integers(0, 50)),
                      st.builds(Target, st.integers(0, 1000), st.integers(0, 50)))
diffs = st.integers(-(2**40), 2**40).filter(bool)


def batches(times):
    return st.builds(
        ProgressBatch,
        st.lists(st.integers(0, 100), min_size=1, max_size=4).map(tuple),
        st.integers(0, 255),
        st.integers(0, 2**32),
        st.lists(st.tuples(locations, times, diffs), max_size=20),
    )


@given(batches(ints))
def test_int_batches_round_trip(batch):
    assert ProgressBatch.decode(batch.encode()) == batch


@given(batches(products(depth=2, max_value=2**64 - 1)))
def test_nested_product_batches_round_trip(batch):
    decoded = ProgressBatch.decode(batch.encode(PPP), PPP)
    assert decoded == batch
    for _, t, _ in decoded.changes:
        assert type(t) is Product and type(t.outer) is Product


def test_encoding_is_compact():
    changes = [(Source(3, 0), 17, -1), (Target(4, 1), 18, 1)]
    data = ProgressBatch((0,), 1, 7, changes).encode()
    assert len(data) <= 20
    assert ProgressBatch.decode(data).changes == changes


@given(st.binary(max_size=200))
def test_decoding_random_bytes_never_crashes_unexpectedly(data):
    try:
        batch = ProgressBatch.decode(data, PP)
    except ProgressError:
        return
    assert isinstance(batch, ProgressBatch)  # well-formed by chance: it decoded to something valid


@pytest.mark.parametrize(
    "payload, complaint",
    [
        ([[0], 0, 0, [1, 0, 5]], "quadruples"),
        ([[0], -1, 0, []], "sender"),
        ([["x"], 0, 0, []], "scope path"),
        ([[0], 0, 0, [1, 0, -5, 1]], "change 0"),
        ([[0], 0, 0, [1, 0, 5, 0]], "change 0"),
        ([[0], 0, 0, [1, 0, "t", 1]], "change 0"),
        ([[0], 0, 0], "4-element"),
    ],
)
def test_malformed_batches_are_refused_saying_what_is_wrong(payload, complaint):
    with pytest.raises(ProgressError, match=complaint):
        ProgressBatch.decode(msgpack.packb(payload))


def test_product_time_of_the_wrong_shape_is_refused():
    with pytest.raises(ProgressError, match="pair"):
        ProgressBatch.decode(msgpack.packb([[0], 0, 0, [1, 0, [1, 2, 3], 1]]), PP)


def test_progcaster_numbers_batches_and_insists_on_fifo():
    a, b = Progcaster((0,), 0, 2), Progcaster((0,), 1, 2)
    first = a.send([(Source(1, 0), 0, -1)])
    second = a.send([(Source(1, 0), 1, 1)])
    assert (first.seq, second.seq) == (0, 1)
    with pytest.raises(ProgressError, match="#1 from worker 0 .* #0 was due .*lost or reordered"):
        b.receive(second)
    assert b.receive(first) == first.changes
    with pytest.raises(ProgressError, match="repeated"):
        b.receive(first)
    assert b.receive(second) == second.changes
    with pytest.raises(ProgressError, match="names worker 5"):
        b.receive(ProgressBatch((0,), 5, 0, []))
