"""script_source: records sent out of order and late, with the frontier moved on a schedule, exactly as scripted,
on one worker or several."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.testing import Advance, Script, run_dataflow, schedule, script_source
from aiotimely.testing.strategies import event_streams

EXAMPLES = settings(max_examples=15, deadline=None)


def observed(stream):
    """What an operator sees, activation by activation: ``("records", time, records)``, and ``("frontier", [...])``
    whenever its input frontier changed (from ``[0]``)."""
    seen = []

    @stream.unary_frontier(name="Observer")
    async def observer(input, output, cap):
        cap.drop()
        frontier = [0]
        async for _ in input.activations():
            for time, records in input.drain():
                seen.append(("records", time.time, list(records)))
            if list(input.frontier) != frontier:
                frontier = list(input.frontier)
                seen.append(("frontier", frontier))

    return observer, seen


def test_an_operator_sees_records_out_of_order_and_times_complete_as_scripted():
    script = Script([(5, "a"), (3, "b"), Advance(4), (4, "c"), Advance(6), (7, "d")])
    seen = []

    def build(scope):
        stream, log = observed(script_source(scope, script))
        seen.append(log)
        return stream

    run_dataflow(build)
    assert seen[0] == [
        ("records", 5, ["a"]),                  # 5 before 3, while nothing is complete (the frontier is [0])
        ("records", 3, ["b"]),
        ("frontier", [4]),                      # 3 completes before 4 gets its record
        ("records", 4, ["c"]),
        ("frontier", [6]),
        ("records", 7, ["d"]),
        ("frontier", []),                       # the source closes at the end of the script
    ]


def test_late_events_reach_a_windows_late_stream_at_the_frontier(aiotimely_run):
    script = Script([(1, "a"), (7, "b"), Advance(6), (4, "late"), (8, "c"), Advance(12), (3, "later")])
    assert script.late() == [(3, 4, "late", 6), (6, 3, "later", 12)]

    def build(scope):
        results, late = script_source(scope, script, mode="event").window(
            at.Tumbling(5), at.Agg.collect(lambda e: e[1]), time=lambda e: e[0], late="stream")
        return {"windows": results, "late": late}

    out = aiotimely_run(build)
    assert out["windows"] == {5: [((0, 5), ["a"])], 10: [((5, 10), ["b", "c"])]}
    assert out["late"] == {6: [(4, "late")], 12: [(3, "later")]}    # at their dataflow times, with their event times


def test_each_worker_sends_its_share_of_the_records_unless_told_otherwise():
    script = schedule([(t, t) for t in range(6)])
    shared = run_dataflow(lambda scope: script_source(scope, script), workers=2)
    assert shared == script.by_time()
    assert shared.workers[0].records() == [0, 2, 4] and shared.workers[1].records() == [1, 3, 5]
    one = run_dataflow(lambda scope: script_source(scope, script, split=False), workers=2)
    assert one == script.by_time() and one.workers[1] == {}


def test_schedule_shuffles_reproducibly_and_moves_the_frontier_as_early_as_it_can():
    events = [(0, "a"), (2, "b"), (1, "c"), (2, "d")]
    assert schedule(events) == Script([(0, "a"), Advance(1), (2, "b"), (1, "c"), Advance(2), (2, "d")])
    assert schedule(events, advance="end") == Script(events)
    shuffled = schedule(events, shuffle=3)
    assert shuffled == schedule(events, shuffle=3) and sorted(shuffled.events()) == sorted(events)
    assert shuffled.by_time() == {0: ["a"], 1: ["c"], 2: ["b", "d"]}


def test_scripts_that_cannot_be_played_are_refused_naming_the_step():
    late = Script([(3, "x"), Advance(5), (4, "late")])
    with pytest.raises(ValueError, match=r"script_source 'Script', step 2: cannot send 'late' at time 4: the "
                                         r"frontier was advanced to 5 at step 1 .*mode='event'"):
        run_dataflow(lambda scope: script_source(scope, late))
    backwards = [Advance(5), Advance(2)]
    with pytest.raises(ValueError, match="step 1: cannot advance the frontier to 2: it is at 5 already"):
        run_dataflow(lambda scope: script_source(scope, backwards, mode="event", name="S"))
    with pytest.raises(ValueError, match=r"step 0 \(\(-1, 'x'\)\): .*-1"):
        run_dataflow(lambda scope: script_source(scope, [(-1, "x")]))
    with pytest.raises(TypeError, match="step 1 of a Script is 'x'"):
        Script([(0, "a"), "x"])


@EXAMPLES
@given(event_streams(), st.sampled_from(["time", "timed"]))
def test_every_scripted_record_arrives_once_at_its_time(aiotimely_run, script, mode):
    def build(scope):
        stream = script_source(scope, script, mode=mode)
        return stream.settle() if mode == "timed" else stream

    assert aiotimely_run(build) == script.by_time()


@EXAMPLES
@given(event_streams(late=True))
def test_in_event_mode_a_record_behind_the_frontier_arrives_at_the_frontier(aiotimely_run, script):
    late = {step: frontier for step, _, _, frontier in script.late()}
    expected: dict = {}
    for step, event in enumerate(script.steps):
        if not isinstance(event, Advance):
            expected.setdefault(late.get(step, event[0]), []).append(event)
    assert aiotimely_run(lambda scope: script_source(scope, script, mode="event")) == expected
