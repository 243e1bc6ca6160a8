"""Keyed operators (stateful_map, state_machine, distinct, reduce, fold, aggregate, join, interval_join): on
random streams of (time, key, value) sent with times out of order, what comes out at which time matches a
plain-Python model, on one worker and on three."""

from __future__ import annotations

import ast
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.testing import run_dataflow, schedule, script_source

from ..recovery.common import crashing, numbers_source
from ..recovery.common import run as run_recoverable

P = at.Product

EXAMPLES = settings(max_examples=40, deadline=None)

events_st = st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abcd"), st.integers(0, 5)), max_size=30)
"""(time, key, value) events, in the order they are sent: times out of order."""


def run_all(build, workers):
    """Execute ``build(worker) -> {name: [(time, record)]}`` and merge what every worker collected, sorted."""
    merged: dict[str, list] = defaultdict(list)
    for result in at.execute(build, workers=workers, loop="asyncio"):
        for name, got in result.items():
            merged[name].extend(got)
    return {name: sorted(got, key=repr) for name, got in merged.items()}


def collect(stream, out, name):
    out[name] = []
    stream.inspect_time(lambda t, x: out[name].append((t, x)))


def sent_from_worker_0(scope, events, name="Events"):
    """``(key, value)`` at each event's time, sent from worker 0 in the events' order, the frontier moved to the
    earliest time still to come after each record (so times complete while later records are on their way)."""
    return script_source(scope, schedule([(t, (k, v)) for t, k, v in events]), split=False, name=name)


def by_time(pairs):
    """``{time: [records]}`` of ``(time, record)`` pairs."""
    grouped = defaultdict(list)
    for time, record in pairs:
        grouped[time].append(record)
    return grouped


def applied(events):
    """The events in the order a keyed operator applies them: by time, and as sent within a time."""
    return sorted(events, key=lambda e: e[0])


def same(got, expected):
    return sorted(got, key=repr) == sorted(expected, key=repr)


# -- per-key state across times ------------------------------------------------------------------


def last_three(state, value):
    """For stateful_map: the key's last values, forgotten after three."""
    seen = (state or ()) + (value,)
    return (None if len(seen) == 3 else seen), seen


def machine(key, value, total):
    """For state_machine: a running total, reset once it passes 8; emits it, and once more for odd values."""
    total += value
    return (None if total > 8 else total), [(key, total)] * (1 + value % 2)


def model_state(events):
    out = {"stateful_map": [], "state_machine": [], "distinct": [], "distinct_by": []}
    maps, machines, seen, seen_by = {}, {}, set(), set()
    for time, key, value in applied(events):
        state, emitted = last_three(maps.get(key), value)
        maps.pop(key, None) if state is None else maps.__setitem__(key, state)
        out["stateful_map"].append((time, (key, emitted)))
        state, outputs = machine(key, value, machines.get(key, 0))
        machines.pop(key, None) if state is None else machines.__setitem__(key, state)
        out["state_machine"].extend((time, o) for o in outputs)
        if (key, value) not in seen:
            seen.add((key, value))
            out["distinct"].append((time, (key, value)))
        if (key, value % 2) not in seen_by:
            seen_by.add((key, value % 2))
            out["distinct_by"].append((time, (key, value)))
    return out


@pytest.mark.parametrize("workers", [1, 3])
@EXAMPLES
@given(events=events_st)
def test_operators_with_state_per_key_match_the_model(workers, events):
    def build(scope):
        keyed = sent_from_worker_0(scope, events)
        return {"stateful_map": keyed.stateful_map(last_three), "state_machine": keyed.state_machine(machine, init=int),
                "distinct": keyed.distinct(), "distinct_by": keyed.distinct(by=lambda v: v % 2)}

    got, expected = run_dataflow(build, workers=workers, loop="asyncio"), model_state(events)
    for name in expected:
        assert got[name] == by_time(expected[name]), name


def test_stateful_map_applies_records_in_time_order_and_forgets_keys():
    """Records sent at 2, 0, 1 are applied at 0, 1, 2; a state of None forgets the key (the fourth record
    starts afresh)."""
    events = [(2, "k", "c"), (0, "k", "a"), (1, "k", "b"), (3, "k", "d")]

    got = run_dataflow(lambda scope: sent_from_worker_0(scope, events).stateful_map(last_three), loop="asyncio")
    assert got == {0: [("k", ("a",))], 1: [("k", ("a", "b"))], 2: [("k", ("a", "b", "c"))], 3: [("k", ("d",))]}


# -- per key and time ---------------------------------------------------------------------------


def model_per_time(events):
    groups = defaultdict(list)
    for time, key, value in applied(events):
        groups[time, key].append(value)
    return {
        "reduce": [(t, (k, sum(vs))) for (t, k), vs in groups.items()],
        "fold": [(t, (k, vs)) for (t, k), vs in groups.items()],
        "aggregate": [(t, f"{k}={max(vs)}") for (t, k), vs in groups.items()],
    }


@pytest.mark.parametrize("workers", [1, 3])
@EXAMPLES
@given(events=events_st)
def test_operators_per_key_and_time_match_the_model(workers, events):
    def build(scope):
        keyed = sent_from_worker_0(scope, events)
        return {"reduce": keyed.reduce(lambda a, b: a + b), "fold": keyed.fold(list, lambda acc, v: acc + [v]),
                "aggregate": keyed.aggregate(lambda k, v, agg: v if agg is None else max(agg, v),
                                             lambda k, agg: f"{k}={agg}")}

    got, expected = run_dataflow(build, workers=workers, loop="asyncio"), model_per_time(events)
    for name in expected:
        assert got[name] == by_time(expected[name]), name


def test_reduce_emits_once_the_time_is_complete():
    async def build(worker):
        inp = at.InputHandle()
        seen = []
        probe = worker.dataflow(lambda s: inp.to_stream(s).reduce(lambda a, b: a + b).inspect_time(
            lambda t, x: seen.append((t, x))).probe())
        inp.send_batch([("a", 1), ("b", 2), ("a", 3)])
        inp.advance_to(1)
        inp.send(("a", 10))
        await worker.step_while(lambda: probe.less_than(1))
        first = list(seen)
        inp.send(("a", 5))                        # time 1 is not complete: it joins the same result
        inp.close()
        await worker.step_until_done()
        return first, seen

    [(first, seen)] = at.execute(build, loop="asyncio")
    assert sorted(first) == [(0, ("a", 4)), (0, ("b", 2))]
    assert sorted(seen) == [(0, ("a", 4)), (0, ("b", 2)), (1, ("a", 15))]


# -- joins ---------------------------------------------------------------------------------------

join_events_st = st.tuples(events_st, events_st, st.integers(-3, 2), st.integers(0, 4))


def model_joins(lefts, rights, lower, upper):
    return {
        "join": [(tl, (kl, (v, w))) for tl, kl, v in lefts for tr, kr, w in rights if (tl, kl) == (tr, kr)],
        "interval_join": [(max(tl, tr), (kl, (v, w))) for tl, kl, v in lefts for tr, kr, w in rights
                          if kl == kr and lower <= tr - tl <= upper],
    }


@pytest.mark.parametrize("workers", [1, 3])
@EXAMPLES
@given(both=join_events_st)
def test_joins_match_a_nested_loop(workers, both):
    lefts, rights, lower, width = both
    upper = lower + width
    lefts = [(t, k, f"l{i}") for i, (t, k, _) in enumerate(lefts)]     # distinct values: pairs are told apart
    rights = [(t, k, f"r{i}") for i, (t, k, _) in enumerate(rights)]

    def build(scope):
        left = sent_from_worker_0(scope, lefts, "Lefts")
        right = sent_from_worker_0(scope, rights, "Rights")
        return {"join": left.join(right), "interval_join": left.interval_join(right, lower, upper)}

    got, expected = run_dataflow(build, workers=workers, loop="asyncio"), model_joins(lefts, rights, lower, upper)
    for name in expected:
        assert got[name] == by_time(expected[name]), name


def test_join_emits_a_pair_as_soon_as_both_sides_are_there():
    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        seen = []
        worker.dataflow(lambda s: a.to_stream(s).join(b.to_stream(s)).inspect_time(lambda t, x: seen.append((t, x))))
        a.send(("k", 1))
        b.send(("k", 2))
        b.send(("j", 3))
        for _ in range(10):                       # time 0 stays open: the pair goes out anyway
            await worker.step()
        early = list(seen)
        a.close()
        b.close()
        return early

    assert at.execute(build, loop="asyncio") == [[(0, ("k", (1, 2)))]]


@pytest.mark.parametrize("lower, upper", [(0, 2), (-2, 0)])
def test_interval_join_keeps_records_until_nothing_they_could_meet_can_come(lower, upper):
    """A record at 0 meets one at the edge of its interval (2 or -2 apart) arriving after every time
    before the edge was applied: it was kept just long enough."""
    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        seen = []
        probe = worker.dataflow(lambda s: a.to_stream(s).interval_join(b.to_stream(s), lower, upper).inspect_time(
            lambda t, x: seen.append((t, x))).probe())
        early, late = (a, b) if lower == 0 else (b, a)
        early.send(("k", "early"))
        for handle in (a, b):
            handle.advance_to(2)
        await worker.step_while(lambda: probe.less_than(2))
        late.send(("k", "late"))
        a.close()
        b.close()
        await worker.step_until_done()
        return seen

    pair = ("early", "late") if lower == 0 else ("late", "early")
    assert at.execute(build, loop="asyncio") == [[(2, ("k", pair))]]


def test_interval_join_needs_int_times():
    def build(worker):
        def make(scope):
            with scope.iterative() as loop:
                keyed = at.to_stream([("k", 1)], scope).enter(loop)
                keyed.interval_join(keyed, 0, 1)

        worker.dataflow(make)

    with pytest.raises(at.GraphError, match="interval_join compares int times .* Product"):
        at.execute(build, loop="asyncio")


# -- iterative scopes ----------------------------------------------------------------------------


def test_keyed_operators_in_an_iterative_scope():
    """Records ``(key, n)`` go round a loop, ``n - 1`` each round until 0, entering at outer times 0 and 1: a
    running count per key across rounds (stateful_map), a sum per key and round (reduce) and a same-round
    self-join, each at its ``Product(epoch, round)``."""
    starts = {0: [("a", 2), ("b", 1), ("a", 1)], 1: [("c", 2)]}

    def build(worker):
        out = {}
        inp = at.InputHandle()

        def make(scope):
            numbers = inp.to_stream(scope)
            with scope.iterative(name="rounds") as loop:
                handle, again = loop.feedback(1)
                stepped = numbers.enter(loop).concat(again)
                collect(stepped.stateful_map(lambda seen, n: ((seen or 0) + 1, (n, (seen or 0) + 1))), out, "count")
                collect(stepped.reduce(lambda x, y: x + y), out, "sum")
                collect(stepped.join(stepped.map(lambda kv: (kv[0], -kv[1]))), out, "join")
                stepped.filter(lambda kv: kv[1] > 0).map(lambda kv: (kv[0], kv[1] - 1)).connect_loop(handle)

        worker.dataflow(make)
        if worker.index == 0:
            for epoch, records in starts.items():
                inp.advance_to(epoch)
                inp.send_batch(records)
        inp.close()
        return out

    rounds = defaultdict(list)                   # Product(epoch, round) -> records in it
    for epoch, records in starts.items():
        for key, n in records:
            for r in range(n + 1):
                rounds[P(epoch, r)].append((key, n - r))
    counts, sums, joins, seen = [], [], [], defaultdict(int)
    for time in sorted(rounds):
        by_key = defaultdict(list)
        for key, n in rounds[time]:
            seen[key] += 1
            counts.append((time, (key, (n, seen[key]))))
            by_key[key].append(n)
        sums += [(time, (key, sum(ns))) for key, ns in by_key.items()]
        joins += [(time, (key, (x, -y))) for key, ns in by_key.items() for x in ns for y in ns]
    for workers in (1, 3):
        got = run_all(build, workers)
        assert same(got["count"], counts) and same(got["sum"], sums) and same(got["join"], joins), workers


# -- bad records ---------------------------------------------------------------------------------

OPERATORS = {
    "stateful_map": ("StatefulMap", lambda s: s.stateful_map(lambda st, v: (st, v))),
    "state_machine": ("StateMachine", lambda s: s.state_machine(lambda k, v, st: (st, [v]))),
    "distinct": ("Distinct", lambda s: s.distinct()),
    "reduce": ("Reduce", lambda s: s.reduce(lambda a, b: a)),
    "fold": ("Fold", lambda s: s.fold(list, lambda acc, v: acc)),
    "aggregate": ("Aggregate", lambda s: s.aggregate(lambda k, v, a: v, lambda k, a: a)),
    "join": ("Join", lambda s: s.join(s)),
    "interval_join": ("IntervalJoin", lambda s: s.interval_join(s, 0, 1)),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("method", sorted(OPERATORS))
def test_a_record_that_is_not_a_pair_is_refused_naming_operator_and_time(method, workers):
    name, apply = OPERATORS[method]

    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: apply(inp.to_stream(scope)).inspect(lambda x: None))
        if worker.index == 0:
            inp.send(("fine", 1))
            inp.advance_to(3)
            inp.send("oops")
        inp.close()

    with pytest.raises(at.DataflowError, match=rf"operator '{name}'.* at time 3: .*{method} takes a keyed stream, "
                                               r"of \(key, value\) pairs; got 'oops'") as caught:
        at.execute(build, workers=workers, loop="asyncio")
    assert caught.value.operator == name and caught.value.time == 3


def test_a_function_returning_no_pair_is_refused():
    def build(worker):
        worker.dataflow(lambda scope: at.to_stream([("k", 1)], scope).stateful_map(lambda st, v: v).inspect(print))

    with pytest.raises(at.DataflowError, match=r"stateful_map: the function must return \(new state or None, "
                                               r"output\); it returned 1 for key 'k'"):
        at.execute(build, loop="asyncio")


def test_interval_join_bounds_are_checked():
    def build(lower, upper):
        def build(worker):
            worker.dataflow(lambda s: at.to_stream([("k", 1)], s).interval_join(at.to_stream([], s), lower, upper))
        return build

    with pytest.raises(ValueError, match=r"lower \(2\) must not be greater than upper \(1\)"):
        at.execute(build(2, 1), loop="asyncio")
    with pytest.raises(TypeError, match="upper must be an int"):
        at.execute(build(0, 1.5), loop="asyncio")


# -- crash and resume ----------------------------------------------------------------------------


def resumable(crash_at, outputs, pace=0.0):
    """Numbers 0..599 (10 per time, the source keeping its position) as ``(x % 7, x)``, through the operators
    that keep state across times; each output as ``(operator, time, record)``."""

    def build(worker):
        def make(scope):
            numbers = at.source(scope, "Numbers", numbers_source(worker, jump=4, pace=pace))
            keyed = numbers.map(crashing(crash_at)).map(lambda x: (x % 7, x))
            streams = {
                "stateful_map": keyed.stateful_map(lambda total, x: ((total or 0) + x, (total or 0) + x)),
                "state_machine": keyed.state_machine(lambda k, x, n: (n + 1, [(k, n + 1)] if x % 5 == 0 else []),
                                                     init=int),
                "distinct": keyed.distinct(by=lambda x: x % 50),
                "interval_join": keyed.interval_join(keyed.filter(lambda kv: kv[1] % 3 == 0), -2, 3),
            }
            for name, stream in streams.items():
                stream.inspect_time(lambda t, r, name=name: outputs.append((name, t, r)))

        worker.dataflow(make, name="keyed")

    return build


def test_a_crash_and_a_resume_on_more_workers_give_what_a_crash_free_run_gives(tmp_path):
    truth: list = []
    at.execute(resumable(None, truth), loop="asyncio")
    assert len(set(truth)) == len(truth)                 # every output is told apart from the others
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run_recoverable(resumable(400, seen, pace=0.02), tmp_path)
    crashed = len(seen)
    run_recoverable(resumable(None, seen), tmp_path, workers=2)
    resumed_from = min(t for _, t, _ in seen[crashed:])
    assert 0 < resumed_from <= 40                         # it resumed from a snapshot, and skipped nothing
    assert set(seen) == set(truth)                        # repeats (at times after the snapshot) are the same


# -- across processes ----------------------------------------------------------------------------


def test_keyed_operators_across_two_processes():
    from ..cluster.harness import PROGRAMS, launch, lines_after_prefix
    from ..cluster.programs import keyed_events

    code, out, err = launch(f"{PROGRAMS}:keyed_operators", 2, 1)
    assert code == 0, err
    got = defaultdict(list)
    for line in lines_after_prefix(out):
        name, time, record = ast.literal_eval(line)
        got[name].append((time, record))
    lefts, rights = keyed_events(1), keyed_events(2)
    sums, expected = {}, model_joins(lefts, rights, -1, 2)
    expected["stateful_map"] = []
    for time, key, value in applied(lefts):
        sums[key] = sums.get(key, 0) + value
        expected["stateful_map"].append((time, (key, sums[key])))
    expected["distinct"] = model_state(lefts)["distinct"]
    expected["reduce"] = model_per_time(lefts)["reduce"]
    for name in expected:
        assert same(got[name], expected[name]), name


def test_state_kept_in_an_iterative_scope_of_a_recoverable_dataflow_is_refused(tmp_path):
    def build(worker):
        def make(scope):
            with scope.iterative() as loop:
                at.to_stream([("k", 1)], scope).enter(loop).stateful_map(lambda st, v: (v, v)).leave()

        worker.dataflow(make, name="nested")

    with pytest.raises(at.RecoveryError, match="stateful_map keeps state by key, and scope 'iterative' .* has "
                                               r"Product\[int, int\] times"):
        run_recoverable(build, tmp_path)
