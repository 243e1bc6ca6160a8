"""The joins' small parts on their own: the expiry index and the kept records of ``interval_join`` (records are
forgotten exactly when nothing they could meet can come), its matching against a nested loop, and ``join``'s
pending times (one capability per time, held until both inputs have passed it); and the error ``delay`` gives
for a function that returns something that is not a time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.dataflow.operators.join import ExpiryIndex, IntervalMatcher, KeptRecords, PendingTimes

EXAMPLES = settings(max_examples=60, deadline=None)

# -- interval_join: the expiry index and the kept records ------------------------------------------------------


def test_the_expiry_index_gives_the_keys_of_the_times_before_a_limit_earliest_first():
    index = ExpiryIndex()
    for time, key in [(1, "a"), (1, "b"), (3, "a"), (7, "c")]:
        index.add(time, key)
    assert list(index.pop_before(4)) == [{"a", "b"}, {"a"}]
    assert list(index.pop_before(4)) == []              # (gone)
    index.extend({9: {"d"}, 8: {"e"}})                  # restored in any order: kept sorted
    assert list(index.pop_before(100)) == [{"c"}, {"e"}, {"d"}]


def test_kept_records_are_forgotten_once_the_frontier_passes_every_time_they_could_meet():
    kept = KeptRecords({}, -1, 2)                       # a left at t meets rights up to t + 2; a right, lefts to t + 1
    kept.keep(0, "k", 3, ["l3"])
    kept.keep(1, "k", 3, ["r3"])
    kept.keep(0, "j", 4, ["l4"])
    kept.expire(5)                                      # 3 + 2 = 5 may still come: the left at 3 stays
    assert kept.by_key == {"k": [[(3, "l3")], []], "j": [[(4, "l4")], []]}
    kept.expire(6)
    assert kept.by_key == {"j": [[(4, "l4")], []]}      # a key with nothing kept is gone
    kept.expire(None)                                   # both inputs complete: nothing more to meet
    assert not kept and kept.by_key == {}


def test_kept_records_restored_from_a_snapshot_expire_like_those_kept_here():
    restored: dict[Any, Any] = {"k": [[(5, "l5"), (9, "l9")], [(2, "r2")]]}
    kept = KeptRecords(restored, 0, 1)
    kept.expire(7)
    assert restored == {"k": [[(9, "l9")], []]}


events = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1), st.sampled_from("ab")), max_size=25)


@EXAMPLES
@given(events=events, lower=st.integers(-3, 2), width=st.integers(0, 4))
def test_the_matcher_applied_time_by_time_with_expiry_pairs_what_a_nested_loop_pairs(events, lower, width):
    """Times applied in order, the kept records expired up to the next time each time: the pairs of a nested loop,
    each at the later of its two times."""
    upper = lower + width
    records = [(t, side, key, f"{'lr'[side]}{i}") for i, (t, side, key) in enumerate(events)]
    kept = KeptRecords({}, lower, upper)
    matcher = IntervalMatcher(kept, lower, upper, "interval_join")
    got = []
    times = sorted({t for t, *_ in records})
    for n, time in enumerate(times):
        lefts = [(k, v) for t, side, k, v in records if t == time and side == 0]
        rights = [(k, v) for t, side, k, v in records if t == time and side == 1]
        got.extend((time, pair) for pair in matcher.pairs(time, lefts, rights))
        kept.expire(times[n + 1] if n + 1 < len(times) else None)
    expected = [(max(tl, tr), (kl, (vl, vr))) for tl, sl, kl, vl in records for tr, sr, kr, vr in records
                if sl == 0 and sr == 1 and kl == kr and lower <= tr - tl <= upper]
    assert sorted(got) == sorted(expected)
    assert not kept


def test_the_matcher_refuses_records_that_are_not_pairs():
    matcher = IntervalMatcher(KeptRecords({}, 0, 1), 0, 1, "interval_join")
    with pytest.raises(TypeError, match="interval_join takes a keyed stream, of \\(key, value\\) pairs; got 7"):
        matcher.pairs(0, [7], [])


# -- join: the pending times -----------------------------------------------------------------------------------


class FakeRef:
    """The part of a received batch's :class:`aiotimely.CapabilityRef` the pending times use: time, delayed."""

    def __init__(self, held: dict[Any, int], time: Any) -> None:
        self.held, self.time = held, time

    def delayed(self, time: Any) -> FakeCapability:
        return FakeCapability(self.held, time)


class FakeCapability:
    def __init__(self, held: dict[Any, int], time: Any) -> None:
        self.held, self.time = held, time
        held[time] = held.get(time, 0) + 1

    def drop(self) -> None:
        self.held[self.time] -= 1
        if not self.held[self.time]:
            del self.held[self.time]


def test_pending_times_hold_one_capability_per_time_until_both_inputs_have_passed_it():
    held: dict[Any, int] = {}
    pending = PendingTimes()
    lefts, rights = pending.at(FakeRef(held, 1))  # type: ignore[arg-type]
    lefts["k"] = ["l"]
    pending.at(FakeRef(held, 1))  # type: ignore[arg-type]
    assert held == {1: 1}                         # the same time: no second capability
    pending.at(FakeRef(held, 2))[1]["k"] = ["r"]  # type: ignore[arg-type]
    assert held == {1: 1, 2: 1}
    left_frontier, right_frontier = 1, 2          # (int times: an input may still send at t >= its frontier)
    pending.forget_passed(lambda t: t >= left_frontier, lambda t: t >= right_frontier)
    assert lefts == {} and held == {1: 1, 2: 1}  # the right input passed 1: nothing will meet the lefts at 1
    left_frontier = 2
    pending.forget_passed(lambda t: t >= left_frontier, lambda t: t >= right_frontier)
    assert held == {2: 1} and pending            # both passed 1: forgotten; 2 is still open on both
    left_frontier = right_frontier = 3
    pending.forget_passed(lambda t: t >= left_frontier, lambda t: t >= right_frontier)
    assert held == {} and not pending


# -- delay: the function's new times are checked ---------------------------------------------------------------


def test_delay_refuses_a_new_time_that_is_not_a_time():
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).delay(lambda x, t: "later"))
        inp.send(1)

    with pytest.raises(at.CapabilityError, match="Delay: the function returned 'later' for time 0: "):
        at.execute(build, loop="asyncio")
