"""run_dataflow and Outputs: a dataflow's records by time, merged over workers, its frontier, and a run that does
not end failing with what it collected instead of hanging."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at
from aiotimely.progress import INT, ProductType
from aiotimely.testing import DataflowTimeout, Outputs, run_dataflow, run_dataflow_async


def test_outputs_merge_every_workers_records_by_time(workers):
    def build(scope):
        return at.to_stream(range(4), scope).delay(lambda x, t: x % 2).exchange(lambda x: x)

    out = run_dataflow(build, workers=workers)
    assert out == {0: [0, 2] * workers, 1: [1, 3] * workers}
    assert out.complete() and out.frontier == at.Antichain()
    assert sorted(out.workers) == list(range(workers))
    if workers == 2:                                  # exchanged by value: even records on worker 0, odd on 1
        assert out.workers[0] == {0: [0, 0, 2, 2]} and out.workers[1] == {1: [1, 1, 3, 3]}
    assert out.pairs() == [(t, x) for t in (0, 1) for x in sorted([t, t + 2] * workers)]
    assert out.counts() == {0: 2 * workers, 1: 2 * workers}


def test_records_of_a_time_compare_as_a_multiset_and_mismatches_are_explained():
    out = Outputs({3: ["b", "a", "a"], 1: [("x", 1)], 2: []})
    assert list(out) == [1, 3] and out[3] == ["a", "a", "b"]               # times in order, records sorted
    assert out == {1: [("x", 1)], 3: ["a", "b", "a"]} and out != {1: [("x", 1)], 3: ["a", "b"]}
    assert out.explain({1: [("x", 1)], 3: ["a", "b", "a"]}) == []
    assert out.explain({1: [("x", 2)], 3: ["a", "b"], 4: ["c"]}) == [
        "outputs differ at 3 times:",
        "  time 1:",
        "    got:      [('x', 1)]",
        "    expected: [('x', 2)]",
        "    missing:  [('x', 2)]",
        "    extra:    [('x', 1)]",
        "  time 3:",
        "    got:      ['a', 'a', 'b']",
        "    expected: ['a', 'b']",
        "    extra:    ['a']",
        "  time 4:",
        "    got:      (nothing)",
        "    expected: ['c']",
        "all outputs, by time:",
        "  1: [('x', 1)]",
        "  3: ['a', 'a', 'b']",
        "  frontier: [] (complete)",
    ]
    assert Outputs({0: [1, "a", None]})[0] == [None, 1, "a"]              # mixed types: by type name, then repr


def test_product_times_and_several_named_streams():
    def build(scope):
        numbers = at.to_stream([3, 5], scope)
        return {"numbers": numbers, "timed": numbers.map(lambda x: x - 2).delay(lambda x, t: at.Product(x, 2 * x))}

    out = run_dataflow(build, timestamp=ProductType(INT, INT))
    assert out["numbers"] == {at.Product(0, 0): [3, 5]}
    assert out["timed"] == {at.Product(1, 2): [1], at.Product(3, 6): [3]}
    assert list(out["timed"]) == [at.Product(1, 2), at.Product(3, 6)]


def test_a_run_that_does_not_complete_fails_with_what_it_collected_and_where_the_frontier_stopped():
    async def stuck(output, cap):
        output.session(cap).give("early")
        cap.downgrade(3)
        await asyncio.Event().wait()                  # never sends again, never drops its capability

    with pytest.raises(DataflowTimeout) as info:
        run_dataflow(lambda scope: at.source(scope, "Stuck", stuck).map(str.upper), workers=2, timeout=0.5)
    assert str(info.value).splitlines() == [
        "the dataflow of test_a_run_that_does_not_complete_fails_with_what_it_collected_and_where_the_frontier_"
        "stopped.<locals>.<lambda> on 2 workers did not complete within 0.5 s (a source that never closes? an "
        "input left open?)",
        "collected so far:",
        "  0: ['EARLY', 'EARLY']",
        "  frontier: [3]",
    ]


def test_errors_of_the_dataflow_and_of_the_build_function_reach_the_test():
    with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
        run_dataflow(lambda scope: at.to_stream([0], scope).map(lambda x: 1 // x))
    with pytest.raises(TypeError, match="must return the stream to collect, or a dict of named streams"):
        run_dataflow(lambda scope: None)


@pytest.mark.asyncio
async def test_on_the_loop_of_an_async_test():
    out = await run_dataflow_async(lambda scope: at.to_stream("ab", scope).map(str.upper), workers=2)
    assert out == {0: ["A", "A", "B", "B"]}
    with pytest.raises(RuntimeError, match="use 'await run_dataflow_async"):
        run_dataflow(lambda scope: at.to_stream("ab", scope))
