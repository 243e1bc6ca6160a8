"""Windows over event time, closed by the frontier: every window kind and aggregation against a plain-Python model,
on random out-of-order streams with late records, on 1 and 3 workers and across processes; lateness policies;
windows per round inside an iteration; a crash mid-window and a resume; errors that name the operator."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at

from ..cluster.harness import launch, lines_after_prefix
from ..cluster.programs import window_events
from ..recovery.common import numbers_source, run, running_sums

# -- the model ----------------------------------------------------------------------------------

AGGS = {  # name -> (aggregation over (key, t, value) records, the same over a plain list of values)
    "count": (lambda: at.Agg.count(), len),
    "sum": (lambda: at.Agg.sum(lambda r: r[2]), sum),
    "min": (lambda: at.Agg.min(key=lambda r: r[2]), lambda vs: min(vs)),
    "max": (lambda: at.Agg.max(key=lambda r: r[2]), lambda vs: max(vs)),
    "mean": (lambda: at.Agg.mean(lambda r: r[2]), lambda vs: sum(vs) / len(vs)),
    "collect": (lambda: at.Agg.collect(lambda r: r[2]), sorted),
    "reduce": (lambda: at.Agg.reduce(lambda a, b: a if a[2] >= b[2] else b), lambda vs: max(vs)),
    "fold": (lambda: at.Agg.fold(0, lambda acc, r: acc + r[2] * r[2], merge=lambda a, b: a + b),
             lambda vs: sum(v * v for v in vs)),
}


def normal(name, value):
    """An aggregation's result as the model gives it (records reduced to their values, lists sorted)."""
    if name in ("min", "max", "reduce"):
        return value[2]
    if name == "collect":
        return sorted(value)
    return value


def model(records, spec, lateness):
    """Windows by the rules, in plain Python: ``records`` are ``(d, key, t, value)``, applied by dataflow time
    ``d``. Returns ``({(out time, key, (start, end)): values}, [(d, record) late])``."""
    windows: dict = {}
    late = []
    if isinstance(spec, at.Sessions):
        gap = spec.gap
        sessions: dict = {}                       # key -> [[start, end, values]]
        for d in sorted({r[0] for r in records}):
            for key in sorted({r[1] for r in records if r[0] == d}):
                new = []
                for _, k, t, v in (r for r in records if r[0] == d and r[1] == key):
                    if t + gap + lateness <= d:   # its own session would be complete already
                        late.append((d, (k, t, v)))
                    else:
                        new.append([t, t + gap, [v]])
                olds = sessions.setdefault(key, [])
                still_open = [s for s in olds if s[1] + lateness > d]
                merged: list = []
                for s in sorted(still_open + new, key=lambda s: s[0]):   # the union of overlapping intervals
                    if merged and s[0] < merged[-1][1]:
                        merged[-1][1] = max(merged[-1][1], s[1])
                        merged[-1][2] = merged[-1][2] + s[2]
                    else:
                        merged.append([s[0], s[1], list(s[2])])
                sessions[key] = [s for s in olds if s[1] + lateness <= d] + merged
        for key, ss in sessions.items():
            for s, e, vs in ss:
                windows[(e + lateness, key, (s, e))] = vs
        return windows, late
    size = spec.size
    for d, k, t, v in records:
        missed = False
        for s in spec.starts(t):
            if s + size + lateness <= d:
                missed = True
            else:
                windows.setdefault((s + size + lateness, k, (s, s + size)), []).append(v)
        if missed:
            late.append((d, (k, t, v)))
    return windows, late


def test_a_time_falls_in_the_tumbling_and_sliding_windows_that_hold_it():
    assert at.Sliding(10, 5).starts(12) == [5, 10]
    assert at.Sliding(10, 3).starts(12) == [3, 6, 9, 12]
    assert at.Sliding(4, 10).starts(12) == [10] and at.Sliding(4, 10).starts(15) == []
    assert at.Sliding(6, 4).starts(2) == [0] and at.Sliding(6, 4).starts(4) == [0, 4]
    assert at.Sliding(6, 4, offset=1).starts(0) == [-3] and at.Sliding(3, 3).starts(5) == [3]
    assert at.Tumbling(10, offset=3).starts(12) == [3] and at.Tumbling(10).starts(-1) == [-10]


# -- feeding random plans ---------------------------------------------------------------------------

def plans(workers):
    """Per worker: steps of (advance, [(key, event time offset, value)]): out of order, some late."""
    record = st.tuples(st.integers(0, 3), st.integers(-12, 12), st.integers(0, 9))
    step = st.tuples(st.integers(0, 4), st.lists(record, max_size=4))
    return st.lists(st.lists(step, max_size=8), min_size=workers, max_size=workers)


def flatten(plans_):
    records = []
    for plan in plans_:
        now = 0
        for advance, batch in plan:
            now += advance
            records.extend((now, k, now + dt, v) for k, dt, v in batch)
    return records


def run_windows(plans_, make, workers, timed=False, step=True):
    """Feed each worker its plan (interleaving the workers, stepping after each batch, or with ``step=False`` all
    at once before the dataflow runs), build ``make(stream)`` -> (results, late) and return what each sends as
    ``(time, record)``: the same, whatever the interleaving."""
    got: list = []
    lates: list = []

    async def build(worker):
        inp = at.InputHandle()

        def dataflow(scope):
            results, late = make(inp.to_stream(scope))
            results.inspect_time(lambda t, r: got.append((t, r)))
            if late is not None:
                late.inspect_time(lambda t, r: lates.append((t, r)))

        worker.dataflow(dataflow)
        now = 0
        for advance, batch in plans_[worker.index]:
            now += advance
            inp.advance_to(now)
            for k, dt, v in batch:
                if timed:
                    inp.send_at(now + max(dt, 0), (k, now + max(dt, 0), v))
                else:
                    inp.send((k, now + dt, v))
            if step:
                await worker.step()
        inp.close()

    at.execute(build, workers=workers, loop="asyncio")
    return got, lates


SPECS = [at.Tumbling(5), at.Tumbling(4, offset=1), at.Sliding(6, 2), at.Sliding(3, 4), at.Sessions(3)]


@settings(max_examples=40, deadline=None)
@given(st.data())
@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_windows_match_the_model_with_out_of_order_and_late_records(spec, workers, data):
    plans_ = data.draw(plans(workers))
    lateness = data.draw(st.sampled_from([0, 0, 3]))
    names = data.draw(st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=3, unique=True))
    early = data.draw(st.booleans())
    got, lates = run_windows(plans_, lambda s: s.window(
        spec, tuple(AGGS[n][0]() for n in names), key=lambda r: r[0], time=lambda r: r[1], lateness=lateness,
        late="stream", early=early), workers, step=data.draw(st.booleans()))
    windows, late = model(flatten(plans_), spec, lateness)
    if early:                  # partial results come before end + lateness; the final ones are the model's
        assert all(t < w[1] + lateness for t, (_, w, _) in got if t != w[1] + lateness)
        got = [(t, (k, w, value)) for t, (k, w, value) in got if t == w[1] + lateness]
    expected = sorted((t, k, w, tuple(AGGS[n][1](vs) for n in names)) for (t, k, w), vs in windows.items())
    normalised = [(t, k, w, tuple(normal(n, x) for n, x in zip(names, value, strict=True))) for t, (k, w, value) in got]
    assert sorted(normalised) == expected
    assert sorted(lates) == sorted(late)


@settings(max_examples=25, deadline=None)
@given(st.data())
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("spec", SPECS[:4], ids=repr)
def test_windows_combined_before_the_exchange_match_the_model(spec, keyed, data):
    """Each worker folds a batch's records into one accumulator per key and window, merged after the exchange:
    the same windows as the model (late records dropped), on 3 workers."""
    plans_ = data.draw(plans(3))
    lateness = data.draw(st.sampled_from([0, 0, 3]))
    names = data.draw(st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=3, unique=True))
    early = data.draw(st.booleans())
    key = (lambda r: r[0]) if keyed else None
    got, _ = run_windows(plans_, lambda s: (s.window(
        spec, tuple(AGGS[n][0]() for n in names), key=key, time=lambda r: r[1], lateness=lateness, early=early,
        combine=True), None), 3, step=data.draw(st.booleans()))
    records = flatten(plans_) if keyed else [(d, 0, t, v) for d, _, t, v in flatten(plans_)]
    windows, _ = model(records, spec, lateness)
    got = [(t, r if keyed else (0, *r)) for t, r in got]
    if early:
        got = [(t, (k, w, value)) for t, (k, w, value) in got if t == w[1] + lateness]
    expected = sorted((t, k, w, tuple(AGGS[n][1](vs) for n in names)) for (t, k, w), vs in windows.items())
    normalised = [(t, k, w, tuple(normal(n, x) for n, x in zip(names, value, strict=True))) for t, (k, w, value) in got]
    assert sorted(normalised) == expected


def operator_names(build_windows, workers):
    """The names of the operators ``build_windows(stream)`` builds (from timely's logging stream)."""
    names: list = []

    def build(worker):
        worker.log_register().insert("timely", lambda _t, events: names.extend(
            e.name for _, _, e in events if isinstance(e, at.lowlevel.OperatesEvent)))
        worker.dataflow(lambda s: build_windows(at.to_stream([("a", 1), ("b", 7)], s)))

    at.execute(build, workers=workers)
    return names


def test_windows_without_a_key_combine_before_the_exchange_by_default():
    tumbling = at.Tumbling(5)
    assert "Window.combine" in operator_names(lambda s: s.window(tumbling, at.Agg.count()), 2)
    assert "Window.combine" not in operator_names(lambda s: s.window(tumbling, at.Agg.count()), 1)   # one worker
    assert "Window.combine" not in operator_names(                 # keyed: only when asked (combine=True)
        lambda s: s.window(tumbling, at.Agg.count(), key=lambda r: r[0]), 2)
    assert "Window.combine" in operator_names(
        lambda s: s.window(tumbling, at.Agg.count(), key=lambda r: r[0], combine=True), 2)
    assert "Window.combine" not in operator_names(                 # a user's fold: its accumulators are the user's
        lambda s: s.window(tumbling, at.Agg.fold(0, lambda a, r: a + 1, merge=lambda a, b: a + b)), 2)


@pytest.mark.parametrize("make, why", [
    (lambda s: s.window(at.Sessions(3), at.Agg.count(), combine=True), "session windows"),
    (lambda s: s.window(at.Tumbling(3), at.Agg.count(), late="count", combine=True), "reported late"),
    (lambda s: s.window(at.Tumbling(3), at.Agg.fold(0, lambda a, r: a + 1), combine=True), "cannot merge"),
    (lambda s: s.window(at.Tumbling(3), at.Agg.count(), time="processing", combine=True), "wall clock"),
])
def test_a_combine_that_cannot_be_done_is_refused(make, why):
    with pytest.raises(ValueError, match=f"cannot combine before the exchange: .*{why}"):
        at.execute(lambda worker: worker.dataflow(lambda s: make(at.to_stream([1], s))), workers=2)


@settings(max_examples=25, deadline=None)
@given(st.data())
@pytest.mark.parametrize("spec", [at.Tumbling(5), at.Sliding(6, 4), at.Sessions(4)], ids=repr)
def test_timed_records_are_never_late_and_close_with_the_frontier(spec, data):
    plans_ = data.draw(plans(3))
    got, lates = run_windows(plans_, lambda s: s.window(spec, at.Agg.sum(lambda r: r[2]), key=lambda r: r[0],
                                                        timed=True, late="count"), 3, timed=True)
    records = [(d, k, max(t, d), v) for d, k, t, v in flatten(plans_)]
    windows, late = model(records, spec, 0)
    assert late == [] and lates == []
    assert sorted((t, k, w, value) for t, (k, w, value) in got) == \
        sorted((t, k, w, sum(vs)) for (t, k, w), vs in windows.items())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 20), max_size=5)), max_size=12))
def test_by_default_the_dataflow_time_is_the_event_time(steps):
    """Without ``time=``, each record's window is its dataflow time's: nothing is ever late, and an unkeyed window
    gives ``((start, end), value)`` from one worker."""
    got: list = []

    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).window(at.Sliding(4, 2), at.Agg.count())
                        .inspect_time(lambda t, r: got.append((t, r))))
        now = 0
        for advance, values in steps:
            now += advance
            inp.advance_to(now)
            inp.send_batch(values)

    at.execute(build, workers=2, loop="asyncio")
    expected: Counter = Counter()
    now = 0
    for advance, values in steps:
        now += advance
        for s in at.Sliding(4, 2).starts(now):
            expected[(s + 4, (s, s + 4))] += 2 * len(values)       # both workers send them
    assert sorted(got) == sorted((t, (w, n)) for (t, w), n in expected.items() if n)


# -- the workload of the benchmark ------------------------------------------------------------------------

def test_the_benchmark_workload_is_one_line_and_matches_plain_python():
    """win_plain.py's workload in small: tumbling count+sum per key of (key, event time, value) events."""
    events = window_events(4000, keys=13)
    table: dict = {}
    for k, t, v in events:
        c, s = table.get((k, t - t % 100), (0, 0))
        table[(k, t - t % 100)] = (c + 1, s + v)
    got: dict = {}

    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: inp.to_stream(scope).window(
            at.Tumbling(100), (at.Agg.count(), at.Agg.sum(lambda e: e[2])), key=lambda e: e[0], time=lambda e: e[1])
            .inspect(lambda r: got.__setitem__((r[0], r[1][0]), r[2])))
        mine = events[worker.index::worker.peers]
        for i in range(0, len(mine), 256):
            inp.advance_to(i)                # events i.. have event times >= i: none is late
            inp.send_batch(mine[i:i + 256])

    at.execute(build, workers=3, loop="asyncio")
    assert got == table


def test_windows_across_two_processes():
    code, out, err = launch("tests/cluster/programs.py:windows", 2, 2)
    assert code == 0, err
    table: dict = {}
    for k, t, v in window_events():
        c, s = table.get((k, t - t % 100), (0, 0))
        table[(k, t - t % 100)] = (c + 1, s + v)
    lines = [line.split() for line in lines_after_prefix(out) if line.startswith("window ")]
    assert len(lines) == len(table)                       # each window once, from the worker that owns its key
    assert {(k, int(s)): (int(c), int(v)) for _, k, s, c, v in lines} == table


# -- lateness ------------------------------------------------------------------------------------------

LATE_PLAN = [(0, [("a", 1, 1), ("a", 7, 2)]), (10, [("a", 3, 4), ("a", 12, 8)]),   # t=3 at d=10: [0,5) is
             (2, [("a", 9, 16), ("a", 4, 32)])]                                      # complete at d=5+lateness


def late_run(late, lateness=0, early=False):
    got: list = []

    def build(worker):
        inp = at.InputHandle()

        def make(scope):
            made = inp.to_stream(scope).window(at.Tumbling(5), at.Agg.sum(lambda r: r[2]), key=lambda r: r[0],
                                               time=lambda r: r[1], lateness=lateness, late=late,
                                               early=early)
            results, side = made if isinstance(made, tuple) else (made, None)
            results.inspect_time(lambda t, r: got.append(("result", t, r)))
            if side is not None:
                side.inspect_time(lambda t, r: got.append(("late", t, r)))

        worker.dataflow(make)
        now = 0
        for advance, batch in LATE_PLAN:
            now += advance
            inp.advance_to(now)
            inp.send_batch(batch)

    at.execute(build, loop="asyncio")
    return sorted(got, key=repr)


def test_late_records_are_dropped_counted_or_sent_on():
    # at d=10, [0, 5) is complete: the record at event time 3 is late; at d=12 so are those at 9 and 4
    results = [("result", 5, ("a", (0, 5), 1)), ("result", 10, ("a", (5, 10), 2)), ("result", 15, ("a", (10, 15), 8))]
    assert late_run("drop") == sorted(results, key=repr)
    assert late_run("count") == sorted(results + [("late", 10, 1), ("late", 12, 2)], key=repr)
    assert late_run("stream") == sorted(results + [("late", 10, ("a", 3, 4)), ("late", 12, ("a", 9, 16)),
                                                   ("late", 12, ("a", 4, 32))], key=repr)
    # with 6 units of lateness [0, 5) stays open until 11: the record at event time 3 (d=10) joins it, and the one
    # at 4 (d=12) is late; each window is sent at its end + 6
    assert late_run("stream", lateness=6) == sorted([
        ("result", 11, ("a", (0, 5), 1 + 4)), ("result", 16, ("a", (5, 10), 2 + 16)),
        ("result", 21, ("a", (10, 15), 8)), ("late", 12, ("a", 4, 32))], key=repr)


def test_a_record_at_its_windows_end_plus_lateness_is_late_however_batches_are_applied():
    """[5, 10) is complete at dataflow time 10: a record at event time 8 that comes at 10 is late, whether the
    window was closed before (stepping) or is still open when the record is applied (all in one activation)."""
    plan = [[(0, [("a", 7, 1)]), (10, [("a", -2, 2), ("a", -1, 4)])]]
    for step in (True, False):
        got, lates = run_windows(plan, lambda s: s.window(at.Tumbling(5), (at.Agg.count(), at.Agg.sum(lambda r: r[2])),
                                                          key=lambda r: r[0], time=lambda r: r[1], late="stream"),
                                 1, step=step)
        assert got == [(10, ("a", (5, 10), (1, 1)))]
        assert sorted(lates) == [(10, ("a", 8, 2)), (10, ("a", 9, 4))]


def test_early_results_are_partial_at_each_time_and_final_at_end_plus_lateness():
    assert late_run("drop", lateness=6, early=True) == sorted([
        ("result", 0, ("a", (0, 5), 1)), ("result", 0, ("a", (5, 10), 2)),          # as each time changes them
        ("result", 10, ("a", (0, 5), 5)), ("result", 10, ("a", (10, 15), 8)), ("result", 12, ("a", (5, 10), 18)),
        ("result", 11, ("a", (0, 5), 5)), ("result", 16, ("a", (5, 10), 18)), ("result", 21, ("a", (10, 15), 8)),
    ], key=repr)


def test_periodic_early_results_come_once_per_period_with_every_window_changed_since():
    # times 0, 10 and 12 with a period of 5: early results at 0 and at 10 (a new period), not at 12 (the same
    # one as 10): what 12 changed is sent only as the final result at 16
    assert late_run("drop", lateness=6, early=5) == sorted([
        ("result", 0, ("a", (0, 5), 1)), ("result", 0, ("a", (5, 10), 2)),
        ("result", 10, ("a", (0, 5), 5)), ("result", 10, ("a", (10, 15), 8)),
        ("result", 11, ("a", (0, 5), 5)), ("result", 16, ("a", (5, 10), 18)), ("result", 21, ("a", (10, 15), 8)),
    ], key=repr)


def test_early_must_be_a_flag_or_a_positive_period():
    for bad in (0, -3, 2.5, "often"):
        with pytest.raises(ValueError, match="early must be"):
            late_run("drop", early=bad)


# -- inside an iteration --------------------------------------------------------------------------------

def test_windows_inside_an_iteration_are_per_round_over_the_outer_time():
    got: list = []

    def build(worker):
        inp = at.InputHandle()

        def make(scope):
            with scope.iterative(name="rounds") as loop:
                handle, again = loop.feedback(1)
                numbers = inp.to_stream(scope).enter(loop).concat(again)
                numbers.filter(lambda x: x < 30).map(lambda x: x + 10).connect_loop(handle)   # a few rounds
                numbers.window(at.Tumbling(4), at.Agg.collect(), key=lambda x: x % 2) \
                    .inspect_time(lambda t, r: got.append((t, r)))
                by_field = numbers.window(at.Tumbling(10), at.Agg.count(), time=lambda x: x, late="count")[0]
                by_field.inspect_time(lambda t, r: got.append((t, r)))

        worker.dataflow(make)
        for t in range(8):
            inp.advance_to(t)
            inp.send(t)

    at.execute(build, loop="asyncio")
    expected = []
    rounds: dict = {}
    for t in range(8):
        x, r = t, 0
        while True:
            rounds.setdefault((t, r), []).append(x)
            if x >= 30:
                break
            x, r = x + 10, r + 1
    by_window: dict = {}
    by_field: Counter = Counter()
    for (t, r), xs in rounds.items():
        for x in xs:
            s = t - t % 4
            by_window.setdefault((at.Product(s + 4, r), x % 2, (s, s + 4)), []).append(x)
            by_field[(at.Product(x - x % 10 + 10, r), (x - x % 10, x - x % 10 + 10))] += 1
    expected = [(t, (k, w, sorted(xs))) for (t, k, w), xs in by_window.items()]
    expected += [(t, (w, n)) for (t, w), n in by_field.items()]
    got = [(t, (r[0], r[1], sorted(r[2])) if len(r) == 3 else r) for t, r in got]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert any(t.inner == 3 for t, _ in got)                         # round 3 had its own windows


# -- a crash and a resume -----------------------------------------------------------------------------------

def windows_factory(crash_at, outputs, pace=0.0):
    """The numbers ``x`` at times ``x // 10``, summed per key ``x % 3`` in sliding windows of 8 over event time
    ``x // 10 + x % 5`` with 1 unit of lateness (windows open across snapshots); each window remembered, and its
    sum added up per key downstream (kept state that a window sent twice would count twice). Four times per
    activation and snapshots every 5: a snapshot holds windows sent at times before it (they are not sent again)."""

    def build(worker):
        def make(scope):
            numbers = at.source(scope, "Numbers", numbers_source(worker, jump=4, pace=pace, crash_at=crash_at))
            windows = numbers.window(
                at.Sliding(8, 4), (at.Agg.sum(), at.Agg.count()), key=lambda x: x % 3,
                time=lambda x: x // 10 + x % 5, lateness=1)
            windows.inspect_time(lambda t, r: outputs.append(("window", t, r)))
            running_sums(windows.map(lambda r: (r[0], r[2][0]))).inspect(lambda r: outputs.append(("sum", *r)))

        worker.dataflow(make, name="windows")

    return build


def final(outputs):
    by_window: dict = {}
    for kind, time, *rest in outputs:
        key = (kind, time, rest[0][:2] if kind == "window" else rest[0])
        value = rest[0][2] if kind == "window" else rest[1]
        assert by_window.setdefault(key, value) == value, f"a repeated output differs: {key}"
    return by_window


def test_a_crash_mid_window_and_a_resume_give_the_crash_free_windows(tmp_path):
    truth: list = []
    at.execute(windows_factory(None, truth), loop="asyncio")
    assert len(final(truth)) == len(truth)                 # each window once
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 350"):
        run(windows_factory(350, seen, pace=0.01), tmp_path, every=5)
    crashed = len(seen)
    assert 0 < crashed < len(truth)
    run(windows_factory(None, seen), tmp_path, workers=3, every=5)      # and on another number of workers
    assert final(seen) == final(truth)                     # windows, and the sums kept downstream of them
    assert len(seen) - crashed < len(truth)               # the resumed run did not start over


# -- processing time ---------------------------------------------------------------------------------------

def test_processing_time_windows_close_on_the_wall_clock():
    got: list = []

    async def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).window(at.Tumbling(30), at.Agg.count(), key=lambda x: x % 2,
                                                          time="processing")
                        .inspect_time(lambda t, r: got.append((t, r))))
        for i in range(20):
            inp.send(i)
            inp.advance_to(i + 1)
            await asyncio.sleep(0.005)
        while not got:                                      # the input is still open: the clock closes windows
            await asyncio.sleep(0.01)
        inp.close()

    at.execute(build, loop="asyncio")
    assert sum(n for _, (_, _, n) in got) == 20
    for t, (_, (start, end), _) in got:
        assert end - start == 30 and start % 30 == 0 and 0 <= t <= 20


# -- errors -----------------------------------------------------------------------------------------------

def test_bad_specs_are_refused_naming_what_is_wrong():
    with pytest.raises(ValueError, match="Tumbling: size must be a positive int"):
        at.Tumbling(0)
    with pytest.raises(ValueError, match="Sliding: step must be a positive int"):
        at.Sliding(10, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Sessions: gap must be a positive int"):
        at.Sessions(-1)

    def build_with(**options):
        def build(worker):
            worker.dataflow(lambda s: at.to_stream([1], s).window(**options))
        return build

    for options, message in [
        (dict(windows=10, aggregation=at.Agg.count()), "Window: the windows must be Tumbling"),
        (dict(windows=at.Tumbling(5), aggregation=len), "Window: the aggregation must be an Aggregation"),
        (dict(windows=at.Tumbling(5), aggregation=at.Agg.count(), lateness=-1), "lateness must be a non-negative"),
        (dict(windows=at.Tumbling(5), aggregation=at.Agg.count(), late="keep"), "late must be one of"),
        (dict(windows=at.Sessions(5), aggregation=at.Agg.fold(0, max)), "cannot merge two accumulators"),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            at.execute(build_with(**options), loop="asyncio")


def test_an_event_time_that_is_not_an_int_is_an_error_naming_the_operator_and_time():
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).window(at.Tumbling(5), at.Agg.count(), time=lambda r: r / 2,
                                                          name="Halves"))
        inp.advance_to(3)
        inp.send_batch([2, 3])
        inp.advance_to(5)
        inp.send_batch([4])                                 # applied in the same activation, after time 3

    with pytest.raises(at.DataflowError, match=r"'Halves' .* at time 3: TypeError: the event time of record 2 "
                                               r"is 1.0: event times must be ints"):
        at.execute(build, loop="asyncio")


def test_a_window_holds_the_frontier_at_its_end_and_nothing_once_sent():
    sent: list = []

    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).window(at.Tumbling(5), at.Agg.count(), time=lambda x: x)
                                .inspect_time(lambda t, r: sent.append((t, r))).probe())

        async def settle(upto):
            for _ in range(50):
                await worker.step()
            return probe.frontier

        inp.send_batch([3, 9])
        inp.advance_to(2)
        assert await settle(2) == at.Antichain([2]) and sent == []
        inp.advance_to(5)
        assert await settle(5) == at.Antichain([5])           # [0, 5) is complete at 5, and sent at 5 ...
        assert sent == [(5, ((0, 5), 1))]
        inp.advance_to(8)
        assert await settle(8) == at.Antichain([8])           # ... and [5, 10) holds 10, not earlier
        inp.advance_to(30)
        assert await settle(30) == at.Antichain([30])         # [5, 10) sent at 10; nothing held back any more
        assert sent == [(5, ((0, 5), 1)), (10, ((5, 10), 1))]
        inp.close()

    at.execute(build, loop="asyncio")


def test_the_model_and_the_operator_agree_on_bridged_complete_and_late_sessions():
    """Sessions(3): [1, 4) and [6, 9) at d=0; a record at 4 (d=1) bridges into [4, 9) only (4 is not before 4); at
    d=4 a record at 3 joins [4, 9) but not [1, 4), complete at 4; at d=9 a record at 2 is late ([2, 5) is complete)."""
    plan = [[(0, [("a", 1, 1), ("a", 6, 2)]), (1, [("a", 3, 4)]), (3, [("a", -1, 16)]), (5, [("a", -7, 8)])]]
    windows, late = model(flatten(plan), at.Sessions(3), 0)
    assert {w: sorted(vs) for w, vs in windows.items()} == {(4, "a", (1, 4)): [1], (9, "a", (3, 9)): [2, 4, 16]}
    assert late == [(9, ("a", 2, 8))]
    for step in (True, False):                # windows closed between batches, or all at the end: the same
        got, lates = run_windows(plan, lambda s: s.window(at.Sessions(3), at.Agg.collect(lambda r: r[2]),
                                                          key=lambda r: r[0], time=lambda r: r[1], late="stream"),
                                 1, step=step)
        assert sorted(got) == [(4, ("a", (1, 4), [1])), (9, ("a", (3, 9), [2, 4, 16]))]   # collected as applied
        assert lates == [(9, ("a", 2, 8))]
