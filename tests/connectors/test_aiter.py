"""Async iterators as sources (batching, time policies, partitions) and async callables as sinks."""

from __future__ import annotations

import asyncio
import logging

import pytest

import aiotimely as at
from aiotimely.connectors import EventTime, EveryBatch, WallClock, from_aiter, to_async
from aiotimely.connectors import aiter as aiter_module


async def bursts(n_bursts: int, size: int, pause: float = 0.01):
    for b in range(n_bursts):
        for i in range(size):
            yield b * size + i          # ready without waiting: one batch
        await asyncio.sleep(pause)      # then the iterator waits: the batch is sent first


def collect(stream, into):
    return stream.inspect_batch(lambda t, xs: into.append((t, list(xs))))


def test_every_batch_gives_each_burst_its_own_time(run):
    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, bursts(4, 5), time=EveryBatch()), got))
        return got

    got = run(build)[0]
    assert got == [(t, list(range(t * 5, t * 5 + 5))) for t in range(4)]


def test_large_bursts_are_cut_into_batches(run):
    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, bursts(1, 2500), batch_size=1000), got))
        return got

    got = run(build)[0]
    assert [len(xs) for _, xs in got] == [1000, 1000, 500]
    assert [t for t, _ in got] == [0, 1, 2]


def test_wall_clock_time_moves_on_while_nothing_arrives(run):
    async def build(worker):
        release = asyncio.Event()

        async def slow():
            yield "early"
            await release.wait()              # nothing arrives until the test has seen time move
            yield "late"

        got = []
        probe = worker.dataflow(lambda s: collect(from_aiter(s, slow(), time=WallClock(0.05)), got).probe())
        for _ in range(500):                  # up to 5 s on a busy machine
            if not probe.less_than(3):
                break
            await asyncio.sleep(0.01)
        frontier_while_waiting = probe.frontier
        release.set()
        await worker.step_until_done()
        return got, frontier_while_waiting

    got, frontier = run(build)[0]
    assert [xs for _, xs in got] == [["early"], ["late"]]
    assert got[0][0] == 0 and got[1][0] >= 3
    assert list(frontier)[0] >= 3           # periods passed with no record: the frontier followed the clock


@pytest.mark.parametrize("late, expected", [
    ("clamp", {5: [5], 6: [6], 7: [7, 3], 8: [8]}),    # 3 comes too late: given the earliest open time, 7
    ("drop", {5: [5], 6: [6], 7: [7], 8: [8]}),
    (None, {5: [5], 6: [6], 7: [7], 8: [8]}),           # the default: drop
])
def test_event_time_with_bounded_lateness(run, late, expected):
    async def events():
        for t in (5, 7, 6, 8, 3):           # 6 is within lateness 1 of 7; 3 is too late
            yield t
            await asyncio.sleep(0.005)

    policy = EventTime(lambda r: r, lateness=1) if late is None else EventTime(lambda r: r, lateness=1, late=late)

    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, events(), time=policy), got))
        return got

    got = run(build)[0]
    merged: dict = {}
    for t, xs in got:
        merged.setdefault(t, []).extend(xs)
    assert merged == expected
    assert policy.late_records == (0 if late == "clamp" else 1)


async def late_by_more_than_two():
    for t in (10, 20, 3):               # 3 comes after 20: 15 units late, with 2 allowed
        yield t
        await asyncio.sleep(0.005)      # (each record a batch of its own)


def tumbling_windows(run, policy, iterator=late_by_more_than_two):
    """The windows of 5 units of event time, and what each collected."""
    def build(worker):
        got = []
        worker.dataflow(lambda s: from_aiter(s, iterator(), time=policy, name="Clicks")
                        .window(at.Tumbling(5), at.Agg.collect()).inspect(got.append), name="late data")
        return got

    return sorted(r for results in run(build) for r in results)


def late_warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "aiotimely.connectors" and r.levelno == logging.WARNING and "late record" in r.getMessage()]


def test_event_time_drops_late_records_by_default_and_says_so(run, caplog):
    policy = EventTime(lambda r: r, lateness=2)
    assert policy.late == "drop"                                 # as window(time=...)'s default
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        windows = tumbling_windows(run, policy)
    assert windows == [((10, 15), [10]), ((20, 25), [20])]     # 3 is in no window: not in (0, 5), not in (15, 20)
    assert policy.late_records == 1                              # counted
    [warning] = late_warnings(caplog)                            # and logged, naming the source, dataflow, worker
    assert "from_aiter 'Clicks' in dataflow 'late data', worker 0" in warning
    assert "event time 3" in warning and "late='clamp'" in warning


def test_event_time_clamps_late_records_only_when_asked(run, caplog):
    policy = EventTime(lambda r: r, lateness=2, late="clamp")
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        windows = tumbling_windows(run, policy)
    assert windows == [((10, 15), [10]), ((15, 20), [3]), ((20, 25), [20])]    # 3 re-timed to 18, as asked
    assert policy.late_records == 0 and late_warnings(caplog) == []


def test_event_time_gives_a_late_record_no_time():
    policy = EventTime(lambda r: r, lateness=2)
    assert policy.times([10]) == [(10, [10])] and policy.times([20]) == [(20, [20])]
    assert policy.times([3]) == [] and policy.current() == 18 and policy.late_records == 1


async def many_late():
    yield 100
    await asyncio.sleep(0.005)
    for _ in range(3):                  # three batches of 50 late records
        for t in range(50):
            yield t
        await asyncio.sleep(0.005)


def test_late_records_are_logged_at_the_first_then_at_most_once_an_interval(run, caplog, monkeypatch):
    monkeypatch.setattr(aiter_module, "LATE_LOG_INTERVAL", 3600.0)
    policy = EventTime(lambda r: r)
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        windows = tumbling_windows(run, policy, many_late)
    assert windows == [((100, 105), [100])] and policy.late_records == 150
    first, end = late_warnings(caplog)
    assert "dropped 50 late records" in first and "event time 0" in first      # the first batch with some
    assert "150 late records dropped in all" in end                            # the count, when the source ends


def test_late_records_logged_every_interval_give_the_running_count(run, caplog, monkeypatch):
    monkeypatch.setattr(aiter_module, "LATE_LOG_INTERVAL", 0.0)
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        tumbling_windows(run, EventTime(lambda r: r), many_late)
    warnings = late_warnings(caplog)
    assert len(warnings) == 3                                    # each batch's (none left to say at the end)
    assert "dropped 50 late records" in warnings[0]
    assert "100 late records dropped so far" in warnings[1] and "150 late records dropped so far" in warnings[2]


def test_a_partitioned_source_counts_the_late_records_of_every_worker(run, caplog):
    async def part(index, peers):
        yield 100 + index
        await asyncio.sleep(0.005)
        yield index                     # late, on each worker

    policy = EventTime(lambda r: r)

    def build(worker):
        worker.dataflow(lambda s: from_aiter(s, part, time=policy, name="Parts"), name="parts")

    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        run(build, workers=2)
    assert policy.late_records == 2     # the policy given counts for the copies each worker used
    assert sorted(w.split(":")[0] for w in late_warnings(caplog)) == [
        "from_aiter 'Parts' in dataflow 'parts', worker 0", "from_aiter 'Parts' in dataflow 'parts', worker 1"]


def test_event_time_can_refuse_late_records(run):
    async def events():
        for t in (10, 2):
            yield t
            await asyncio.sleep(0.005)

    def build(worker):
        worker.dataflow(lambda s: from_aiter(s, events(), time=EventTime(lambda r: r, late="error")))

    with pytest.raises(at.DataflowError, match="at event time 2 is later than allowed: time 10 is already complete"):
        run(build)


def test_a_partitioned_source_reads_one_iterator_per_worker(run):
    async def part(index, peers):
        for x in range(index, 20, peers):
            yield x

    def build(worker):
        got = []
        worker.dataflow(lambda s: from_aiter(s, part).inspect(got.append))
        return got

    results = run(build, workers=3)
    assert [sorted(r) for r in results] == [list(range(w, 20, 3)) for w in range(3)]


def test_to_async_bounds_calls_in_flight_and_passes_on_what_was_delivered(run):
    async def build(worker):
        state = {"running": 0, "most": 0, "seen": []}

        async def deliver(time, records):
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
            await asyncio.sleep(0.01)
            state["seen"].extend(records)
            state["running"] -= 1

        inp = at.InputHandle()
        delivered = []
        probe = worker.dataflow(lambda s: to_async(inp.to_stream(s), deliver, max_in_flight=3)
                                .inspect(delivered.append).probe())
        for t in range(10):
            inp.send_batch([t * 10 + i for i in range(4)])
            inp.advance_to(t + 1)
        await probe.wait_beyond(4)
        assert all(x in state["seen"] for x in delivered)        # passed on only once delivered
        assert sorted(x for x in state["seen"] if x < 50) == sorted(x for x in delivered if x < 50)
        inp.close()
        await worker.step_until_done()
        return state, delivered

    state, delivered = run(build)[0]
    assert state["most"] == 3
    assert sorted(delivered) == sorted(state["seen"]) == sorted(t * 10 + i for t in range(10) for i in range(4))


def test_to_async_per_record_and_failures(run):
    def build(worker):
        async def picky(record):
            if record == 3:
                raise ValueError("three is bad")

        worker.dataflow(lambda s: to_async(at.to_stream(range(5), s), picky, per="record", name="Picky"))

    with pytest.raises(at.DataflowError, match="Picky.*ValueError: three is bad"):
        run(build)
