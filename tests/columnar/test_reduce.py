"""Keyed reduce on columns: per key and dataflow time against the record path's ``reduce`` and a model; per key
and event time against a model, the record path's window of size 1 and the columnar window; on 1 and 3
workers."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

from .test_windows import stepped, timed_events  # noqa: E402
from .windowing import events  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None)


def per_dataflow_time(timed):
    """``(k, count, sum of x)`` per key, by dataflow time."""
    out: dict = {}
    for d, rows in timed:
        for k, _, x in rows:
            c, s = out.setdefault(d, {}).get(k, (0, 0))
            out[d][k] = (c + 1, s + x)
    return {d: sorted((k, c, s) for k, (c, s) in per.items()) for d, per in out.items()}


@SETTINGS
@given(timed=timed_events, workers=st.sampled_from([1, 3]))
def test_a_reduce_per_dataflow_time_equals_the_record_paths_reduce(timed, workers):
    def build(scope):
        rows = events(scope, timed)
        columnar = rows.reduce(at.Agg.count(), pl.col("x").sum().alias("total"), key="k")
        assert columnar.schema == pl.Schema({"k": pl.Int64, "count": pl.UInt32, "total": pl.Int64})
        record = (rows.records().map(lambda r: (r[0], (1, r[2])))
                  .reduce(lambda a, b: (a[0] + b[0], a[1] + b[1])).map(lambda kv: (kv[0], *kv[1])))
        return {"columnar": columnar.records(), "record": record}

    got = run_dataflow(build, workers=workers)
    assert got["columnar"] == per_dataflow_time(timed) == dict(got["record"].items())


def per_event_time(timed, lateness):
    """``(k, ts, count, sum)`` at ``ts + lateness``; rows whose ``ts`` is at or before ``d - lateness - 1`` late."""
    out: dict = {}
    late: dict = {}
    for d, rows in timed:
        for k, ts, x in rows:
            if ts + 1 <= d - lateness:
                late.setdefault(d, []).append((k, ts, x))
                continue
            c, s = out.setdefault(ts + lateness, {}).get((k, ts), (0, 0))
            out[ts + lateness][(k, ts)] = (c + 1, s + x)
    return ({t: sorted((k, ts, c, s) for (k, ts), (c, s) in per.items()) for t, per in out.items()},
            {d: sorted(rs) for d, rs in late.items()})


@SETTINGS
@given(timed=timed_events, lateness=st.integers(0, 3), workers=st.sampled_from([1, 3]))
def test_a_reduce_per_event_time_is_a_window_of_one_unit_sent_at_its_time(timed, lateness, workers):
    def build(scope):
        rows = events(scope, timed)
        results, late = rows.reduce(at.Agg.count(), at.Agg.sum("x"), key="k", time="ts", lateness=lateness,
                                    late="stream")
        assert results.schema == pl.Schema({"k": pl.Int64, "ts": pl.Int64, "count": pl.UInt32,
                                            "x_sum": pl.Int64})
        windows = rows.window(at.Tumbling(1), at.Agg.count(), at.Agg.sum("x"), key="k", time="ts",
                              lateness=lateness, name="Ones")
        return {"reduce": results.records(), "late": late.records(), "windows": windows.records()}

    got = run_dataflow(build, workers=workers)
    results, late = per_event_time(timed, lateness)
    assert got["reduce"] == results
    assert got["late"] == late
    shifted = {t - 1: [(k, s, c, x) for k, s, _, c, x in rows] for t, rows in got["windows"].items()}
    assert got["reduce"] == shifted                        # a window [t, t + 1), one unit earlier


def test_with_event_times_equal_to_dataflow_times_both_meanings_agree():
    timed = [(d, [(d % 3, d, d * 10), (1, d, 1)]) for d in range(6)]

    def build(scope):
        rows = events(scope, timed)
        return {"dataflow": rows.reduce(pl.col("x").sum(), key="k").records(),
                "event": rows.reduce(pl.col("x").sum(), key="k", time="ts").select("k", "x").records()}

    got = run_dataflow(build, workers=3)
    assert got["dataflow"] == got["event"]


def test_a_reduce_per_dataflow_time_refuses_lateness():
    def build(scope):
        return events(scope, [(0, [(1, 2, 3)])]).reduce(at.Agg.count(), key="k", lateness=2).records()

    with pytest.raises(ValueError, match="operator 'Reduce' in dataflow 'build'.*give time="):
        run_dataflow(build)


def test_stepped_windows_of_one_unit_are_a_reduce_by_event_time_one_unit_later():
    timed = [(0, [(1, 3, 1), (2, 0, 5)]), (3, [(1, 3, 2), (1, 1, 9)]), (4, [(2, 4, 1)])]
    got, late = stepped(timed, at.Tumbling(1), 0, 1)
    assert sorted(got) == [(1, (2, 0, 1, 1, 5, 5)), (4, (1, 3, 4, 2, 3, 2)), (5, (2, 4, 5, 1, 1, 1))]
    assert late == [(3, (1, 1, 9))]
