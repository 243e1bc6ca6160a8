"""Columnar windows over event-time columns against the record path's window on the same rows and a plain-Python
model, on 1 and 3 workers and 2 processes: tumbling and sliding, keyed and not, lateness and each late policy;
results appear exactly when the frontier reaches end + lateness; errors name their place."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402

from .windowing import EVENTS, events, model, record_window  # noqa: E402

AGGS = (at.Agg.count(), at.Agg.sum("x"), pl.col("x").max().alias("x_max"))
"""The built-ins and a Polars expression: results ``(k, window_start, window_end, count, x_sum, x_max)``."""

timed_events = st.lists(
    st.tuples(st.integers(0, 16), st.lists(st.tuples(st.integers(0, 3), st.integers(-8, 8), st.integers(-9, 9)),
                                            max_size=8)),
    max_size=7).map(lambda items: sorted(((d, [(k, d + dt, x) for k, dt, x in rows]) for d, rows in items),
                                         key=lambda item: item[0]))
specs = st.sampled_from([at.Tumbling(5), at.Tumbling(4, offset=1), at.Sliding(6, 2), at.Sliding(3, 5)])
SETTINGS = settings(max_examples=30, deadline=None)


def both(timed, spec, lateness, keyed=True):
    """The columnar window and the record path's, on the same rows."""
    def build(scope):
        rows = events(scope, timed)
        results, late = rows.window(spec, *AGGS, key="k" if keyed else None, time="ts", lateness=lateness,
                                    late="stream")
        expected, expected_late = record_window(rows.records(), spec, lateness, keyed=keyed)
        return {"columnar": results.records(), "late": late.records(), "record": expected,
                "record_late": expected_late}
    return build


@SETTINGS
@given(timed=timed_events, spec=specs, lateness=st.integers(0, 4), workers=st.sampled_from([1, 3]))
def test_keyed_windows_equal_the_record_paths_and_the_model(timed, spec, lateness, workers):
    got = run_dataflow(both(timed, spec, lateness), workers=workers)
    results, late = model(timed, spec, lateness)
    assert got["columnar"] == results
    assert got["columnar"] == dict(got["record"].items())
    assert got["late"] == late
    assert got["late"] == dict(got["record_late"].items())


@SETTINGS
@given(timed=timed_events, spec=specs, lateness=st.integers(0, 3), workers=st.sampled_from([1, 3]))
def test_windows_without_a_key_are_one_per_window_on_worker_0(timed, spec, lateness, workers):
    got = run_dataflow(both(timed, spec, lateness, keyed=False), workers=workers)
    results, late = model(timed, spec, lateness, keyed=False)
    assert got["columnar"] == results == dict(got["record"].items())
    assert got["late"] == late
    assert all(w == 0 for w in got["columnar"].workers if got["columnar"].workers[w])


@SETTINGS
@given(timed=timed_events, workers=st.sampled_from([1, 3]))
def test_without_a_time_column_the_dataflow_time_is_the_event_time(timed, workers):
    def build(scope):
        rows = events(scope, timed)
        return {"columnar": rows.window(at.Tumbling(5), *AGGS, key="k").records(),
                "record": record_window(rows.records().map(lambda r: (r[0], -1, r[2])), at.Tumbling(5), 0,
                                        dataflow_time=True)[0]}

    flat = [(d, [(k, d, x) for k, _, x in rows]) for d, rows in timed]
    got = run_dataflow(build, workers=workers)
    assert got["columnar"] == model(flat, at.Tumbling(5), 0)[0] == dict(got["record"].items())


def test_late_count_sends_the_number_of_late_rows_per_time_and_worker():
    timed = [(0, [(1, 3, 1), (2, 9, 1)]), (10, [(1, 4, 1), (1, 2, 1), (2, 11, 1)]), (12, [(2, 1, 5)])]

    def build(scope):
        results, counts = events(scope, timed).window(at.Tumbling(5), at.Agg.count(), key="k", time="ts",
                                                      late="count")
        assert counts.schema == pl.Schema({"late": pl.Int64})
        return {"results": results.records(), "counts": counts.records()}

    for workers in (1, 3):
        got = run_dataflow(build, workers=workers)
        per_time = {t: sum(n for (n,) in rows) for t, rows in got["counts"].items()}
        assert per_time == {10: 2, 12: 1}                       # 4 and 2 (d=10), 1 (d=12): windows [0, 5) closed
        assert got["results"] == {5: [(1, 0, 5, 1)], 10: [(2, 5, 10, 1)], 15: [(2, 10, 15, 1)]}


def test_late_drop_returns_one_stream_and_drops_the_late_rows():
    timed = [(0, [(1, 3, 1)]), (10, [(1, 4, 7), (1, 12, 2)])]

    def build(scope):
        results = events(scope, timed).window(at.Tumbling(5), at.Agg.sum("x"), key="k", time="ts")
        assert results.schema == pl.Schema({"k": pl.Int64, "window_start": pl.Int64, "window_end": pl.Int64,
                                            "x_sum": pl.Int64})
        return results.records()

    assert run_dataflow(build) == {5: [(1, 0, 5, 1)], 15: [(1, 10, 15, 2)]}


def test_any_polars_aggregation_is_exact_over_the_windows_rows():
    timed = [(0, [(1, t, x) for t, x in [(0, 5), (1, 1), (2, 9), (3, 1)]]), (2, [(1, 4, 4), (2, 4, 8)])]

    def build(scope):
        return events(scope, timed).window(
            at.Tumbling(5), pl.col("x").median().alias("median"), pl.col("x").n_unique().alias("distinct"),
            pl.col("x").sort().alias("sorted"), (pl.col("x") * pl.col("ts")).sum().alias("weighted"),
            key="k", time="ts").records()

    for workers in (1, 3):
        assert run_dataflow(build, workers=workers) == {
            5: [(1, 0, 5, 4.0, 4, [1, 1, 4, 5, 9], 0 + 1 + 18 + 3 + 16), (2, 0, 5, 8.0, 1, [8], 32)]}


def test_several_key_columns_and_a_string_key():
    frame = pl.DataFrame({"user": ["a", "b", "a", "a"], "page": ["x", "x", "y", "x"], "ts": [1, 2, 3, 7]})

    def build(scope):
        mine = [frame] if scope.worker.index == 0 else []
        return (at.from_arrow(scope, mine, schema=frame.schema)
                .window(at.Tumbling(5), at.Agg.count(), key=["user", "page"], time="ts").records())

    for workers in (1, 3):
        assert run_dataflow(build, workers=workers) == {
            5: [("a", "x", 0, 5, 1), ("a", "y", 0, 5, 1), ("b", "x", 0, 5, 1)], 10: [("a", "x", 5, 10, 1)]}


# -- exactly when the frontier passes -------------------------------------------------------------------------

def test_a_window_is_sent_exactly_when_the_frontier_reaches_end_plus_lateness():
    sent: list = []
    late: list = []

    async def build(worker):
        inp = at.InputHandle()

        def make(scope):
            results, lates = inp.to_stream(scope).columnar(EVENTS).window(
                at.Tumbling(5), at.Agg.count(), key="k", time="ts", lateness=2, late="stream")
            results.inspect_batch(lambda t, df: sent.append((t, df.rows())))
            lates.inspect_batch(lambda t, df: late.append((t, df.rows())))
            return results.probe()

        probe = worker.dataflow(make)

        async def settle():
            for _ in range(30):
                await worker.step()
            return probe.frontier

        inp.send_batch([(1, 3, 1), (1, 6, 1)])
        inp.advance_to(6)
        assert await settle() == at.Antichain([6]) and sent == []        # [0, 5) waits for 5 + 2
        inp.send_batch([(1, 4, 1)])                                       # at 6: still on time for [0, 5)
        inp.advance_to(7)
        assert await settle() == at.Antichain([7])
        assert sent == [(7, [(1, 0, 5, 2)])]                              # sent at 7, once the frontier is at 7
        inp.send_batch([(1, 2, 1)])                                       # at 7: late
        inp.advance_to(11)
        assert await settle() == at.Antichain([11])                       # [5, 10) holds 12, nothing earlier
        assert late == [(7, [(1, 2, 1)])] and len(sent) == 1
        inp.advance_to(12)
        assert await settle() == at.Antichain([12])
        assert sent[1:] == [(12, [(1, 5, 10, 1)])]
        inp.advance_to(40)
        assert await settle() == at.Antichain([40])                       # nothing held once the windows went
        inp.close()

    at.execute(build, loop="asyncio")


# -- errors name their place -----------------------------------------------------------------------------------

@pytest.mark.parametrize("make, error", [
    (lambda s: s.window(at.Tumbling(5), at.Agg.count(), time="nope"), "there is no event-time column 'nope'"),
    (lambda s: s.with_columns(pl.col("ts").cast(pl.Float64)).window(at.Tumbling(5), at.Agg.count(), time="ts"),
     "the event-time column 'ts' is Float64, not an integer type"),
    (lambda s: s.window(at.Tumbling(5), pl.col("nope").sum(), time="ts"), "ColumnNotFoundError"),
    (lambda s: s.window(at.Tumbling(5), at.Agg.count(), pl.len().alias("count"), time="ts"), "Duplicate"),
    (lambda s: s.window(at.Tumbling(5), at.Agg.count(), key="nope", time="ts"), "there is no key column 'nope'"),
])
def test_a_bad_window_is_refused_as_the_dataflow_is_built(make, error):
    def windows(scope):
        return make(events(scope, [(0, [(1, 2, 3)])])).records()

    with pytest.raises(at.GraphError) as info:
        run_dataflow(windows)
    assert "operator 'Window' in dataflow 'windows' on worker 0" in str(info.value)
    assert error in str(info.value)


@pytest.mark.parametrize("agg, error", [
    (lambda r: r, "an aggregation is a Polars expression"),
    (at.Agg.fold(0, lambda a, r: a + 1), "runs Python per record"),
    (at.Agg.sum(lambda r: r[2]), "takes a column's name, e.g. at.Agg.sum(\"x\")"),
])
def test_an_aggregation_that_is_not_columnar_is_refused_naming_the_operator(agg, error):
    def windows(scope):
        return events(scope, [(0, [(1, 2, 3)])]).window(at.Tumbling(5), agg, time="ts").records()

    with pytest.raises(TypeError) as info:
        run_dataflow(windows)
    assert "operator 'Window' in dataflow 'windows' on worker 0" in str(info.value) and error in str(info.value)


@pytest.mark.parametrize("fn, error", [
    (lambda df: df.with_columns(pl.col("ts").cast(pl.String)), "the event-time column 'ts' is String"),
    (lambda df: df.with_columns(ts=pl.lit(None, dtype=pl.Int64)), "the event-time column 'ts' has 1 null"),
    (lambda df: df.drop("ts"), "there is no event-time column 'ts'"),
])
def test_a_bad_event_time_found_on_a_batch_fails_the_dataflow_naming_the_operator_and_time(fn, error):
    def windows(scope):
        return (events(scope, [(3, [(1, 2, 3)])]).map_batches(fn)
                .window(at.Tumbling(5), at.Agg.count(), time="ts", name="Spans").records())

    with pytest.raises(at.DataflowError) as info:
        run_dataflow(windows)
    message = str(info.value)
    assert "'Spans'" in message and "'windows'" in message and "time 3" in message and error in message


# -- between processes ------------------------------------------------------------------------------------------

TWO_PROCESSES = [(d, [((i * 7 + d) % 5, d + (i % 9) - 4, i) for i in range(12)]) for d in range(0, 40, 3)]


def two_processes(scope):
    timed = TWO_PROCESSES if scope.worker.index == 0 else []
    rows = events(scope, timed)
    results, late = rows.window(at.Sliding(6, 3), *AGGS, key="k", time="ts", lateness=1, late="stream")
    expected, expected_late = record_window(rows.records(), at.Sliding(6, 3), 1)
    return {"columnar": results.records(), "late": late.records(), "record": expected, "record_late": expected_late}


def test_windows_on_two_processes_equal_the_record_paths_and_the_model():
    got = run_processes(two_processes, processes=2, workers=2)
    results, late = model(TWO_PROCESSES, at.Sliding(6, 3), 1)
    assert got["columnar"] == results == dict(got["record"].items())
    assert got["late"] == late == dict(got["record_late"].items())
    assert len([w for w, out in got["columnar"].workers.items() if out]) > 1     # the keys spread over workers


def stepped(timed, spec, lateness, workers):
    """Each worker feeds its share of ``timed`` by hand, the dataflow stepped after each time (so windows close
    between times, as the frontier moves): the results and late rows as ``(time, row)``."""
    got: list = []
    lates: list = []

    async def build(worker):
        inp = at.InputHandle()

        def make(scope):
            results, late = inp.to_stream(scope).columnar(EVENTS).window(
                spec, *AGGS, key="k", time="ts", lateness=lateness, late="stream")
            results.inspect_batch(lambda t, df: got.extend((t, r) for r in df.rows()))
            late.inspect_batch(lambda t, df: lates.extend((t, r) for r in df.rows()))

        worker.dataflow(make)
        for d, rows in timed:
            inp.advance_to(d)
            mine = rows[worker.index::worker.peers]
            if mine:
                inp.send_batch(mine)
            for _ in range(4):
                await worker.step()
        inp.close()

    at.execute(build, workers=workers, loop="asyncio")
    return got, lates


def by_time(pairs):
    out: dict = {}
    for t, r in pairs:
        out.setdefault(t, []).append(r)
    return {t: sorted(rs) for t, rs in out.items()}


@settings(max_examples=60, deadline=None)
@given(timed=timed_events, spec=specs, lateness=st.integers(0, 4), workers=st.sampled_from([1, 3]))
@example(timed=[(0, [(1, 3, 1)]), (4, [(1, 4, 1)])], spec=at.Tumbling(5), lateness=0, workers=1)
@example(timed=[(0, [(1, 3, 1)]), (6, [(1, 4, 1)])], spec=at.Tumbling(5), lateness=2, workers=3)
def test_windows_closed_as_the_frontier_moves_equal_the_model(timed, spec, lateness, workers):
    got, lates = stepped(timed, spec, lateness, workers)
    results, late = model(timed, spec, lateness)
    assert by_time(got) == results
    assert by_time(lates) == late
