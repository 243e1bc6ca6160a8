"""Columnar session windows against the record path's sessions on the same rows and a plain-Python model of its
rule (merging only into sessions still open at the time applied), on 1 and 3 workers, fed at once and stepped;
frontier exactness; the 2-process run."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402

from .test_windows import AGGS, by_time, stepped, timed_events  # noqa: E402
from .windowing import events, record_window, sessions_model  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None)
gaps = st.integers(1, 6)


def both(timed, gap, lateness):
    def build(scope):
        rows = events(scope, timed)
        results, late = rows.window(at.Sessions(gap), *AGGS, key="k", time="ts", lateness=lateness, late="stream")
        expected, expected_late = record_window(rows.records(), at.Sessions(gap), lateness)
        return {"columnar": results.records(), "late": late.records(), "record": expected,
                "record_late": expected_late}
    return build


@SETTINGS
@given(timed=timed_events, gap=gaps, lateness=st.integers(0, 4), workers=st.sampled_from([1, 3]))
def test_sessions_equal_the_record_paths_and_the_model(timed, gap, lateness, workers):
    got = run_dataflow(both(timed, gap, lateness), workers=workers)
    results, late = sessions_model(timed, gap, lateness)
    assert got["columnar"] == results
    assert got["columnar"] == dict(got["record"].items())
    assert got["late"] == late == dict(got["record_late"].items())


@SETTINGS
@given(timed=timed_events, gap=gaps, lateness=st.integers(0, 4), workers=st.sampled_from([1, 3]))
@example(timed=[(0, [(1, 1, 1), (1, 6, 2)]), (1, [(1, 4, 4)]), (4, [(1, 3, 16)]), (9, [(1, 2, 8)])],
         gap=3, lateness=0, workers=1)
def test_sessions_closed_as_the_frontier_moves_equal_the_model(timed, gap, lateness, workers):
    got, lates = stepped(timed, at.Sessions(gap), lateness, workers)
    results, late = sessions_model(timed, gap, lateness)
    assert by_time(got) == results
    assert by_time(lates) == late


def test_a_bridging_row_merges_open_sessions_but_not_a_complete_one():
    """Sessions(3): [1, 4) and [6, 9) at d=0; 4 at d=1 bridges into [4, 9) only (4 is not before 4); at d=4, 3
    joins [4, 9) but not [1, 4), complete at 4; at d=9, 2 is late (the record path's own example)."""
    timed = [(0, [(1, 1, 1), (1, 6, 2)]), (1, [(1, 4, 4)]), (4, [(1, 3, 16)]), (9, [(1, 2, 8)])]
    for workers in (1, 3):
        got, lates = stepped(timed, at.Sessions(3), 0, workers)
        assert sorted(got) == [(4, (1, 1, 4, 1, 1, 1)), (9, (1, 3, 9, 3, 22, 16))]
        assert lates == [(9, (1, 2, 8))]


TWO_PROCESSES = [(d, [((i * 7 + d) % 5, d + (i % 9) - 4, i) for i in range(12)]) for d in range(0, 60, 7)]


def two_processes(scope):
    timed = TWO_PROCESSES if scope.worker.index == 0 else []
    rows = events(scope, timed)
    results, late = rows.window(at.Sessions(3), *AGGS, key="k", time="ts", lateness=1, late="stream")
    return {"columnar": results.records(), "late": late.records()}


def test_sessions_on_two_processes_equal_the_model():
    got = run_processes(two_processes, processes=2, workers=2)
    results, late = sessions_model(TWO_PROCESSES, 3, 1)
    assert got["columnar"] == results
    assert got["late"] == late
