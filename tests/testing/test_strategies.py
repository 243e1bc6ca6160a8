"""The hypothesis strategies give what they promise: times of the asked nesting, true antichains, update batches,
and scripts whose frontier passes an event still to come only when late events are asked for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.testing import Advance
from aiotimely.testing.strategies import antichains, event_streams, int_times, products, times, updates


@given(products(depth=2, max_value=3), times(), int_times(2))
def test_times_have_the_nesting_asked_for(nested, plain, small):
    assert type(nested.outer) is at.Product and type(nested.outer.outer) is int and type(nested.inner) is int
    assert max(nested.outer.outer, nested.outer.inner, nested.inner) <= 3
    assert type(plain) is int and 0 <= small <= 2


@given(antichains(), antichains(int_times()))
def test_antichains_hold_incomparable_times_only(partial, total):
    elements = list(partial)
    assert all(a == b or not (a.less_equal(b) or b.less_equal(a)) for a in elements for b in elements)
    assert len(total) <= 1


@given(updates())
def test_updates_are_time_and_diff_pairs_a_mutable_antichain_takes(batch):
    frontier = at.MutableAntichain()
    frontier.update_iter(batch)
    assert all(type(t) is at.Product and -2 <= d <= 2 for t, d in batch)


@settings(max_examples=50)
@given(st.data(), st.booleans())
def test_event_streams_leave_events_behind_the_frontier_only_when_asked(data, late):
    script = data.draw(event_streams(max_time=5, late=late))
    frontier = 0
    for step in script.steps:
        if isinstance(step, Advance):
            assert step.time > frontier
            frontier = step.time
        else:
            assert 0 <= step[0] <= 5
    assert late or script.late() == []
